"""The README's Python example runs as written and prints what the README says it does."""

from __future__ import annotations

import contextlib
import io
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_python_example_runs(spark: Any, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # The example's lake is a `tempfile.mkdtemp()`, which a user keeps to look at; here it goes
    # under the test's own folder, not /tmp.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    section = README.read_text().split("## From Python", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None, "no Python example under 'From Python'"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code.group(1), "README.md", "exec"), {"__name__": "readme_example"})
    text = out.getvalue()
    assert "{'stream': 2, 'table': 2} 2 ('2024-03-01',)" in text
    assert re.search(r"o1\|2024-03-01 04:00:00\|\s+1\.08\|", text), text
    assert re.search(r"o2\|2024-03-01 09:00:00\|\s+1\.1\|", text), text
    assert "DayDifference(before=2, after=2, added=0, removed=0, changed=0)" in text
    assert list(tmp_path.glob("*/joins/orders_with_rates/output")), "the lake is elsewhere"
