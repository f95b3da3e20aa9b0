"""Importers against fixtures mirroring each tool's schema versions (tests/fixtures/, written by
scripts/make_tool_fixtures.py, which cites each tool's source for fields and formulas): every
file loads or is refused with a reason, and llminfer reproduces each tool's own summary within
0.5 % where the definitions agree; compare_definitions names where they do not."""

import gzip
import json
import math
import shutil

import numpy as np
import pandas as pd
import pytest

from llminfer import compare_definitions, read_requests, read_summary, summarize
from llminfer.importers import ExportError, detect_format
from llminfer.metrics import in_flight
from tests.test_logs import DATA

FIX = DATA.parent / "tests" / "fixtures"

FORMATS = {
    "vllm_2024_benchmark_serving.json": "vllm",
    "vllm_2026_bench_serve_detailed.json": "vllm",
    "vllm_bench_serve_no_detailed.json": "vllm",
    "sglang_bench_serving_details.jsonl": "sglang",
    "sglang_bench_serving_summary.jsonl": "sglang",
    "aiperf_profile_export.jsonl": "aiperf",
    "aiperf_v0_1_profile_export.jsonl": "aiperf",
    "aiperf_profile_export_aiperf.json": "aiperf",
    "llama_550_150_individual_responses.json": "llmperf",
    "llama_550_150_summary.json": "llmperf",
    "guidellm_v0_3_benchmarks.json": "guidellm",
    "guidellm_v0_4_benchmarks.json": "guidellm",
}
SUMMARY_ONLY = {
    "vllm_bench_serve_no_detailed.json": "--save-detailed",
    "sglang_bench_serving_summary.jsonl": "--output-details",
    "aiperf_profile_export_aiperf.json": "no per-request records",
    "llama_550_150_summary.json": "individual_responses",
}


@pytest.mark.parametrize(("name", "fmt"), FORMATS.items())
def test_detected_by_content_even_under_another_name(name, fmt, tmp_path):
    assert detect_format(FIX / name) == fmt
    renamed = tmp_path / "export.txt"
    shutil.copy(FIX / name, renamed)
    assert detect_format(renamed) == fmt


@pytest.mark.parametrize(("name", "hint"), SUMMARY_ONLY.items())
def test_summary_only_files_are_refused_with_the_reason(name, hint):
    with pytest.raises(ValueError, match=hint):
        read_requests(FIX / name)
    assert read_summary(FIX / name).values  # and their figures can be read


@pytest.mark.parametrize("name", [n for n in FORMATS if n not in SUMMARY_ONLY])
def test_every_per_request_file_loads_with_its_failed_request(name):
    log = read_requests(FIX / name)
    assert log.n_failed >= (0 if name.startswith("sglang") else 1) and len(log.rejected) == 0
    assert log.source.assumptions


def test_vllm_2024_without_start_times_or_latencies():
    log = read_requests(FIX / "vllm_2024_benchmark_serving.json")
    data = json.loads((FIX / "vllm_2024_benchmark_serving.json").read_text())
    assert not log.source.starts_known and log.source.window_s == data["duration"]
    r0 = log.requests.iloc[0]
    assert r0["end_ts"] == pytest.approx(data["ttfts"][0] + sum(data["itls"][0]))  # TTFT + ΣITL
    # request 6: vLLM counted it successful with 0 tokens and TTFT 0.0 → failed, "empty response"
    assert log.requests.loc[6, "status"] == "failed"
    assert log.requests.loc[6, "error"] == "empty response"
    with pytest.raises(ValueError, match="can't tell"):
        in_flight(log)
    assert summarize(log).rps == pytest.approx(6 / data["duration"])


def _close(a, b, rel=0.005):
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-12)


@pytest.mark.parametrize(
    "name",
    [
        "vllm_2026_bench_serve_detailed.json",
        "vllm_2024_benchmark_serving.json",
        "aiperf_profile_export.jsonl",
        "llama_550_150_individual_responses.json",
        "guidellm_v0_4_benchmarks.json",
    ],
)
def test_llminfer_reproduces_the_tools_own_summary(name):
    log = read_requests(FIX / name)
    table = compare_definitions(log, read_summary(FIX / name))
    comparable = table.dropna(subset=["llminfer_value"])
    agree = comparable[comparable["note"] == ""]
    assert len(agree) >= 3
    for key, row in agree.iterrows():
        assert _close(row["llminfer_value"], row["tool_value"]), (key, row.to_dict())
    # where they differ, the table says why
    differ = comparable[
        ~comparable.apply(lambda r: _close(r["llminfer_value"], r["tool_value"]), axis=1)
    ]
    assert (differ["note"] != "").all(), differ


def test_vllm_empty_responses_are_named_where_the_summary_differs():
    name = "vllm_2026_bench_serve_detailed.json"
    table = compare_definitions(read_requests(FIX / name), read_summary(FIX / name))
    assert "0 output tokens" in table.loc["ttft_s_mean", "note"]
    assert table.loc["tpot_s_mean", "same_definition"]
    assert _close(table.loc["itl_s_p99", "llminfer_value"], table.loc["itl_s_p99", "tool_value"])


