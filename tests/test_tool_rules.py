"""Each tool's own numbers, reproduced: for every live-run fixture (vLLM 0.33.0 ``bench serve``,
AIPerf 0.13.0, GuideLLM 0.8.1 against ``llminfer serve``; commands in tests/fixtures/README.md)
and every figure in its ToolSummary, llminfer's value computed by the tool's own rules
(``llminfer.logs.rules``) is within 0.1 % of the tool's."""

import json
import math
import urllib.request
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from llminfer import compare_definitions, read_requests, read_summary
from llminfer.logs.rules import GUIDELLM, ToolRules, nearest_rank, statistic
from tests.test_importers import FIX

#: (per-request file, summary file or None for the same file, benchmark index or None).
LIVE = [
    ("vllm_0_33_bench_serve.json", None, None),
    ("vllm_0_33_bench_serve_llama_server.json", None, None),  # 2 of 40 failed there
    ("vllm_0_33_bench_serve_llama_server_rate.json", None, None),
    ("aiperf_0_13_streaming/profile_export.jsonl", None, None),
    ("aiperf_0_13_streaming/profile_export.jsonl", "profile_export_aiperf.json", None),
    ("aiperf_0_13_streaming/profile_export.jsonl", "profile_export_aiperf.csv", None),
    ("aiperf_0_13_non_streaming/profile_export.jsonl", None, None),
    ("aiperf_0_13_non_streaming/profile_export.jsonl", "profile_export_aiperf.csv", None),
    ("guidellm_0_8_1_warmup_cooldown_benchmarks.json.gz", None, None),
    ("guidellm_0_8_1_max_duration_benchmarks.json.gz", None, None),
    ("guidellm_0_8_1_two_benchmarks.json.gz", None, 0),
    ("guidellm_0_8_1_two_benchmarks.json.gz", None, 1),
    ("guidellm_0_8_1_two_benchmarks.json.gz", None, None),  # the last, by default
    ("guidellm_0_8_1_non_streaming_benchmarks.json.gz", None, None),
    ("vllm_0_33_bench_serve_with_errors.json", None, None),
    ("aiperf_0_13_with_errors/profile_export.jsonl", None, None),
    ("aiperf_0_13_with_errors/profile_export.jsonl", "profile_export_aiperf.csv", None),
    # against llama.cpp's llama-server: 4 of 40 failed (its keep-alive), error-adjusted figures
    # GuideLLM 0.8.1 against llama-server: 4 concurrent streams; its throughput profile
    ("guidellm_0_8_1_llama_server_benchmarks.json.gz", None, None),
    ("guidellm_0_8_1_llama_server_throughput/benchmarks.json.gz", None, None),
    ("guidellm_0_8_1_llama_server_throughput/benchmarks.json.gz", "benchmarks.csv", None),
    ("aiperf_0_13_llama_server/profile_export.jsonl", None, None),
    ("aiperf_0_13_llama_server/profile_export.jsonl", "profile_export_aiperf.csv", None),
    ("aiperf_0_13_llama_server_nonstream/profile_export.jsonl", None, None),
    ("aiperf_0_13_llama_server_nonstream/profile_export.jsonl", "profile_export_aiperf.csv", None),
    ("aiperf_0_13_llama_server_compl/profile_export.jsonl", None, None),
    ("aiperf_0_13_llama_server_compl/profile_export.jsonl", "profile_export_aiperf.csv", None),
    # made on 2026-12-03: a Poisson rate, a GuideLLM sweep, AIPerf at a request rate and for a
    # duration on /v1/completions, prompt and answer lengths varied
    ("guidellm_0_8_1_poisson_varied_lengths_benchmarks.json.gz", None, None),
    *(("guidellm_0_8_1_sweep_benchmarks.json.gz", None, i) for i in range(4)),
    *(
        (f"aiperf_0_13_{run}/profile_export.jsonl", summary, None)
        for run in ("request_rate", "completions_duration")
        for summary in (None, "profile_export_aiperf.json", "profile_export_aiperf.csv")
    ),
    ("vllm_0_33_bench_serve_completions_rate.json", None, None),
    # GuideLLM 0.8.1 writes benchmarks.json and benchmarks.csv by default, YAML when asked:
    # the requests from the JSON or the YAML, the figures from any of the three
    *(
        (f"guidellm_0_8_1_json_csv_yaml/{log}", summary, None)
        for log in ("benchmarks.json.gz", "benchmarks.yaml.gz")
        for summary in (None, "benchmarks.csv", "benchmarks.json.gz", "benchmarks.yaml.gz")
    ),
    *(
        ("guidellm_0_8_1_three_benchmarks_csv/benchmarks.json.gz", "benchmarks.csv", i)
        for i in (0, 1, 2, None)
    ),
    ("guidellm_0_8_1_non_streaming_yaml_csv/benchmarks.yaml.gz", None, None),
    ("guidellm_0_8_1_non_streaming_yaml_csv/benchmarks.yaml.gz", "benchmarks.csv", None),
    # AIPerf with --goodput: its thresholds are in the aggregate JSON's input_config.slos
    *(
        ("aiperf_0_13_goodput/profile_export.jsonl", summary, None)
        for summary in (None, "profile_export_aiperf.json", "profile_export_aiperf.csv")
    ),
    # GuideLLM 0.8.1 with goodput objectives (config.slo): goodput and attainment too
    ("guidellm_0_8_1_goodput/benchmarks.json.gz", None, None),
    ("guidellm_0_8_1_goodput/benchmarks.json.gz", "benchmarks.csv", None),
    # AIPerf multi-turn conversations; vLLM with a linear ramp-up of the request rate
    *(
        ("aiperf_0_13_multi_turn/profile_export.jsonl", summary, None)
        for summary in (None, "profile_export_aiperf.json", "profile_export_aiperf.csv")
    ),
    ("vllm_0_33_bench_serve_ramp_up.json", None, None),
    # two vLLM runs appended to one file (--append-result: one result a line)
    *(("vllm_0_33_bench_serve_append_result.json", None, i) for i in (0, 1, None)),
]


