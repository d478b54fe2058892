"""The bad-input corpus (issue 9): JSON-lines, CSV and Parquet files with every kind of damage,
ingested through a whole ingest run of a table source. For each file the test states either the
exact stored rows or the exact quarantine rows (reason naming file, row and field), and the
accounting holds: rows in = stored + expired + quarantined (a file quarantined whole counts
as one). Then the next batch runs normally."""

from __future__ import annotations

import csv
import io
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from joins.core.human import duration, iso_time
from joins.ingest import IngestSource, run_ingest
from joins.lake import read_delta
from joins.landing import LandingSpec

pytestmark = pytest.mark.spark

RETENTION = 1_000
LIMIT = 1 << 20
OUT_OF_RANGE_HINT = "the event time must lie within years 1..9999, or the declared ts_min_ms..ts_max_ms"
AFTER = ("out of range: {ts} ms is after the latest accepted event time, 253402300799999 ms "
         f"(9999-12-31T23:59:59.999Z); {OUT_OF_RANGE_HINT}")
BEFORE = ("out of range: {ts} ms is before the earliest accepted event time, -62135596800000 ms "
          f"(0001-01-01T00:00:00.000Z); {OUT_OF_RANGE_HINT}")
NOT_FINITE = ("not a finite number (NaN and ±Infinity are refused; a JSON number beyond the double "
              "range such as 1e400 reads as Infinity)")
NOT_NULL_KEY = "must not be null (key column)"


@dataclass
class Expect:
    """What one file must give: stored rows (k, ts, v, w, d, tombstone) and quarantine rows
    (row, field, problem) or, for a file quarantined whole, its problem."""

    stored: list[tuple[Any, ...]] = field(default_factory=list)
    bad: list[tuple[int, str, str]] = field(default_factory=list)
    whole: str | None = None
    expired: list[tuple[int, int]] = field(default_factory=list)   # (row, ts)

    @property
    def rows_in(self) -> int:
        return len(self.stored) + len(self.bad) + len(self.expired) + (self.whole is not None)


def spec(fmt: str, **over: Any) -> LandingSpec:
    return LandingSpec.parse({
        "format": fmt, "key_columns": [{"name": "k", "type": "string"}],
        "value_columns": [{"name": "v", "type": "long"}, {"name": "w", "type": "string"},
                          {"name": "d", "type": "double"}],
        "ts_column": "ts", "on_bad_record": "quarantine", **over})


def source(root: Path, landing_spec: LandingSpec) -> IngestSource:
    return IngestSource(name="src", kind="table", landing=str(root / "landing"), spec=landing_spec,
                        table=str(root / "versions"), quarantine=str(root / "quarantine"),
                        manifest=str(root / "manifest"), lease=str(root / "lease"),
                        history_retention_ms=RETENTION)


def good(k: str, ts: int, v: int | None = 1, w: str | None = "x", d: float | None = 0.5) -> dict[str, Any]:
    return {"k": k, "ts": ts, "v": v, "w": w, "d": d}


def row_of(r: dict[str, Any]) -> tuple[Any, ...]:
    tomb = r["v"] is None and r["w"] is None and r["d"] is None
    return (r["k"], r["ts"], r["v"], r["w"], r["d"], tomb)


def lines(*items: Any) -> bytes:
    out = []
    for item in items:
        out.append(item if isinstance(item, bytes) else
                   (item if isinstance(item, str) else json.dumps(item)).encode())
    return b"\n".join(out) + b"\n"


