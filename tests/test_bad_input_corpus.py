"""Issue 23, `metrics` / `diagnose`: the second bad-input corpus. Every row is one input and
what the command line must do with it — the exit code and a piece of the one ``error:`` line
(or, for input that is read, a piece of what it states). The first corpus is
``test_bad_input_cli.py``; this one holds what that one let through: Parquet read without the
seconds rule, timestamps read in the wrong unit, cells quoted as pandas parsed them, damaged
files reported as bugs, a directory refused whole for one bad file."""

from __future__ import annotations

import bz2
import codecs
import gzip
import json
import lzma
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from llminfer.cli import main, parse_percentiles
from llminfer.logs.reading import read_requests
from llminfer.logs.schema import LogError

DATA = Path(__file__).parent.parent / "data"
CLEAN = (DATA / "requests.csv").read_text(encoding="utf-8")
HEADER = CLEAN.splitlines()[0]
BASE = pd.read_csv(DATA / "requests.csv")
TIMES = ("start_ts", "first_token_ts", "end_ts")
SCALE = {"s": 1, "ms": 1e3, "us": 1e6, "ns": 1e9}
BODY = (
    HEADER
    + "\n"
    + "".join(f"r{i},{i % 50}.25,{i % 50}.5,{i % 50 + 3}.1,10,5\n" for i in range(3000))
)


def _text(tmp: Path, name: str, text: str, encoding: str = "utf-8") -> Path:
    path = tmp / name
    path.write_bytes(text.encode(encoding))
    return path


def _bytes(tmp: Path, name: str, data: bytes) -> Path:
    path = tmp / name
    path.write_bytes(data)
    return path


def _rows(tmp: Path, name: str, *rows: str, header: str = HEADER) -> Path:
    return _text(tmp, name, header + "\n" + "".join(r + "\n" for r in rows))


def _frame(unit: str = "s") -> pd.DataFrame:
    frame = BASE.copy()
    for column in TIMES:
        frame[column] = frame[column] * SCALE[unit]
    return frame


def _stamps(tmp: Path, name: str, unit: str, kind: str = "timestamp", tz=None) -> Path:
    """The article's three requests with Arrow timestamp (epoch) or duration times."""
    columns = {"request_id": pa.array(BASE["request_id"])}
    for column in TIMES:
        seconds = BASE[column] + (1_717_660_800 if kind == "timestamp" else 0)
        ticks = pa.array((seconds * SCALE[unit]).round().astype("int64"))
        arrow = pa.timestamp(unit, tz=tz) if kind == "timestamp" else pa.duration(unit)
        columns[column] = ticks.cast(arrow)
    columns["input_tokens"] = pa.array(BASE["input_tokens"])
    columns["output_tokens"] = pa.array(BASE["output_tokens"])
    path = tmp / name
    pq.write_table(pa.table(columns), path)
    return path


def _parquet(tmp: Path, name: str, frame: pd.DataFrame | pa.Table) -> Path:
    path = tmp / name
    table = frame if isinstance(frame, pa.Table) else pa.Table.from_pandas(frame)
    pq.write_table(table, path)
    return path


def _table(**columns) -> pa.Table:
    """Two requests as an Arrow table; ``columns`` replace the plain ones."""
    plain = {
        "request_id": pa.array(["a", "b"]),
        "start_ts": pa.array([0.0, 1.0]),
        "first_token_ts": pa.array([0.4, 1.4]),
        "end_ts": pa.array([3.0, 4.0]),
        "input_tokens": pa.array([10, 20]),
        "output_tokens": pa.array([5, 5]),
    }
    plain.update(columns)
    return pa.table(plain)


def _ms_csv(tmp: Path, name: str = "ms.csv") -> Path:
    path = tmp / name
    _frame("ms").to_csv(path, index=False)
    return path


def _directory(tmp: Path, name: str, **files) -> Path:
    folder = tmp / name
    folder.mkdir()
    for file, content in files.items():
        file = file.replace("_", ".")
        if isinstance(content, pd.DataFrame):
            if file.endswith(".parquet"):
                content.to_parquet(folder / file)
            else:
                content.to_csv(folder / file, index=False)
        else:
            (folder / file).write_text(content, encoding="utf-8")
    return folder


