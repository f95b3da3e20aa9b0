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
from llminfer.logs.importers import ExportError, detect_format
from llminfer.logs.timeline import in_flight
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
    "genai_perf_profile_export.json": "genai-perf",
    "genai_perf_profile_export_genai_perf.json": "genai-perf",
}
SUMMARY_ONLY = {
    "vllm_bench_serve_no_detailed.json": "--save-detailed",
    "sglang_bench_serving_summary.jsonl": "--output-details",
    "aiperf_profile_export_aiperf.json": "no per-request records",
    "llama_550_150_summary.json": "individual_responses",
    "genai_perf_profile_export_genai_perf.json": "profile_export.json beside it",
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
    ],
)
def test_llminfer_reproduces_the_tools_own_summary(name):
    # GuideLLM's figures are reproduced by its own rules on live exports: tests/test_tool_rules.py
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


def test_llmperf_leaderboard_layout_finds_its_summary(tmp_path):
    """ray-project/llmperf-leaderboard keeps its raw data as ``raw_data/individual/<run>.json``
    beside ``raw_data/summary/<run>.json`` (commit 3ecc0cbdd8d23522761dbe0d87bbf71517ac05a8,
    e.g. ``groq_70b.json``); the run window comes from that summary, and every figure llmperf
    reports — min, max and every quantile of its own inter_token_latency_s too — is reproduced."""
    (tmp_path / "individual").mkdir()
    (tmp_path / "summary").mkdir()
    shutil.copy(FIX / "llama_550_150_individual_responses.json", tmp_path / "individual/run.json")
    shutil.copy(FIX / "llama_550_150_summary.json", tmp_path / "summary/run.json")
    log = read_requests(tmp_path / "individual/run.json")
    summary = json.loads((FIX / "llama_550_150_summary.json").read_text())
    assert _close(summarize(log).output_tps, summary["results_mean_output_throughput_token_per_s"])
    table = compare_definitions(log, read_summary(tmp_path / "summary/run.json"))
    for key in ("itl_s_min", "itl_s_max", "itl_s_p25", "itl_s_p90", "e2e_s_p75", "rps"):
        assert _close(table.loc[key, "llminfer_value"], table.loc[key, "tool_value"]), key
    assert not table.loc["itl_s_p90", "same_definition"]  # llmperf's ITL ≈ E2E/N, said so
    assert "llmperf means" in table.loc["itl_s_p90", "note"]


def test_rates_use_the_tools_window_when_the_log_has_none(tmp_path):
    """A per-request file read alone holds no duration (llmperf's throughput is over the whole
    test): set beside the tool's summary, the rates use the summary's window and say so."""
    alone = tmp_path / "run.json"
    shutil.copy(FIX / "llama_550_150_individual_responses.json", alone)
    log = read_requests(alone)
    assert math.isnan(summarize(log).output_tps)
    table = compare_definitions(log, read_summary(FIX / "llama_550_150_summary.json"))
    for key in ("output_tps", "rps", "window_s"):
        assert _close(table.loc[key, "llminfer_value"], table.loc[key, "tool_value"]), key
        assert "tool's window_s" in table.loc[key, "note"]
    assert table.loc["n_failed", "rel_diff"] == 0 or table.loc["n_failed", "tool_value"] != 0


# --- GenAI-Perf: profile_export.json beside its own *_genai_perf.json / .csv ----------------
# The fixture and both summaries are written by scripts/make_tool_fixtures.py (genai_perf) with
# GenAI-Perf's own formulas: triton-inference-server/perf_analyzer,
# genai-perf/genai_perf/profile_data_parser/llm_profile_data_parser.py (_parse_requests,
# _preprocess_response), metrics/statistics.py (np.mean, np.percentile, min, max, std; ns → ms)
# and export_data/json_exporter.py, csv_exporter.py (names, units, "{:,.2f}").
GENAI = FIX / "genai_perf_profile_export.json"


@pytest.mark.parametrize("suffix", ["_genai_perf.json", "_genai_perf.csv"])
def test_genai_perf_summary_is_reproduced_where_definitions_agree(suffix):
    log = read_requests(GENAI)
    tool = read_summary(FIX / f"genai_perf_profile_export{suffix}")
    table = compare_definitions(log, tool)
    assert {"ttft_s_mean", "ttft_s_p99", "e2e_s_p50", "itl_s_mean", "output_tps", "rps"} <= set(
        table.index
    )
    # the CSV holds two decimals of ms: 0.005 ms on a ~20 ms ITL is 0.03 %
    agree = table.drop(index="rps")
    bad = agree[(agree["rel_diff"].abs() > 0.005) | agree["llminfer_value"].isna()]
    assert bad.empty, bad
    # ITL: GenAI-Perf's (E2E − TTFT)/(N − 1), llminfer's TPOT, not its chunk gaps — named
    assert not table.loc["itl_s_mean", "same_definition"]
    assert "(E2E − TTFT)/(N − 1)" in table.loc["itl_s_mean", "note"]
    # request_throughput counts the request that streamed no content; llminfer's rps does not
    assert not table.loc["rps", "same_definition"]
    assert "every request sent" in table.loc["rps", "note"]
    assert table.loc["rps", "rel_diff"] == pytest.approx(-1 / 8, abs=0.01)  # 7 of 8 requests
    assert "0 output tokens" not in table.loc["ttft_s_mean", "note"]  # GenAI-Perf drops them too