def _summary(name, summary, benchmark):
    path = FIX / name if summary is None else (FIX / name).with_name(summary)
    return read_summary(path) if benchmark is None else read_summary(path, benchmark=benchmark)


@pytest.mark.parametrize(("name", "summary", "benchmark"), LIVE)
def test_every_figure_of_every_live_export_is_reproduced(name, summary, benchmark):
    log = read_requests(FIX / name)
    tool = _summary(name, summary, benchmark)
    assert tool.rules is not None and len(tool.values) >= 15
    table = compare_definitions(log, tool)
    assert list(table.index) == list(tool.to_dict())
    for key, row in table.iterrows():
        ours, theirs = row["llminfer_value"], row["tool_value"]
        assert math.isfinite(ours), (key, row.to_dict())
        if theirs == 0:
            assert ours == 0, key
        else:
            assert abs(ours - theirs) / abs(theirs) < 1e-3, (key, row.to_dict())


def test_guidellm_keeps_warmup_requests_and_counts_by_its_window():
    name = FIX / "guidellm_0_8_1_warmup_cooldown_benchmarks.json.gz"
    log = read_requests(name)
    tool = read_summary(name)
    assert len(log) == 50 and tool.values["n_requests"] < 50  # warm-up/cool-down are in the file
    assert any("outside GuideLLM's measured window" in a for a in log.source.assumptions)
    table = compare_definitions(log, tool)
    # llminfer's own figures (all 50, interpolated, E2E to the last token) differ, and say why
    assert "nearest rank" in table.loc["ttft_s_p90", "note"]
    assert not table.loc["ttft_s_p90", "same_definition"]
    assert "response's end" in table.loc["e2e_s_mean", "note"]
    assert "measured window" in table.loc["rps", "note"]
    assert table.loc["e2e_s_mean", "llminfer_own"] != pytest.approx(
        table.loc["e2e_s_mean", "tool_value"], rel=1e-4
    )