def check_corpus(spark: Any, root: Path, landing_spec: LandingSpec,
                 expected: dict[str, Expect]) -> None:
    src = source(root, landing_spec)
    [summary] = run_ingest(spark, src)
    landing = src.landing
    got_stored = sorted(tuple(r[c] for c in ("k", "ts", "v", "w", "d", "tombstone"))
                        for r in read_delta(spark, src.table).collect())
    quarantine = read_delta(spark, src.quarantine).collect()
    got_bad = sorted((r["source_file"], r["source_row"] or 0, r["field"], r["kind"], r["reason"])
                     for r in quarantine)
    want_stored: list[tuple[Any, ...]] = []
    want_bad: list[tuple[str, int, str, str, str]] = []
    for name, exp in expected.items():
        path = f"{landing}/{name}"
        want_stored += exp.stored
        want_bad += [(path, row, fld, "bad_record", f"file {path}, row {row}, field '{fld}': {problem}")
                     for row, fld, problem in exp.bad]
        if exp.whole is not None:
            want_bad.append((path, 0, "<file>", "bad_file",
                             f"file {path}: {exp.whole}; the whole file is quarantined"))
    stream_time = max(r[1] for r in want_stored)
    for name, exp in expected.items():
        path = f"{landing}/{name}"
        want_bad += [(path, row, "ts", "expired",
                      f"expired: ts {iso_time(ts)} < stream time {iso_time(stream_time)} - "
                      f"history retention {duration(RETENTION)} = "
                      f"{iso_time(stream_time - RETENTION)}; not stored") for row, ts in exp.expired]
    # Per file: a mismatch names the file and both sides of every row that differs.
    differ = {}
    for name in expected:
        path = f"{landing}/{name}"
        got = {b[1:] for b in got_bad if b[0] == path}
        want = {b[1:] for b in want_bad if b[0] == path}
        if got != want:
            differ[name] = {"unexpected": sorted(got - want), "missing": sorted(want - got)}
    assert not differ, "\n" + "\n".join(f"{n}: {d}" for n, d in differ.items())
    assert got_bad == sorted(want_bad)
    assert got_stored == sorted(want_stored)
    rows_in = sum(e.rows_in for e in expected.values())
    assert (summary.rows_in, summary.stored, summary.expired, summary.quarantined) == (
        rows_in, len(want_stored), sum(len(e.expired) for e in expected.values()),
        len(want_bad) - sum(len(e.expired) for e in expected.values()))
    assert summary.rows_in == summary.stored + summary.expired + summary.quarantined
    assert sorted(summary.bad_files) == sorted(n for n, e in expected.items() if e.whole is not None)

    # The next batch runs normally, the bad files taken once and for all.
    nxt = Path(landing) / "zzz-next.jsonl"
    write_next(nxt, landing_spec.format)
    [after] = run_ingest(spark, src)
    assert (after.batch_id, after.files, after.stored, after.quarantined) == (1, ("zzz-next.jsonl",), 1, 0)
    assert run_ingest(spark, src) == []


def write_next(path: Path, fmt: str) -> None:
    row = good("next", 10_000)
    if fmt == "jsonl":
        path.write_bytes(lines(row))
    elif fmt == "csv":
        path.write_text("k,ts,v,w,d\nnext,10000,1,x,0.5\n")
    else:
        write_parquet(path, [row])


def special_names(folder: Path, fmt: str, write: Any) -> dict[str, Expect]:
    """Files whose names a glob or a URI parser would misread, each with one good row."""
    out: dict[str, Expect] = {}
    for i, stem in enumerate(["a*", "ab", "x[1]", "e{f}", "g\\h", "c:d", "sp ace%20", "q?"]):
        name = f"n-{stem}.{fmt}"
        row = good(f"N{i}", 4_000 + i)
        write(folder / name, [row])
        out[name] = Expect(stored=[row_of(row)])
    return out


def whole_file_refusals(folder: Path, fmt: str) -> dict[str, Expect]:
    target = folder.parent / "outside.txt"
    target.write_text("root:x:0:0:root:/root:/bin/bash\n")
    os.symlink(target, folder / f"link.{fmt}")
    (folder / f"dir.{fmt}").mkdir()
    os.mkfifo(folder / f"fifo.{fmt}")
    (folder / ".hidden.tmp").write_text("not landed yet")
    (folder / "_SUCCESS").write_text("")
    return {
        f"link.{fmt}": Expect(whole="a symbolic link: links are not followed, land the file itself"),
        f"dir.{fmt}": Expect(whole="a directory, not a regular file"),
        f"fifo.{fmt}": Expect(whole="a named pipe (FIFO), not a regular file"),
    }


def finish_corpus(spark: Any, root: Path, fmt: str, write: Any, expected: dict[str, Expect]) -> None:
    """Add the cases every format shares (odd names, refused entries, an expired put: its file
    sorts last, behind stream time), then ingest and check."""
    folder = root / "landing"
    expected.update(special_names(folder, fmt, write))
    expected.update(whole_file_refusals(folder, fmt))
    write(folder / f"zz-late.{fmt}", [good("Z1", 10)])
    # A CSV file's first row is line 2 (the header is line 1).
    expected[f"zz-late.{fmt}"] = Expect(expired=[(2 if fmt == "csv" else 1, 10)])
    check_corpus(spark, root, spec(fmt), expected)


# ---- JSON lines ---------------------------------------------------------------------------------


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_bytes(lines(*rows))


