"""Issue 11: every class of bad input gives exit 2 and exactly one ``error:`` line on stderr
naming the file (and, where it applies, row, line, column and value) — never a traceback.
Files that are only stored differently (gzip, UTF-16 with a byte-order mark, semicolons, tabs,
decimal commas) are read, with the same numbers as the plain CSV."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pandas as pd
import pytest

from llminfer.cli import main

DATA = Path(__file__).parent.parent / "data"
CLEAN = (DATA / "requests.csv").read_text(encoding="utf-8")
HEADER = CLEAN.splitlines()[0]


def _text(tmp: Path, name: str, text: str, encoding: str = "utf-8") -> Path:
    path = tmp / name
    path.write_bytes(text.encode(encoding))
    return path


def _bytes(tmp: Path, name: str, data: bytes) -> Path:
    path = tmp / name
    path.write_bytes(data)
    return path


def _scaled(tmp: Path, name: str, factor: float, integer: bool = False) -> Path:
    frame = pd.read_csv(DATA / "requests.csv")
    for column in ("start_ts", "first_token_ts", "end_ts"):
        frame[column] = frame[column] * factor
        if integer:
            frame[column] = frame[column].round().astype("int64")
    path = tmp / name
    frame.to_csv(path, index=False)
    return path


def _json(tmp: Path, name: str, data) -> Path:
    path = tmp / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _vllm_itls_number(tmp: Path) -> Path:
    data = json.loads((DATA / "vllm_bench_detailed.json").read_text(encoding="utf-8"))
    data["itls"][0] = 0.5  # a number where vLLM writes a list of gaps
    return _json(tmp, "vllm_itls.json", data)


def _parquet(tmp: Path) -> Path:
    path = tmp / "log.csv"
    pd.read_csv(DATA / "requests.csv").to_parquet(path)
    return path


def _xlsx_like(tmp: Path) -> Path:
    path = tmp / "log.csv"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("xl/workbook.xml", "<workbook/>")
    return path


# (id, builder(tmp) -> path, extra arguments, substrings the error line must hold)
BAD = [
    ("empty", lambda t: _text(t, "e.csv", ""), [], ["is empty"]),
    ("blank-lines-only", lambda t: _text(t, "b.csv", "\n  \n\n"), [], ["only blank lines"]),
    ("header-only", lambda t: _text(t, "h.csv", HEADER + "\n"), [], ["no data rows"]),
    ("directory", lambda t: (t / "d.csv").mkdir() or t / "d.csv", [], ["names no log"]),
    ("no-such-file", lambda t: t / "nothere.csv", [], ["no such file"]),
    (
        "latin-1",
        lambda t: _text(t, "l.csv", HEADER + "\ncafé,0,0.4,3.1,10,5\n", "latin-1"),
        [],
        ["not UTF-8", "line 2", "0xe9"],
    ),
    (
        "utf-16-without-bom",
        lambda t: _text(t, "u.csv", CLEAN, "utf-16-le"),
        [],
        ["UTF-16 text without a byte-order mark"],
    ),
    ("binary-nul", lambda t: _bytes(t, "x.csv", bytes(range(256)) * 4), [], ["NUL bytes"]),
    ("binary-no-nul", lambda t: _bytes(t, "y.csv", bytes(range(128, 256)) * 8), [], ["UTF-8"]),
    ("parquet read as csv", _parquet, ["--format", "csv"], ["Parquet"]),
    ("zip-or-xlsx", _xlsx_like, [], ["ZIP archive"]),
    (
        "broken-gzip",
        lambda t: _bytes(t, "g.csv", gzip.compress(CLEAN.encode())[:12]),
        [],
        ["gzip"],
    ),
    (
        "ragged-row",
        lambda t: _text(t, "r.csv", CLEAN + "r4,1,2,3,10,5,extra\n"),
        [],
        ["line 5 has 7 cells", "header has 6"],
    ),
    (
        "missing-column",
        lambda t: _text(t, "m.csv", "request_id,start_ts\nr1,0\n"),
        [],
        ["lacks column(s) first_token_ts"],
    ),
    (
        "misnamed-column",
        lambda t: _text(t, "n.csv", CLEAN.replace("start_ts", "Start_TS", 1)),
        [],
        ["lacks column(s) start_ts", "'Start_TS' would be 'start_ts'"],
    ),
    (
        # Blank lines and a quoted line break before the bad row: its line is 6, not row + 2 = 3.
        "bad-row-after-blank-lines",
        lambda t: _text(
            t,
            "q.csv",
            HEADER + '\n\n"r\n1",0,0.4,3.1,10,5\n\nr2,0,0.5,0.1,10,5\n',
        ),
        [],
        ["row 1 (line 6 of the file)", "column end_ts", "value '0.1'", "--on-error report"],
    ),
    (
        "hex-count",
        lambda t: _text(t, "x16.csv", HEADER + "\nr1,0,0.4,3.1,0x10,5\n"),
        [],
        ["row 0 (line 2 of the file)", "column input_tokens", "value '0x10'", "not a number"],
    ),
    (
        "count-above-2**53",
        lambda t: _text(t, "big.csv", HEADER + "\nr1,0,0.4,3.1,9007199254740993,5\n"),
        [],
        ["column input_tokens", "too large"],
    ),
    (
        "blank-id",
        lambda t: _text(t, "id.csv", HEADER + "\n   ,0,0.4,3.1,10,5\n"),
        [],
        ["row 0", "column request_id", "missing request_id"],
    ),
    (
        "status-word",
        lambda t: _text(t, "st.csv", HEADER + ",status\nr1,0,0.4,3.1,10,5,maybe\n"),
        [],
        ["column status", "value 'maybe'"],
    ),
    ("milliseconds", lambda t: _scaled(t, "ms.csv", 1e3), [], ["--time-unit ms", "median TPOT"]),
    (
        "epoch-nanoseconds",
        lambda t: _scaled(t, "ns.csv", 1e9, integer=True) if False else _epoch_ns(t),
        [],
        ["--time-unit", "row 0, column start_ts"],
    ),
    (
        "all-rows-rejected-in-report-mode",
        lambda t: _text(t, "all.csv", HEADER + "\nr1,0,0.4,0.1,10,5\nr2,x,0.4,3.1,10,5\n"),
        ["--on-error", "report"],
        ["no valid request remains", "all 2 row(s)"],
    ),
    (
        "forced-llmperf-on-genai-perf-json",
        lambda t: (
            shutil.copy(DATA / "genai_perf_profile_export.json", t / "g.json") and t / "g.json"
        ),
        ["--format", "llmperf"],
        ["llmperf"],
    ),
    (
        "forced-genai-perf-on-llmperf-json",
        lambda t: (
            shutil.copy(DATA / "llmperf_individual_responses.json", t / "l.json") and t / "l.json"
        ),
        ["--format", "genai-perf"],
        ["genai-perf"],
    ),
    (
        "forced-aiperf-on-vllm-json",
        lambda t: shutil.copy(DATA / "vllm_bench_detailed.json", t / "v.json") and t / "v.json",
        ["--format", "aiperf"],
        ["is not aiperf output"],
    ),
    (
        "forced-vllm-on-llmperf-json",
        lambda t: (
            shutil.copy(DATA / "llmperf_individual_responses.json", t / "l2.json") and t / "l2.json"
        ),
        ["--format", "vllm"],
        ["vLLM"],
    ),
    ("vllm-itls-a-number", _vllm_itls_number, [], ["vllm"]),
    (
        "llmperf-records-not-objects",
        lambda t: _json(t, "lp.json", [1, 2]),
        ["--format", "llmperf"],
        [],
    ),
    ("unrecognised-json", lambda t: _json(t, "u.json", {"hello": 1}), [], ["looked for"]),
    ("not-json", lambda t: _text(t, "bad.json", "{not json"), [], ["not valid JSON"]),
    ("csv-as-vllm", lambda t: _text(t, "c.csv", CLEAN), ["--format", "vllm"], ["JSON"]),
    ("bad-slo", lambda t: _text(t, "s.csv", CLEAN), ["--slo", "ttft=0ms"], ["--slo"]),
]


def _epoch_ns(tmp: Path) -> Path:
    frame = pd.read_csv(DATA / "requests.csv")
    for column in ("start_ts", "first_token_ts", "end_ts"):
        frame[column] = ((frame[column] + 1_717_660_800) * 1e9).round().astype("int64")
    path = tmp / "epoch_ns.csv"
    frame.to_csv(path, index=False)
    return path


def _run(path: Path, extra: list[str], capsys) -> tuple[int, str, str]:
    command = "metrics"
    if "@diagnose" in extra:
        command, extra = "diagnose", [a for a in extra if a != "@diagnose"]
    code = main([command, str(path), *extra])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    ("builder", "extra", "needles"), [b[1:] for b in BAD], ids=[b[0] for b in BAD]
)
def test_bad_input_exits_2_with_one_error_line_naming_the_file(
    tmp_path, capsys, builder, extra, needles
):
    path = builder(tmp_path)
    code, _, err = _run(path, extra, capsys)
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 2, err
    assert len(errors) == 1, err
    assert "Traceback" not in err
    line = errors[0]
    assert str(path) in line or path.name in line
    for needle in needles:
        assert needle in line, line
    assert "on_error=" not in line and "time_unit=" not in line  # the CLI's own words


def _summary(path: Path, capsys, *extra: str) -> dict:
    assert main(["metrics", str(path), "--json", *extra]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


GOOD = [
    ("gzip", lambda t: _bytes(t, "g.csv", gzip.compress(CLEAN.encode()))),
    ("utf-16-with-bom", lambda t: _text(t, "u.csv", CLEAN, "utf-16")),
    ("utf-8-with-bom", lambda t: _text(t, "b.csv", CLEAN, "utf-8-sig")),
    ("semicolons", lambda t: _text(t, "s.csv", CLEAN.replace(",", ";"))),
    ("tabs", lambda t: _text(t, "t.csv", CLEAN.replace(",", "\t"))),
    (
        "semicolons-and-decimal-commas",
        lambda t: _text(t, "d.csv", CLEAN.replace(",", ";").replace(".", ",")),
    ),
    ("crlf-and-blank-lines", lambda t: _text(t, "c.csv", CLEAN.replace("\n", "\r\n\r\n"))),
]


@pytest.mark.parametrize("builder", [g[1] for g in GOOD], ids=[g[0] for g in GOOD])
def test_files_stored_differently_give_the_article_numbers(tmp_path, capsys, builder):
    clean = _summary(DATA / "requests.csv", capsys)
    other = _summary(builder(tmp_path), capsys)
    assert other == clean


def test_time_unit_converts_milliseconds_and_nanoseconds(tmp_path, capsys):
    clean = _summary(DATA / "requests.csv", capsys)
    assert _summary(_scaled(tmp_path, "ms.csv", 1e3), capsys, "--time-unit", "ms") == pytest.approx(
        clean
    )
    ns = _scaled(tmp_path, "ns.csv", 1e9, integer=True)
    assert _summary(ns, capsys, "--time-unit", "ns") == pytest.approx(clean)
    assert clean["ttft_s_p50"] == pytest.approx(0.48)  # the article: TTFTs 0.42, 0.56, 0.48 s


def test_report_mode_counts_by_reason_shows_ten_rows_and_writes_all_to_a_file(tmp_path, capsys):
    lines = [HEADER] + [f"ok{i},0,0.4,3.1,10,5" for i in range(3)]
    lines += [f"bad{i},0,0.4,0.1,10,5" for i in range(300)]  # end before first token
    lines += [f"neg{i},0,0.4,3.1,-1,5" for i in range(200)]
    log = _text(tmp_path, "many.csv", "\n".join(lines) + "\n")
    rejected = tmp_path / "out" / "rejected.csv"
    code = main(["metrics", str(log), "--on-error", "report", "--rejected", str(rejected)])
    err = capsys.readouterr().err
    assert code == 0
    assert "500 row(s) rejected (500 problem(s)) by reason:" in err
    assert "     300  end_ts is before first_token_ts" in err
    assert "     200  input_tokens is negative" in err
    assert "first 10:" in err and len(err.splitlines()) < 25
    written = pd.read_csv(rejected)
    assert len(written) == 500 and list(written.columns) == [
        "row",
        "line",
        "column",
        "value",
        "reason",
    ]
    assert written.loc[0, "row"] == 3 and written.loc[0, "line"] == 5
    # --rejected alone implies report mode.
    assert main(["metrics", str(log), "--rejected", str(tmp_path / "r2.csv")]) == 0


def test_debug_shows_the_traceback_and_still_one_error_line(tmp_path):
    path = _text(tmp_path, "h.csv", HEADER + "\n")
    run = subprocess.run(
        [sys.executable, "-m", "llminfer", "metrics", str(path), "--debug"],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 2 and "Traceback" in run.stderr
    assert sum(line.startswith("error:") for line in run.stderr.splitlines()) == 1
    quiet = subprocess.run(
        [sys.executable, "-m", "llminfer", "metrics", str(path)], capture_output=True, text=True
    )
    assert quiet.returncode == 2 and quiet.stderr.startswith("error: ")
    assert quiet.stderr.count("\n") == 1 and "Traceback" not in quiet.stderr


def test_an_internal_error_is_one_line_asking_for_debug(monkeypatch, capsys):
    import llminfer.cli as cli

    def broken(*args, **kwargs):
        raise KeyError("boom")

    monkeypatch.setattr(cli, "summarize", broken)
    assert main(["metrics", str(DATA / "requests.csv")]) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and "internal error" in err and "--debug" in err
    assert str(DATA / "requests.csv") in err


def test_a_csv_log_with_any_suffix_is_read_by_its_content(tmp_path, capsys):
    path = _text(tmp_path, "log.txt", CLEAN)
    code, out, err = _run(path, [], capsys)
    assert code == 0, err
    assert "requests" in out


def test_diagnose_on_a_log_whose_requests_all_failed_says_so_without_a_traceback(tmp_path, capsys):
    rows = "".join(f"r{i},{i},,,10,,failed\n" for i in range(30))
    path = _text(tmp_path, "f.csv", HEADER + ",status\n" + rows)
    code, out, err = _run(path, ["@diagnose"], capsys)
    assert "Traceback" not in err and "error:" not in err
    assert code == 1  # a problem: every request failed
    assert "fail" in out.splitlines()[1 + out.startswith("#")].lower() or "failures" in out
    few = _text(tmp_path, "g.csv", HEADER + ",status\nr1,0,,,10,,failed\nr2,1,,,10,,failed\n")
    code, out, err = _run(few, ["@diagnose"], capsys)
    assert code == 3 and "not enough data" in out and "Traceback" not in err
