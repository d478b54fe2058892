"""SQL pipelines planned onto the operators (`joins.sql.pipeline`): every accepted shape gives
the settings its YAML twin holds, every refused one names its line, column and why."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
import yaml

from joins.errors import ConfigError
from joins.pipeline.shared import SharedSource, parse_source
from joins.sql.pipeline import plan_sql_pipeline

SQL_SPECS = Path(__file__).resolve().parents[1] / "pipelines" / "specs_sql"
SOURCES: dict[str, SharedSource] = {
    s.name: s for s in (parse_source(yaml.safe_load(p.read_text())) for p in SQL_SPECS.glob("*.yaml"))}
AS_OF = "SELECT * FROM orders o {how} JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON {on}"


def plan(sql: str) -> dict[str, Any]:
    return plan_sql_pipeline(sql, SOURCES, default_name="from_file").raw


def refusal(sql: str) -> str:
    with pytest.raises(ConfigError) as info:
        plan_sql_pipeline(sql, SOURCES, default_name="from_file")
    return str(info.value)


def test_the_demo_stream_table_join() -> None:
    raw = plan((SQL_SPECS / "orders_with_rates.sql").read_text())
    assert raw == {
        "operator": "stream_table_join", "name": "orders_with_rates",
        "stream": {"source": "orders", "key_columns": ["currency"]}, "table": {"source": "rates"},
        "join": "left", "description": "Orders enriched with the currency rate valid at each "
                                       "order's event time.",
        "history_retention_ms": 86_400_000, "grace_ms": 1_800_000, "late": "join",
        "start_date": dt.date(2024, 3, 1), "backfill_horizon_days": 2,
        "quarantine_threshold": 0.05}


@pytest.mark.parametrize(("how", "join"), [("", "inner"), ("INNER", "inner"), ("LEFT", "left"),
                                           ("LEFT OUTER", "left")])
def test_stream_table_join_types(how: str, join: str) -> None:
    assert plan(AS_OF.format(how=how, on="r.currency = o.currency"))["join"] == join


def test_a_stream_joined_by_its_own_key_is_not_rekeyed() -> None:
    raw = plan("SELECT * FROM deliveries d JOIN orders FOR SYSTEM_TIME AS OF d.ts ON d.order_id = "
               "orders.order_id")
    assert (raw["stream"], raw["table"]) == ({"source": "deliveries", "key_columns": ["order_id"]},
                                             {"source": "orders"})
    assert plan("SELECT * FROM orders o JOIN deliveries FOR SYSTEM_TIME AS OF o.ts AS d ON "
                "o.order_id = d.delivery_id")["stream"] == {"source": "orders"}


@pytest.mark.parametrize(("how", "join"), [("", "inner"), ("LEFT", "left"), ("RIGHT", "right"),
                                           ("FULL OUTER", "full"), ("FULL", "full")])
def test_interval_join_types_and_the_condition_by_source_names(how: str, join: str) -> None:
    raw = plan(f"SET 'orders.lag_ms' = 5; SET 'deliveries.lag_ms' = INTERVAL '1' SECOND;\n"
               f"SELECT * FROM orders o {how} JOIN deliveries d ON d.ts BETWEEN o.ts - INTERVAL '1' "
               f"MINUTE AND o.ts + INTERVAL '3' HOUR AND d.order_id = o.order_id AND o.amount > 0")
    assert raw == {"operator": "interval_join", "name": "from_file",
                   "left": {"source": "orders"}, "right": {"source": "deliveries"},
                   "condition": "deliveries.ts BETWEEN orders.ts - INTERVAL '1' MINUTE AND orders.ts "
                                "+ INTERVAL '3' HOUR AND deliveries.order_id = orders.order_id AND "
                                "orders.amount > 0",
                   "join": join, "left_lag_ms": 5, "right_lag_ms": 1000}


def test_unqualified_columns_are_qualified_by_their_source() -> None:
    raw = plan("SELECT * FROM orders JOIN deliveries ON deliveries.ts < orders.ts + 10 AND "
               "orders.ts <= deliveries.ts AND courier = 'x'")
    assert raw["condition"] == ("deliveries.ts < orders.ts + 10 AND orders.ts <= deliveries.ts AND "
                                "deliveries.courier = 'x'")


@pytest.mark.parametrize(("how", "join"), [("", "inner"), ("LEFT", "left"), ("FULL OUTER", "outer")])
def test_table_table_join_on_both_primary_keys(how: str, join: str) -> None:
    raw = plan(f"SET 'customers.history_retention_ms' = 7; SET 'accounts.versioned' = FALSE;\n"
               f"SELECT * FROM customers c {how} JOIN accounts a ON a.customer_id = c.customer_id")
    assert raw == {"operator": "table_table_join", "name": "from_file",
                   "left": {"source": "customers", "history_retention_ms": 7},
                   "right": {"source": "accounts", "versioned": False}, "join": join}


@pytest.mark.parametrize(("how", "join"), [("", "inner"), ("LEFT", "left")])
def test_foreign_key_join_on_a_left_column_and_the_right_key(how: str, join: str) -> None:
    raw = plan(f"SELECT * FROM order_updates o {how} JOIN customers c ON o.customer_id = c.customer_id")
    assert raw == {"operator": "fk_join", "name": "from_file", "foreign_key": "customer_id",
                   "left": {"source": "order_updates"}, "right": {"source": "customers"},
                   "join": join}


@pytest.mark.parametrize(("where", "predicate"), [
    ("status = 'open'", {"field": "status", "op": "eq", "value": "open"}),
    ("status <> 'open'", {"field": "status", "op": "ne", "value": "open"}),
    ("status != 'open'", {"field": "status", "op": "ne", "value": "open"}),
    ("balance < 10", {"field": "balance", "op": "lt", "value": 10}),
    ("balance <= -1.5", {"field": "balance", "op": "le", "value": -1.5}),
    ("balance > 0", {"field": "balance", "op": "gt", "value": 0}),
    ("0 > balance", {"field": "balance", "op": "lt", "value": 0}),
    ("balance >= 100", {"field": "balance", "op": "ge", "value": 100}),
    ("status IN ('open', 'frozen')", {"field": "status", "op": "in", "value": ["open", "frozen"]}),
    ("status NOT IN ('closed')", {"field": "status", "op": "not_in", "value": ["closed"]}),
    ("status IS NULL", {"field": "status", "op": "eq", "value": None}),
    ("status IS NOT NULL", {"field": "status", "op": "ne", "value": None}),
    ("(a.status = 'open')", {"field": "status", "op": "eq", "value": "open"}),
])
def test_where_over_a_table_is_the_versioned_filter(where: str, predicate: dict[str, Any]) -> None:
    raw = plan(f"SET 'versioned' = TRUE; SET 'a.history_retention_ms' = 9;\n"
               f"SELECT * FROM accounts a WHERE {where}")
    assert raw == {"operator": "table_filter", "name": "from_file", "source": {"source": "accounts"},
                   "predicate": predicate, "versioned": True, "history_retention_ms": 9}


def test_a_filter_carries_the_columns_it_selects() -> None:
    raw = plan("SELECT customer_id, status, balance AS balance FROM accounts WHERE status = 'open'")
    assert raw["value_columns"] == ["status", "balance"]


def test_a_filter_publishes_what_as_renames() -> None:
    raw = plan("SELECT customer_id, status AS state, balance FROM accounts WHERE status = 'open'")
    assert (raw["value_columns"], raw["select"]) == (["status", "balance"],
                                                     [{"column": "status", "as": "state"}, "balance"])


@pytest.mark.parametrize(("query", "select"), [
    # The stream-table join: the stream's columns by their names, the table's `table_`-prefixed;
    # the key (the stream's lookup column, the table's key) and the event time come along.
    (AS_OF.format(how="LEFT", on="o.currency = r.currency").replace(
        "*", "o.order_id, o.currency, r.currency, o.ts, o.amount AS amt, r.rate"),
     ["order_id", {"column": "amount", "as": "amt"}, {"column": "table_rate", "as": "rate"}]),
    # The interval join: `<source>_<column>`, published under the SQL name unless AS says.
    ("SET 'orders.lag_ms' = 5; SET 'deliveries.lag_ms' = 5;\nSELECT o.order_id, d.courier AS by, "
     "d.ts FROM orders o JOIN deliveries d ON d.ts BETWEEN o.ts AND o.ts + 10",
     [{"column": "orders_order_id", "as": "order_id"}, {"column": "deliveries_courier", "as": "by"}]),
    # The table joins: `left_` / `right_`; the right key of a foreign-key join is the left's
    # foreign key column.
    ("SELECT c.customer_id, a.customer_id, c.name, a.balance AS balance FROM customers c JOIN "
     "accounts a ON c.customer_id = a.customer_id",
     [{"column": "left_name", "as": "name"}, {"column": "right_balance", "as": "balance"}]),
    ("SELECT o.amount, c.customer_id AS customer, c.name FROM order_updates o JOIN customers c ON "
     "o.customer_id = c.customer_id",
     [{"column": "left_amount", "as": "amount"}, {"column": "left_customer_id", "as": "customer"},
      {"column": "right_name", "as": "name"}]),
    # The aggregate's value, named by AS.
    ("SELECT country, COUNT(*) AS customers FROM customers GROUP BY country",
     [{"column": "count", "as": "customers"}]),
])
def test_a_column_list_and_as_names_are_the_pipelines_select(query: str, select: list[Any]) -> None:
    assert plan(query)["select"] == select


def test_select_star_and_a_value_named_as_the_operator_names_it_select_nothing() -> None:
    assert "select" not in plan(AS_OF.format(how="", on="o.currency = r.currency"))
    assert "select" not in plan("SELECT country, COUNT(*) AS count FROM customers GROUP BY country")


def test_a_projection_over_a_table_is_the_map() -> None:
    raw = plan("SELECT customer_id, status, balance AS amount FROM accounts")
    assert raw == {"operator": "table_map", "name": "from_file", "source": {"source": "accounts"},
                   "columns": ["status", {"field": "balance", "as": "amount"}]}
    raw = plan("SET 'upstream_key' = 'customer_id';\nSELECT right_status AS status FROM customer_accounts")
    assert raw == {"operator": "table_map", "name": "from_file", "upstream": "customer_accounts",
                   "columns": [{"field": "right_status", "as": "status"}], "upstream_key": "customer_id"}


def test_a_filter_over_another_pipeline_reads_it_upstream() -> None:
    raw = plan("SET 'upstream_key' = 'customer_id';\nSELECT * FROM customer_accounts WHERE "
               "right_status = 'open'")
    assert raw == {"operator": "table_filter", "name": "from_file", "upstream": "customer_accounts",
                   "predicate": {"field": "right_status", "op": "eq", "value": "open"},
                   "upstream_key": "customer_id"}


@pytest.mark.parametrize(("select", "aggregate"), [
    ("country, COUNT(*)", {"function": "count"}), ("COUNT(*), country", {"function": "count"}),
    ("country, SUM(balance)", {"function": "sum", "field": "balance"})])
def test_group_by_is_the_aggregate(select: str, aggregate: dict[str, Any]) -> None:
    source = "accounts" if "balance" in select else "customers"
    sql = f"SELECT {select} FROM {source} GROUP BY country".replace(
        "country", "status" if source == "accounts" else "country")
    raw = plan(sql)
    assert raw["operator"] == "table_aggregate" and raw["aggregate"] == aggregate
    assert raw["group_by"] == ("status" if source == "accounts" else "country")


@pytest.mark.parametrize("hinted", [
    "rates /*+ OPTIONS('history_retention_ms' = '86400000') */ FOR SYSTEM_TIME AS OF o.ts AS r",
    "rates FOR SYSTEM_TIME AS OF o.ts AS r /*+ OPTIONS('history_retention_ms'='86400000') */"])
def test_flinks_table_options_hint_is_a_tables_option(hinted: str) -> None:
    by_set = plan("SET 'rates.history_retention_ms' = 86400000;\n"
                  + AS_OF.format(how="", on="o.currency = r.currency"))
    by_hint = plan(f"SELECT * FROM orders o JOIN {hinted} ON o.currency = r.currency")
    assert by_hint == by_set and by_hint["history_retention_ms"] == 86_400_000


def test_the_name_comes_from_insert_into_set_or_the_file() -> None:
    query = "SELECT * FROM customers WHERE country = 'DE'"
    assert plan(query)["name"] == "from_file"
    assert plan(f"SET 'name' = 'german';\n{query}")["name"] == "german"
    assert plan(f"INSERT INTO german {query}")["name"] == "german"
    assert "name the pipeline twice" in refusal(f"SET 'name' = 'a';\nINSERT INTO german {query}")


@pytest.mark.parametrize(("sql", "message"), [
    ("SELECT *\nFROM orders o\nJOIN deliveries d ON d.courier = o.currency",
     "line 3, column 22: 'd.courier = o.currency': d.courier is not the primary key of 'deliveries' "
     "(delivery_id); a join without a time bound or a FOR SYSTEM_TIME AS OF clause has unbounded state"),
    ("SELECT * FROM orders o JOIN deliveries d ON d.order_id = o.order_id",
     "line 1, column 45: 'd.order_id = o.order_id': d.order_id is not the primary key"),
    ("SELECT * FROM orders, rates", "line 1, column 23: a join without a time bound or a FOR "
                                    "SYSTEM_TIME AS OF clause has unbounded state"),
    ("SELECT * FROM orders CROSS JOIN rates", "line 1, column 33: CROSS join: a join without"),
    ("SELECT * FROM customers JOIN accounts USING (customer_id)",
     "line 1, column 30: USING (customer_id): write the join's condition out, "
     "`ON customers.customer_id = accounts.customer_id`"),
    ("SELECT * FROM customers NATURAL JOIN accounts", "line 1, column 38: NATURAL join: a join without"),
    ("SELECT * FROM customers c LEFT SEMI JOIN accounts a ON c.customer_id = a.customer_id",
     "line 1, column 42: LEFT SEMI JOIN: no operator runs it"),
    ("SELECT * FROM orders o ASOF JOIN rates r ON o.currency = r.currency AND o.ts >= r.ts",
     "line 1, column 34: ASOF JOIN: an as-of join is written `JOIN t FOR SYSTEM_TIME AS OF"),
    (AS_OF.format(how="RIGHT", on="o.currency = r.currency"),
     "line 1, column 35: RIGHT JOIN: the stream-table join is INNER | LEFT"),
    ("SELECT * FROM orders o JOIN rates FOR SYSTEM_TIME AS OF o.amount AS r ON o.currency = r.currency",
     "line 1, column 57: FOR SYSTEM_TIME AS OF o.amount: the table is read as of the stream's event "
     "time, `o.ts`"),
    ("SELECT * FROM orders o JOIN rates TIMESTAMP AS OF o.ts AS r ON o.currency = r.currency",
     "line 1, column 51: 'FOR TIMESTAMP AS OF o.ts': the stream-table join reads the table FOR "
     "SYSTEM_TIME AS OF"),
    (AS_OF.format(how="", on="o.currency = r.rate"),
     "line 1, column 71: 'o.currency = r.rate': the stream-table join looks the table up by its "
     "primary key 'currency'"),
    (AS_OF.format(how="", on="o.currency = r.currency AND o.amount > 1"),
     "'o.amount > 1': the ON clause of a stream-table join is one equality"),
    ("SELECT * FROM rates FOR SYSTEM_TIME AS OF rates.ts JOIN orders ON orders.currency = rates.currency",
     "line 1, column 15: FOR SYSTEM_TIME AS OF belongs to the versioned table, the right side"),
    ("SELECT * FROM customers c RIGHT JOIN accounts a ON c.customer_id = a.customer_id",
     "line 1, column 38: RIGHT JOIN: the table-table join is INNER | LEFT | FULL"),
    ("SELECT * FROM order_updates o FULL JOIN customers c ON o.customer_id = c.customer_id",
     "line 1, column 41: FULL JOIN: the foreign-key join (it has no outer form) is INNER | LEFT"),
    ("SELECT * FROM orders o JOIN deliveries d ON d.ts BETWEEN o.ts AND o.ts + 1 JOIN rates r ON "
     "r.currency = o.currency", "line 1, column 81: a pipeline joins two inputs (one JOIN)"),
    (AS_OF.format(how="", on="o.currency = r.currency").replace("*", "o.order_id, r.rate * 2"),
     "line 1, column 20: 'r.rate * 2': a pipeline publishes columns of the join, not expressions"),
    (AS_OF.format(how="", on="o.currency = r.currency").replace("*", "r.*"),
     "line 1, column 8: 'r.*': a pipeline publishes columns of the join, not expressions"),
    (AS_OF.format(how="", on="o.currency = r.currency").replace("*", "o.currency AS c, r.rate"),
     "line 1, column 8: 'o.currency AS c': o.currency comes along under its own name"),
    (AS_OF.format(how="", on="o.currency = r.currency").replace("*", "o.ts"),
     "line 1, column 8: list at least one value column"),
    ("SELECT c.customer_id AS id, a.status FROM customers c JOIN accounts a ON c.customer_id = "
     "a.customer_id", "line 1, column 8: 'c.customer_id AS id': c.customer_id comes along under its "
                      "own name"),
    ("SELECT country AS land, COUNT(*) FROM customers GROUP BY country",
     "line 1, column 8: 'country AS land': the group is the output's key (`key`): it keeps its name"),
    ("SELECT customer_id AS id FROM accounts WHERE status = 'open'",
     "line 1, column 8: 'customer_id AS id': the key and the event time keep their names"),
    ("SELECT * FROM customers c JOIN accounts a ON c.customer_id = a.customer_id WHERE a.balance > 0",
     "line 1, column 82: WHERE over a join: a pipeline is one operator"),
    ("SELECT * FROM customers WHERE country = 'DE' ORDER BY name",
     "line 1, column 55: ORDER BY is not supported"),
    ("SELECT DISTINCT country FROM customers WHERE country = 'DE'", "DISTINCT is not supported"),
    ("SELECT * FROM customers WHERE country = 'DE' LIMIT 3", "LIMIT is not supported"),
    ("WITH c AS (SELECT * FROM customers) SELECT * FROM c WHERE country = 'x'",
     "WITH (a common table expression) is not supported"),
    ("SELECT * FROM customers WHERE country = 'DE' UNION SELECT * FROM customers WHERE country = 'FR'",
     "UNION: a pipeline is one SELECT"),
    ("SELECT * FROM (SELECT * FROM customers) c WHERE c.country = 'DE'",
     "line 1, column 23: a subquery is not supported"),
    ("SELECT * FROM ordres o JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.currency = r.currency",
     "line 1, column 15: no source named 'ordres' (did you mean `orders`?); sources defined in the "
     "folder: accounts, customers, deliveries, order_updates, orders, rates"),
    ("SELECT * FROM lake.orders WHERE amount > 1", "line 1, column 15: 'lake.orders': name a source"),
    (AS_OF.format(how="", on="o.curency = r.currency"),
     "line 1, column 71: 'orders' has no column 'curency' (did you mean `currency`?) (its columns: "
     "order_id, currency, amount, ts)"),
    (AS_OF.format(how="", on="x.currency = r.currency"), "'x' is no table of the query"),
    ("SELECT * FROM customers c JOIN accounts a ON customer_id = a.customer_id",
     "column 'customer_id' is in more than one table of the query; qualify it"),
    ("SELECT * FROM customers WHERE country = 'DE' AND name = 'x'",
     "line 1, column 31: \"country = 'DE' AND name = 'x'\": the versioned filter takes one comparison"),
    ("SELECT * FROM customers WHERE country = name", "the versioned filter takes one comparison"),
    ("SELECT * FROM customers WHERE country = UPPER('de')", "compare with a literal"),
    ("SELECT * FROM customers WHERE countr = 'DE'",
     "line 1, column 31: 'customers' has no column 'countr' (did you mean `country`?)"),
    ("SELECT * FROM customers", "line 1, column 8: a query over one table filters it (WHERE), maps "
                                "its columns (SELECT a, b AS c) or aggregates it (GROUP BY)"),
    ("SELECT UPPER(status) FROM accounts", "line 1, column 8: 'UPPER(status)': the map keeps and "
                                           "renames columns of its input, not expressions"),
    ("SELECT customer_id AS id, status FROM accounts", "'customer_id AS id': the key and the event "
                                                       "time keep their names"),
    ("SELECT customer_id FROM accounts", "line 1, column 8: select at least one value column"),
    ("SELECT country, AVG(balance) FROM customers GROUP BY country",
     "line 1, column 17: 'AVG(balance)': the aggregate computes COUNT(*) or SUM(column)"),
    ("SELECT country, COUNT(DISTINCT name) FROM customers GROUP BY country", "COUNT(*) or SUM(column)"),
    ("SELECT country, name, COUNT(*) FROM customers GROUP BY country, name", "GROUP BY one column"),
    ("SELECT country FROM customers GROUP BY country", "select an aggregate: COUNT(*) or SUM(column)"),
    ("SELECT country, name, COUNT(*) FROM customers GROUP BY country",
     "line 1, column 17: 'name' is not the GROUP BY column (country): select the GROUP BY column "
     "and one aggregate"),
    ("SELECT country, COUNT(*) FROM customers GROUP BY name", "'country' is not the GROUP BY column (name)"),
    ("SELECT country, COUNT(*) FROM customers WHERE name = 'x' GROUP BY country", "GROUP BY with WHERE"),
    ("SELECT country, COUNT(*) OVER (PARTITION BY country) FROM customers WHERE country = 'x'",
     "line 1, column 17: a window function"),
    ("CREATE TABLE t (a INT) WITH ('connector' = 'kafka');\nSELECT * FROM t",
     "line 1, column 14: only SET options and one query (SELECT, or INSERT INTO <name> SELECT) make a "
     "pipeline; CREATE TABLE is not supported: sources are declared in `kind: source` YAML files of "
     "the folder (docs/sql.md)"),
    ("SELECT * FROM customers WHERE country = 'a';\nSELECT * FROM customers WHERE country = 'b'",
     "line 2, column 8: a pipeline file holds one query"),
    ("-- only a comment", "line 1, column 1: no query"),
    ("SELECT * FROM\nWHERE", "line 2, column 5: not valid SQL (Expected table name but got 'WHERE')"),
    ("SET 'join' = 'left';\nSELECT * FROM customers WHERE country = 'DE'",
     "line 1, column 5: option 'join': 'join' is given by the query itself, not by an option"),
    ("SET 'grace_ms' = 1;\nSET 'grace_ms' = 2;\n" + AS_OF.format(how="", on="o.currency = r.currency"),
     "line 2, column 5: option 'grace_ms' is set twice"),
    ("SET 'ratez.history_retention_ms' = 1;\n" + AS_OF.format(how="", on="o.currency = r.currency"),
     "line 1, column 5: option 'ratez.history_retention_ms': 'ratez' is no table of the query (did you "
     "mean `rates`?)"),
    ("SET 'rates.grace_ms' = 1;\n" + AS_OF.format(how="", on="o.currency = r.currency"),
     "option 'rates.grace_ms': 'grace_ms' is not a setting of table 'rates' here (its settings: "
     "history_retention_ms)"),
    ("SET 'rates.history_retention_ms' = 1;\nSET 'r.history_retention_ms' = 2;\n"
     + AS_OF.format(how="", on="o.currency = r.currency"),
     "line 2, column 5: option 'r.history_retention_ms': sets what option "
     "'rates.history_retention_ms' set already"),
    ("SET 'rates.history_retention_ms' = 1;\nSET 'history_retention_ms' = 2;\n"
     + AS_OF.format(how="", on="o.currency = r.currency"),
     "line 2, column 5: option 'history_retention_ms': sets what option "
     "'rates.history_retention_ms' set already"),
    ("SET 'grace_ms' = o.ts;\n" + AS_OF.format(how="", on="o.currency = r.currency"),
     "an option's value is a literal"),
    ("SET 'a.versioned' = TRUE;\nSELECT * FROM customers c JOIN accounts a /*+ OPTIONS('versioned' = "
     "'false') */ ON c.customer_id = a.customer_id",
     "line 2, column 32: option 'a.versioned' is given by SET and by OPTIONS"),
    ("SELECT * FROM customers c JOIN accounts a /*+ OPTIONS('grace_ms' = '1') */ ON c.customer_id = "
     "a.customer_id", "line 1, column 32: option 'a.grace_ms': 'grace_ms' is not a setting of table "
                      "'a' here (its settings: versioned, history_retention_ms)"),
    ("SELECT /*+ BROADCAST(a) */ * FROM customers c JOIN accounts a ON c.customer_id = a.customer_id",
     "the query hint /*+ BROADCAST(a) */ is not supported"),
    ("SELECT * FROM rates FOR SYSTEM_TIME AS OF 5 WHERE rate > 1",
     "line 1, column 15: FOR SYSTEM_TIME AS OF reads a versioned table in a stream-table join"),
    ("DELETE FROM rates", "line 1, column 13: only SET options and one query (SELECT, or INSERT INTO "
                          "<name> SELECT) make a pipeline; DELETE is not supported"),
])
def test_what_no_operator_runs_is_refused_at_its_position(sql: str, message: str) -> None:
    assert message in refusal(sql)


def test_the_readme_sql_is_the_demo_pipeline() -> None:
    readme = (SQL_SPECS.parents[1] / "README.md").read_text()
    shown = readme.split("The same pipeline in SQL", 1)[1].split("```sql\n", 1)[1].split("```", 1)[0]
    demo = plan((SQL_SPECS / "orders_with_rates.sql").read_text())
    assert plan(shown) == {k: v for k, v in demo.items()
                           if k not in ("description", "quarantine_threshold")}


def test_a_duration_option_spelled_as_the_ui_shows_it(tmp_path: Path) -> None:
    from joins.pipeline.files import load_spec_file

    sql = tmp_path / "orders_with_rates.sql"
    sql.write_text("SET 'start_date' = '2024-03-01';\nSET 'grace_ms' = '30 min';\n"
                   "SET 'rates.history_retention_ms' = '2 days 6 h';\n"
                   + AS_OF.format(how="", on="o.currency = r.currency"))
    spec = load_spec_file(sql, SOURCES)
    assert (spec.grace_ms, spec.history_retention_ms) == (1_800_000, 194_400_000)


def test_names_quoted_with_backticks_as_in_flink() -> None:
    quoted = plan("SET 'description' = 'it''s';\nSELECT * FROM `orders` AS `o` JOIN `rates` FOR "
                  "SYSTEM_TIME AS OF `o`.`ts` AS r ON o.`currency` = r.currency")
    assert quoted == {**plan(AS_OF.format(how="", on="o.currency = r.currency")),
                      "description": "it's"}


def test_a_query_over_a_pipeline_may_list_its_key_and_event_time() -> None:
    """Known once `upstream_key` is read: they come along anyway, so they carry nothing."""
    raw = plan("SET 'upstream_key' = 'customer_id';\nSELECT customer_id, ts, right_status AS status "
               "FROM customer_accounts")
    assert raw["columns"] == [{"field": "right_status", "as": "status"}]
    raw = plan("SET 'upstream_key' = 'customer_id';\nSELECT customer_id, left_name AS name, "
               "right_balance FROM customer_accounts WHERE right_balance > 10")
    assert (raw["value_columns"], raw["select"]) == (
        ["left_name", "right_balance"], [{"column": "left_name", "as": "name"}, "right_balance"])
    raw = plan("SET 'upstream_key' = 'customer_id';\nSELECT customer_id, right_balance FROM "
               "customer_accounts WHERE right_balance > 10")
    assert raw["value_columns"] == ["right_balance"] and "select" not in raw
