"""`python -m joins reproduce` (issue 29, point 3) on a lake of the demo pipeline built from
landing files: a batch and a day agree (exit 0, the short report), a day whose output was
tampered with differs (exit 1, examples), and a user's mistakes are one line each (exit 2)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from joins import lake
from joins.cli import main
from joins.ingest import run_ingest
from joins.pipeline import PipelineLayout, parse_pipeline_spec
from pipelines.definitions import DEMO_SPEC, SPECS_DIR

pytestmark = pytest.mark.spark

T0 = 1_709_251_200_000   # 2024-03-01T00:00:00Z
M = 60_000


def _land(layout: PipelineLayout, role: str, name: str, text: str) -> None:
    folder = Path(layout.landing(layout.spec.input(role).source))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)


def _orders(rows: list[tuple[str, str, float, int]]) -> str:
    return "".join(json.dumps({"order_id": o, "currency": c, "amount": a, "ts": T0 + t}) + "\n"
                   for o, c, a, t in rows)


@pytest.fixture(scope="module")
def lake_root(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    root = str(tmp_path_factory.mktemp("reproduce"))
    layout = PipelineLayout(root, parse_pipeline_spec(DEMO_SPEC))
    engine = layout.spec.engine(layout)
    _land(layout, "table", "0000-rates.csv", f"currency,rate,ts\nEUR,1.08,{T0}\nGBP,1.27,{T0}\n"
                                             f"EUR,1.09,{T0 + 60 * M}\n")
    _land(layout, "stream", "0000-orders.jsonl", _orders(
        [("o-1", "EUR", 10.0, 30 * M), ("o-2", "GBP", 11.0, 40 * M), ("o-3", "EUR", 12.0, 90 * M)]))
    for role in ("table", "stream"):
        run_ingest(spark, layout.ingest_source(layout.spec.input(role)))
    engine.microbatch(spark)
    _land(layout, "stream", "0001-orders.jsonl", _orders(
        [("o-4", "EUR", 13.0, 200 * M), ("o-5", "GBP", 14.0, 300 * M)]))
    run_ingest(spark, layout.ingest_source(layout.spec.input("stream")))
    engine.microbatch(spark)
    return root


def reproduce(root: str, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["reproduce", "orders_with_rates", *args, "--lake", root, "--specs", str(SPECS_DIR)])
    return code, out.getvalue(), err.getvalue()


def test_a_batch_and_a_day_agree(lake_root: str) -> None:
    code, out, err = reproduce(lake_root, "--batch", "0")
    assert code == 0, err
    assert out.startswith("orders_with_rates batch 0 at output commit 0: recomputed from stream 0..")
    assert "no difference" in out
    code, out, err = reproduce(lake_root, "--day", "2024-03-01", "--json")
    assert code == 0, err
    answer = json.loads(out)
    # o-1..o-4; o-5 waits in the grace buffer (stream time 5 h, grace half an hour).
    assert answer["agrees"] and answer["rows_output"] == answer["rows_recomputed"] == 4
    assert answer["pins"]["written by"] == "micro-batch(es) 0, 1"


def test_a_tampered_day_differs(spark: Any, lake_root: str) -> None:
    layout = PipelineLayout(lake_root, parse_pipeline_spec(DEMO_SPEC))
    before = lake.delta_version(layout.output)
    assert before is not None
    one = lake.read_delta(spark, layout.output).where("order_id = 'o-1'")
    lake.write_delta(one.selectExpr("*", "amount * 2 AS _a").drop("amount").withColumnRenamed("_a", "amount"),
                     layout.output, mode="append", partition_by=["event_date"])
    code, out, err = reproduce(lake_root, "--day", "2024-03-01")
    assert code == 1, err
    assert "5 row(s) in the output, 4 recomputed: 1 missing from the recomputation" in out
    assert '"amount": 20.0' in out and "in the output only" in out
    assert "which neither a micro-batch nor a backfill made" in out
    # The commit before the tampering still agrees.
    assert reproduce(lake_root, "--day", "2024-03-01", "--as-of-commit", str(before))[0] == 0


@pytest.mark.parametrize(("args", "message"), [
    (["--batch", "9"], "orders_with_rates: batch 9 does not exist (batches 0..1 completed)"),
    (["--day", "2024-03-01", "--as-of-commit", "99"], "there is no commit 99"),
    (["--day", "March 1"], "--day: not a date (YYYY-MM-DD): 'March 1'"),
    (["--batch", "0", "--as-of-commit", "1"], "--as-of-commit goes with --day"),
    (["--batch", "-1"], "--batch: batch ids and commits count from 0, got -1"),
    (["--day", "2024-03-01", "--as-of-commit", "-2"], "--as-of-commit: batch ids and commits count"),
])
def test_mistakes_are_one_line(lake_root: str, args: list[str], message: str) -> None:
    code, _out, err = reproduce(lake_root, *args)
    assert code == 2 and message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_an_unknown_join_and_a_join_that_never_ran(lake_root: str) -> None:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["reproduce", "orders_with_rate", "--batch", "0", "--lake", lake_root,
                     "--specs", str(SPECS_DIR)])
    assert code == 2 and "no pipeline 'orders_with_rate'" in err.getvalue()
    assert "orders_with_rates" in err.getvalue()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["reproduce", "accounts_per_country", "--batch", "0", "--lake", lake_root,
                     "--specs", str(SPECS_DIR)])
    # Every operator reproduces; this one's input (another pipeline's output) was never written.
    assert code == 2 and "accounts_per_country: the input table" in err.getvalue()
    assert "customer_accounts/output' does not exist yet" in err.getvalue()


def test_the_dagster_reproduce_job(lake_root: str) -> None:
    """In the UI: the `orders_with_rates_reproduce` job's Launchpad takes a batch (or a day and
    a commit); the run's output metadata holds the report; a mistake fails the run, naming it.
    Runs before the tampering test in this file's order would not matter: batches read their
    own commits."""
    from pipelines.definitions import build_definitions

    defs = build_definitions([DEMO_SPEC], lake_root=lake_root)
    job = defs.resolve_job_def("orders_with_rates_reproduce")

    def run(**config: Any) -> Any:
        return job.execute_in_process(
            run_config={"ops": {"orders_with_rates_reproduce_output": {"config": config}}},
            resources=defs.resources, raise_on_error=False)

    result = run(batch=1)
    assert result.success
    [event] = [e for e in result.all_events if e.event_type_value == "STEP_OUTPUT"]
    metadata = event.event_specific_data.metadata
    assert metadata["agrees"].value is True and metadata["rows_output"].value == 2
    assert "orders_with_rates batch 1 at output commit 1" in metadata["report"].value
    failed = run(batch=7)
    [failure] = [e for e in failed.all_events if e.is_step_failure]
    assert "batch 7 does not exist" in failure.step_failure_data.user_failure_data.description