def test_guidellm_several_benchmarks_are_read_one_at_a_time():
    name = FIX / "guidellm_0_8_1_two_benchmarks.json.gz"
    both = read_requests(name)
    assert sorted(both.requests["benchmark"].unique()) == [0, 1]
    first = read_requests(name, benchmark=0)
    assert set(first.requests["benchmark"]) == {0} and len(first) < len(both)
    s0, s1 = read_summary(name, benchmark=0), read_summary(name, benchmark=1)
    assert s0.rules.benchmark == 0 and s1.rules.benchmark == 1
    assert s0.values["rps"] != pytest.approx(s1.values["rps"], rel=1e-3)
    assert read_summary(name).rules.benchmark == 1  # the last by default, and said so
    assert any("benchmark 1" in n for n in read_summary(name).notes)
    # one benchmark's log against its own figures
    table = compare_definitions(first, s0)
    assert (table["rel_diff"].abs() < 1e-3).all()
    with pytest.raises(ValueError, match="2 benchmark"):
        read_summary(name, benchmark=2)
    with pytest.raises(ValueError, match="one run"):
        read_summary(FIX / "aiperf_0_13_streaming/profile_export.jsonl", benchmark=0)


def test_guidellm_max_duration_rates_use_the_measured_window():
    name = FIX / "guidellm_0_8_1_max_duration_benchmarks.json.gz"
    data = json.loads(__import__("gzip").decompress(name.read_bytes()))
    bench = data["benchmarks"][0]
    tool = read_summary(name)
    metrics = bench["scheduler_metrics"]
    window = metrics["measure_end_time"] - metrics["measure_start_time"]
    assert tool.values["window_s"] == pytest.approx(window)
    assert tool.values["window_s"] == pytest.approx(bench["duration"], rel=1e-6)
    table = compare_definitions(read_requests(name), tool)
    assert abs(table.loc["rps", "rel_diff"]) < 1e-3


def test_aiperf_rates_divide_by_the_profiling_phase_not_benchmark_duration():
    name = FIX / "aiperf_0_13_streaming/profile_export.jsonl"
    tool = read_summary(name)
    phase = json.loads((name.parent / "phase_manifest.json").read_text())["phases"][1]
    assert tool.rules.rate_window_s == pytest.approx((phase["end_ns"] - phase["start_ns"]) * 1e-9)
    assert tool.rules.rate_window_s > tool.values["window_s"]  # phase > first start → last end
    assert tool.values["rps"] == pytest.approx(
        tool.values["n_requests"] / tool.rules.rate_window_s, rel=1e-6
    )
    assert "profiling phase" in compare_definitions(read_requests(name), tool).loc["rps", "note"]


def test_aiperf_non_streaming_records_and_csv_with_an_empty_gpu_section():
    records = FIX / "aiperf_0_13_non_streaming/profile_export.jsonl"
    log = read_requests(records)
    assert len(log) == 30 and log.n_failed == 0
    assert any("non-streaming" in a for a in log.source.assumptions)
    streaming_csv = FIX / "aiperf_0_13_streaming/profile_export_aiperf.csv"
    assert "GPU_Index" in streaming_csv.read_text()  # AIPerf's empty telemetry table
    csv_summary = read_summary(streaming_csv)
    assert csv_summary.tool == "aiperf"
    json_summary = read_summary(streaming_csv.with_suffix(".json"))
    for key, value in csv_summary.values.items():
        assert value == pytest.approx(json_summary.values[key], rel=2e-3, abs=1e-5), key


def test_vllm_itl_percentiles_are_over_pooled_chunk_gaps():
    name = FIX / "vllm_0_33_bench_serve.json"
    data = json.loads(name.read_text())
    gaps = np.concatenate([g for g in data["itls"] if g])
    table = compare_definitions(read_requests(name), read_summary(name))
    for q in (25, 75, 90, 95):
        assert table.loc[f"itl_s_p{q}", "llminfer_value"] == pytest.approx(
            np.percentile(gaps, q), rel=1e-9
        )
        assert table.loc[f"itl_s_p{q}", "tool_value"] == pytest.approx(
            data[f"p{q}_itl_ms"] / 1000, rel=1e-9
        )


