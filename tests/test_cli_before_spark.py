"""A question the lake cannot answer yet fails before a Spark session starts (seconds of a JVM
for nothing): `./tj table` on a table no ingest has stored, or at a commit it does not have;
`./tj reproduce --batch` of a batch that never completed."""

from __future__ import annotations

from pathlib import Path

import pytest

from joins.cli import EXIT_INVALID, main


@pytest.fixture
def no_session(monkeypatch: pytest.MonkeyPatch) -> None:
    import joins.spark

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a Spark session was started")

    monkeypatch.setattr(joins.spark, "get_spark", refuse)


@pytest.mark.usefixtures("no_session")
def test_a_table_nothing_stored_yet(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lake = ["--lake", str(tmp_path)]
    assert main(["table", "rates", "get", "EUR", "--as-of", "2024-03-02T14:05Z", *lake]) == EXIT_INVALID
    assert f"table 'rates': nothing stored yet at {tmp_path}/tables/rates" in capsys.readouterr().err
    assert main(["table", "rates", "history", "EUR", *lake]) == EXIT_INVALID
    assert "nothing stored yet" in capsys.readouterr().err


@pytest.mark.usefixtures("no_session")
def test_a_batch_that_never_ran(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["reproduce", "orders_with_rates", "--batch", "3", "--lake", str(tmp_path)]) \
        == EXIT_INVALID
    assert "orders_with_rates: batch 3 does not exist (no batch has completed)" in \
        capsys.readouterr().err
