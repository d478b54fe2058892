"""Every project file the docs and the code cite by path exists: a command a user copies from
the docs runs on a file that is there, and a module's "see docs/x.md" leads somewhere. Every
dotted name the docs and the code cite in backticks (`joins.changelog.keyed_state`) imports."""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
CITING = ["README.md", "bench/README.md", "docs", "joins", "resources", "assets", "pipelines",
          "runplatform", "demo", "bench", "tests"]
CITED = re.compile(r"(?<![\w/.-])((?:docs|joins|tests|bench|pipelines|assets|resources|runplatform|demo)"
                   r"/[\w/.-]*\.(?:py|md|yaml|yml|sql|json))\b")
# Names in examples that stand for a user's file, not one of the project's.
PLACEHOLDERS = {"tests/scenarios/FILE.json",                # `replay FILE`
                "pipelines/specs_sql/stream_join.sql"}      # the file docs/sql.md has a user add


@cache
def _citing_files() -> dict[Path, list[str]]:
    """Each citing file's lines, read once for every test here."""
    files: list[Path] = []
    for name in CITING:
        path = ROOT / name
        files += [path] if path.is_file() else sorted(
            p for p in path.rglob("*") if p.suffix in (".md", ".py") and "results" not in p.parts)
    # Its own examples cite no file.
    return {f: f.read_text().splitlines() for f in files if f != Path(__file__).resolve()}


def _cited(pattern: re.Pattern[str], *, docs_only: bool = False) -> Iterator[tuple[Path, str, str]]:
    """(file, `file:line` for a message, what `pattern` found there) over every citing line."""
    for file, lines in _citing_files().items():
        if docs_only and file.suffix != ".md":
            continue
        for number, line in enumerate(lines, 1):
            for found in pattern.findall(line):
                yield file, f"{file.relative_to(ROOT)}:{number}", found


def test_every_cited_path_exists() -> None:
    missing = [f"{where}: {cited}" for _file, where, cited in _cited(CITED)
               if cited not in PLACEHOLDERS and not (ROOT / cited).exists()]
    assert not missing, "cited but not in the repository:\n" + "\n".join(missing)


LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_every_relative_link_of_the_docs_resolves() -> None:
    broken = [f"{where}: {target}" for file, where, target in _cited(LINK, docs_only=True)
              if not re.match(r"[a-z]+:", target) and not (file.parent / target).exists()]
    assert not broken, "links to no file:\n" + "\n".join(broken)


NAME = re.compile(r"`((?:joins|assets|resources|pipelines|runplatform|tests|bench|demo)"
                  r"(?:\.[A-Za-z_]\w*)+)(?:\(\))?`")


def _resolves(name: str) -> bool:
    """The longest importable module prefix of `name`, then its attributes."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: ModuleType | object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(found, attribute):
                return False
            found = getattr(found, attribute)
        return True
    return False


def test_every_dotted_name_the_docs_and_docstrings_cite_imports() -> None:
    unresolved = [f"{where}: {name}" for _file, where, name in _cited(NAME) if not _resolves(name)]
    assert not unresolved, "cited but not importable:\n" + "\n".join(unresolved)


def test_the_pattern_finds_what_it_must() -> None:
    # The check above can fail: a cited path is found inside prose, code spans and commands.
    line = "see (docs/fk_join.md) and `joins/core/human.py`; replay tests/scenarios/x_y.json --check"
    assert CITED.findall(line) == ["docs/fk_join.md", "joins/core/human.py",
                                   "tests/scenarios/x_y.json"]
    assert CITED.findall("../shared/scenarios/FORMAT.md and .venv/bin/x.py") == []
    assert LINK.findall("[a](../x.md#part), [b](https://e.org/y), [c](y.md)") == [
        "../x.md", "https://e.org/y", "y.md"]
    assert NAME.findall("`joins.core.human.duration()` and `joins.spark` but not `pyspark.sql`") \
        == ["joins.core.human.duration", "joins.spark"]
    assert _resolves("joins.core.human.duration") and not _resolves("joins.core.human.nothing")