def test_nearest_rank_is_guidellms_percentile():
    values = [1.0, 2.0, 3.0, 4.0]
    assert nearest_rank(values, None, 50) == 2.0  # smallest value with CDF ≥ 0.5
    assert nearest_rank(values, None, 51) == 3.0
    assert statistic(values, None, "p50", "linear") == 2.5
    assert nearest_rank([1.0, 2.0], [3, 1], 75) == 1.0  # weighted: CDF 0.75 at 1.0
    assert statistic([1.0, 2.0], [3, 1], "mean", "nearest_rank") == pytest.approx(1.25)
    assert math.isnan(nearest_rank([], None, 50))
    assert GUIDELLM.percentile == "nearest_rank"
    with pytest.raises(ValueError, match="percentile"):
        ToolRules("x", percentile="cubic")


def test_serve_model_card_has_vllms_fields():
    from llminfer.serve import ServerProcess

    with (
        ServerProcess(["--preset", "small"], shutdown_after=60) as server,
        urllib.request.urlopen(server.url + "/models", timeout=10) as answer,
    ):
        card = json.load(answer)["data"][0]
    assert card["root"] == card["id"] and "parent" in card and card["max_model_len"] > 0


def test_guidellm_non_streaming_requests_are_successful_without_ttft():
    name = FIX / "guidellm_0_8_1_non_streaming_benchmarks.json.gz"
    log = read_requests(name)
    assert log.n_failed == 0 and not log.requests["streamed"].any()
    tool = read_summary(name)
    assert "ttft_s_mean" not in tool.values  # GuideLLM measured no TTFT
    assert tool.values["itl_s_mean"] == 0.0  # and counts each request's ITL as 0


def test_guidellm_csv_gives_the_json_figures_and_names_its_own_cells():
    folder = FIX / "guidellm_0_8_1_three_benchmarks_csv"
    for i in (0, 1, 2):
        from_csv = read_summary(folder / "benchmarks.csv", benchmark=i)
        from_json = read_summary(folder / "benchmarks.json.gz", benchmark=i)
        # the CSV has every figure of the JSON but p99.9 (its Percentiles list stops at p99)
        assert set(from_json.values) - set(from_csv.values) == {
            f"{m}_p99.9" for m in ("ttft_s", "e2e_s", "itl_s", "tpot_s")
        }
        assert all(from_csv.values[k] == from_json.values[k] for k in from_csv.values)
        assert from_csv.rules.benchmark == i
        assert from_csv.names["ttft_s_p90"] == (
            "Time to First Token / Successful ms / Percentiles [p90]"
        )
        assert from_csv.names["ttft_s_p50"] == "Time to First Token / Successful ms / Median"
        assert "3 benchmarks in the file" in " ".join(from_csv.notes)
    assert read_summary(folder / "benchmarks.csv").rules.benchmark == 2  # the last, as the JSON
    with pytest.raises(ValueError, match="holds 3 benchmark"):
        read_summary(folder / "benchmarks.csv", benchmark=3)


@pytest.mark.parametrize(
    ("name", "tool"),
    [
        ("guidellm_0_8_1_json_csv_yaml/benchmarks.csv", "GuideLLM's benchmarks.csv"),
        ("aiperf_0_13_streaming/profile_export_aiperf.csv", "AIPerf's profile_export_aiperf.csv"),
    ],
)
def test_a_tools_summary_csv_is_not_read_as_a_request_log(name, tool):
    with pytest.raises(ValueError, match=rf"is {tool} .*read_summary\(path\)"):
        read_requests(FIX / name)


