"""Reading request logs: the article's CSV, every kind of bad row, failed requests, importers."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from llminfer import ARTICLE_COLUMNS, read_requests, summarize
from llminfer.logs.importers import detect_format

DATA = Path(__file__).parent.parent / "data"
# The article's requests.csv (chapter 6), exactly.
ARTICLE = pd.DataFrame(
    {
        "request_id": ["r1", "r2", "r3"],
        "start_ts": [0.00, 0.15, 0.40],
        "first_token_ts": [0.42, 0.71, 0.88],
        "end_ts": [3.10, 4.36, 2.92],
        "input_tokens": [1024, 4096, 512],
        "output_tokens": [80, 96, 64],
    }
)


def test_the_article_csv_loads_exactly():
    log = read_requests(DATA / "requests.csv")
    assert list(log.requests.columns[:6]) == list(ARTICLE_COLUMNS)
    pd.testing.assert_frame_equal(log.requests[list(ARTICLE_COLUMNS)], ARTICLE)
    assert list(log.requests["status"]) == ["ok"] * 3
    assert log.rejected.empty and log.source.format == "csv"


def test_a_dataframe_loads_and_keeps_extra_columns():
    frame = ARTICLE.assign(preemptions=[0, 2, 1], cached_prefix_tokens=[0, 512, 0])
    log = read_requests(frame)
    assert list(log.requests["preemptions"]) == [0, 2, 1]
    assert list(log.requests["cached_prefix_tokens"]) == [0, 512, 0]
    assert log.source.format == "dataframe"


def test_a_log_never_aliases_its_input_and_can_be_edited(tmp_path):
    frame = ARTICLE.astype({"input_tokens": "int32"})
    log = read_requests(frame)
    assert log.requests["input_tokens"].dtype == np.int64
    frame.loc[0, "start_ts"] = 99.0  # the caller's frame changes; the log does not
    frame.loc[0, "output_tokens"] = 7
    assert log.requests.loc[0, "start_ts"] == 0.0 and log.requests.loc[0, "output_tokens"] == 80
    path = tmp_path / "requests.csv"
    ARTICLE.to_csv(path, index=False)
    from_file = read_requests(path)  # the reader's own frame: its arrays are kept, writable
    from_file.requests.loc[0, "end_ts"] = 3.5
    from_file.requests.loc[0, "output_tokens"] = 81
    assert from_file.requests.loc[0, ["end_ts", "output_tokens"]].tolist() == [3.5, 81]


def _bad(**changes):
    """The article's rows with row 1 (r2) changed."""
    frame = ARTICLE.astype(object).copy()
    for column, value in changes.items():
        frame.loc[1, column] = value
    return frame


@pytest.mark.parametrize(
    ("changes", "column", "reason"),
    [
        ({"end_ts": None}, "end_ts", "missing end_ts"),
        ({"end_ts": np.nan}, "end_ts", "missing end_ts"),
        ({"end_ts": "nan"}, "end_ts", "missing end_ts"),
        ({"first_token_ts": "abc"}, "first_token_ts", "first_token_ts is not a number"),
        ({"start_ts": np.inf}, "start_ts", "start_ts is not finite"),
        ({"output_tokens": -5}, "output_tokens", "output_tokens is negative"),
        ({"input_tokens": -1}, "input_tokens", "input_tokens is negative"),
        (
            {"output_tokens": 1e20},
            "output_tokens",
            "output_tokens is too large to be a token count",
        ),
        ({"output_tokens": 12.5}, "output_tokens", "output_tokens is not a whole number"),
        ({"output_tokens": 0}, "output_tokens", "output_tokens >= 1"),
        ({"first_token_ts": 0.10}, "first_token_ts", "first_token_ts is before start_ts"),
        ({"end_ts": 0.70}, "end_ts", "end_ts is before first_token_ts"),
        ({"request_id": "r1"}, "request_id", "duplicate request_id"),
        ({"request_id": None}, "request_id", "missing request_id"),
        ({"request_id": ""}, "request_id", "missing request_id"),
    ],
)
def test_every_kind_of_bad_row_raises_or_is_reported(changes, column, reason):
    frame = _bad(**changes)
    with pytest.raises(ValueError, match=f"row 1.*column {column}.*{reason}"):
        read_requests(frame)
    log = read_requests(frame, on_error="report")
    assert list(log.requests["request_id"]) == ["r1", "r3"]
    assert list(log.rejected["row"]) == [1]
    assert log.rejected.loc[0, "column"] == column
    assert reason in log.rejected.loc[0, "reason"]