def test_llmperf_throughput_is_over_the_test_not_the_longest_request():
    log = read_requests(FIX / "llama_550_150_individual_responses.json")
    summary = json.loads((FIX / "llama_550_150_summary.json").read_text())
    mine = summarize(log)
    assert _close(mine.output_tps, summary["results_mean_output_throughput_token_per_s"])
    lonely = summarize(read_requests(FIX / "lonely_individual_responses.json"))
    assert math.isnan(lonely.output_tps) and math.isnan(lonely.rps)
    said = " ".join(read_requests(FIX / "lonely_individual_responses.json").source.assumptions)
    assert "NaN" in said
    # llmperf's ITL from its own per-request values, exactly
    table = compare_definitions(log)
    assert _close(table.loc["llmperf_itl", "mean_s"], summary["results_inter_token_latency_s_mean"])


def test_aiperf_old_and_new_records_agree_and_warmup_is_excluded():
    old = read_requests(FIX / "aiperf_v0_1_profile_export.jsonl")
    new = read_requests(FIX / "aiperf_profile_export.jsonl")
    assert len(old) == len(new) == 7  # the warm-up record is out
    assert any("1 warm-up record(s) excluded" in a for a in new.source.assumptions)
    a, b = summarize(old).to_dict(), summarize(new).to_dict()
    assert a["ttft_s_mean"] == pytest.approx(b["ttft_s_mean"])
    assert "itl_s_mean" in b and "itl_s_mean" not in a  # only new records hold chunk gaps


def test_sglang_runs_and_per_token_itls():
    log = read_requests(FIX / "sglang_bench_serving_details.jsonl")
    assert sorted(log.requests["run"].unique()) == [0, 1]
    line = json.loads((FIX / "sglang_bench_serving_details.jsonl").read_text().splitlines()[0])
    first_run = log.requests[log.requests["run"] == 0]
    assert first_run["ttft_s" if False else "first_token_ts"].tolist() == pytest.approx(
        line["ttfts"]
    )


def test_summarize_reports_chunk_itl_and_stalls():
    d = summarize(read_requests(FIX / "vllm_2026_bench_serve_detailed.json")).to_dict()
    data = json.loads((FIX / "vllm_2026_bench_serve_detailed.json").read_text())
    assert d["itl_s_mean"] == pytest.approx(data["mean_itl_ms"] / 1000)
    assert d["itl_s_p99"] == pytest.approx(data["p99_itl_ms"] / 1000)
    assert d["n_stalls"] >= 1  # request 3's 0.4 s pause


def test_gzip_and_parquet(tmp_path):
    raw = (FIX / "aiperf_profile_export.jsonl").read_bytes()
    packed = tmp_path / "profile_export.jsonl.gz"
    packed.write_bytes(gzip.compress(raw))
    assert len(read_requests(packed)) == 7
    frame = read_requests(DATA / "requests.csv").requests
    parquet = tmp_path / "log.parquet"
    frame.drop(columns=["status"]).to_parquet(parquet)
    log = read_requests(parquet)
    assert log.source.format == "parquet" and len(log) == 3


@pytest.mark.parametrize(
    ("content", "where"),
    [
        ('{"ttfts": [0.1, 0.2], "output_lens": [3], "duration": 1}', "output_lens"),
        ('{"ttfts": [0.1], "output_lens": ["x"], "duration": 1}', "output_lens[0]"),
        ('{"ttfts": [0.1], "output_lens": [3], "itls": [[0.1, "a"]], "duration": 1}', "itls[0][1]"),
        ('{"metadata": {"request_start_ns": 1}, "metrics": {"time_to_first_token": 3}}', "line 1"),
        ('[{"ttft_s": 0.1, "end_to_end_latency_s": null, "error_code": null}]', "record 0"),
        ('{"benchmarks": [{"requests": {"successful": [{"start_time": null}]}}]}', "successful[0]"),
        ('{"hello": 1}', "looked for"),
    ],
)
def test_errors_name_file_record_and_field(tmp_path, content, where):
    path = tmp_path / "x.json"
    path.write_text(content)
    with pytest.raises(ExportError, match=r"x\.json") as info:
        read_requests(path)
    assert where in str(info.value)
    assert isinstance(info.value, ValueError)


def test_read_summary_uses_summarize_keys_and_names_the_tools_figures():
    s = read_summary(FIX / "vllm_2024_benchmark_serving.json")
    d = s.to_dict()
    assert {"ttft_s_mean", "ttft_s_p99", "e2e_s_mean", "output_tps", "rps", "itl_s_p99"} <= set(d)
    assert s.names["ttft_s_p99"] == "p99_ttft_ms" and s.names["e2e_s_mean"] == "mean_e2el_ms"
    assert isinstance(s.to_frame(), pd.DataFrame)
    assert np.isfinite(list(d.values())).all()