def test_yaml_that_is_not_an_export_says_so(tmp_path):
    bad = tmp_path / "benchmarks.yaml"
    bad.write_text("benchmarks:\n  - [unclosed\n")
    with pytest.raises(ValueError, match="is not valid YAML"):
        read_requests(bad)
    other = tmp_path / "other.yaml"
    other.write_text("---\nhello\n")
    with pytest.raises(ValueError, match="not a mapping or a list"):
        read_summary(other)
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("results:\n  value: 3\n")  # YAML, but no tool's shape
    with pytest.raises(ValueError, match="is not a format llminfer knows"):
        read_requests(unknown)


def test_vllm_results_appended_to_one_file_are_read_one_run_at_a_time():
    name = FIX / "vllm_0_33_bench_serve_append_result.json"
    both = read_requests(name)
    assert both.requests["benchmark"].value_counts().to_dict() == {0: 12, 1: 12}
    assert any("--append-result" in a for a in both.source.assumptions)
    second = read_requests(name, benchmark=-1)
    assert set(second.requests["benchmark"]) == {1} and len(second) == 12
    s0, s1 = read_summary(name, benchmark=0), read_summary(name)
    assert (s0.rules.benchmark, s1.rules.benchmark) == (0, 1)  # the last by default
    assert s0.rules.rate_window_s == s0.values["window_s"] != s1.values["window_s"]
    # each run's rates over its own duration, from its own requests
    table = compare_definitions(both, s0)
    assert table.loc["rps", "llminfer_value"] == pytest.approx(12 / s0.values["window_s"])
    with pytest.raises(ValueError, match="holds 2 result"):
        read_summary(name, benchmark=2)
    with pytest.raises(ValueError, match="holds 1 result"):
        read_requests(FIX / "vllm_0_33_bench_serve.json", benchmark=1)
    with pytest.raises(ValueError, match="an export of aiperf holds one run"):
        read_requests(FIX / "aiperf_0_13_streaming/profile_export.jsonl", benchmark=0)


def test_vllm_goodput_is_reproduced_from_the_thresholds_it_was_run_with():
    """vLLM's file holds its goodput but not the --goodput thresholds (ttft:60 tpot:15
    e2el:300, fixtures/README.md): given them, the goodput is recomputed by vLLM's rule."""
    name = FIX / "vllm_0_33_bench_serve_goodput.json"
    log, tool = read_requests(name), read_summary(name)
    blind = compare_definitions(log, tool)
    assert math.isnan(blind.loc["goodput_rps", "llminfer_value"])
    assert "slo=" in blind.loc["goodput_rps", "note"]
    slo = {"ttft_s": 0.060, "tpot_s": 0.015, "e2e_s": 0.300}
    table = compare_definitions(log, tool, slo=slo)
    assert table.loc["goodput_rps", "rel_diff"] == pytest.approx(0, abs=1e-9)
    assert (table["rel_diff"].abs() < 1e-3).all()
    assert "meets every threshold" in table.loc["goodput_rps", "note"]
    # a stricter TTFT counts fewer good requests, so the figure is not a copy of the tool's
    strict = compare_definitions(log, tool, slo={**slo, "ttft_s": 0.03})
    assert strict.loc["goodput_rps", "llminfer_value"] < tool.values["goodput_rps"]
    for bad, message in (({"ttft": 0.06}, "not a goodput metric"), ({"ttft_s": -1}, "positive")):
        with pytest.raises(ValueError, match=message):
            compare_definitions(log, tool, slo=bad)
    with pytest.raises(ValueError, match="applies to a tool's summary"):
        compare_definitions(log, slo=slo)


def test_aiperf_goodput_thresholds_come_from_its_file():
    folder = FIX / "aiperf_0_13_goodput"
    tool = read_summary(folder / "profile_export.jsonl")
    assert tool.rules.slo == {"ttft_s": 0.060, "itl_s": 0.015}  # --goodput in ms
    assert tool.values["good_fraction"] == 0.2  # 4 good of 20: some miss, some meet
    assert read_summary(folder / "profile_export_aiperf.csv").rules.slo == tool.rules.slo
    log = read_requests(folder / "profile_export.jsonl")
    loose = compare_definitions(log, tool, slo={"ttft_s": 10.0})  # everyone is good
    assert loose.loc["goodput_rps", "llminfer_value"] == pytest.approx(
        loose.loc["rps", "llminfer_value"]
    )