def test_the_bad_rows_file_rejects_eight_rows_with_reasons_and_keeps_the_rest():
    with pytest.raises(ValueError, match=r"8 bad row\(s\).*line 5 of the file.*end_ts"):
        read_requests(DATA / "requests_bad.csv")
    log = read_requests(DATA / "requests_bad.csv", on_error="report")
    assert list(log.requests["request_id"]) == ["r1", "r2", "r3", "r11"]
    assert log.rejected["row"].tolist() == [3, 4, 5, 6, 7, 8, 9, 10]
    assert log.rejected.loc[1, "value"] == "abc"
    assert list(log.rejected.columns) == ["row", "column", "value", "reason"]
    # r11 failed without timestamps or output count: kept, counted, out of latency statistics.
    assert log.n_failed == 1
    assert any("no output_tokens; counted as 0" in a for a in log.source.assumptions)
    s = summarize(log)
    assert (s.n_requests, s.n_failed) == (4, 1)
    assert s.to_dict()["ttft_s_p95"] == pytest.approx(0.552)


def test_a_missing_column_is_an_error_naming_it():
    with pytest.raises(ValueError, match=r"lacks column.*first_token_ts"):
        read_requests(ARTICLE.drop(columns="first_token_ts"), on_error="report")


def test_bad_arguments_name_parameter_and_allowed_values():
    with pytest.raises(ValueError, match=r"format='excel'.*csv"):
        read_requests(ARTICLE, format="excel")
    with pytest.raises(ValueError, match="on_error='ignore'"):
        read_requests(ARTICLE, on_error="ignore")
    with pytest.raises(ValueError, match="no such file"):
        read_requests(DATA / "missing.csv")
    with pytest.raises(ValueError, match="source=42"):
        read_requests(42)


def test_status_and_error_columns_mark_failed_requests():
    frame = ARTICLE.assign(status=["ok", "FAILED", "ok"], error=["", "", "timeout"])
    log = read_requests(frame)
    assert list(log.requests["status"]) == ["ok", "failed", "failed"]
    bad = ARTICLE.assign(status=["ok", "maybe", "ok"])
    with pytest.raises(ValueError, match="status must be 'ok' or 'failed'"):
        read_requests(bad)


def test_a_failed_request_may_lack_its_timestamps_but_not_its_start():
    frame = ARTICLE.astype(object).assign(status=["ok", "failed", "ok"])
    frame.loc[1, ["first_token_ts", "end_ts", "output_tokens"]] = None
    assert read_requests(frame).n_failed == 1
    frame.loc[1, "start_ts"] = None
    with pytest.raises(ValueError, match="missing start_ts"):
        read_requests(frame)


def test_token_ts_arrays_and_lists_break_the_same_rules_in_the_same_order():
    # 1-D numeric arrays are checked all at once, anything else row by row: the same verdicts
    start = ARTICLE["start_ts"].iloc[0]
    end = ARTICLE["end_ts"].iloc[0]
    cells = [
        [start + 0.1, start + 0.2],  # fine
        [],  # no token
        [start + 0.2, np.nan, start + 0.1],  # not finite (before: decreasing)
        [start + 0.3, start + 0.2],  # decreasing
        [start - 1.0, start + 0.2],  # before the start
        [start + 0.1, end + 1.0],  # after the end
        [np.inf, np.inf],  # not finite
    ]
    frame = pd.concat([ARTICLE.iloc[:1]] * len(cells), ignore_index=True)
    frame["request_id"] = [f"r{i}" for i in range(len(cells))]
    verdicts = []
    for make in (list, lambda c: np.asarray(c, dtype=float), lambda c: np.asarray(c, "float32")):
        log = read_requests(frame.assign(token_ts=[make(c) for c in cells]), on_error="report")
        verdicts.append(log.rejected.set_index("row")["reason"].to_dict())
    assert verdicts[0] == verdicts[1] == verdicts[2], verdicts
    assert verdicts[0] == {
        1: "token_ts must hold finite times",
        2: "token_ts must hold finite times",
        3: "token_ts must not decrease",
        4: "token_ts must lie between start_ts and end_ts",
        5: "token_ts must lie between start_ts and end_ts",
        6: "token_ts must hold finite times",
    }


