"""Pipeline specs as YAML files in a folder: a user adds a join without writing Python.

Every `*.yaml` / `*.yml` file holds one spec (a mapping with an `operator`). A file that cannot
be read, is not valid YAML or holds an invalid spec is reported by path (and line, or the
setting's key) and left out; the other files still load.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from joins.errors import JoinsError
from joins.pipeline.registry import parse_pipeline_spec
from joins.pipeline.spec import PipelineSpec


@dataclass(frozen=True)
class SpecFileError:
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@dataclass(frozen=True)
class LoadedSpecs:
    specs: tuple[PipelineSpec, ...] = ()
    errors: tuple[SpecFileError, ...] = ()
    files: dict[str, str] = field(default_factory=dict)  # spec name -> its file


def spec_files(folder: str | Path) -> list[Path]:
    base = Path(folder)
    if not base.is_dir():
        return []
    return sorted(p for p in base.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())


def load_spec_file(path: str | Path) -> PipelineSpec:
    """One spec file; JoinsError (with the problem, not the path) when it is not usable."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise JoinsError(f"cannot read the file: {exc}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise JoinsError(f"{where}not valid YAML ({problem})") from None
    if not isinstance(raw, dict):
        raise JoinsError(f"a spec file holds one mapping of settings (operator, name, ...), got "
                         f"{type(raw).__name__}")
    try:
        return parse_pipeline_spec(raw)
    except JoinsError as exc:
        raise JoinsError(with_lines(str(exc), text)) from None


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


def load_spec_folder(folder: str | Path, *, taken: set[str] | None = None) -> LoadedSpecs:
    """Every spec file of `folder`; `taken` are pipeline names defined elsewhere (a duplicate
    name would make two assets of one key)."""
    specs: list[PipelineSpec] = []
    errors: list[SpecFileError] = []
    files: dict[str, str] = {}
    names = set(taken or ())
    for path in spec_files(folder):
        try:
            spec = load_spec_file(path)
        except JoinsError as exc:
            errors.append(SpecFileError(str(path), str(exc)))
            continue
        used = {spec.name, *(i.source.name for i in spec.pipeline_inputs() if i.source is not None)}
        clash = sorted(used & names)
        if clash:
            errors.append(SpecFileError(str(path), f"config.name: {clash} already defined by another "
                                                   f"spec; pipeline and source names must be unique"))
            continue
        names |= used
        specs.append(spec)
        files[spec.name] = str(path)
    return LoadedSpecs(tuple(specs), tuple(errors), files)
