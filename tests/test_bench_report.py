"""The batch benchmarks' common end (`bench.harness.report`): ratios to the reference engine of
each case, the run saved as JSON, and a failing exit status when two engines' contents differ."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.harness import Result, report

BEFORE = {"loadavg_1_5_15": [0.5, 0.5, 0.5]}


def _result(engine: str, seconds: list[float], checksum: int, *, dist: str = "uniform") -> Result:
    res = Result(size="1m", dist=dist, engine=engine, times_s=seconds, rows=10, checksum=checksum)
    res.finish()
    return res


def _report(results: list[Result], out: Path) -> int:
    return report(results, reference="duckdb", command="python -m bench.x", args={"runs": 3},
                  out=out, machine_before=BEFORE, extra={"reference": "duckdb"})


def test_ratios_are_to_the_reference_of_the_same_case_and_the_run_is_saved(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = [_result("duckdb", [1.0, 2.0, 3.0], 7), _result("ours", [3.0, 4.0, 5.0], 7),
               _result("duckdb", [4.0], 9, dist="skewed"), _result("ours", [2.0], 9, dist="skewed")]
    assert _report(results, tmp_path / "run.json") == 0
    assert [r.ratio_to_duckdb for r in results] == [1.0, 2.0, 1.0, 0.5]
    saved = json.loads((tmp_path / "run.json").read_text())
    assert saved["command"] == "python -m bench.x" and saved["reference"] == "duckdb"
    assert saved["args"] == {"runs": "3"} and saved["content_problems"] == []
    assert [r["median_s"] for r in saved["results"]] == [2.0, 4.0, 4.0, 2.0]
    assert "CONTENT MISMATCH" not in capsys.readouterr().out


def test_engines_that_disagree_on_the_rows_fail_the_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = [_result("duckdb", [1.0], 7), _result("ours", [1.5], 8)]
    assert _report(results, tmp_path / "run.json") == 1
    assert json.loads((tmp_path / "run.json").read_text())["content_problems"]
    assert "CONTENT MISMATCH: 1m uniform inner: results differ" in capsys.readouterr().out


def test_a_floor_gets_its_ratio_but_is_not_compared_by_content(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A floor reads the inputs and joins nothing: its row count is the rows read, with no checksum.
    floor = Result(size="1m", dist="uniform", engine="spark_read", times_s=[0.5], rows=11, floor=True)
    floor.finish()
    results = [_result("duckdb", [1.0], 7), floor, _result("ours", [1.5], 7)]
    assert _report(results, tmp_path / "run.json") == 0
    assert floor.ratio_to_duckdb == 0.5
    out = capsys.readouterr().out
    assert "floor: reads its inputs, joins nothing" in out and "CONTENT MISMATCH" not in out
    # The floor does not hide a real disagreement.
    results = [_result("duckdb", [1.0], 7), floor, _result("ours", [1.5], 8)]
    assert _report(results, tmp_path / "run.json") == 1