def test_jsonl_corpus(spark: Any, tmp_path: Path) -> None:
    folder = tmp_path / "landing"
    folder.mkdir()
    expected: dict[str, Expect] = {}

    g = [good("J1", 1_000), good("J2", 1_500, v=None, w=None, d=None), good("J3", 2_000, d=1e300)]
    (folder / "01-good.jsonl").write_bytes(lines(g[0], "", "  ", g[1], g[2]))
    expected["01-good.jsonl"] = Expect(stored=[row_of(r) for r in g])

    def rec(**over: Any) -> dict[str, Any]:
        return {**good("R", 2), **over}

    def raw(ts: str = "2", d: str = "0.5") -> str:
        return f'{{"k": "R", "ts": {ts}, "v": 1, "w": "x", "d": {d}}}'

    bad_lines: list[tuple[Any, str, str]] = [
        ({"k": "R", "v": 2, "w": "y", "d": 0.5}, "ts", "missing (the object has no such field)"),
        (rec(k=None), "k", NOT_NULL_KEY),
        (rec(ts=None), "ts", "must not be null (event time)"),
        (rec(ts="12:00"), "ts", 'expected an integer (long), got "12:00" (JSON STRING)'),
        (raw(ts="1.5"), "ts", "expected an integer (long), got 1.5 (JSON DECIMAL(2,1))"),
        (raw(ts="1e400"), "ts", 'expected an integer (long), got "Infinity" (JSON DOUBLE)'),
        (rec(v="two"), "v", 'expected an integer (long), got "two" (JSON STRING)'),
        (rec(w=5), "w", "expected a string (string), got 5 (JSON BIGINT)"),
        (rec(k={"a": 1}), "k", 'expected a string (string), got {"a":1} (JSON OBJECT<a: BIGINT>)'),
        ('{"k": "R", "ts": ', "<record>", "malformed JSON: the line is not a JSON value"),
        ("[1, 2]", "<record>", "not a JSON object (one object per line is expected)"),
        (rec(ts=253_402_300_800_000), "ts", AFTER.format(ts=253_402_300_800_000)),
        (rec(ts=-62_135_596_800_001), "ts", BEFORE.format(ts=-62_135_596_800_001)),
        (rec(ts=9_300_000_000_000_000), "ts", AFTER.format(ts=9_300_000_000_000_000)),
        (raw(d="1e400"), "d", NOT_FINITE),
        (raw(d="-1e400"), "d", NOT_FINITE),
        (raw(d="NaN"), "<record>", "malformed JSON: the line is not a JSON value"),
        (raw(d="Infinity"), "<record>", "malformed JSON: the line is not a JSON value"),
        (json.dumps(rec(w="@")).encode().replace(b"@", b"\xff\xfe"),
         "<record>", "not valid UTF-8 (the line holds bytes that are no UTF-8 text)"),
    ]
    ok_last = good("J4", 2_500)
    (folder / "02-records.jsonl").write_bytes(lines(*(b[0] for b in bad_lines), ok_last))
    expected["02-records.jsonl"] = Expect(stored=[row_of(ok_last)],
                                          bad=[(i + 1, f, p) for i, (_, f, p) in enumerate(bad_lines)])

    huge = json.dumps(good("R", 3_000, w="x" * 21_000_000))
    (folder / "03-huge.jsonl").write_bytes(lines(good("J5", 3_000), huge))
    expected["03-huge.jsonl"] = Expect(stored=[row_of(good("J5", 3_000))], bad=[(
        2, "<record>", f"record too large: {len(huge)} bytes, over max_record_bytes ({LIMIT})")])

    (folder / "04-empty.jsonl").write_bytes(b"")
    expected["04-empty.jsonl"] = Expect()
    (folder / "05-broken.jsonl.gz").write_bytes(b"\x1f\x8bgarbage garbage")
    # A compressed file is read through once before Spark reads it (for a line too long to hold:
    # joins/landing/long_lines.py), which finds the broken stream first, in Python's words.
    expected["05-broken.jsonl.gz"] = Expect(whole="cannot be read: Unknown compression method")
    finish_corpus(spark, tmp_path, "jsonl", write_jsonl, expected)


# ---- CSV ------------------------------------------------------------------------------------------


def csv_bytes(rows: list[list[Any]], header: list[str] | None = ("k", "ts", "v", "w", "d")) -> bytes:
    buf = io.StringIO()
    writer = csv.writer(buf)  # Python's own dialect: quotes, doubled quotes, \r\n line ends
    if header is not None:
        writer.writerow(header)
    writer.writerows(rows)
    return buf.getvalue().encode()


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_bytes(csv_bytes([[r["k"], r["ts"], r["v"], r["w"], r["d"]] for r in rows]))