def test_scheduled_ts_must_lie_between_start_and_first_token():
    frame = ARTICLE.assign(scheduled_ts=[0.1, 0.8, 0.5])
    with pytest.raises(ValueError, match=r"row 1.*scheduled_ts is after first_token_ts"):
        read_requests(frame)


def test_token_ts_must_not_decrease_and_lie_in_the_request():
    frame = ARTICLE.iloc[:1].assign(token_ts=[np.array([0.42, 1.0, 0.9, 3.10])])
    with pytest.raises(ValueError, match="token_ts must not decrease"):
        read_requests(frame)
    frame = ARTICLE.iloc[:1].assign(token_ts=[np.array([0.42, 1.0, 3.5])])
    with pytest.raises(ValueError, match="between start_ts and end_ts"):
        read_requests(frame)


def test_token_ts_in_a_csv_is_space_separated(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text(
        "request_id,start_ts,first_token_ts,end_ts,input_tokens,output_tokens,token_ts\n"
        "a,0,1.0,1.3,10,4,1.0 1.1 1.2 1.3\n"
    )
    log = read_requests(path)
    np.testing.assert_allclose(log.requests.loc[0, "token_ts"], [1.0, 1.1, 1.2, 1.3])


# --- importers: each against its synthetic sample (scripts/make_sample_logs.py) -------------

SAMPLES = {
    "vllm_bench_detailed.json": "vllm",
    "genai_perf_profile_export.json": "genai-perf",
    "aiperf_profile_export.jsonl": "aiperf",
    "llmperf_individual_responses.json": "llmperf",
    "requests.csv": "csv",
}


@pytest.mark.parametrize(("name", "fmt"), SAMPLES.items())
def test_formats_are_detected(name, fmt):
    assert detect_format(DATA / name) == fmt
    assert read_requests(DATA / name).source.format == fmt


@pytest.mark.parametrize("name", [n for n in SAMPLES if n != "requests.csv"])
def test_every_importer_reads_the_same_six_requests(name):
    log = read_requests(DATA / name)
    assert len(log) == 6 and log.n_failed == 1
    assert log.requests.loc[4, "status"] == "failed"  # the sample's HTTP 500
    ok = log.ok
    # Sample stream: request i has 6 + 2i one-token chunks and 200 + 150 i input tokens.
    assert list(ok["output_tokens"]) == [6, 8, 10, 12, 16]
    assert list(ok["input_tokens"]) == [200, 350, 500, 650, 950]
    assert log.source.assumptions  # every importer says what it assumed


def test_importers_agree_on_latencies():
    ttft = {}
    for name in SAMPLES:
        if name == "requests.csv":
            continue
        m = summarize(read_requests(DATA / name)).table
        ttft[name] = m.loc[["ttft_s", "tpot_s", "e2e_s"], "mean"].to_numpy()
    values = list(ttft.values())
    for other in values[1:]:
        np.testing.assert_allclose(other, values[0], rtol=1e-6)


def test_vllm_start_times_are_monotonic_and_genai_perf_skips_empty_events():
    vllm = read_requests(DATA / "vllm_bench_detailed.json")
    assert "perf_counter" in " ".join(vllm.source.assumptions)
    assert vllm.requests.loc[0, "start_ts"] == 100.0
    genai = read_requests(DATA / "genai_perf_profile_export.json")
    # The role-only event 4 ms before the first content is not the first token.
    np.testing.assert_allclose(
        genai.requests["first_token_ts"], vllm.requests["first_token_ts"], atol=1e-9
    )
    assert len(genai.requests.loc[0, "token_ts"]) == 6


def test_llmperf_says_start_times_are_assumed():
    log = read_requests(DATA / "llmperf_individual_responses.json")
    assert (log.requests["start_ts"] == 0).all()
    assert "no request start times" in log.source.assumptions[0]
    assert not log.source.starts_known


def test_unrecognised_json_is_an_error(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{"hello": 1}')
    with pytest.raises(ValueError, match="not a format llminfer knows"):
        read_requests(path)
    with pytest.raises(ValueError, match="is not vllm output"):
        read_requests(path, format="vllm")


# Cells that pyarrow's reader (the fast path for the article's columns) and pandas' reader
# might take differently: each must load, or be rejected, exactly as pandas' path does.
ODD_CELLS = [
    ("request_id", ""),
    ("request_id", "NA"),
    ("request_id", "null"),
    ("request_id", "r1"),  # a duplicate of row 0
    ("request_id", '"r9\nr10"'),  # a quoted line break
    ("request_id", "007"),
    ("start_ts", ""),
    ("start_ts", "nan"),
    ("start_ts", "NaN"),
    ("start_ts", "inf"),
    ("start_ts", "-inf"),
    ("start_ts", "Infinity"),
    ("start_ts", " 0.4"),
    ("start_ts", "0.4 "),
    ("start_ts", "1e-1"),
    ("start_ts", "+0.4"),
    ("start_ts", ".4"),
    ("start_ts", "0x1"),
    ("start_ts", "1_0"),
    ("start_ts", "fast"),
    ("start_ts", "True"),
    ("output_tokens", "64.0"),
    ("output_tokens", "64.5"),
    ("output_tokens", "-64"),
    ("output_tokens", "NA"),
    ("output_tokens", "1e2"),
    # A count beyond 2**53 is reported as too large by both paths.
    pytest.param(
        "output_tokens",
        "99999999999999999999",
        marks=pytest.mark.filterwarnings("ignore:invalid value encountered in cast"),
    ),
    ("output_tokens", "+64"),
    ("output_tokens", "064"),
    ("output_tokens", " 64"),
]


@pytest.mark.parametrize("whole_times", [False, True])
@pytest.mark.parametrize(("column", "cell"), ODD_CELLS)
def test_the_fast_csv_path_reads_exactly_what_pandas_reads(
    tmp_path, monkeypatch, column, cell, whole_times
):
    from llminfer.logs import logfile

    text = (DATA / "requests.csv").read_text(encoding="utf-8").splitlines()
    if whole_times:  # "3" where the article has "3.10": pandas reads such a column as int64
        text = [text[0], "r1,0,1,3,1024,80", "r2,1,2,4,4096,96", "r3,2,1,5,512,64"]
    header = text[0].split(",")
    fields = text[3].split(",")
    fields[header.index(column)] = cell
    path = tmp_path / "requests.csv"
    path.write_text("\n".join([*text[:3], ",".join(fields)]) + "\n", encoding="utf-8")

    def load():
        try:
            log = read_requests(path, on_error="report")
        except ValueError as error:
            return str(error)
        return log.requests, log.rejected, log.source

    fast = load()
    monkeypatch.setattr(logfile, "_read_article_csv", lambda path: None)
    slow = load()
    if isinstance(slow, str):
        assert fast == slow
        return
    pd.testing.assert_frame_equal(fast[0], slow[0])
    pd.testing.assert_frame_equal(fast[1], slow[1])
    assert fast[2] == slow[2]


def test_the_fast_csv_path_is_taken_for_the_article_columns():
    from llminfer.logs import logfile

    frame = logfile._read_article_csv(DATA / "requests.csv")
    assert frame is not None and list(frame.columns) == list(ARTICLE_COLUMNS)
