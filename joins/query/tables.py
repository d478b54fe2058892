"""Which versioned tables a lake holds, by name, from the pipeline specs that define them; and
the user's words for keys and times turned into values."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from joins.pipeline.files import load_spec_folder
from joins.pipeline.spec import PipelineInput, SourceLayout
from joins.query.versioned import QueryError, VersionedTableRef
from joins.spec import did_you_mean
from joins.versioned.spark_store import VersionedDeltaLayout

_STORED_AS = {"events": "an events table (a stream: no versions to ask for)",
              "changelog": "a changelog table (its joins version it; the table keeps every update "
                           "in arrival order)"}


def _inputs(specs: str | Path) -> tuple[dict[str, PipelineInput], int]:
    """Every source of the folder's pipelines by name, and how many files did not load."""
    loaded = load_spec_folder(specs)
    out: dict[str, PipelineInput] = {name: use.input() for name, use in loaded.sources.items()}
    for spec in loaded.specs:
        for item in spec.pipeline_inputs():
            if item.source is not None and item.name not in out:
                out[item.name] = item
    return out, len(loaded.errors)


def versioned_table(name: str, *, specs: str | Path, root: str) -> VersionedTableRef:
    """The versioned table `name` of the lake at `root`, as the specs folder defines it."""
    inputs, broken = _inputs(specs)
    versioned = sorted(n for n, i in inputs.items() if i.kind == "versioned")
    item = inputs.get(name)
    if item is None:
        hint = f" ({broken} spec file(s) did not load: ./tj check {specs})" if broken else ""
        raise QueryError(f"no table {name!r} in the pipelines of {specs}"
                         f"{did_you_mean(name, list(inputs))}; versioned tables: "
                         f"{', '.join(versioned) or 'none'}{hint}")
    if item.kind != "versioned":
        raise QueryError(f"{name!r} is {_STORED_AS.get(item.kind, item.kind)}; versioned tables: "
                         f"{', '.join(versioned) or 'none'}")
    return table_ref(item, root)


def table_ref(item: PipelineInput, root: str) -> VersionedTableRef:
    """A pipeline input stored as a versioned table, as the queries read it."""
    source = item.source
    assert source is not None and item.kind == "versioned", item
    layout = VersionedDeltaLayout(key_columns=tuple(c.name for c in source.key_columns),
                                  value_columns=source.value_names,
                                  history_retention_ms=item.history_retention_ms or 0)
    return VersionedTableRef(source.name, SourceLayout(root).table(source), layout,
                             {c.name: c.type for c in source.key_columns})


def parse_key(text: str, types: dict[str, str]) -> dict[str, Any]:
    """`EUR` (one key column) or `a,b` (several, in their order), typed as the columns are."""
    parts = text.split(",") if len(types) > 1 else [text]
    if len(parts) != len(types):
        raise QueryError(f"the key has {len(types)} columns ({', '.join(types)}): give "
                         f"{len(types)} values separated by commas, got {text!r}")
    out: dict[str, Any] = {}
    for (column, kind), part in zip(types.items(), parts, strict=True):
        try:
            out[column] = {"string": str, "long": int, "int": int, "double": float,
                           "boolean": _boolean}[kind](part)
        except ValueError:
            raise QueryError(f"key column {column} is a {kind}, got {part!r}") from None
    return out


def _boolean(text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise ValueError(text)
    return text.lower() == "true"


def parse_time(text: str) -> int:
    """An event time: ISO 8601 (`2024-03-02T14:05:00Z`, `2024-03-02 14:05`, `2024-03-02`; no
    zone means UTC) or epoch milliseconds."""
    raw = text.strip()
    if raw.lstrip("-").isdigit():
        return int(raw)
    try:
        stamp = dt.datetime.fromisoformat(raw)
    except ValueError:
        raise QueryError(f"not a time: {text!r} (ISO 8601 such as 2024-03-02T14:05:00Z, or "
                         f"epoch milliseconds)") from None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=dt.UTC)
    return round(stamp.timestamp() * 1000)