def _vllm(tmp: Path, name: str, tail: str) -> Path:
    text = (DATA / "vllm_bench_detailed.json").read_text(encoding="utf-8").rstrip()
    return _text(tmp, name, text[:-1] + tail + "}")


def _symlink_loop(tmp: Path) -> Path:
    path = tmp / "loop.csv"
    os.symlink(path, path)
    return path


def _decimal_comma(tmp: Path) -> Path:
    lines = (DATA / "requests_realistic.csv").read_text(encoding="utf-8").splitlines()[:41]
    rows = [line.replace(",", ";").replace(".", ",") for line in lines]
    cells = rows[5].split(";")
    cells[2] = "1.500"  # the one cell written with a point
    rows[5] = ";".join(cells)
    return _text(tmp, "comma.csv", "\n".join(rows) + "\n")


# (id, builder(tmp) -> path, extra arguments, exit code, substrings of the one error line)
BAD = [
    # --- one unit rule for every format ---------------------------------------------------
    ("parquet-in-ms", lambda t: _parquet(t, "ms.parquet", _frame("ms")), [], 2,
     ["ms.parquet", "do not look like seconds", "--time-unit ms"]),
    ("parquet-epoch-ns-integers", lambda t: _parquet(t, "ns.parquet", _frame("ns").assign(
        **{c: ((BASE[c] + 1.7e9) * 1e9).astype("int64") for c in TIMES})), [], 2,
     ["value 1.7e+18 s", "--time-unit"]),
    ("parquet-1e308", lambda t: _parquet(t, "x.parquet", _frame().assign(end_ts=1e308)), [], 2,
     ["do not look like seconds", "1e+308"]),
    ("csv-epoch-ns-integers", lambda t: _rows(
        t, "ns.csv", "r1,1717660800000000000,1717660800400000000,1717660803100000000,10,5"),
     [], 2, ["row 0, column start_ts", "--time-unit"]),
    ("timestamps-and-a-time-unit", lambda t: _stamps(t, "ts.parquet", "ns"),
     ["--time-unit", "ms"], 2, ["does not apply", "timestamps or durations"]),
    ("directory-one-file-in-ms", lambda t: _directory(t, "d", a_csv=_frame(), b_csv=_frame("ms")),
     [], 2, ["b.csv", "do not look like seconds"]),
    ("directory-parquet-one-in-ms", lambda t: _directory(
        t, "d", a_parquet=_frame(), b_parquet=_frame("ms")), [], 2, ["b.parquet", "seconds"]),
    ("directory-units-disagree", lambda t: _directory(
        t, "d", a_csv=_frame(), b_csv=_frame().assign(
            end_ts=BASE["first_token_ts"] + (BASE["end_ts"] - BASE["first_token_ts"]) / 1000)),
     [], 2, ["do not share one time unit", "a.csv", "b.csv"]),
    ("stream-in-ms", _ms_csv, ["--stream"], 2, ["do not look like seconds", "--time-unit"]),
    ("stream-directory-one-in-ms", lambda t: _directory(
        t, "d", a_parquet=_frame(), b_parquet=_frame("ms")), ["--stream"], 2, ["b.parquet"]),
    # --- types that are no numbers ----------------------------------------------------------
    ("parquet-bool-count", lambda t: _parquet(t, "b.parquet", _frame().assign(output_tokens=True)),
     [], 2, ["column output_tokens", "value 'True'", "not a number"]),
    ("parquet-list-times", lambda t: _parquet(t, "l.parquet", _table(
        start_ts=pa.array([[0.0], [1.0]]))), [], 2, ["column start_ts", "not a number"]),
    ("parquet-struct-times", lambda t: _parquet(t, "s.parquet", _table(
        start_ts=pa.array([{"x": 0.0}, {"x": 1.0}]))), [], 2, ["column start_ts"]),
    ("parquet-empty-token_ts", lambda t: _parquet(t, "z.parquet", _table(
        token_ts=pa.array([[], [1.4, 2.0]], pa.list_(pa.float64())))), [], 2,
     ["column token_ts", "value '[]'"]),
    ("parquet-no-rows", lambda t: _parquet(t, "e.parquet", _frame().iloc[0:0]), [], 2,
     ["no rows"]),
    ("stream-bool-count", lambda t: _parquet(t, "b.parquet", _frame().assign(output_tokens=True)),
     ["--stream"], 2, ["output_tokens is stored as bool"]),
    ("stream-hex-count", lambda t: _rows(t, "h.csv", "r1,0.1,0.4,3.1,0x10,5"), ["--stream"], 2,
     ["0x10"]),
    ("stream-duckdb-hex-count", lambda t: _rows(t, "h.csv", "r1,0.1,0.4,3.1,0x10,5"),
     ["--stream", "--engine", "duckdb"], 2, ["0x10"]),
    ("hex-count-fast-path", lambda t: _rows(
        t, "h.csv", "r1,0.1,0.4,3.1,0x10,5", "r2,0.2,0.4,3.1,1,5"), [], 2,
     ["column input_tokens", "value '0x10'", "not a number"]),
    ("hex-upper", lambda t: _rows(t, "h.csv", "r1,0.1,0.4,3.1,10,0X1F"), [], 2, ["'0X1F'"]),
    # --- header -----------------------------------------------------------------------------
    ("duplicate-start_ts", lambda t: _rows(t, "d.csv", "r1,0,0.4,3.1,10,5,9",
                                           header=HEADER + ",start_ts"), [], 2,
     ["names column 'start_ts' twice", "cells 2 and 7"]),
    ("duplicate-request_id", lambda t: _rows(t, "d.csv", "x,r1,0,0.4,3.1,10,5",
                                             header="request_id," + HEADER), [], 2,
     ["'request_id' twice"]),
    ("duplicate-name-semicolons", lambda t: _text(
        t, "d.csv", (HEADER + ",end_ts\nr1,0,0.4,3.1,10,5,4\n").replace(",", ";")), [], 2,
     ["'end_ts' twice"]),
    ("a-million-columns", lambda t: _text(
        t, "w.csv", ",".join(f"c{i}" for i in range(10**6)) + "\n1\n"), [], 2,
     ["header line has more than", "cells"]),
    # --- values quoted as the file writes them -----------------------------------------------
    ("NaN-cell", lambda t: _rows(t, "n.csv", "r1,0,0.4,NaN,10,5"), [], 2, ["value 'NaN'"]),
    ("None-cell", lambda t: _rows(t, "n.csv", "r1,0,0.4,None,10,5"), [], 2, ["value 'None'"]),
    ("1e309-cell", lambda t: _rows(t, "n.csv", "r1,0,0.4,1e309,10,5"), [], 2,
     ["value '1e309'", "not finite"]),
    ("minus-zero-count", lambda t: _rows(t, "n.csv", "r1,0,0.4,3.1,10,-0"), [], 2, ["value '-0'"]),
    ("1e-400-count", lambda t: _rows(t, "n.csv", "r1,0,0.4,3.1,10,1e-400"), [], 2,
     ["value '1e-400'"]),
    ("short-row", lambda t: _rows(t, "n.csv", "r1,0,0.4,3.1,10"), [], 2,
     ["column output_tokens, value ''"]),
    ("NaN-in-semicolon-file", lambda t: _text(t, "n.csv", (HEADER + "\nr1,0,0.4,NaN,10,5\n")
                                              .replace(",", ";")), [], 2, ["value 'NaN'"]),
    ("long-cell", lambda t: _rows(t, "n.csv", "r1,0,0.4,3.1,10," + "5" * 300_000), [], 2,
     ["column output_tokens", "(300,000 characters)"]),
    ("decimal-comma-with-one-point", _decimal_comma, [], 2,
     ["1 bad row(s)", "line 6 of the file", "value '1.500'"]),
    # --- damaged files: the reader's error, never "a bug" -------------------------------------
    ("truncated-gzip", lambda t: _bytes(t, "t.csv.gz", gzip.compress(BODY.encode())[:-500]), [], 2,
     ["damaged gzip file", "truncated or corrupt"]),
    ("truncated-bz2", lambda t: _bytes(t, "t.csv.bz2", bz2.compress(BODY.encode())[:-500]), [], 2,
     ["damaged bz2 file"]),
    ("corrupt-xz", lambda t: _bytes(t, "c.csv.xz", _corrupt(lzma.compress(BODY.encode()))), [], 2,
     ["damaged xz file"]),
    ("truncated-gzip-json", lambda t: _bytes(t, "t.json.gz", gzip.compress(
        (DATA / "vllm_bench_detailed.json").read_bytes())[:-40]), [], 2, ["damaged gzip file"]),
    ("json-nested-too-deep", lambda t: _text(t, "deep.json", "[" * 100_000 + "]" * 100_000), [], 2,
     ["nests its JSON deeper"]),
    ("jsonl-nested-too-deep", lambda t: _text(t, "deep.jsonl", "{}\n" + "[" * 100_000 + "\n"),
     [], 2, ["deep.jsonl"]),
    # --- JSON --------------------------------------------------------------------------------
    ("vllm-duplicate-key", lambda t: _vllm(t, "v.json", ', "duration": 1'), [], 2,
     ["names key 'duration' twice"]),
    ("aiperf-duplicate-key", lambda t: _text(
        t, "a.jsonl", (DATA / "aiperf_profile_export.jsonl").read_text(encoding="utf-8").replace(
            "{", '{"x": 1, "x": 2, ', 1)), [], 2, ["line 1", "names key 'x' twice"]),
    ("empty-json-object", lambda t: _text(t, "e.json", "{}"), [], 2, ["looked for"]),
    ("empty-json-list", lambda t: _text(t, "e.json", "[]"), [], 2, ["looked for"]),
    # --- file names, paths, directories ------------------------------------------------------
    ("newline-in-file-name", lambda t: _text(t, "a\nb.csv", HEADER + "\n"), [], 2,
     ["no data rows"]),
    ("symlink-loop", _symlink_loop, [], 2, ["symbolic link that leads to no file"]),
    ("glob-matching-nothing", lambda t: t / "*.nothing", [], 2, ["names no log"]),
    ("empty-directory", lambda t: _directory(t, "d"), [], 2, ["names no log"]),
    ("directory-every-file-bad", lambda t: _directory(t, "d", a_csv=HEADER + "\n", b_csv=""),
     ["--on-error", "report"], 2, ["none of its 2 file(s) could be read", "a.csv"]),
    ("directory-bad-file-raise", lambda t: _directory(t, "d", a_csv=_frame(), b_csv=HEADER + "\n"),
     [], 2, ["b.csv", "no data rows"]),
    # --- stream ------------------------------------------------------------------------------
    ("stream-json-export", lambda t: DATA / "vllm_bench_detailed.json", ["--stream"], 2,
     ["not a CSV or Parquet"]),
    ("stream-empty-file", lambda t: _text(t, "e.csv", ""), ["--stream"], 2, ["is empty"]),
    ("stream-missing-column", lambda t: _text(t, "m.csv", "request_id,start_ts\nr1,0\n"),
     ["--stream"], 2, ["lacks column(s) first_token_ts"]),
    ("stream-with-by", lambda t: DATA / "requests.csv", ["--stream", "--by", "source"], 2,
     ["--by does not go with --stream"]),
    ("stream-with-report", lambda t: DATA / "requests.csv", ["--stream", "--on-error", "report"], 2,
     ["--on-error report does not go with --stream"]),
    # --- options -----------------------------------------------------------------------------
    ("percentiles-word", lambda t: DATA / "requests.csv", ["--percentiles", "abc"], 2,
     ["--percentiles 'abc'", "(0, 100]"]),
    ("percentiles-zero", lambda t: DATA / "requests.csv", ["--percentiles", "0,50"], 2,
     ["'0' is not a percentile"]),
    ("percentiles-above-100", lambda t: DATA / "requests.csv", ["--percentiles", "50,101"], 2,
     ["'101'"]),
    ("percentiles-nan", lambda t: DATA / "requests.csv", ["--percentiles", "nan"], 2, ["'nan'"]),
    ("percentiles-twice", lambda t: DATA / "requests.csv", ["--percentiles", "50,50"], 2,
     ["twice"]),
    ("percentiles-empty-item", lambda t: DATA / "requests.csv", ["--percentiles", "50,,90"], 2,
     ["'' is not a percentile"]),
    ("slo-twice", lambda t: DATA / "requests.csv", ["--slo", "ttft=5ms,ttft=6ms"], 2,
     ["names ttft twice"]),
    ("slo-nan", lambda t: DATA / "requests.csv", ["--slo", "ttft=nan"], 2, ["--slo 'ttft=nan'"]),
    ("slo-inf", lambda t: DATA / "requests.csv", ["--slo", "ttft=inf"], 2, ["--slo 'ttft=inf'"]),
    ("slo-1e999", lambda t: DATA / "requests.csv", ["--slo", "ttft=1e999"], 2, ["--slo"]),
    ("slo-negative", lambda t: DATA / "requests.csv", ["--slo", "ttft=-1s"], 2, ["--slo"]),
    ("slo-hours", lambda t: DATA / "requests.csv", ["--slo", "ttft=1h"], 2, ["--slo 'ttft=1h'"]),
    ("slo-semicolons", lambda t: DATA / "requests.csv", ["--slo", "ttft=5ms;tpot=1ms"], 2,
     ["--slo"]),
    ("slo-only-commas", lambda t: DATA / "requests.csv", ["--slo", ",,,"], 2, ["names no target"]),
    ("unknown-option", lambda t: DATA / "requests.csv", ["--frobnicate"], 2,
     ["unrecognized arguments: --frobnicate"]),
    ("bad-time-unit", lambda t: DATA / "requests.csv", ["--time-unit", "hours"], 2,
     ["invalid choice: 'hours'"]),
    # --- diagnose ---------------------------------------------------------------------------
    ("diagnose-parquet-in-ms", lambda t: _parquet(t, "ms.parquet", _frame("ms")), ["@diagnose"], 2,
     ["do not look like seconds"]),
    ("diagnose-duplicate-header", lambda t: _rows(t, "d.csv", "r1,0,0.4,3.1,10,5,9",
                                                  header=HEADER + ",end_ts"), ["@diagnose"], 2,
     ["'end_ts' twice"]),
    ("diagnose-slo-twice", lambda t: DATA / "requests.csv",
     ["@diagnose", "--slo", "tpot=1s,tpot=2s"], 2, ["names tpot twice"]),
]  # fmt: skip