def test_guidellm_goodput_and_attainment_by_its_objectives():
    folder = FIX / "guidellm_0_8_1_goodput"
    log = read_requests(folder / "benchmarks.json.gz")
    for summary in ("benchmarks.json.gz", "benchmarks.csv"):
        tool = read_summary(folder / summary)
        assert tool.rules.slo == pytest.approx({"ttft_s": 0.1, "tpot_s": 0.011, "e2e_s": 0.28})
        assert 0 < tool.values["good_fraction"] < 1  # some requests miss: a real test
        table = compare_definitions(log, tool)
        assert abs(table.loc["goodput_rps", "rel_diff"]) < 1e-9
        assert abs(table.loc["good_fraction", "rel_diff"]) < 1e-9
        assert "errored ones as not good" in table.loc["good_fraction", "note"]
    # tighter objectives, fewer good requests: recomputed, not copied
    tight = compare_definitions(log, tool, slo={"ttft_s": 0.05})
    assert tight.loc["good_fraction", "llminfer_value"] < tool.values["good_fraction"]


def test_guidellm_sampled_requests_are_said_not_reproducible():
    name = FIX / "guidellm_0_8_1_sampled" / "benchmarks.json.gz"
    log, tool = read_requests(name), read_summary(name)
    assert len(log) == 3
    assert any("lists 3 of the 30 requests" in a for a in log.source.assumptions)
    table = compare_definitions(log, tool)
    assert not table["same_definition"].any()
    assert table["note"].str.contains("sample of 3 of the 30 requests").all()


def test_aiperf_raw_export_points_to_the_records_beside_it():
    """--export-level raw adds profile_export_raw.jsonl (payloads and packets, no metrics;
    the fixture keeps its first 3 lines): refused with the file to read instead, and its
    summary is the aggregate beside it."""
    raw = FIX / "aiperf_0_13_raw" / "profile_export_raw.jsonl"
    with pytest.raises(ValueError, match=r"raw export .* read profile_export\.jsonl beside it"):
        read_requests(raw)
    assert read_summary(raw).values["n_requests"] == 12


def test_vllm_peak_tokens_per_second_and_concurrency_follow_its_buckets():
    """vLLM 0.33's "Peak output token throughput" and "Peak concurrent requests": one-second
    buckets from the first start; both reproduced exactly, and both move when one request's
    tokens are moved into one bucket."""
    from llminfer.logs.rules import vllm_peaks

    log = read_requests(FIX / "vllm_0_33_bench_serve_ramp_up.json")
    tool = read_summary(FIX / "vllm_0_33_bench_serve_ramp_up.json")
    requests = log.requests
    ok = (requests["status"] == "ok").to_numpy()
    assert vllm_peaks(requests, ok) == (
        tool.values["peak_output_tps"],
        tool.values["peak_concurrency"],
    )
    # a hand-made case: two requests, 0-1.5 s and 0.2-0.4 s, tokens at 0.1, 0.3 | 1.2
    toy = pd.DataFrame(
        {
            "start_ts": [0.0, 0.2],
            "end_ts": [1.5, 0.4],
            "token_ts": [np.array([0.1, 0.3, 1.2]), np.array([0.3, 0.35, 0.4])],
        }
    )
    assert vllm_peaks(toy, np.array([True, True])) == (5.0, 2.0)
    assert vllm_peaks(toy, np.array([True, False])) == (2.0, 1.0)