def test_genai_perf_summary_found_beside_the_export_and_its_csv_alone(tmp_path):
    assert read_summary(GENAI).names["ttft_s_p99"] == "time_to_first_token.p99"
    shutil.copy(GENAI, tmp_path / "profile_export.json")
    shutil.copy(FIX / "genai_perf_profile_export_genai_perf.csv", tmp_path / "x_genai_perf.csv")
    with pytest.raises(ValueError, match="not beside it"):
        read_summary(tmp_path / "profile_export.json")
    shutil.copy(
        FIX / "genai_perf_profile_export_genai_perf.csv",
        tmp_path / "profile_export_genai_perf.csv",
    )
    from_csv = read_summary(tmp_path / "profile_export.json").to_dict()
    from_json = read_summary(GENAI).to_dict()
    assert set(from_csv) <= set(from_json)  # the CSV leaves out p1, p5, p10
    assert {"ttft_s_p25", "itl_s_p99", "e2e_s_max", "rps", "output_tps"} <= set(from_csv)
    for key, value in from_csv.items():
        value = from_json[key]
        assert from_csv[key] == pytest.approx(value, rel=0.005, abs=5e-6), key


def test_genai_perf_events_and_empty_responses():
    log = read_requests(GENAI)
    data = json.loads(GENAI.read_text())["experiments"][0]["requests"]
    r = log.requests.set_index("request_id")
    # request 2 streamed the role chunk and [DONE] only: failed, counted, said
    assert r.loc["concurrency=2/2", "status"] == "failed"
    assert r.loc["concurrency=2/2", "error"].startswith("empty response")
    assert any("1 request(s) had no response with content" in a for a in log.source.assumptions)
    # request 4: two events in one network read are one chunk of two tokens
    assert list(r.loc["concurrency=2/4", "chunk_tokens"]).count(2) == 1
    events = sum(o["response"].count('"content": "') for o in data[4]["response_outputs"])
    assert r.loc["concurrency=2/4", "output_tokens"] == events - 1  # less the role chunk's ""
    # TTFT from the first response with content, not the role-only first event
    first = data[0]["response_timestamps"][1] * 1e-9
    assert r.loc["concurrency=2/0", "first_token_ts"] == pytest.approx(first, abs=1e-6)


def test_genai_perf_non_streaming_chat_completion_has_content(tmp_path):
    """A non-streaming response is one ``chat.completion`` whose text is ``message.content``
    (GenAI-Perf's _extract_openai_text_output reads it); it must not be taken for empty."""
    body = {
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi there"}}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2},
    }
    export = {
        "experiments": [
            {
                "experiment": {"mode": "concurrency", "value": 1},
                "requests": [
                    {
                        "timestamp": 1_000_000_000,
                        "request_inputs": {"payload": '{"messages": []}'},
                        "response_timestamps": [1_250_000_000],
                        "response_outputs": [{"response": json.dumps(body)}],
                    }
                ],
            }
        ]
    }
    path = tmp_path / "profile_export.json"
    path.write_text(json.dumps(export))
    log = read_requests(path)
    assert log.n_failed == 0 and log.requests.loc[0, "output_tokens"] == 2
    assert summarize(log).to_dict()["ttft_s_mean"] == pytest.approx(0.25)


def test_aiperf_v0_1_aggregate_under_records_with_null_stats(tmp_path):
    """AIPerf v0.1's profile_export_aiperf.json nests each metric under ``records`` with its
    ``tag`` and writes null for the statistics a count or a rate has (shape of ai-dynamo/aiperf
    examples/artifacts/run1/profile_export_aiperf.json, commit
    7c31f57933ad8a452db7737d05dba2b29cd6bf8c: 89 valid + 11 cancelled requests, 9.3178 s)."""

    def block(tag, unit, avg, **stats):
        nulls = dict.fromkeys(("min", "max", "p1", "p50", "p99", "std"))
        return {"tag": tag, "unit": unit, "header": tag, "avg": avg, **nulls, **stats}

    records = {
        "error_request_count": block("error_request_count", "requests", 11.0),
        "request_count": block("request_count", "requests", 89.0),
        "ttft": block("ttft", "ms", 2343.2, min=464.7, max=3853.9, p50=2369.3, p99=3833.4),
        "request_latency": block("request_latency", "ms", 9059.7, p50=9097.3, p99=9297.6),
        "inter_token_latency": block("inter_token_latency", "ms", 27.76, p50=27.62, p99=33.73),
        "benchmark_duration": block("benchmark_duration", "sec", 9.317788951),
        "request_throughput": block("request_throughput", "requests/sec", 9.551622221540914),
        "output_token_throughput": block("output_token_throughput", "tokens/sec", 2320.72),
    }
    path = tmp_path / "profile_export_aiperf.json"
    path.write_text(json.dumps({"records": records, "error_summary": [], "was_cancelled": False}))
    assert detect_format(path) == "aiperf"
    d = read_summary(path).to_dict()
    assert d["n_requests"] == 100 and d["n_failed"] == 11
    assert d["window_s"] == pytest.approx(9.317788951)
    assert d["rps"] == pytest.approx(89 / 9.317788951, rel=1e-6)  # valid requests / duration
    assert d["ttft_s_p99"] == pytest.approx(3.8334) and "ttft_s_p1" not in d  # nulls skipped
    assert d["itl_s_mean"] == pytest.approx(0.02776)
