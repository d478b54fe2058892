"""Sources defined once and read by many joins.

A source file in the specs folder holds `kind: source` and a source's settings (the same as a
join's inline source: `joins.pipeline.sources.SourceSpec`). It is ingested once, into one table,
whichever joins read it; a join names it where it would declare a source inline:

    stream: orders                                   # the source as declared
    stream: {source: orders, key_columns: [currency]}  # joined on other columns of it

A join may key a source by other columns than the source's own key (a stream of orders keyed
by order id is joined to rates by currency): the stored table keeps every column by name, so
the join reads the same rows under its own key. Such a column must never be null in the stored
table (the source's key, or a value column declared `nullable: false`, which the ingest
enforces). Settings that belong to the join's side of a source (a changelog side's `versioned`
and `history_retention_ms`) may be given beside `source`; the source's own settings may not.

How a source is stored (an events table, a changelog, a versioned table with its history
retention) follows from what its readers need; two joins that need it stored differently are
an error naming both (`storage_of`, checked where the folder is loaded).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from joins.core.human import duration
from joins.errors import ConfigError
from joins.pipeline.sources import SourceSpec
from joins.spec import config_problem, did_you_mean, models_in

if TYPE_CHECKING:
    from joins.pipeline.spec import InputKind, PipelineInput

SOURCE_KIND = "source"


@dataclass(frozen=True)
class SharedSource:
    """A source defined in its own file: its settings as written and validated."""

    spec: SourceSpec
    raw: dict[str, Any]       # the file's settings, less `kind`
    file: str = ""

    @property
    def name(self) -> str:
        return self.spec.name


@dataclass(frozen=True)
class Storage:
    """How a source's table is stored: what its readers need, and who needs it."""

    kind: InputKind
    history_retention_ms: int | None
    reader: str                  # the first join that reads it so

    def describe(self) -> str:
        if self.kind == "versioned":
            retention = self.history_retention_ms
            return ("a versioned table with history retention "
                    f"{'unbounded' if retention is None else duration(retention)}")
        return {"events": "an events table", "changelog": "a changelog table"}[self.kind]


def is_source_file(raw: Mapping[str, Any]) -> bool:
    return raw.get("kind") == SOURCE_KIND


def parse_source(raw: Mapping[str, Any], *, file: str = "") -> SharedSource:
    """A source file's settings (`kind: source` and a source's keys); ConfigError naming them."""
    settings = {k: v for k, v in raw.items() if k != "kind"}
    name = settings.get("name")
    who = "source" + (f" {name!r}" if isinstance(name, str) and name else "")
    try:
        spec = SourceSpec.model_validate(settings)
    except ValidationError as exc:
        raise ConfigError(f"{who}: invalid config: " + "; ".join(
            config_problem(err, SourceSpec, err["loc"], setting_of="a source")
            for err in exc.errors())) from None
    return SharedSource(spec, settings, file)


def source_roles(cls: type[BaseModel]) -> dict[str, type[SourceSpec]]:
    """The settings of a pipeline spec class that hold a source (field -> its model)."""
    out: dict[str, type[SourceSpec]] = {}
    for name, field in cls.model_fields.items():
        found = [m for m in models_in(field.annotation) if issubclass(m, SourceSpec)]
        if found:
            out[name] = found[0]
    return out


def resolve_references(raw: dict[str, Any], cls: type[BaseModel],
                       sources: Mapping[str, SharedSource]) -> tuple[dict[str, Any], set[str]]:
    """`raw` with every source named by reference replaced by its settings (and the join's
    own key and side settings), and the names of the shared sources it reads."""
    out = dict(raw)
    used: set[str] = set()
    who = f"{raw.get('operator', 'pipeline')} spec" + (f" {raw['name']!r}" if raw.get("name") else "")
    for role, model in source_roles(cls).items():
        value = raw.get(role)
        if isinstance(value, str):
            value = {"source": value}
        if not isinstance(value, dict) or "source" not in value:
            continue   # declared inline (or missing: the spec's own validation says so)
        name = value["source"]
        shared = sources.get(name) if isinstance(name, str) else None
        if shared is None:
            known = sorted(sources)
            raise ConfigError(
                f"{who}: invalid config: config.{role}.source: no source named {name!r}"
                f"{did_you_mean(str(name), known)}; sources defined in the folder: "
                f"{', '.join(known) or 'none'} (a source file holds `kind: source`)")
        out[role] = _side_settings(who, role, value, shared, model)
        used.add(shared.name)
    return out, used


def _side_settings(who: str, role: str, ref: dict[str, Any], shared: SharedSource,
                   model: type[SourceSpec]) -> dict[str, Any]:
    own = set(SourceSpec.model_fields)
    side_only = [k for k in model.model_fields if k not in own]
    settings = dict(shared.raw)
    for key, value in ref.items():
        if key in ("source", "key_columns"):
            continue
        if key in own:
            raise ConfigError(f"{who}: invalid config: config.{role}.{key}: a setting of source "
                              f"{shared.name!r} ({shared.file or 'its file'}); a join reading it "
                              f"cannot change it")
        if key not in side_only:
            hint = did_you_mean(key, ["source", "key_columns", *side_only])
            raise ConfigError(f"{who}: invalid config: config.{role}.{key}: unknown key (not a "
                              f"setting of a join's side of a source){hint}")
        settings[key] = value
    if "key_columns" in ref:
        settings.update(_rekeyed(who, role, ref["key_columns"], shared))
    return settings


def _rekeyed(who: str, role: str, keys: Any, shared: SharedSource) -> dict[str, Any]:
    """The key and value columns of `shared` keyed by `keys` (names) instead of its own key."""
    where = f"config.{role}.key_columns"
    if not isinstance(keys, list) or not keys:
        raise ConfigError(f"{who}: invalid config: {where}: a list of column names of source "
                          f"{shared.name!r}, got {keys!r}")
    spec = shared.spec
    columns = {c.name: c for c in (*spec.key_columns, *spec.value_columns)}
    own_keys = {c.name for c in spec.key_columns}
    names = [k["name"] if isinstance(k, dict) and "name" in k else k for k in keys]
    for name in names:
        if name not in columns:
            raise ConfigError(f"{who}: invalid config: {where}: {name!r} is not a column of source "
                              f"{shared.name!r}{did_you_mean(str(name), list(columns))} (its "
                              f"columns: {', '.join(columns)})")
        if name not in own_keys and columns[name].nullable:
            raise ConfigError(f"{who}: invalid config: {where}: {name!r} may be null in source "
                              f"{shared.name!r}; a join key is never null: declare it "
                              f"`nullable: false` in the source (its ingest then quarantines "
                              f"rows without it)")
    as_value = [c.model_copy(update={"nullable": False}) if c.name in own_keys else c
                for c in columns.values() if c.name not in names]
    return {"key_columns": [columns[n].model_dump() for n in names],
            "value_columns": [c.model_dump() for c in as_value]}


def storage_of(item: PipelineInput, reader: str) -> Storage:
    retention = item.history_retention_ms if item.kind == "versioned" else None
    return Storage(item.kind, retention, reader)


def check_storage(shared: SharedSource, want: Storage, have: Storage | None) -> None:
    """ConfigError when `want` (a new reader's need) differs from what an earlier reader set."""
    if have is None or (have.kind, have.history_retention_ms) == (want.kind, want.history_retention_ms):
        return
    raise ConfigError(
        f"{want.reader}: source {shared.name!r} is read as {have.describe()} by {have.reader!r}; "
        f"this join needs {want.describe()}. One source is stored one way: give the joins the "
        f"same setting, or declare a second source over the same landing folder")
