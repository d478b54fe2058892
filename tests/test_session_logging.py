"""The driver's log configuration a classic session starts with (joins/spark/log4j2.properties):
passed to the driver JVM ahead of the caller's own options, never to a Connect client. That a
command's output no longer opens with Spark's start-up notes is checked on a real child process
(tests/spark/test_table_replay_cli.py)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

from joins.spark.session import DRIVER_OPTIONS, SparkSettings


def _log_config(options: str) -> Path:
    first = options.split()[0]
    assert first.startswith("-Dlog4j2.configurationFile="), options
    return Path(url2pathname(urlparse(first.split("=", 1)[1]).path))


def test_a_local_session_logs_by_the_projects_file() -> None:
    options = SparkSettings().conf()[DRIVER_OPTIONS]
    config = _log_config(options)
    assert config.is_file(), config
    text = config.read_text()
    assert "rootLogger.level = error" in text
    assert "org.apache.spark.api.python.PythonGatewayServer" in text


def test_the_callers_driver_options_come_after_so_theirs_win() -> None:
    settings = SparkSettings(extra_conf={DRIVER_OPTIONS: "-Dlog4j2.configurationFile=mine.xml -Dx=1"})
    options = settings.conf()[DRIVER_OPTIONS]
    assert _log_config(options).name == "log4j2.properties"
    assert options.endswith(" -Dlog4j2.configurationFile=mine.xml -Dx=1")


def test_a_connect_client_sets_no_driver_options() -> None:
    assert DRIVER_OPTIONS not in SparkSettings(remote="sc://127.0.0.1:15002").conf()
