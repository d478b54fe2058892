"""The README's Python example runs as written and prints what the README says it does."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_python_example_runs(spark: Any) -> None:
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
