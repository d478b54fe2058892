"""An operator's report of one call of the runtime, the same rule for every operator.

A batch that ran, or a committed batch asked for again, reports what its done record holds (the
latter marked skipped, with the reason); a call with nothing to do reports no batch, with what
the last done record carried (an operator's stream times) for the operator to show.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from joins.incremental.runner import BatchResult

R = TypeVar("R")


def report_of_result(result: BatchResult, from_dict: Callable[..., R],
                     nothing: Callable[..., R]) -> R:
    """`from_dict(done.report, skipped=, skip_reason=, commits=, timings=)` for a batch,
    `nothing(carry, skip_reason=, timings=)` for a skip without one."""
    done = result.done
    timings = dict(result.timings)
    if done is not None and (not result.skipped or result.batch_id is not None):
        return from_dict(done.report, skipped=result.skipped, skip_reason=result.skip_reason,
                         commits=result.commits, timings=timings)
    carry: Mapping[str, Any] = {} if done is None else done.carry
    return nothing(carry, skip_reason=result.skip_reason, timings=timings)