def _corrupt(data: bytes) -> bytes:
    damaged = bytearray(data)
    damaged[len(damaged) // 2] ^= 0xFF
    return bytes(damaged)


def _run(path: Path, extra: list[str], capsys) -> tuple[int, str, str]:
    command = "metrics"
    if "@diagnose" in extra:
        command, extra = "diagnose", [a for a in extra if a != "@diagnose"]
    try:
        code = main([command, str(path), *extra])
    except SystemExit as exit:  # argparse's own usage errors
        code = exit.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    ("builder", "extra", "code", "needles"), [b[1:] for b in BAD], ids=[b[0] for b in BAD]
)
def test_bad_input_is_refused_in_one_line(tmp_path, capsys, builder, extra, code, needles):
    path = builder(tmp_path)
    got, _, err = _run(path, extra, capsys)
    assert got == code, err
    lines = err.splitlines()
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1 and len(lines) == 1, err
    line = errors[0]
    assert "internal error" not in line and "This is a bug" not in line
    assert len(line) < 2000, f"{len(line)} characters"
    for needle in needles:
        assert needle in line, line


# (id, builder, extra arguments, substrings of stdout + stderr) — read, and what was assumed
# or set aside is said.
READ = [
    ("parquet-timestamp-us", lambda t: _stamps(t, "us.parquet", "us"), [],
     ["timestamp[us], read as seconds since 1970-01-01 UTC", "requests: 3"]),
    ("parquet-timestamp-ns", lambda t: _stamps(t, "ns.parquet", "ns"), [], ["timestamp[ns]"]),
    ("parquet-timestamp-ms-zone", lambda t: _stamps(t, "z.parquet", "ms", tz="Europe/Paris"), [],
     ["timestamp[ms, tz=Europe/Paris]"]),
    ("parquet-duration-ms", lambda t: _stamps(t, "d.parquet", "ms", kind="duration"), [],
     ["duration[ms], read as seconds"]),
    ("parquet-in-ms-told", lambda t: _parquet(t, "ms.parquet", _frame("ms")),
     ["--time-unit", "ms"], ["requests: 3"]),
    ("directory-report-keeps-good-files", lambda t: _directory(
        t, "d", a_csv=_frame(), b_csv=_frame(), c_csv=HEADER + "\n"), ["--on-error", "report"],
     ["2 file(s) read", "c.csv NOT READ", "warning: c.csv: file not read", "requests: 6"]),
    ("directory-report-one-in-ms", lambda t: _directory(t, "d", a_csv=_frame(), b_csv=_frame("ms")),
     ["--on-error", "report"], ["b.csv NOT READ", "do not look like seconds", "requests: 3"]),
    ("directory-other-files-said", lambda t: _directory(
        t, "d", a_csv=_frame(), b_parquet=_frame(), notes_json="{}"), [],
     ["1 other file(s) in the directory not read", "notes.json", "requests: 6"]),
    ("utf-16-json", lambda t: _text(t, "u.json", (DATA / "vllm_bench_detailed.json").read_text(
        encoding="utf-8"), "utf-16"), [], ["vllm log"]),
    ("parquet-decimal-counts", lambda t: _parquet(t, "d.parquet", _table(
        input_tokens=pa.array([10, 20], pa.decimal128(10, 2)))), [], ["requests: 2"]),
    ("percentiles", lambda t: DATA / "requests.csv", ["--percentiles", "50,99.9"], ["p99.9"]),
    ("future-timestamps", lambda t: _rows(
        t, "f.csv", "r1,32503680000,32503680000.4,32503680003.1,10,5"), [], ["requests: 1"]),
    ("negative-zero-start", lambda t: _rows(t, "z.csv", "r1,-0,0.4,3.1,10,5"), [], ["requests: 1"]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("builder", "extra", "needles"), [r[1:] for r in READ], ids=[r[0] for r in READ]
)
def test_input_that_can_be_read_is_read_saying_what_was_assumed(
    tmp_path, capsys, builder, extra, needles
):
    path = builder(tmp_path)
    code, out, err = _run(path, extra, capsys)
    assert code == 0, err
    for needle in needles:
        assert needle in out + err, out + err


def test_arrow_timestamps_are_converted_by_their_declared_unit(tmp_path):
    expected = read_requests(DATA / "requests.csv").requests
    for unit in ("s", "ms", "us", "ns"):
        log = read_requests(_stamps(tmp_path, f"{unit}.parquet", unit))
        ttft = (log.requests["first_token_ts"] - log.requests["start_ts"]).to_numpy()
        if unit != "s":  # whole seconds hold no TTFT of 0.42 s
            assert ttft == pytest.approx([0.42, 0.56, 0.48], abs=1e-6)
        assert log.requests["start_ts"].iloc[0] == pytest.approx(1_717_660_800.0)
        stored = "ms" if unit == "s" else unit  # Parquet has no timestamp[s]: pyarrow writes ms
        assert any(f"timestamp[{stored}]" in said for said in log.source.assumptions)
    durations = read_requests(_stamps(tmp_path, "d.parquet", "us", kind="duration")).requests
    assert durations["end_ts"].to_numpy() == pytest.approx(expected["end_ts"].to_numpy())
    # A DataFrame's datetime64 columns carry their unit too.
    frame = BASE.assign(**{c: pd.to_datetime(BASE[c] + 1.7e9, unit="s") for c in TIMES})
    log = read_requests(frame)
    assert (log.requests["end_ts"] - log.requests["start_ts"]).tolist() == pytest.approx(
        [3.10, 4.21, 2.52], abs=1e-6
    )
    # pandas' Arrow-backed columns (dtype_backend="pyarrow"), a missing end reported.
    ms = pa.duration("ms")
    arrow = BASE.assign(
        **{c: pd.Series(pa.array((BASE[c] * 1e3).round().astype("int64")).cast(ms),
                        dtype=pd.ArrowDtype(ms)) for c in TIMES}
    )  # fmt: skip
    arrow.loc[0, "end_ts"] = None
    log = read_requests(arrow, on_error="report")
    assert "duration[ms]" in log.source.assumptions[0]
    assert (log.requests["end_ts"] - log.requests["start_ts"]).tolist() == pytest.approx(
        [4.21, 2.52]
    )
    assert log.rejected["reason"].tolist() == ["missing end_ts"]
    with pytest.raises(ValueError, match="time_unit='ms' does not apply"):
        read_requests(arrow, time_unit="ms")


def test_parquet_is_held_to_the_same_seconds_rule_as_csv(tmp_path):
    for name, write in (("ms.csv", lambda p: _frame("ms").to_csv(p, index=False)),
                        ("ms.parquet", lambda p: _frame("ms").to_parquet(p))):  # fmt: skip
        write(tmp_path / name)
        with pytest.raises(LogError, match="time_unit='ms'"):
            read_requests(tmp_path / name)
        told = read_requests(tmp_path / name, time_unit="ms").requests
        assert told["end_ts"].tolist() == pytest.approx([3.10, 4.36, 2.92])


def test_report_mode_keeps_the_good_files_and_lists_the_bad_one(tmp_path):
    folder = _directory(tmp_path, "d", a_csv=_frame(), b_csv=_frame("ms"), c_csv=_frame())
    with pytest.raises(LogError, match=r"b\.csv"):
        read_requests(folder)
    log = read_requests(folder, on_error="report")
    assert len(log) == 6 and list(log.requests["source"].cat.categories) == ["a.csv", "c.csv"]
    whole = log.rejected[log.rejected["row"] == -1]
    assert whole["source"].tolist() == ["b.csv"]
    assert whole["reason"].iloc[0].startswith("file not read: ")
    assert any("b.csv NOT READ" in said for said in log.source.assumptions)


def test_rejected_values_are_quoted_as_the_file_writes_them(tmp_path):
    rows = ["r1,0,0.4,NaN,10,5", "r2,0,0.4,1e309,10,5", "r3,-0,0.4,3.1,10,-0"]
    path = _rows(tmp_path, "q.csv", *rows, "r4,0,0.4,3.1,10,5", '"r5",0,0.4,None,10,5')
    log = read_requests(path, on_error="report")
    assert log.rejected["value"].tolist() == ["NaN", "1e309", "-0", "None"]
    # A DataFrame has no text: its values are shown as Python writes them, never as ''.
    frame = BASE.assign(end_ts=[np.nan, None, -0.0])
    shown = read_requests(frame, on_error="report").rejected["value"].tolist()
    assert shown == ["nan", "nan", "-0.0"]


def test_a_million_column_header_is_refused_in_under_two_seconds(tmp_path):
    path = _text(tmp_path, "wide.csv", ",".join(f"c{i}" for i in range(10**6)) + "\n1\n")
    began = time.perf_counter()
    with pytest.raises(ValueError, match="header line has more than") as caught:
        read_requests(path)
    assert time.perf_counter() - began < 2.0
    assert len(str(caught.value)) < 300


def test_stream_json_is_one_json_document(tmp_path, capsys):
    failed = _rows(tmp_path, "f.csv", "r1,0,,,10,,failed", header=HEADER + ",status")
    for path in (DATA / "requests.csv", failed):
        assert main(["metrics", str(path), "--stream", "--json"]) == 0
        captured = capsys.readouterr()
        data = json.loads(captured.out)  # no comment line, no NaN
        assert "n_requests" in data and "# streamed" in captured.err
    assert data["ttft_s_p50"] is None


def test_stream_takes_the_time_unit_and_gives_the_numbers_summarize_gives(tmp_path, capsys):
    main(["metrics", str(DATA / "requests.csv"), "--json"])
    clean = json.loads(capsys.readouterr().out)
    assert main(["metrics", str(_ms_csv(tmp_path)), "--stream", "--json", "--time-unit", "ms"]) == 0
    streamed = json.loads(capsys.readouterr().out)
    assert streamed["ttft_s_p50"] == pytest.approx(clean["ttft_s_p50"])
    stamps = _stamps(tmp_path, "ts.parquet", "ns")
    assert main(["metrics", str(stamps), "--stream", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["e2e_s_max"] == pytest.approx(4.21, abs=1e-6)


def test_files_stored_differently_read_the_same(tmp_path, capsys):
    main(["metrics", str(DATA / "requests.csv"), "--json"])
    clean = json.loads(capsys.readouterr().out)
    variants = {
        "cr.csv": CLEAN.replace("\n", "\r").encode(),
        "mixed.csv": CLEAN.replace("\n", "\r\n", 2).encode(),
        "utf16-crlf.csv": CLEAN.replace("\n", "\r\n").encode("utf-16"),
        "utf32.csv": CLEAN.encode("utf-32"),
        "bom-tabs.csv": codecs.BOM_UTF8 + CLEAN.replace(",", "\t").encode(),
        "bz2.csv": bz2.compress(CLEAN.encode()),
        "xz.csv": lzma.compress(CLEAN.encode()),
    }
    for name, data in variants.items():
        assert main(["metrics", str(_bytes(tmp_path, name, data)), "--json"]) == 0, name
        assert json.loads(capsys.readouterr().out) == clean, name


def test_parse_percentiles():
    assert parse_percentiles("50, 90,99.9") == (50.0, 90.0, 99.9)
    for text in ("", "abc", "0", "100.5", "-1", "1e2", "nan", "inf", "50,50"):
        with pytest.raises(ValueError, match="--percentiles"):
            parse_percentiles(text)


def test_rejected_file_of_a_directory_or_glob_names_each_row_and_line(tmp_path, capsys):
    bad = HEADER + "\nr1,0,0.4,3.1,10,5\n\nr2,0,0.4,NaN,10,5\n"
    folder = _directory(tmp_path, "d", a_csv=_frame(), b_csv=bad, c_csv=HEADER + "\n")
    for source in (folder, folder / "*.csv"):
        out = tmp_path / "rejected.csv"
        assert main(["metrics", str(source), "--rejected", str(out)]) == 0
        assert "warning: c.csv: file not read" in capsys.readouterr().err
        table = pd.read_csv(out, keep_default_na=False)
        row = table[table["source"] == "b.csv"].iloc[0]
        assert (row["row"], row["line"], row["value"]) == (1, "4", "NaN")  # c.csv: no line
        assert table[table["source"] == "c.csv"]["row"].tolist() == [-1]


def test_one_bad_row_at_the_end_of_a_long_file_is_named_with_its_line(tmp_path, capsys):
    n = 200_000
    rows = "".join(f"r{i},{i * 1e-3:.3f},{i * 1e-3 + 0.4:.3f},{i * 1e-3 + 3.1:.3f},10,5\n"
                   for i in range(n - 1))  # fmt: skip
    path = _text(tmp_path, "long.csv", HEADER + "\n" + rows + f"r{n - 1},1,1.4,NaN,10,5\n")
    code, _, err = _run(path, [], capsys)
    assert code == 2
    assert f"row {n - 1} (line {n + 1} of the file), column end_ts, value 'NaN'" in err
    code, out, err = _run(path, ["--on-error", "report"], capsys)
    assert code == 0 and f"requests: {n - 1} " in out
    assert "1 row(s) rejected" in err


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: read_requests(DATA / "requests.csv", time_unit=["ms"]), r"time_unit=\['ms'\]"),
        (lambda: read_requests(pd.DataFrame({f"c{i}": [1] for i in range(3000)})), "2,970 more"),
        (lambda: read_requests(BASE, time_unit="hours"), "time_unit='hours' is not known"),
    ],
)
def test_api_errors_name_the_parameter_and_stay_short(call, match):
    with pytest.raises(ValueError, match=match) as caught:
        call()
    assert len(str(caught.value)) < 600