def test_csv_corpus(spark: Any, tmp_path: Path) -> None:
    folder = tmp_path / "landing"
    folder.mkdir()
    expected: dict[str, Expect] = {}

    # Exactly what Python's csv writer produces: quotes, doubled quotes, embedded newlines.
    g = [good("C1", 1_000, w='say "hi", twice'), good("C2", 1_100, w="two\nlines"),
         good("C3", 1_200, w="crlf\r\ninside, too"), good("C4", 1_300, v=None, w=None, d=None),
         good("C5", 1_400, w=" padded ")]
    header_and_rows = csv_bytes([[r["k"], r["ts"], r["v"], r["w"], r["d"]] for r in g])
    (folder / "01-quoted.csv").write_bytes(header_and_rows + b"\r\n")
    expected["01-quoted.csv"] = Expect(stored=[row_of(r) for r in g])

    # Row numbers are the lines records start on: the header is line 1, C2 spans 3..4.
    body = csv_bytes([["R", "12:00", 1, "x", 0.5], ["", 5, 1, "x", 0.5], ["R", 1.5, 1, "x", 0.5],
                      ["R", 5, "two", "x", 0.5], ["R", 5, 1, "x", "NaN"], ["R", 5, 1, "x", "Infinity"],
                      ["R", 5, 1, "x", "1e400"], ["R", 253_402_300_800_000, 1, "x", 0.5],
                      ["R", 5, 1], ["R", 5, 1, "x", 0.5, "extra"]])
    body += b'R,5,1,\xff\xfe,0.5\r\nR,5,1,"x"y,0.5\r\nC6,1500,1,ok,0.5\r\nR,5,1,"never closed,0.5\r\n'
    (folder / "02-records.csv").write_bytes(body)
    width = "not the header's 5 field(s) (k, ts, v, w, d)"
    expected["02-records.csv"] = Expect(stored=[row_of(good("C6", 1_500, w="ok"))], bad=[
        (2, "ts", "expected an integer (long), got '12:00'"),
        (3, "k", NOT_NULL_KEY),
        (4, "ts", "expected an integer (long), got '1.5'"),
        (5, "v", "expected an integer (long), got 'two'"),
        (6, "d", NOT_FINITE), (7, "d", NOT_FINITE), (8, "d", NOT_FINITE),
        (9, "ts", AFTER.format(ts=253_402_300_800_000)),
        (10, "<record>", f"the record has 3 field(s), {width}"),
        (11, "<record>", f"the record has 6 field(s), {width}"),
        (12, "<record>", "not valid UTF-8 (byte 0xff at byte 6 of the record)"),
        (13, "<record>", "malformed CSV: ',' expected after '\"'"),
        (15, "<record>", "malformed CSV: unexpected end of data"),
    ])

    # No header: the first record is quarantined as such, never lost; the rest lack k and ts.
    (folder / "03-no-header.csv").write_bytes(csv_bytes([["R", 5, 1, "x", 0.5], ["R", 6, 1, "x", 0.5]],
                                                        header=None))
    expected["03-no-header.csv"] = Expect(bad=[
        (1, "<record>", "not a header: it does not name the column(s) k, ts (a CSV file starts with a "
                        "header line naming its columns, or declare csv_columns with csv_header: false)"),
        (2, "k", "missing (the header has no such column)")])

    big = "y" * (LIMIT + 10)
    (folder / "04-big.csv").write_bytes(csv_bytes([["C7", 1_600, 1, "x", 0.5], ["R", 5, 1, big, 0.5]]))
    expected["04-big.csv"] = Expect(stored=[row_of(good("C7", 1_600))], bad=[
        (3, "<record>", f"record too large: {LIMIT + 20} bytes, over max_record_bytes ({LIMIT})")])
    # A NUL character is text like any other (Python's csv module reads it since 3.11).
    (folder / "05-nul.csv").write_bytes(b"k,ts,v,w,d\nC8,1700,1,a\x00b,0.5\n")
    expected["05-nul.csv"] = Expect(stored=[row_of(good("C8", 1_700, w="a\x00b"))])
    (folder / "06-empty.csv").write_bytes(b"")
    expected["06-empty.csv"] = Expect()
    finish_corpus(spark, tmp_path, "csv", write_csv, expected)


# ---- Parquet ------------------------------------------------------------------------------------


