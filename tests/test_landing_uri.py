"""Landing files named by a URI (an object store's, here `file://`) are opened through pyarrow's
file systems: what the readers check without Spark must hold there as for a local path."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from joins.landing.parquet import footer_problem


def test_a_parquet_footer_reads_through_a_uri(tmp_path: Path) -> None:
    # A footer is read from the end of the file: the file must be opened for random access
    # (a stream could not seek, and every remote Parquet file was judged unreadable).
    path = tmp_path / "batch.parquet"
    pd.DataFrame({"k": ["a"], "ts": [1]}).to_parquet(path, index=False)
    assert footer_problem(path.as_uri()) is None
    assert footer_problem(str(path)) is None


def test_a_broken_parquet_file_through_a_uri_is_named_as_such(tmp_path: Path) -> None:
    path = tmp_path / "broken.parquet"
    path.write_bytes(b"PAR1 not parquet")
    problem = footer_problem(path.as_uri())
    assert problem is not None and problem.startswith("not a readable Parquet file:")
    assert "seekable" not in problem
