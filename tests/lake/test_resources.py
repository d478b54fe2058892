"""The Dagster resources: config validation, table naming, and an asset run through them.

No `from __future__ import annotations` here: Dagster reads the asset's parameter annotations
as classes to find its context and resources.
"""

from pathlib import Path

import pytest
from dagster import AssetExecutionContext, asset, materialize

from joins.errors import ConfigError
from resources import LakeResource, SparkResource
from resources.spark import spark_identity


def test_spark_settings_from_config() -> None:
    settings = SparkResource(master="local[1]", shuffle_partitions=3,
                             extra_conf={"spark.sql.ansi.enabled": "false"}).settings()
    assert (settings.master, settings.shuffle_partitions) == ("local[1]", 3)
    assert settings.conf()["spark.sql.ansi.enabled"] == "false"
    assert SparkResource(remote="sc://spark:15002").settings().remote == "sc://spark:15002"


@pytest.mark.parametrize(("config", "key"), [
    ({"remote": "http://spark:15002"}, "spark.remote"),
    ({"shuffle_partitions": 0}, "spark.shuffle_partitions"),
    ({"master": " "}, "spark.master"),
    ({"extra_conf": {"sql.shuffle": "1"}}, "spark.extra_conf.sql.shuffle"),
])
def test_spark_config_errors_name_the_key(config: dict, key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        SparkResource(**config).settings()


class _ConnectLike:
    """What a Spark Connect session offers: a session id, and no SparkContext."""

    session_id = "3f1c"

    @property
    def sparkContext(self):  # pyspark's name
        raise AttributeError("sparkContext is not supported in Spark Connect")


def test_spark_identity_of_a_connect_session_names_its_session_id() -> None:
    assert spark_identity(_ConnectLike()).startswith("application connect-3f1c, process ")


def test_table_paths(tmp_path: Path) -> None:
    lake = LakeResource(root=str(tmp_path / "lake") + "/")
    assert lake.table_path("bronze/orders") == str(tmp_path / "lake" / "bronze" / "orders")
    assert LakeResource(root="s3://bucket/lake/").table_path("t") == "s3://bucket/lake/t"
    for bad in ("", "../x", "a//b", ".hidden", "a/_delta_log/../b", "a b"):
        with pytest.raises(ConfigError, match="table name"):
            lake.table_path(bad)
    with pytest.raises(ConfigError, match=r"lake\.root"):
        LakeResource(root="  ").table_path("t")


@pytest.mark.spark
def test_asset_writes_and_reads_through_the_resources(spark, tmp_path: Path) -> None:
    @asset
    def orders(context: AssetExecutionContext, spark_session: SparkResource,
               lake: LakeResource) -> None:
        session = spark_session.get_session()
        df = session.createDataFrame([(1, "2024-01-01"), (2, "2024-01-02")], "id long, day string")
        info = lake.write(df, "bronze/orders", partition_by=["day"])
        context.log.info(f"committed {info}")
        assert lake.read(session, "bronze/orders").count() == 2
        assert lake.version("bronze/orders") == 0 and lake.exists("bronze/orders")
        assert lake.read_changes(session, "bronze/orders", -1).count() == 2
        assert lake.schema("bronze/orders").fieldNames() == ["id", "day"]
        assert lake.vacuum_orphans("bronze/orders", dry_run=True) == []

    result = materialize([orders], resources={
        "spark_session": SparkResource(shuffle_partitions=2),
        "lake": LakeResource(root=str(tmp_path / "lake"))})
    assert result.success
    assert SparkResource().get_session() is spark  # one session per process
