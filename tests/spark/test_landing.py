"""Landing files (issue 3 §6): declared schema, per-row validation, file/row/field in every
complaint, arrival order = file name order then row order."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from joins.errors import ConfigError, InputRecordError
from joins.ingest.table import ingest_landing
from joins.lake import delta_version, read_delta
from joins.landing import LandingFileError, LandingRecordError, LandingSpec, read_landing

pytestmark = pytest.mark.spark


def spec(fmt: str, **over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "format": fmt,
        "key_columns": [{"name": "k", "type": "string"}],
        "value_columns": [{"name": "v", "type": "long"}, {"name": "w", "type": "string"}],
        "ts_column": "ts",
        "on_bad_record": "fail",
    }
    return {**base, **over}


def jsonl(path: Path, *lines: Any) -> str:
    path.write_text("".join((ln if isinstance(ln, str) else json.dumps(ln)) + "\n" for ln in lines))
    return str(path)


def csv_file(path: Path, *lines: str) -> str:
    path.write_text("".join(ln + "\n" for ln in lines))
    return str(path)


def parquet(path: Path, frame: pd.DataFrame) -> str:
    frame.to_parquet(path, index=False)
    return str(path)


GOOD = {"k": "a", "ts": 1, "v": 1, "w": "x"}

# (name, format, file content after one good row, bad row number, field, message fragment)
JSON_CASES = [
    ("missing_column", {"k": "b", "v": 2, "w": "y"}, "ts", "missing"),
    ("null_key", {"k": None, "ts": 2, "v": 2, "w": "y"}, "k", "must not be null"),
    ("null_ts", {"k": "b", "ts": None, "v": 2, "w": "y"}, "ts", "must not be null"),
    ("ts_clock_string", {"k": "b", "ts": "12:00", "v": 2, "w": "y"}, "ts", "expected an integer"),
    ("ts_fraction", '{"k": "b", "ts": 1.5, "v": 2, "w": "y"}', "ts", "expected an integer"),
    ("wrong_value_type", {"k": "b", "ts": 2, "v": "two", "w": "y"}, "v", "expected an integer"),
    ("string_as_number", {"k": "b", "ts": 2, "v": 2, "w": 5}, "w", "expected a string"),
    ("key_as_object", {"k": {"a": 1}, "ts": 2, "v": 2, "w": "y"}, "k", "expected a string"),
    ("malformed_line", '{"k": "b", "ts": ', "<record>", "malformed JSON"),
    ("not_an_object", "[1, 2]", "<record>", "not a JSON object"),
]


@pytest.mark.parametrize(("bad", "field", "fragment"), [c[1:] for c in JSON_CASES],
                         ids=[c[0] for c in JSON_CASES])
def test_jsonl_bad_record_fails_naming_file_row_field(spark: Any, tmp_path: Path, bad: Any,
                                                     field: str, fragment: str) -> None:
    path = jsonl(tmp_path / "batch.jsonl", GOOD, "", bad, GOOD)
    with pytest.raises(LandingRecordError) as info:
        read_landing(spark, path, spec("jsonl"))
    err = info.value
    assert (err.file, err.row, err.field) == (path, 3, field)  # the blank line 2 still counts
    assert isinstance(err, InputRecordError)
    assert f"{path}, row 3, field '{field}'" in str(err) and fragment in str(err)


def test_jsonl_quarantine_mode_reconciles_and_keeps_good_rows(spark: Any, tmp_path: Path) -> None:
    lines = [GOOD] + [c[1] for c in JSON_CASES] + [{**GOOD, "k": "z", "ts": 9}]
    path = jsonl(tmp_path / "batch.jsonl", *lines)
    batch = read_landing(spark, path, spec("jsonl", on_bad_record="quarantine"))
    try:
        good = sorted((r["k"], r["source_row"], r["arrival"]) for r in batch.changelog.collect())
        bad = sorted((r["source_row"], r["field"], r["source_file"]) for r in batch.bad_records.collect())
    finally:
        batch.close()
    assert good == [("a", 1, 0), ("z", len(lines), len(lines) - 1)]
    assert bad == [(i + 2, c[2], path) for i, c in enumerate(JSON_CASES)]
    assert len(good) + len(bad) == len(lines)


def test_json_one_point_zero_is_an_integer_but_big_and_fractional_are_not(spark: Any,
                                                                        tmp_path: Path) -> None:
    s = spec("jsonl", value_columns=[{"name": "n", "type": "int"}], on_bad_record="quarantine")
    path = jsonl(tmp_path / "b.jsonl", '{"k": "a", "ts": 1.0, "n": 1}',
                 '{"k": "b", "ts": 2, "n": 3000000000}', '{"k": "c", "ts": 1e3, "n": 1}')
    batch = read_landing(spark, path, s)
    try:
        assert [(r["k"], r["ts"]) for r in batch.changelog.collect()] == [("a", 1)]
        assert sorted((r["source_row"], r["field"]) for r in batch.bad_records.collect()) == [
            (2, "n"), (3, "ts")]
    finally:
        batch.close()


CSV_CASES = [
    ("null_key", ",2,2,y", "k", "must not be null"),
    ("ts_clock_string", "b,12:00,2,y", "ts", "expected an integer"),
    ("ts_fraction", "b,1.5,2,y", "ts", "expected an integer"),
    ("null_ts", "b,,2,y", "ts", "must not be null"),
    ("wrong_value_type", "b,2,two,y", "v", "expected an integer"),
    ("too_few_fields", "b,2", "<record>", "header's 4 field(s)"),
    ("too_many_fields", "b,2,2,y,extra", "<record>", "header's 4 field(s)"),
]


@pytest.mark.parametrize(("bad", "field", "fragment"), [c[1:] for c in CSV_CASES],
                         ids=[c[0] for c in CSV_CASES])
def test_csv_bad_record_fails_naming_file_row_field(spark: Any, tmp_path: Path, bad: str,
                                                   field: str, fragment: str) -> None:
    # Row numbers are line numbers: the header is line 1.
    path = csv_file(tmp_path / "batch.csv", "k,ts,v,w", "a,1,1,x", bad)
    with pytest.raises(LandingRecordError) as info:
        read_landing(spark, path, spec("csv"))
    assert (info.value.file, info.value.row, info.value.field) == (path, 3, field)
    assert fragment in str(info.value)


def test_csv_header_without_the_event_time_is_no_header(spark: Any, tmp_path: Path) -> None:
    # Its first record is quarantined as a record (never lost); later rows lack the column.
    path = csv_file(tmp_path / "batch.csv", "k,v,w", "a,1,x")
    with pytest.raises(LandingRecordError, match=r"row 1, field '<record>': not a header: it does "
                                                 r"not name the column\(s\) ts") as info:
        read_landing(spark, path, spec("csv"))
    assert info.value.file == path
    batch = read_landing(spark, path, spec("csv", on_bad_record="quarantine"))
    try:
        assert sorted((r["source_row"], r["field"]) for r in batch.bad_records.collect()) == [
            (1, "<record>"), (2, "ts")]
    finally:
        batch.close()


def test_csv_unreadable_first_record_is_quarantined_not_taken_for_the_header(
        spark: Any, tmp_path: Path) -> None:
    # The first line is not UTF-8: it cannot be the header, and it is a record like any other.
    path = tmp_path / "batch.csv"
    path.write_bytes(b"k,\xff,v,w\n" + b"a,1,1,x\n")
    batch = read_landing(spark, str(path), spec("csv", on_bad_record="quarantine"))
    try:
        bad = sorted((r["source_row"], r["field"], r["reason"]) for r in batch.bad_records.collect())
        assert batch.changelog.count() == 0
    finally:
        batch.close()
    assert [(row, field) for row, field, _ in bad] == [(1, "<record>"), (2, "<record>")]
    assert "not valid UTF-8" in bad[0][2]
    assert "first record cannot be read, so the file has no header" in bad[1][2]
    with pytest.raises(LandingRecordError, match=r"row 1, field '<record>': not valid UTF-8"):
        read_landing(spark, str(path), spec("csv"))


def test_csv_quoted_delimiter_and_header_order_per_file(spark: Any, tmp_path: Path) -> None:
    a = csv_file(tmp_path / "a.csv", "k,ts,v,w", '"x,y",1,1,"q"')
    b = csv_file(tmp_path / "b.csv", "w,v,ts,k", "r,2,2,z")
    batch = read_landing(spark, [b, a], spec("csv"))
    try:
        rows = [(r["k"], r["ts"], r["v"], r["w"], r["source_file"], r["arrival"])
                for r in batch.changelog.orderBy("arrival").collect()]
    finally:
        batch.close()
    # Arrival: a.csv before b.csv (sorted by name), header lines counted in the index space.
    assert [r[:5] for r in rows] == [("x,y", 1, 1, "q", a), ("z", 2, 2, "r", b)]
    assert rows[0][5] < rows[1][5]


def test_parquet_bad_inputs(spark: Any, tmp_path: Path) -> None:
    s = spec("parquet", on_bad_record="quarantine")
    good = parquet(tmp_path / "1.parquet", pd.DataFrame(
        {"k": ["a", None], "ts": [1, 2], "v": [1, 2], "w": ["x", "y"]}))
    wrong = parquet(tmp_path / "2.parquet", pd.DataFrame(
        {"k": ["b"], "ts": [1.5], "v": [1], "w": ["x"]}))
    missing = parquet(tmp_path / "3.parquet", pd.DataFrame({"k": ["c"], "ts": [3], "v": [1]}))
    batch = read_landing(spark, str(tmp_path), s)
    try:
        assert [(r["k"], r["source_file"], r["source_row"]) for r in batch.changelog.collect()] == [
            ("a", good, 1)]
        bad = sorted((r["source_file"], r["source_row"], r["field"], r["arrival"])
                     for r in batch.bad_records.collect())
    finally:
        batch.close()
    assert bad == [(good, 2, "k", 1), (wrong, 1, "ts", 2), (missing, 1, "w", 3)]
    with pytest.raises(LandingRecordError, match=r"1\.parquet, row 2, field 'k'"):
        read_landing(spark, str(tmp_path), spec("parquet"))


def test_parquet_widening_is_accepted(spark: Any, tmp_path: Path) -> None:
    path = parquet(tmp_path / "p.parquet", pd.DataFrame(
        {"k": ["a"], "ts": pd.Series([5], dtype="int32"), "v": pd.Series([7], dtype="int16"),
         "w": ["x"]}))
    batch = read_landing(spark, path, spec("parquet"))
    try:
        assert [(r["ts"], r["v"]) for r in batch.changelog.collect()] == [(5, 7)]
    finally:
        batch.close()


def test_tombstones_by_flag_and_by_null_values(spark: Any, tmp_path: Path) -> None:
    by_null = jsonl(tmp_path / "n.jsonl", {"k": "a", "ts": 1, "v": None, "w": None},
                    {"k": "b", "ts": 1, "v": None, "w": "kept"})
    batch = read_landing(spark, by_null, spec("jsonl"))
    try:
        assert sorted((r["k"], r["tombstone"], r["w"]) for r in batch.changelog.collect()) == [
            ("a", True, None), ("b", False, "kept")]
    finally:
        batch.close()
    flagged = jsonl(tmp_path / "f.jsonl", {"k": "a", "ts": 1, "v": 3, "w": "x", "del": True},
                    {"k": "b", "ts": 1, "v": None, "w": None, "del": False},
                    {"k": "c", "ts": 1, "v": 1, "w": "x", "del": None})
    s = spec("jsonl", tombstone_column="del", on_bad_record="quarantine")
    batch = read_landing(spark, flagged, s)
    try:
        # A tombstone carries no value; all-null values without the flag is a value.
        assert sorted((r["k"], r["tombstone"], r["v"]) for r in batch.changelog.collect()) == [
            ("a", True, None), ("b", False, None)]
        assert [(r["source_row"], r["field"]) for r in batch.bad_records.collect()] == [(3, "del")]
    finally:
        batch.close()


def test_not_nullable_value_column(spark: Any, tmp_path: Path) -> None:
    s = spec("jsonl", value_columns=[{"name": "v", "type": "long", "nullable": False},
                                     {"name": "w", "type": "string"}])
    path = jsonl(tmp_path / "a.jsonl", {"k": "a", "ts": 1, "v": None, "w": None},
                 {"k": "b", "ts": 1, "v": None, "w": "x"})
    with pytest.raises(LandingRecordError, match=r"row 2, field 'v': must not be null"):
        read_landing(spark, path, s)


def test_row_numbers_exact_across_many_file_splits(spark: Any, tmp_path: Path) -> None:
    """Small splits force several blocks per file: numbering must stitch them in order."""
    n = 300
    first = jsonl(tmp_path / "a.jsonl", *({"k": f"a{i}", "ts": i, "v": i, "w": "x"} for i in range(n)))
    second = jsonl(tmp_path / "b.jsonl", *({"k": f"b{i}", "ts": i, "v": i, "w": "x"} for i in range(n)))
    old = spark.conf.get("spark.sql.files.maxPartitionBytes")
    spark.conf.set("spark.sql.files.maxPartitionBytes", "2048")
    try:
        batch = read_landing(spark, [second, first], spec("jsonl"))
        try:
            rows = batch.changelog.select("k", "source_file", "source_row", "arrival").collect()
        finally:
            batch.close()
    finally:
        spark.conf.set("spark.sql.files.maxPartitionBytes", old)
    got = sorted((r["arrival"], r["source_file"], r["source_row"], r["k"]) for r in rows)
    want = [(i, first, i + 1, f"a{i}") for i in range(n)]
    want += [(n + i, second, i + 1, f"b{i}") for i in range(n)]
    assert got == want


@pytest.mark.parametrize(("config", "key"), [
    ({"key_columns": [{"name": "ts", "type": "string"}]},
     "ts_column: column 'ts' is declared twice (also in key_columns)"),
    ({"value_columns": [{"name": "k", "type": "long"}]},
     "value_columns: column 'k' is declared twice (also in key_columns)"),
    ({"value_columns": [{"name": "v", "type": "date"}]}, "value_columns.0.type"),
    ({"value_columns": [], "tombstone_column": None}, "tombstone_column"),
    ({"on_bad_record": "drop"}, "on_bad_record"),
    ({"format": "xml"}, "format"),
    ({"ts_column": "my ts"}, "plain column name"),
    ({"surprise": 1}, "config.surprise: unknown key"),
])
def test_bad_spec_names_the_key(config: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(key)):
        LandingSpec.parse(spec("jsonl", **config))


@pytest.mark.parametrize(("config", "key"), [
    ({"format": "csv", "csv_header": False}, "csv_columns: required when csv_header is false"),
    ({"format": "csv", "csv_columns": ["k", "ts"]}, "csv_columns: only for format csv with csv_header"),
    ({"format": "csv", "csv_header": False, "csv_columns": ["k", "v"]},
     r"must include the key and event-time columns; missing \['ts'\]"),
    ({"ts_min_ms": 10, "ts_max_ms": 5}, "ts_min_ms: 10 is after ts_max_ms 5"),
    ({"ts_max_ms": 253_402_300_800_000}, "ts_max_ms"),
    ({"max_record_bytes": 0}, "max_record_bytes"),
    ({"max_record_bytes": (16 << 20) + 1}, "max_record_bytes"),
])
def test_bad_reading_options_name_the_key(config: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError, match=key):
        LandingSpec.parse(spec("jsonl", **{"format": "jsonl", **config}))


def test_csv_byte_order_mark_is_not_part_of_the_header(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "bom.csv"
    path.write_bytes(b"\xef\xbb\xbfk,ts,v,w\r\nx,7,1,w1\r\n")
    batch = read_landing(spark, str(path), spec("csv"))
    try:
        assert [(r["k"], r["ts"], r["w"]) for r in batch.changelog.collect()] == [("x", 7, "w1")]
    finally:
        batch.close()


def test_csv_gzipped_lands_as_the_plain_file_and_a_truncated_one_is_a_bad_file(
        spark: Any, tmp_path: Path) -> None:
    import gzip

    text = b'k,ts,v,w\n"x\ny",7,1,w1\nz,8,2,w2\n'
    plain = tmp_path / "a.csv"
    plain.write_bytes(text)
    packed = tmp_path / "b.csv.gz"
    packed.write_bytes(gzip.compress(text))
    cut = tmp_path / "c.csv.gz"
    cut.write_bytes(gzip.compress(text * 200)[:60])
    batch = read_landing(spark, [str(plain), str(packed), str(cut)], spec("csv", on_bad_record="quarantine"))
    try:
        rows = sorted((Path(r["source_file"]).name, r["source_row"], r["k"], r["ts"], r["v"], r["w"])
                      for r in batch.changelog.collect())
        bad_files = [(Path(f).name, reason) for f, reason in batch.bad_files]
    finally:
        batch.close()
    assert rows == [("a.csv", 2, "x\ny", 7, 1, "w1"), ("a.csv", 4, "z", 8, 2, "w2"),
                    ("b.csv.gz", 2, "x\ny", 7, 1, "w1"), ("b.csv.gz", 4, "z", 8, 2, "w2")]
    assert [name for name, _ in bad_files] == ["c.csv.gz"]
    assert "Compressed file ended before the end-of-stream marker" in bad_files[0][1]


def test_a_jsonl_line_too_long_to_hold_refuses_its_file_before_spark_reads_it(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Spark's text reader would hold the line whole (a 300 MB line took a 4 GB session's JVM
    # down): the file is scanned in blocks first and refused whole, its other lines too.
    import gzip

    from joins.landing import long_lines

    monkeypatch.setattr(long_lines, "MAX_LINE_BYTES", 100)
    good = jsonl(tmp_path / "a.jsonl", GOOD)
    long = tmp_path / "b.jsonl"
    long.write_text(json.dumps(GOOD) + "\n" + json.dumps({**GOOD, "w": "x" * 200}) + "\n")
    packed = tmp_path / "c.jsonl.gz"
    packed.write_bytes(gzip.compress(("x" * 150 + "\n").encode()))
    batch = read_landing(spark, [good, str(long), str(packed)], spec("jsonl", on_bad_record="quarantine"))
    try:
        rows = [(Path(r["source_file"]).name, r["source_row"]) for r in batch.changelog.collect()]
        bad_files = [(Path(f).name, reason) for f, reason in batch.bad_files]
        quarantined = sorted((r["kind"], Path(r["source_file"]).name) for r in batch.bad_records.collect())
    finally:
        batch.close()
    assert rows == [("a.jsonl", 1)]
    assert bad_files == [(name, f"cannot be read: line {n} is longer than 100 bytes, the longest line "
                                "a reader holds") for name, n in (("b.jsonl", 2), ("c.jsonl.gz", 1))]
    assert quarantined == [("bad_file", "b.jsonl"), ("bad_file", "c.jsonl.gz")]


def test_a_parquet_row_too_large_to_hold_refuses_its_file_before_spark_reads_it(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Spark's Parquet reader would hold the value whole (a 300 MB string took a 4 GB session's
    # JVM down): a row group whose footer allows such a row is read first, one column at a time
    # in a Python task, and the file is refused whole, its other rows too.
    from joins.landing import parquet_values

    monkeypatch.setattr(parquet_values, "MAX_VALUE_BYTES", 1000)
    good = parquet(tmp_path / "a.parquet", pd.DataFrame([GOOD]))
    many = parquet(tmp_path / "b.parquet", pd.DataFrame(
        [{**GOOD, "k": f"{i:060d}", "ts": i} for i in range(1, 41)]))  # 2,400 bytes of keys
    huge = parquet(tmp_path / "c.parquet", pd.DataFrame([GOOD, {**GOOD, "w": "x" * 1500}]))
    batch = read_landing(spark, [good, many, huge], spec("parquet", on_bad_record="quarantine"))
    try:
        rows = sorted((Path(r["source_file"]).name, r["source_row"]) for r in batch.changelog.collect())
        bad_files = [(Path(f).name, reason) for f, reason in batch.bad_files]
        quarantined = sorted((r["kind"], Path(r["source_file"]).name) for r in batch.bad_records.collect())
    finally:
        batch.close()
    assert rows == [("a.parquet", 1), *(("b.parquet", i) for i in range(1, 41))]
    size = 1 + 1500   # the row's strings: k and w
    assert bad_files == [("c.parquet", f"cannot be read: row 2 holds {size} bytes of values (most in "
                                       "column 'w'), more than 1000 bytes, the largest row a reader holds")]
    assert quarantined == [("bad_file", "c.parquet")]


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_files_named_by_a_uri_land_as_local_ones(spark: Any, tmp_path: Path, fmt: str) -> None:
    # An object store's landing folder names its files by URI (here file://): a Parquet footer
    # must be read from a seekable file, a .csv.gz decompressed once.
    import gzip

    if fmt == "parquet":
        path = tmp_path / "a.parquet"
        parquet(path, pd.DataFrame({"k": ["a", "b"], "ts": [1, 2], "v": [1, 2], "w": ["x", "y"]}))
    else:
        path = tmp_path / "a.csv.gz"
        path.write_bytes(gzip.compress(b"k,ts,v,w\na,1,1,x\nb,2,2,y\n"))
    batch = read_landing(spark, path.as_uri(), spec(fmt, on_bad_record="quarantine"))
    try:
        rows = sorted((r["k"], r["ts"], r["v"], r["w"]) for r in batch.changelog.collect())
        assert not batch.bad_files and batch.bad_records.count() == 0
    finally:
        batch.close()
    assert rows == [("a", 1, 1, "x"), ("b", 2, 2, "y")]


def test_csv_without_header_reads_the_declared_columns(spark: Any, tmp_path: Path) -> None:
    path = csv_file(tmp_path / "a.csv", "x,7,1,w1", "y,8,2,w2")
    s = spec("csv", csv_header=False, csv_columns=["k", "ts", "v", "w"])
    batch = read_landing(spark, path, s)
    try:
        assert sorted((r["k"], r["ts"], r["source_row"]) for r in batch.changelog.collect()) == [
            ("x", 7, 1), ("y", 8, 2)]
    finally:
        batch.close()


def test_declared_record_size_limit_and_event_time_range(spark: Any, tmp_path: Path) -> None:
    s = spec("jsonl", max_record_bytes=60, ts_min_ms=0, ts_max_ms=1_000, on_bad_record="quarantine")
    long_line = {"k": "b", "ts": 2, "v": 1, "w": "x" * 40}
    path = jsonl(tmp_path / "a.jsonl", GOOD, long_line, {**GOOD, "ts": -1}, {**GOOD, "ts": 1_001})
    batch = read_landing(spark, path, s)
    try:
        bad = {r["source_row"]: r["reason"] for r in batch.bad_records.collect()}
        assert [r["source_row"] for r in batch.changelog.collect()] == [1]
    finally:
        batch.close()
    size = len(json.dumps(long_line))
    assert bad[2] == (f"file {path}, row 2, field '<record>': record too large: {size} bytes, over "
                      f"max_record_bytes (60)")
    assert bad[3].endswith("field 'ts': out of range: -1 ms is before the earliest accepted event "
                           "time, 0 ms (1970-01-01T00:00:00.000Z); the event time must lie within "
                           "years 1..9999, or the declared ts_min_ms..ts_max_ms")
    assert "field 'ts': out of range: 1001 ms is after the latest accepted event time, 1000 ms" in bad[4]


def test_unreadable_file_refuses_a_fail_mode_batch(spark: Any, tmp_path: Path) -> None:
    jsonl(tmp_path / "a.jsonl", GOOD)
    (tmp_path / "b.jsonl").symlink_to(tmp_path / "a.jsonl")
    with pytest.raises(LandingFileError, match=r"b\.jsonl, field '<file>': a symbolic link: links "
                                               r"are not followed"):
        read_landing(spark, str(tmp_path), spec("jsonl"))
    batch = read_landing(spark, str(tmp_path), spec("jsonl", on_bad_record="quarantine"))
    try:
        assert batch.bad_files == ((str(tmp_path / "b.jsonl"),
                                    "a symbolic link: links are not followed, land the file itself"),)
        assert batch.changelog.count() == 1
    finally:
        batch.close()


def test_missing_landing_file_is_a_config_error(spark: Any, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        read_landing(spark, [str(tmp_path / "nope.jsonl")], spec("jsonl"))


# ---- landing files into the versioned Delta table -------------------------------------------


def _bound_cases(tmp_path: Path) -> dict[str, tuple[list[str], int, int]]:
    """format -> (files, records the files hold, good rows among them)."""
    return {
        # A blank line is a record of the count (it is numbered) but no row; one bad record.
        "jsonl": ([jsonl(tmp_path / "a.jsonl", GOOD, "", {**GOOD, "ts": "12:00"}),
                   jsonl(tmp_path / "b.jsonl", {**GOOD, "k": "b"})], 4, 2),
        # Each file's header line is counted too.
        "csv": ([csv_file(tmp_path / "a.csv", "k,ts,v,w", "a,1,1,x", "b,oops,2,y"),
                 csv_file(tmp_path / "b.csv", "k,ts,v,w", "c,3,3,z")], 5, 2),
        "parquet": ([parquet(tmp_path / "a.parquet", pd.DataFrame({"k": ["a", "b"], "ts": [1, 2],
                                                                   "v": [1, 2], "w": ["x", "y"]})),
                     parquet(tmp_path / "b.parquet", pd.DataFrame({"k": ["c"], "ts": [3], "v": [3],
                                                                   "w": ["z"]}))], 3, 3),
    }


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_a_read_bounds_its_rows_by_the_records_it_numbered(spark: Any, tmp_path: Path,
                                                           fmt: str) -> None:
    # The versioned ingest takes a batch of at most one block's rows without a job to find
    # its arrivals' span: the bound must never be below the good rows.
    files, records, good = _bound_cases(tmp_path)[fmt]
    batch = read_landing(spark, files, spec(fmt, on_bad_record="quarantine"))
    try:
        assert batch.changelog.count() == good
        assert batch.rows_at_most == records
    finally:
        batch.close()
    # A file that cannot be read holds no counted record; a CSV file is read as bytes, so an
    # undecodable one is a record (quarantined) of the count.
    broken = tmp_path / {"jsonl": "broken.jsonl.gz", "parquet": "broken.parquet",
                         "csv": "broken.csv"}[fmt]
    broken.write_bytes(b"\x1f\x8b not gzip" if fmt == "jsonl" else b"PAR1 not parquet"
                       if fmt == "parquet" else b"\xff\n")
    batch = read_landing(spark, [*files, str(broken)], spec(fmt, on_bad_record="quarantine"))
    try:
        assert batch.changelog.count() == good
        if fmt == "csv":
            assert not batch.bad_files and batch.rows_at_most == records + 1
        else:
            assert [Path(p).name for p, _ in batch.bad_files] == [broken.name]
            assert batch.rows_at_most == records
    finally:
        batch.close()


def test_ingest_landing_hands_the_bound_to_the_versioned_ingest(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import joins.ingest.table as table

    told: list[int | None] = []
    real = table.ingest_changelog

    def spy(*args: Any, **kwargs: Any) -> Any:
        told.append(kwargs.get("rows_at_most"))
        return real(*args, **kwargs)

    monkeypatch.setattr(table, "ingest_changelog", spy)
    files, records, good = _bound_cases(tmp_path)["jsonl"]
    report = ingest_landing(spark, files, spec("jsonl", on_bad_record="quarantine"),
                            source_id="landing", batch_id=0, history_retention_ms=5,
                            versions_path=str(tmp_path / "v"), quarantine_path=str(tmp_path / "q"))
    assert told == [records] and report.stored == good


def test_ingest_landing_reconciles_good_bad_and_expired_rows(spark: Any, tmp_path: Path) -> None:
    landing = tmp_path / "landing" / "batch-0"
    landing.mkdir(parents=True)
    # b.jsonl arrives after a.jsonl (name order), so its ts 90 is behind stream time 100.
    b = jsonl(landing / "b.jsonl", {"k": "x", "ts": 90, "v": 1, "w": "late"},
              {"k": "y", "ts": "12:00", "v": 1, "w": "bad"}, {"k": "y", "ts": 96, "v": 2, "w": "ok"})
    a = jsonl(landing / "a.jsonl", {"k": "x", "ts": 100, "v": 3, "w": "ok"},
              {"k": None, "ts": 101, "v": 4, "w": "bad"})
    tables = {"versions_path": str(tmp_path / "versions"),
              "quarantine_path": str(tmp_path / "quarantine")}
    s = spec("jsonl", on_bad_record="quarantine")
    report = ingest_landing(spark, [b, a], s, source_id="landing", batch_id=0,
                            history_retention_ms=5, **tables)
    assert (report.rows_in, report.stored, report.expired, report.quarantined) == (5, 2, 1, 2)
    assert report.rows_in == report.stored + report.expired + report.quarantined
    assert (report.stream_time_before, report.stream_time_after) == (None, 100)
    quarantine = sorted((r["kind"], r["source_file"], r["source_row"], r["field"], r["stream_time"])
                        for r in read_delta(spark, tables["quarantine_path"]).collect())
    assert quarantine == [("bad_record", a, 2, "k", None), ("bad_record", b, 2, "ts", None),
                          ("expired", b, 1, "ts", 100)]
    stored = sorted((r["k"], r["ts"]) for r in read_delta(spark, tables["versions_path"]).collect())
    assert stored == [("x", 100), ("y", 96)]

    versions_at = delta_version(tables["versions_path"])
    again = ingest_landing(spark, [b, a], s, source_id="landing", batch_id=0,
                           history_retention_ms=5, **tables)
    assert again.skipped and (again.stored, again.expired, again.quarantined) == (2, 1, 2)
    assert delta_version(tables["versions_path"]) == versions_at

    # Fail mode refuses the next batch whole: nothing is written.
    nxt = jsonl(tmp_path / "c.jsonl", {"k": "z", "ts": 120, "v": 1, "w": "ok"},
                {"k": "z", "ts": 1.5, "v": 1, "w": "bad"})
    with pytest.raises(LandingRecordError, match=r"c\.jsonl, row 2, field 'ts'"):
        ingest_landing(spark, nxt, spec("jsonl"), source_id="landing", batch_id=1,
                       history_retention_ms=5, **tables)
    assert delta_version(tables["versions_path"]) == versions_at
