"""Table properties: read, recorded in a version-guarded metadata commit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from joins.lake import (
    ConcurrentCommitError,
    delta_version,
    set_table_properties,
    table_properties,
    write_delta,
)
from joins.lake.write import NEW_TABLE_PROPERTIES
from tests.lake.conftest import events

pytestmark = pytest.mark.spark


def test_properties_are_recorded_on_an_existing_table_and_guarded(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    assert table_properties(path) is None
    write_delta(events(spark, [(1, "a", 1.0, "2024-01-01", None)]), path)
    assert table_properties(path) == NEW_TABLE_PROPERTIES   # a checkpoint every 100 commits
    version = set_table_properties(path, {"temporalJoins.x": "1"}, expected_version=0)
    assert version == 1 == delta_version(path)
    assert table_properties(path) == {**NEW_TABLE_PROPERTIES, "temporalJoins.x": "1"}
    with pytest.raises(ConcurrentCommitError, match="expected the table at version 0 but it is at 1"):
        set_table_properties(path, {"temporalJoins.x": "2"}, expected_version=0)
    assert table_properties(path) == {**NEW_TABLE_PROPERTIES, "temporalJoins.x": "1"}
