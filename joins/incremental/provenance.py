"""What a backfill read, pinned and written down: its input sources held at the versions read
under the lease (`Pinned`), and those versions in the replace commit's message
(`backfill_message` / `read_backfill_message`), so that `joins.reproduce` can recompute the
days it wrote from exactly those inputs later. Micro-batches need none of this: their plans in
the batch log pin everything they read."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_PINS = re.compile(r"\(consistent with batch (None|\d+); inputs ((?:\w+@\d+(?:, )?)*)\)")


@dataclass(frozen=True)
class Pinned:
    """A source whose `version()` is fixed: every read a batch form makes "at the latest
    version" reads this one instead. Anything else is the wrapped source's."""

    source: Any
    pinned: int | None

    @property
    def path(self) -> str:
        return str(self.source.path)

    def version(self) -> int | None:
        return self.pinned

    def __getattr__(self, name: str) -> Any:
        return getattr(self.source, name)


def backfill_message(name: str, days: Sequence[str], batch_id: int | None,
                     versions: Mapping[str, int | None]) -> str:
    inputs = ", ".join(f"{role}@{v}" for role, v in sorted(versions.items()) if v is not None)
    return (f"{name}: backfill of {', '.join(days)} (consistent with batch {batch_id}; "
            f"inputs {inputs})")


def read_backfill_message(message: str) -> tuple[int | None, dict[str, int]] | None:
    """(batch id, input versions) of a backfill commit's message; None when it is not one (or
    one written before backfills recorded their inputs)."""
    found = _PINS.search(message)
    if found is None:
        return None
    batch = None if found.group(1) == "None" else int(found.group(1))
    pins = dict(part.split("@") for part in found.group(2).split(", ") if part)
    return batch, {role: int(v) for role, v in pins.items()}