PARQUET_SCHEMA = pa.schema([("k", pa.string()), ("ts", pa.int64()), ("v", pa.int64()),
                            ("w", pa.string()), ("d", pa.float64())])


def write_parquet(path: Path, rows: list[dict[str, Any]]) -> None:
    pq.write_table(pa.Table.from_pylist(rows, schema=PARQUET_SCHEMA), path)


def corrupt_page(path: Path) -> None:
    """A Parquet file whose footer reads but whose data page does not decode."""
    table = pa.table({"k": ["R"] * 2000, "ts": list(range(2000)), "v": list(range(2000)),
                      "w": ["x" * 50] * 2000, "d": [0.5] * 2000})
    pq.write_table(table, path, compression="snappy", use_dictionary=False, write_page_index=False)
    chunk = pq.ParquetFile(path).metadata.row_group(0).column(1)
    data = bytearray(path.read_bytes())
    at = chunk.data_page_offset + 1000
    data[at:at + 16] = b"\xff" * 16
    path.write_bytes(bytes(data))


def test_parquet_corpus(spark: Any, tmp_path: Path) -> None:
    folder = tmp_path / "landing"
    folder.mkdir()
    expected: dict[str, Expect] = {}

    g = [good("P1", 1_000), good("P2", 1_100, v=None, w=None, d=None), good("P3", 1_200, d=-0.0)]
    write_parquet(folder / "01-good.parquet", g)
    expected["01-good.parquet"] = Expect(stored=[row_of(r) for r in g])

    rows = [good(None, 1_250), good("R", 253_402_300_800_000),  # type: ignore[arg-type]
            good("R", -62_135_596_800_001), good("R", 9_300_000_000_000_000),
            good("R", 1_250, d=float("nan")), good("R", 1_250, d=float("-inf")),
            good("R", 1_250, w="z" * (LIMIT + 1)), good("P4", 1_300)]
    write_parquet(folder / "02-records.parquet", rows)
    size = len(json.dumps({"k": "R", "ts": 1_250, "v": 1, "w": "z" * (LIMIT + 1), "d": 0.5},
                          separators=(",", ":")))
    expected["02-records.parquet"] = Expect(stored=[row_of(good("P4", 1_300))], bad=[
        (1, "k", NOT_NULL_KEY), (2, "ts", AFTER.format(ts=253_402_300_800_000)),
        (3, "ts", BEFORE.format(ts=-62_135_596_800_001)), (4, "ts", AFTER.format(ts=9_300_000_000_000_000)),
        (5, "d", NOT_FINITE), (6, "d", NOT_FINITE),
        (7, "<record>", f"record too large: {size} bytes, over max_record_bytes ({LIMIT})")])

    pd.DataFrame([{"k": "R", "ts": 1_250.5, "v": 1, "w": "x", "d": 0.5}]).to_parquet(
        folder / "03-ts-double.parquet", index=False)
    expected["03-ts-double.parquet"] = Expect(bad=[
        (1, "ts", "has type double in the file, expected long (every row of the file)")])
    pq.write_table(pa.table({"k": ["R"], "v": [1], "w": ["x"], "d": [0.5]}),
                   folder / "04-no-ts.parquet")
    expected["04-no-ts.parquet"] = Expect(bad=[(1, "ts", "missing (the file has no such column)")])

    (folder / "05-empty.parquet").write_bytes(b"")
    expected["05-empty.parquet"] = Expect(whole="not a readable Parquet file: Parquet file size is 0 bytes")
    good_bytes = (folder / "01-good.parquet").read_bytes()
    (folder / "06-truncated.parquet").write_bytes(good_bytes[: len(good_bytes) // 2])
    expected["06-truncated.parquet"] = Expect(whole=(
        "not a readable Parquet file: Parquet magic bytes not found in footer. Either the file is "
        "corrupted or this is not a parquet file."))
    (folder / "07-text.parquet").write_text("k,ts\nR,5\n")
    expected["07-text.parquet"] = Expect(whole=(
        "not a readable Parquet file: Parquet magic bytes not found in footer. Either the file is "
        "corrupted or this is not a parquet file."))
    corrupt_page(folder / "08-bad-page.parquet")
    expected["08-bad-page.parquet"] = Expect(whole=(
        "not a readable Parquet file: org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] "
        f"Encountered error while reading file file://{folder}/08-bad-page.parquet.  SQLSTATE: "
        "KD001 (cause: java.io.IOException: FAILED_TO_UNCOMPRESS(5))"))
    finish_corpus(spark, tmp_path, "parquet", write_parquet, expected)
