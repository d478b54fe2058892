"""The engine's layering, read from the import graph (every import, lazy ones included).

- An operator never imports another operator: what two operators share lives below them
  (`joins/core`, `joins/versioned`, `joins/changelog`, the runtime), so a newcomer can read,
  change or delete one operator's folder alone. The operators' shared contract is
  `joins.core.operator`; `joins.operators.registry` lists them.
- The foundations (below `joins/operators/`) never import from it.
- Nothing in `joins/` imports Dagster.
- The Dagster side is layered too, each package importing only those before it: `resources`
  (Spark and the lake for Dagster), `assets` (specs into Dagster objects), `pipelines` (the
  code location: sensors, schedules, checks, Definitions), `runplatform` (where runs execute:
  the warm run worker, its launcher, the instance, `./tj dev`), `demo` (sample data, the demo).
- Dagster's private modules (`dagster._*`) are imported in one place, `resources.dagster_private`,
  which lists each name with why no public API serves, for the one pinned Dagster version.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
JOINS = REPO / "joins"
SHARED_OPERATOR_MODULES = {"registry"}
FOUNDATIONS = ("core", "versioned", "changelog", "landing", "ingest", "audit", "lake",
               "incremental", "asof", "spark", "sql")
# Crossings still to move down, if any: shrink this, never grow it.
KNOWN_CROSS_IMPORTS: set[tuple[str, str]] = set()


def imports_of(path: Path) -> Iterator[tuple[int, str]]:
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name


def operator_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] == ["joins", "operators"] and len(parts) > 2 and parts[2] not in SHARED_OPERATOR_MODULES:
        return parts[2]
    return None


def modules() -> list[Path]:
    return sorted(JOINS.rglob("*.py"))


def test_the_scan_sees_the_engine() -> None:
    # The rules below pass vacuously on an empty list: the scan must find the operators' imports.
    found = {operator_of(m) for p in modules() for _, m in imports_of(p)}
    assert {"stream_table_join", "interval_join", "fk_join", "versioned_table"} <= found


def test_no_operator_imports_another() -> None:
    crossing = set()
    problems = []
    for path in modules():
        rel = path.relative_to(JOINS).parts
        if rel[0] != "operators" or len(rel) < 3:
            continue
        for line, module in imports_of(path):
            other = operator_of(module)
            if other is not None and other != rel[1]:
                crossing.add((rel[1], other))
                if (rel[1], other) not in KNOWN_CROSS_IMPORTS:
                    problems.append(f"joins/{'/'.join(rel)}:{line} imports {module}")
    assert not problems, "an operator imports another (move the shared part down):\n" + "\n".join(problems)
    assert crossing >= KNOWN_CROSS_IMPORTS, (
        f"{sorted(KNOWN_CROSS_IMPORTS - crossing)} no longer cross: remove them from "
        "KNOWN_CROSS_IMPORTS")


@pytest.mark.parametrize("package", FOUNDATIONS)
def test_foundations_import_no_operator(package: str) -> None:
    problems = [f"joins/{path.relative_to(JOINS)}:{line} imports {module}"
                for path in sorted((JOINS / package).rglob("*.py"))
                for line, module in imports_of(path)
                if module == "joins.operators" or module.startswith("joins.operators.")]
    assert not problems, "\n".join(problems)


def test_the_engine_imports_no_dagster() -> None:
    problems = [f"joins/{path.relative_to(JOINS)}:{line} imports {module}"
                for path in modules() for line, module in imports_of(path)
                if module == "dagster" or module.startswith(("dagster.", "dagster_"))]
    assert not problems, "\n".join(problems)


def test_private_dagster_apis_are_imported_in_one_module() -> None:
    private_module = REPO / "resources" / "dagster_private.py"
    problems = [f"{path.relative_to(REPO)}:{line} imports {module}"
                for folder in ("assets", "pipelines", "resources", "tests", "bench")
                for path in sorted((REPO / folder).rglob("*.py")) if path != private_module
                for line, module in imports_of(path)
                if module.startswith("dagster._")]
    assert not problems, ("import these from resources.dagster_private (and list them there, with "
                          "why no public API serves):\n" + "\n".join(problems))


def test_the_private_dagster_list_holds_for_the_pinned_version() -> None:
    import re

    import dagster

    from resources import dagster_private

    pins = set(re.findall(r'"dagster(?:-[a-z]+)?==([\d.]+)"', (REPO / "pyproject.toml").read_text()))
    assert pins == {dagster_private.PINNED} == {dagster.__version__}
    missing = []
    for name in dagster_private.PRIVATE:
        try:
            getattr(dagster_private, name)
        except (AttributeError, ImportError) as exc:
            missing.append(f"{name}: {exc}")
    assert not missing, "\n".join(missing)
    with pytest.raises(AttributeError, match=r"not in resources\.dagster_private\.PRIVATE"):
        _ = dagster_private.SomethingNotListed


DAGSTER_LAYERS = ("resources", "assets", "pipelines", "runplatform", "demo")


@pytest.mark.parametrize("package", DAGSTER_LAYERS)
def test_each_dagster_package_imports_only_the_ones_before_it(package: str) -> None:
    above = DAGSTER_LAYERS[DAGSTER_LAYERS.index(package) + 1:]
    found = [(path, line, module) for path in sorted((REPO / package).rglob("*.py"))
             for line, module in imports_of(path)]
    assert found, f"no imports scanned in {package}/"
    problems = [f"{path.relative_to(REPO)}:{line} imports {module}" for path, line, module in found
                if module.split(".")[0] in above]
    assert not problems, "\n".join(problems)
