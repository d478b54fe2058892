"""Pipeline specs as YAML files in a folder: a user adds a join without writing Python.

Every `*.yaml` / `*.yml` file holds one spec: a pipeline (a mapping with an `operator`) or a
source that pipelines share (`kind: source`, `joins.pipeline.shared`). A `*.sql` file holds a
pipeline as a query over those sources, planned into the same settings (`joins.sql.pipeline`,
docs/sql.md). A file that cannot be read, is not valid YAML or SQL or holds an invalid spec is
reported by path (and line, or the setting's key) and left out; the other files still load.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from joins.core.yaml_text import load_yaml
from joins.errors import JoinsError
from joins.pipeline.registry import parse_pipeline_spec, spec_classes
from joins.pipeline.shared import (
    SharedSource,
    Storage,
    check_storage,
    is_source_file,
    parse_source,
    resolve_references,
    storage_of,
)
from joins.pipeline.spec import PipelineInput, PipelineSpec

SQL_SUFFIX = ".sql"


@dataclass(frozen=True)
class SpecFileError:
    path: str
    message: str
    name: str | None = None      # the `name` the file gives, when it gives one

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"

    @property
    def line(self) -> int | None:
        """The first line of the file the message names."""
        found = re.search(r"\bline (\d+)", self.message)
        return int(found.group(1)) if found else None


def _named(raw: dict[str, Any]) -> str | None:
    name = raw.get("name")
    return name if isinstance(name, str) and name else None


@dataclass(frozen=True)
class SourceUse:
    """A shared source as the folder uses it: how it is stored, and the joins that read it."""

    source: SharedSource
    storage: Storage
    readers: tuple[str, ...]

    def input(self) -> PipelineInput:
        """The source as the ingest sees it (its own key, stored as its readers need)."""
        return PipelineInput("source", self.source.spec, self.storage.kind,
                             self.storage.history_retention_ms)


@dataclass(frozen=True)
class LoadedSpecs:
    specs: tuple[PipelineSpec, ...] = ()
    errors: tuple[SpecFileError, ...] = ()
    files: dict[str, str] = field(default_factory=dict)  # spec name -> its file
    sources: dict[str, SourceUse] = field(default_factory=dict)  # shared sources, by name


def spec_files(folder: str | Path) -> list[Path]:
    base = Path(folder)
    if not base.is_dir():
        return []
    return sorted(p for p in base.iterdir() if p.suffix in (".yaml", ".yml", SQL_SUFFIX) and p.is_file())


def read_spec_yaml(path: str | Path) -> tuple[dict[str, Any], str]:
    """A spec file's mapping and its text; JoinsError (the problem, not the path) otherwise.
    A SQL file's mapping is only its default name: its settings need the folder's sources."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise JoinsError(f"cannot read the file: {exc}") from None
    if p.suffix == SQL_SUFFIX:
        return {"name": p.stem}, text
    try:
        raw = load_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise JoinsError(f"{where}not valid YAML ({problem})") from None
    if not isinstance(raw, dict):
        raise JoinsError(f"a spec file holds one mapping of settings (a pipeline: operator, "
                         f"name, ...; or a source: kind: source, name, ...), got "
                         f"{type(raw).__name__}")
    return raw, text


def load_spec_file(path: str | Path,
                   sources: Mapping[str, SharedSource] | None = None) -> PipelineSpec:
    """One pipeline spec file (naming only the `sources` given); JoinsError (the problem, not
    the path) when it is not usable."""
    raw, text = read_spec_yaml(path)
    if is_source_file(raw):
        raise JoinsError("a source file (kind: source), not a pipeline: load the folder")
    return parse_pipeline_file(Path(path), raw, text, sources or {})[0]


def parse_pipeline_file(path: Path, raw: dict[str, Any], text: str, sources: Mapping[str, SharedSource]
                        ) -> tuple[PipelineSpec, set[str], Callable[[str], str]]:
    """A pipeline spec file, YAML or SQL (`parse_spec_text`), and how a later message about it
    names the line of a setting."""
    if path.suffix != SQL_SUFFIX:
        return (*parse_spec_text(raw, text, sources), lambda message: with_lines(message, text))
    from joins.sql.pipeline import plan_sql_pipeline

    sql = plan_sql_pipeline(text, sources, default_name=path.stem)
    return (*parse_spec_text(sql.raw, text, sources, where=sql.locate), sql.locate)


def parse_spec_text(raw: dict[str, Any], text: str, sources: Mapping[str, SharedSource], *,
                    where: Callable[[str], str] | None = None) -> tuple[PipelineSpec, set[str]]:
    """A pipeline spec with its source references resolved, and the shared sources it reads;
    JoinsError with the line of every setting it names (`where`: how a message gets them,
    default the YAML text's lines)."""
    try:
        used: set[str] = set()
        cls = spec_classes().get(raw.get("operator"))  # type: ignore[arg-type]
        if cls is not None:
            raw, used = resolve_references(raw, cls, sources)
        return parse_pipeline_spec(raw), used
    except JoinsError as exc:
        raise JoinsError(where(str(exc)) if where else with_lines(str(exc), text)) from None


_SETTING = re.compile(r"config\.([A-Za-z0-9_.\-]+):")


def with_lines(message: str, text: str) -> str:
    """`message` with "line N, " before every `config.<path>:` it names that is in the file
    (a missing setting: the line of the mapping it belongs in)."""
    try:
        root = yaml.compose(text)
    except yaml.YAMLError:
        return message
    if root is None:
        return message

    def line(match: re.Match[str]) -> str:
        found = _line_of(root, match.group(1).split("."))
        return match.group(0) if found is None else f"line {found}, {match.group(0)}"

    return _SETTING.sub(line, message)


