"""Reproducing past output of the table-result operators (issue 29, point 3; joins.reproduce):
the table-table join, the foreign-key join, the filter, the map and the aggregate, each run as
its pipeline runs it (two micro-batches over changelogs with out-of-order updates and deletes);
every batch and the event day re-run from their pinned plans agree with what the output holds,
and an input version a vacuum removed is named."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from joins.ingest import run_ingest
from joins.pipeline import PipelineLayout, load_spec_folder
from joins.reproduce import ReproduceError, reproduce_batch, reproduce_day
from pipelines.definitions import SPECS_DIR
from tests.dagster.test_sql_pipelines import FILTER_YAML, LANDED, MAP_YAML, SUM_YAML

pytestmark = [pytest.mark.spark, pytest.mark.slow]

DAY = dt.date(2024, 3, 1)


def _halves(name: str, text: str) -> list[tuple[str, str]]:
    """A landed file as two files (a CSV's header in both): two micro-batches' worth."""
    lines = text.splitlines(keepends=True)
    header, rows = (lines[:1], lines[1:]) if name.endswith(".csv") else ([], lines)
    cut = len(rows) // 2
    return [(f"1-{name}", "".join(header + rows[:cut])), (f"2-{name}", "".join(header + rows[cut:]))]


def _folder(tmp_path: Path, name: str) -> Path:
    if name in ("customer_accounts", "orders_with_customer"):
        return SPECS_DIR
    folder = tmp_path / "specs"
    folder.mkdir()
    shutil.copy(SPECS_DIR.parent / "specs_sql" / "accounts.yaml", folder)
    (folder / f"{name}.yaml").write_text({"open_accounts": FILTER_YAML, "account_amounts": MAP_YAML,
                                          "balance_per_status": SUM_YAML}[name])
    return folder


def _two_batches(spark: Any, tmp_path: Path, name: str) -> tuple[PipelineLayout, Any]:
    loaded = load_spec_folder(_folder(tmp_path, name))
    spec = next(s for s in loaded.specs if s.name == name)
    layout = PipelineLayout(str(tmp_path / "lake"), spec)
    engine = spec.engine(layout)
    for half in (0, 1):
        for item in spec.pipeline_inputs():
            assert item.source is not None
            landing = Path(layout.landing(item.source))
            landing.mkdir(parents=True, exist_ok=True)
            file, text = _halves(*LANDED[item.name])[half]
            (landing / file).write_text(text)
            use = loaded.sources.get(item.name)
            run_ingest(spark, layout.ingest_source(use.input() if use is not None else item))
        assert not engine.microbatch(spark).skipped
    return layout, engine


@pytest.mark.parametrize("name", ["customer_accounts", "orders_with_customer", "open_accounts",
                                  "account_amounts", "balance_per_status"])
def test_every_batch_and_the_day_reproduce(spark: Any, tmp_path: Path, name: str) -> None:
    _, engine = _two_batches(spark, tmp_path, name)
    rt = engine.runtime()
    rows = 0
    for batch in (0, 1):
        got = reproduce_batch(spark, rt, batch)
        assert got.agrees, got.text()
        assert got.rows_output == got.rows_recomputed
        rows += got.rows_output
    assert rows > 0
    day = reproduce_day(spark, rt, DAY)
    assert day.agrees, day.text()
    assert day.rows_output == rows   # every row so far is of that day


def test_a_vacuumed_input_version_is_named(spark: Any, tmp_path: Path) -> None:
    layout, engine = _two_batches(spark, tmp_path, "open_accounts")
    rt = engine.runtime()
    table = layout.input_table("table")
    # Rewrite the input's files into one and delete the old ones: version 0 is gone.
    DeltaTable(table).optimize.compact()
    DeltaTable(table).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    with pytest.raises(ReproduceError, match=r"version \d+ cannot be read any more: .* removed "
                                             r"\(a vacuum\)"):
        reproduce_batch(spark, rt, 0)
