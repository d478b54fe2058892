"""A reproduction's verdict: the rows recomputed from pinned inputs against the rows the output
held, compared as multisets over the columns both have (lineage columns a recomputation cannot
know, such as a micro-batch's id on a day a batch form recomputes, are left out by the caller).
Only counts and a few example rows reach the driver."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

EXAMPLES = 3
# Keys of `Reproduction.pins` that are not versions: the batch the pins are consistent with and
# who wrote a reproduced day last.
BATCH, WRITER = "batch", "written by"


@dataclass(frozen=True)
class Reproduction:
    """What `joins.reproduce` recomputed and how it compares with the output at `output_commit`.

    `what`: "batch 7" or "day 2024-03-03"; `pins`: the input (and state) versions the rows were
    recomputed from; `missing`: rows the output held that the recomputation did not produce;
    `extra`: rows it produced that the output did not hold (with a few examples of each)."""

    join: str
    what: str
    output_commit: int | None
    pins: dict[str, Any]
    rows_output: int
    rows_recomputed: int
    missing: int
    extra: int
    missing_examples: list[dict[str, Any]] = field(default_factory=list)
    extra_examples: list[dict[str, Any]] = field(default_factory=list)
    compared: list[str] = field(default_factory=list)

    @property
    def agrees(self) -> bool:
        return self.missing == 0 and self.extra == 0

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "agrees": self.agrees}

    def text(self) -> str:
        pins = ", ".join(f"{k} {v}" for k, v in self.pins.items() if k not in (BATCH, WRITER))
        head = f"{self.join} {self.what} at output commit {self.output_commit}: "
        if WRITER not in self.pins:
            head += f"recomputed from {pins or 'no input'}"
        else:
            head += f"rebuilt from {self.pins[WRITER]}"
            if pins:
                head += f" (the backfill's inputs: {pins}; as of batch {self.pins.get(BATCH)})"
        counts = f"{self.rows_output} row(s) in the output, {self.rows_recomputed} recomputed"
        if self.agrees:
            return f"{head}\n  {counts}: no difference"
        lines = [head, f"  {counts}: {self.missing} missing from the recomputation, "
                       f"{self.extra} not in the output"]
        for label, examples in (("in the output only", self.missing_examples),
                                ("recomputed only", self.extra_examples)):
            lines += [f"  {label}: {json.dumps(e, default=str, sort_keys=True)}" for e in examples]
        return "\n".join(lines)


def compare_rows(join: str, what: str, output_commit: int | None, pins: dict[str, Any],
                 recomputed: DataFrame | None, output: DataFrame | None,
                 columns: list[str] | None = None) -> Reproduction:
    """Multiset difference of `recomputed` and `output` over `columns` (default: all) that both
    frames have, in the output's order (a pipeline's `select` may have changed since the output
    was written: `compared` says what was compared). None is an empty side."""
    if recomputed is None and output is None:
        return Reproduction(join, what, output_commit, pins, 0, 0, 0, 0)
    frames = [f for f in (output, recomputed) if f is not None]
    both = [c for c in frames[0].columns if all(c in f.columns for f in frames)]
    columns = both if columns is None else [c for c in both if c in columns]
    new = None if recomputed is None else recomputed.select(*columns)
    old = None if output is None else output.select(*columns)
    if new is None or old is None:
        side = new if old is None else old
        assert side is not None
        n = side.count()
        examples = [_plain(r) for r in side.limit(EXAMPLES).collect()]
        return Reproduction(join, what, output_commit, pins, 0 if old is None else n,
                            0 if new is None else n, 0 if old is None else n,
                            0 if new is None else n, [] if old is None else examples,
                            [] if new is None else examples, columns)
    extra_rows, missing_rows = new.exceptAll(old).persist(), old.exceptAll(new).persist()
    try:
        return Reproduction(join, what, output_commit, pins, old.count(), new.count(),
                            missing_rows.count(), extra_rows.count(),
                            [_plain(r) for r in missing_rows.limit(EXAMPLES).collect()],
                            [_plain(r) for r in extra_rows.limit(EXAMPLES).collect()], columns)
    finally:
        extra_rows.unpersist()
        missing_rows.unpersist()


def _plain(row: Any) -> dict[str, Any]:
    return {k: (str(v) if not isinstance(v, int | float | str | bool | type(None)) else v)
            for k, v in row.asDict().items()}
