"""A Delta source named in Spark's catalog (`catalog_table`, `joins.ingest.catalog`): resolved to
its location and recorded by the first ingest run, checked by every later one; a name that is
not a table, a table that is not Delta, and a name that now points at another table are refused
with the reason."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from joins.errors import ConfigError
from joins.ingest import IngestSource, run_ingest
from joins.ingest.catalog import recorded
from joins.landing.spec import LandingSpec

pytestmark = pytest.mark.spark

_db_numbers = itertools.count()


@pytest.fixture
def db(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A database of the session's catalog for one test (the session is shared by the run),
    its folder a temporary one (not the working directory's spark-warehouse)."""
    name = f"tj_catalog_{next(_db_numbers)}"
    spark.sql(f"CREATE DATABASE {name} LOCATION '{tmp_path_factory.mktemp(name)}'")
    yield name
    spark.sql(f"DROP DATABASE {name} CASCADE")


def _source(lake: Path, table: str) -> IngestSource:
    spec = LandingSpec.model_validate({
        "format": "delta", "key_columns": [{"name": "currency", "type": "string"}],
        "value_columns": [{"name": "rate", "type": "double"}], "ts_column": "ts"})
    return IngestSource(name="rates", kind="changelog", landing=f"catalog:{table}", spec=spec,
                        table=str(lake / "tables/rates"), quarantine=str(lake / "quarantine/rates"),
                        manifest=str(lake / "manifests/rates"), lease=str(lake / "leases/rates"),
                        catalog_table=table, catalog_record=str(lake / "catalog/rates"))


def _create(spark: Any, name: str, where: Path, rows: list[tuple[str, float, int]]) -> None:
    spark.sql(f"CREATE TABLE {name} (currency STRING, rate DOUBLE, ts BIGINT) USING delta "
              f"LOCATION '{where}'")
    spark.createDataFrame(rows, "currency string, rate double, ts long") \
        .write.format("delta").mode("append").save(str(where))


def test_the_first_run_resolves_and_records_the_name_and_later_runs_take_new_versions(
        spark: Any, tmp_path: Path, db: str) -> None:
    name = f"{db}.rates"
    _create(spark, name, tmp_path / "user" / "rates", [("EUR", 1.08, 1), ("USD", 1.0, 2)])
    source = _source(tmp_path / "lake", name)
    first = run_ingest(spark, source)
    assert [s.rows_in for s in first] == [2]
    found = recorded(str(tmp_path / "lake/catalog/rates"))
    assert found is not None and found.name == name
    assert found.location == str(tmp_path / "user" / "rates")

    spark.sql(f"INSERT INTO {name} VALUES ('EUR', 1.10, 3)")
    assert [s.rows_in for s in run_ingest(spark, source)] == [1]
    rows = spark.read.format("delta").load(str(tmp_path / "lake/tables/rates"))
    assert sorted((r["currency"], r["rate"]) for r in rows.collect()) == [
        ("EUR", 1.08), ("EUR", 1.10), ("USD", 1.0)]


def test_a_name_that_is_not_a_delta_table_is_refused_naming_it(
        spark: Any, tmp_path: Path, db: str) -> None:
    with pytest.raises(ConfigError, match=rf"source rates: catalog_table {db}.nothing is not a "
                                          r"table of this Spark session's catalog .*extra_conf"):
        run_ingest(spark, _source(tmp_path / "lake", f"{db}.nothing"))
    spark.sql(f"CREATE TABLE {db}.plain (currency STRING) USING parquet "
              f"LOCATION '{tmp_path / 'plain'}'")
    with pytest.raises(ConfigError, match=rf"catalog_table {db}.plain is a parquet table, not a "
                                          r"Delta table"):
        run_ingest(spark, _source(tmp_path / "lake", f"{db}.plain"))
    # Nothing was recorded or ingested for a name that did not resolve.
    assert recorded(str(tmp_path / "lake/catalog/rates")) is None


def test_a_name_that_now_points_at_another_table_is_refused(
        spark: Any, tmp_path: Path, db: str) -> None:
    name = f"{db}.rates"
    _create(spark, name, tmp_path / "user" / "v1", [("EUR", 1.08, 1)])
    source = _source(tmp_path / "lake", name)
    run_ingest(spark, source)
    spark.sql(f"DROP TABLE {name}")
    _create(spark, name, tmp_path / "user" / "v2", [("GBP", 0.8, 1)])
    with pytest.raises(ConfigError, match=r"is now the Delta table .* at .*v2, but this source has "
                                          r"ingested the versions of .* at .*v1"):
        run_ingest(spark, source)
    rows = spark.read.format("delta").load(str(tmp_path / "lake/tables/rates"))
    assert [r["currency"] for r in rows.collect()] == ["EUR"]


def test_the_same_table_moved_is_followed(spark: Any, tmp_path: Path, db: str) -> None:
    """Its Delta log moves with it, so its versions are the ones the ingest counted."""
    import shutil

    name = f"{db}.rates"
    _create(spark, name, tmp_path / "user" / "v1", [("EUR", 1.08, 1)])
    source = _source(tmp_path / "lake", name)
    run_ingest(spark, source)
    shutil.copytree(tmp_path / "user" / "v1", tmp_path / "user" / "moved")
    spark.sql(f"ALTER TABLE {name} SET LOCATION '{tmp_path / 'user' / 'moved'}'")
    shutil.rmtree(tmp_path / "user" / "v1")
    spark.sql(f"INSERT INTO {name} VALUES ('USD', 1.0, 2)")
    assert [s.rows_in for s in run_ingest(spark, source)] == [1]
    found = recorded(str(tmp_path / "lake/catalog/rates"))
    assert found is not None and found.location == str(tmp_path / "user" / "moved")
    rows = spark.read.format("delta").load(str(tmp_path / "lake/tables/rates"))
    assert sorted(r["currency"] for r in rows.collect()) == ["EUR", "USD"]