def test_aiperf_time_to_second_token_and_tokens_per_user_are_recomputed():
    """AIPerf's console shows TTST and output tokens/s per user: recomputed from the log's
    chunk times and ITLs (not copied: moving one chunk moves the TTST)."""
    folder = FIX / "aiperf_0_13_streaming"
    log, tool = (
        read_requests(folder / "profile_export.jsonl"),
        read_summary(folder / "profile_export.jsonl"),
    )
    assert {"ttst_s_p50", "user_tps_mean"} <= set(tool.values)
    table = compare_definitions(log, tool)
    for key in ("ttst_s_mean", "ttst_s_p99", "user_tps_mean", "user_tps_p50"):
        assert abs(table.loc[key, "rel_diff"]) < 1e-4, key
        assert "llminfer has none of its own" in table.loc[key, "note"]
    # the records' first chunk gaps, kept exactly, give it; moving them moves it
    requests = log.requests.copy()
    requests["second_chunk_gap_s"] += 1.0
    moved = compare_definitions(requests, tool)
    assert (
        moved.loc["ttst_s_mean", "llminfer_value"]
        > table.loc["ttst_s_mean", "llminfer_value"] + 0.9
    )
    # a log with chunk times only (token_ts) gives it too, and moves with a chunk
    requests = log.requests.drop(columns="second_chunk_gap_s")
    again = compare_definitions(requests, tool)
    assert abs(again.loc["ttst_s_mean", "rel_diff"]) < 1e-4
    requests["token_ts"] = [
        None if t is None else np.concatenate(([t[0]], t[1:] + 1.0)) for t in requests["token_ts"]
    ]
    moved = compare_definitions(requests, tool)
    assert (
        moved.loc["ttst_s_mean", "llminfer_value"]
        > table.loc["ttst_s_mean", "llminfer_value"] + 0.9
    )


def test_guidellm_concurrency_and_total_tokens_per_second_by_its_window():
    name = FIX / "guidellm_0_8_1_poisson_varied_lengths_benchmarks.json.gz"
    log, tool = read_requests(name), read_summary(name)
    table = compare_definitions(log, tool)
    assert abs(table.loc["concurrency_mean", "rel_diff"]) < 1e-5
    assert table.loc["total_tps", "llminfer_value"] == pytest.approx(
        table.loc["input_tps", "llminfer_value"] + table.loc["output_tps", "llminfer_value"]
    )
    assert tool.values["concurrency_mean"] > 5  # a Poisson rate of 3/s piles requests up


def test_aiperf_error_adjusted_figures_count_each_failure_as_infinite():
    # AIPerf 0.13 against llama-server: 4 of the 40 profiled requests failed (ClientOSError,
    # the server closing a kept-alive connection), so it wrote adj_<tag> figures: the 36
    # successes and 4 x +inf, numpy's "nearest" percentiles (aiperf/metrics/derived_latency.py)
    name = FIX / "aiperf_0_13_llama_server/profile_export.jsonl"
    log, tool = read_requests(name), read_summary(name)
    assert tool.names["ttft_adj_s_p50"] == "adj_time_to_first_token.p50"
    assert tool.values["n_failed"] == 4 and tool.values["n_requests"] == 40
    assert {f"{m}_adj_s_p90" for m in ("ttft", "e2e", "itl")} <= set(tool.values)
    assert "ttft_adj_s_p95" not in tool.values  # inf: AIPerf writes none
    table = compare_definitions(log, tool)
    for key in ("ttft_adj_s_p50", "e2e_adj_s_p90", "itl_adj_s_p75"):
        row = table.loc[key]
        assert row["llminfer_value"] == pytest.approx(row["tool_value"], rel=1e-4)
        assert not row["same_definition"] and "error-adjusted" in row["note"]
    # the p90 of 40 with 4 failures is the largest success; the plain p90 interpolates below it
    assert tool.values["e2e_adj_s_p90"] == pytest.approx(tool.values["e2e_s_max"], rel=1e-6)
    assert tool.values["e2e_s_p90"] < tool.values["e2e_adj_s_p90"]
    with pytest.raises(ValueError, match="nearest"):
        statistic([1.0, 2.0], [1.0, 1.0], "p50", "nearest")
    # recomputed, not copied: without the failures the adjusted p90 is the plain one's rank
    ok = replace(log, requests=log.requests[log.requests["status"] == "ok"])
    again = compare_definitions(ok, tool).loc["e2e_adj_s_p90", "llminfer_value"]
    assert again < tool.values["e2e_adj_s_p90"]