def _line_of(node: yaml.Node, path: list[str]) -> int | None:
    line = node.start_mark.line + 1
    for step in path:
        if isinstance(node, yaml.MappingNode):
            match = next(((k, v) for k, v in node.value if getattr(k, "value", None) == step), None)
            if match is None:
                return line
            line, node = match[0].start_mark.line + 1, match[1]
        elif isinstance(node, yaml.SequenceNode) and step.isdigit() and int(step) < len(node.value):
            node = node.value[int(step)]
            line = node.start_mark.line + 1
        else:
            return line
    return line


def _read_folder(folder: str | Path) -> tuple[list[tuple[Path, dict[str, Any], str]],
                                              list[SpecFileError]]:
    """Every spec file of `folder` as (path, mapping, text), and the files that cannot be read."""
    read: list[tuple[Path, dict[str, Any], str]] = []
    errors: list[SpecFileError] = []
    for path in spec_files(folder):
        try:
            read.append((path, *read_spec_yaml(path)))
        except JoinsError as exc:
            errors.append(SpecFileError(str(path), str(exc)))
    return read, errors


def _parse_sources(read: list[tuple[Path, dict[str, Any], str]],
                   names: set[str]) -> tuple[dict[str, SharedSource], list[SpecFileError]]:
    """The source files among `read`, by name (adding each to `names`), and the bad ones."""
    shared: dict[str, SharedSource] = {}
    errors: list[SpecFileError] = []
    for path, raw, text in read:
        if not is_source_file(raw):
            continue
        try:
            source = parse_source(raw, file=str(path))
        except JoinsError as exc:
            errors.append(SpecFileError(str(path), with_lines(str(exc), text), _named(raw)))
            continue
        if source.name in names:
            errors.append(SpecFileError(str(path), with_lines(
                f"config.name: {source.name!r} is already defined by another spec; pipeline and "
                f"source names must be unique", text), _named(raw)))
            continue
        names.add(source.name)
        shared[source.name] = source
    return shared, errors


def load_spec_folder(folder: str | Path, *, taken: set[str] | None = None) -> LoadedSpecs:
    """Every spec file of `folder`: sources (`kind: source`) first, then the pipelines, which
    may name them. `taken` are names defined elsewhere (a duplicate name would make two assets
    of one key)."""
    read, errors = _read_folder(folder)
    names = set(taken or ())
    shared, bad_sources = _parse_sources(read, names)
    errors += bad_sources
    specs: list[PipelineSpec] = []
    files: dict[str, str] = {}
    storage: dict[str, Storage] = {}
    readers: dict[str, list[str]] = {name: [] for name in shared}
    failed: list[tuple[str, str]] = []   # (file name, text) of the pipeline files that did not load
    for path, raw, text in read:
        if is_source_file(raw):
            continue
        try:
            spec, used, where = parse_pipeline_file(path, raw, text, shared)
            own = {spec.name, *(i.source.name for i in spec.pipeline_inputs()
                                if i.source is not None and i.source.name not in used)}
            clash = sorted(own & names)
            if clash:
                raise JoinsError(where(f"config.name: {clash} already defined by another spec; "
                                       f"pipeline and source names must be unique"))
            needs = {i.name: storage_of(i, spec.name) for i in spec.pipeline_inputs()
                     if i.source is not None and i.name in used}
            for name, want in needs.items():
                check_storage(shared[name], want, storage.get(name))
        except JoinsError as exc:
            errors.append(SpecFileError(str(path), str(exc), _named(raw)))
            failed.append((Path(path).name, text))
            continue
        names |= own
        for name, want in needs.items():
            storage.setdefault(name, want)
            readers[name].append(spec.name)
        specs.append(spec)
        files[spec.name] = str(path)
    sources: dict[str, SourceUse] = {}
    for name, source in shared.items():
        if name not in storage:
            # A reader whose file is broken is the likelier cause than a source nobody reads.
            naming = [file for file, text in failed if re.search(rf"\b{re.escape(name)}\b", text)]
            verb = "names" if len(naming) == 1 else "name"
            why = (f"is read by no pipeline that loaded ({', '.join(naming)} {verb} it but did not "
                   "load: its own error says why)") if naming else "is read by no pipeline"
            errors.append(SpecFileError(source.file, f"source {name!r} {why}, so it is not "
                                                     f"ingested (a source is stored as the joins "
                                                     f"that read it need)", name))
            continue
        sources[name] = SourceUse(source, storage[name], tuple(readers[name]))
    return LoadedSpecs(tuple(specs), tuple(errors), files, sources)


def resolved_spec(path: str | Path) -> dict[str, Any]:
    """A pipeline spec file's settings with the sources it names (defined in files beside it)
    written inline: the spec as one self-contained mapping (for Python callers and tests)."""
    raw, text = read_spec_yaml(path)
    # The folder's load reports unreadable or bad source files; here they are only absent.
    shared, _ = _parse_sources(_read_folder(Path(path).parent)[0], set())
    where: Callable[[str], str] = lambda message: with_lines(message, text)  # noqa: E731
    if Path(path).suffix == SQL_SUFFIX:
        from joins.sql.pipeline import plan_sql_pipeline

        sql = plan_sql_pipeline(text, shared, default_name=Path(path).stem)
        raw, where = sql.raw, sql.locate
    cls = spec_classes().get(raw.get("operator"))  # type: ignore[arg-type]
    if cls is None:
        return raw
    try:
        return resolve_references(raw, cls, shared)[0]
    except JoinsError as exc:
        raise JoinsError(where(str(exc))) from None
