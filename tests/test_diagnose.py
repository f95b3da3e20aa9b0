"""Chapter 7: ``diagnose`` names the right cause on logs with a known cause (each built in the
simulator by changing a setting, not only the load), says "not enough data" — never "ok" — when
it cannot tell, never suggests what the deployment already has, and its case-study logs are
exactly what their seeds produce."""

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from llminfer import Diagnosis, Finding, get_gpu, get_model, read_requests
from llminfer.cli import DIAGNOSE_EXIT, main, parse_engine
from llminfer.cost.latency import estimate_latency
from llminfer.diagnose.cases import (
    CASE_SLO,
    CASE_STUDIES,
    LONG_V0_ENGINE,
    V0_ENGINE,
    V1_ENGINE,
    RampWorkload,
)
from llminfer.diagnose.deployment import Deployment, simulate_deployment
from llminfer.diagnose.errors import error_line, stale_connection
from llminfer.diagnose.findings import CAUSES, STEPS
from llminfer.diagnose.procedure import MIN_REQUESTS, causes_table, procedure_table
from llminfer.diagnose.run import diagnose, remeasure
from llminfer.diagnose.scrape import combine, parse_scrape, read_scrape
from llminfer.diagnose.signals import (
    decode_stalls,
    decoding_together,
    overlapping_prefill_tokens,
    rank_correlation,
    waiting_at,
    work_ahead,
)
from llminfer.diagnose.suggestions import COSTS
from llminfer.logs.metrics import request_metrics
from llminfer.sim.workload import Empirical, LogNormal, Workload

DATA = Path(__file__).resolve().parent.parent / "data"
SIMULATOR_COLUMNS = ["scheduled_ts", "preemptions", "cached_prefix_tokens", "prefix_group"]
CHAT = {
    "prompt_tokens": LogNormal(512, 0.6, 16, 4096),
    "output_tokens": LogNormal(128, 0.6, 8, 1024),
}
LONG_CHAT = {
    "prompt_tokens": LogNormal(1024, 0.5, 16, 8192),
    "output_tokens": LogNormal(256, 0.5, 8, 2048),
}


def case_log(name: str):
    return read_requests(DATA / CASE_STUDIES[name].data_file)


def run(workload: Workload, deployment: Deployment, slo=CASE_SLO, know_deployment=True):
    log = read_requests(simulate_deployment(workload, deployment))
    kwargs = deployment.diagnose_kwargs() if know_deployment else {}
    return diagnose(log, slo=slo, **kwargs)


def already_on(report: Diagnosis, d: Deployment) -> list[str]:
    """Suggestions in the report that propose what deployment ``d`` already has."""
    e = d.engine
    wrong = []
    for finding in report.findings:
        for s in finding.suggestions:
            if s.key == "enable_chunked_prefill" and e.chunked_prefill:
                wrong.append(s.key)
            if s.key == "prefix_caching" and e.prefix_caching:
                wrong.append(s.key)
            if s.key == "raise_gpu_memory_utilization" and e.gpu_memory_utilization >= 0.9:
                wrong.append(s.key)
            if s.key == "kv_cache_fp8" and d.kv_dtype == "fp8":
                wrong.append(s.key)
            if s.key == "quantise_weights" and d.weight_dtype in ("fp8", "int4"):
                wrong.append(s.key)
            if s.key == "smaller_prefill_chunk" and not (
                e.chunked_prefill and e.max_num_batched_tokens > 2048
            ):
                wrong.append(s.key)
            if s.key in ("continuous_batching", "paged_attention"):
                wrong.append(s.key)
    return wrong


# --- the case studies -------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(CASE_STUDIES))
def test_names_the_cause_of_every_case_study(name):
    case = CASE_STUDIES[name]
    report = diagnose(case_log(name), slo=CASE_SLO, **case.deployment.diagnose_kwargs())
    assert [f.step for f in report.findings] == list(STEPS)
    assert report.cause == case.expected
    assert report.verdict == ("ok" if case.expected is None else "problem")
    assert already_on(report, case.deployment) == []
    # Without the deployment the log alone still points at the same cause.
    assert diagnose(case_log(name), slo=CASE_SLO).cause == case.expected


@pytest.mark.parametrize("name", [n for n, c in CASE_STUDIES.items() if c.fix])
def test_the_suggested_change_cures_the_case(name):
    case = CASE_STUDIES[name]
    after = read_requests(case.requests(case.fixed_deployment))
    report = diagnose(after, slo=CASE_SLO, **case.fixed_deployment.diagnose_kwargs())
    assert report.verdict == "ok" and report.cause is None and report.primary is None
    table = remeasure(case_log(name), after, CASE_SLO)
    assert table.loc["good_fraction", "after"] > table.loc["good_fraction", "before"]
    # p90 targets met; the head-of-line cure leaves the long prompts (5 %) missing TTFT, and the
    # long-prompt cure leaves its longest documents' prefill near 1 s
    assert table.loc["good_fraction", "after"] >= 0.9


@pytest.mark.parametrize("name", [n for n, c in CASE_STUDIES.items() if c.fix])
def test_cures_are_tried_cheapest_first_and_only_the_last_cures(name):
    """One change at a time, settings before software before hardware: every attempt before the
    fix leaves the case a problem, and the fix is the first deployment the verdict calls ok."""
    case = CASE_STUDIES[name]
    tries = case.tries()
    ranks = [list(COSTS).index(cost) for _, cost, _ in tries]
    assert ranks == sorted(ranks), tries
    table = case.cure_table()
    assert list(table["verdict"]) == ["problem"] * len(tries) + ["ok"]
    assert table.iloc[-1]["good_fraction"] > table.iloc[0]["good_fraction"]


def test_cure_costs_follow_what_the_change_needs():
    costs = {name: c.fix_cost for name, c in CASE_STUDIES.items() if c.fix}
    assert costs["head_of_line"] == costs["kv_exhausted"] == costs["prefill_interference"]
    assert costs["head_of_line"] == "setting"
    assert costs["long_prompts"] == costs["busy"] == "software"
    assert costs["overloaded"] == costs["ramp"] == costs["slow_gpu"] == "hardware"


def test_head_of_line_is_cured_by_the_long_prefill_threshold_on_the_same_gpu():
    case = CASE_STUDIES["head_of_line"]
    fixed = case.fixed_deployment
    assert fixed.n_gpus == case.deployment.n_gpus == 1
    assert (
        fixed.engine.long_prefill_token_threshold
        > 0
        == case.deployment.engine.long_prefill_token_threshold
    )
    report = diagnose(case_log("head_of_line"), slo=CASE_SLO, **case.deployment.diagnose_kwargs())
    assert report.suggestions[0].key == "long_prefill_threshold"


def test_case_study_files_are_what_the_seeds_produce():
    for case in CASE_STUDIES.values():
        stored = pd.read_csv(DATA / case.data_file)
        fresh = case.requests()
        assert list(stored.columns) == list(fresh.columns)
        for column in ["start_ts", "scheduled_ts", "first_token_ts", "end_ts"]:
            np.testing.assert_allclose(stored[column], fresh[column], atol=1e-6)
        assert (stored["output_tokens"] == fresh["output_tokens"]).all()
        assert ("token_ts" in stored.columns) == case.token_times
        if case.token_times:
            log = read_requests(DATA / case.data_file).requests
            for kept, made in zip(log["token_ts"], fresh["token_ts"], strict=True):
                np.testing.assert_allclose(kept, made, atol=1e-6)


def test_long_prompts_fix_is_what_the_report_suggests():
    """The cure is the report's cheapest applicable suggestion: FP8 weights (its first, prefix
    caching, does not apply: the documents share no prefix). With split-KV decode attention
    ("vllm" profile) TP = 4 alone would cure TPOT too: the FP8 KV cache the plain-PyTorch
    step model needed is not part of any cure."""
    case = CASE_STUDIES["long_prompts"]
    assert case.deployment.profile == "vllm"
    report = diagnose(case_log("long_prompts"), slo=CASE_SLO, **case.deployment.diagnose_kwargs())
    assert report.cause == "too_slow" and report.primary.step == "prefill"
    keys = [s.key for s in report.suggestions]
    assert keys[:2] == ["prefix_caching", "quantise_weights"] and "tensor_parallel" in keys
    assert case.fix == {"weight_dtype": "fp8"}
    assert (case_log("long_prompts").requests["prefix_group"] < 0).all()
    # each prefill stalls every decode on the V0-like engine: measured in the token streams
    decode = report.finding("decode")
    assert decode.cause == "interference"
    tp_only = read_requests(case.requests(replace(case.deployment, n_gpus=4)))
    table = remeasure(case_log("long_prompts"), tp_only, CASE_SLO)
    assert table.loc["ttft_s_p90", "after"] < 1.0 < table.loc["ttft_s_p90", "before"]
    assert table.loc["tpot_s_p90", "after"] < CASE_SLO["tpot_s"]
    # one request alone at 32k tokens of context on TP = 4: under the target without FP8 KV
    alone = estimate_latency(
        get_model("llama-3.1-8b"), get_gpu("h100-sxm"), 32000, 128, batch=1, n_gpus=4,
        profile=case.deployment.profile,
    ).tpot_s  # fmt: skip
    assert alone < CASE_SLO["tpot_s"]


def test_every_case_spells_out_its_engine():
    """The default EngineConfig() is changing (vLLM V1-like): no case may depend on it."""
    import inspect
    import re

    import llminfer.diagnose.cases

    source = inspect.getsource(llminfer.diagnose.cases)
    assert "EngineConfig()" not in source
    deployments = re.findall(r"Deployment\(([^()]*(?:\([^()]*\)[^()]*)*)\)", source)
    assert deployments and all("engine=" in d for d in deployments)
    for name, engine in (("V0", V0_ENGINE), ("V1", V1_ENGINE)):
        assert engine.max_num_seqs == 256, name
    assert (V0_ENGINE.chunked_prefill, V1_ENGINE.chunked_prefill) == (False, True)


def test_overloaded_tp2_beats_two_replicas():
    """TP = 2 against two replicas at 21 req/s (realistic step times): two replicas meet both
    targets for 83 % of the requests (each engine still decodes too many together for 20 ms),
    TP = 2 for 96.9 %; one replica for none (the case studies' "pytorch" profile)."""
    case = CASE_STUDIES["overloaded"]
    good = {}
    for label, change in {"replicas": {"replicas": 2}, "tp": {"n_gpus": 2}}.items():
        log = read_requests(case.requests(replace(case.deployment, **change)))
        good[label] = remeasure(case_log("overloaded"), log, CASE_SLO).loc["good_fraction"]
    assert good["tp"]["before"] < 0.01
    assert good["tp"]["after"] == pytest.approx(0.969, abs=0.002)
    assert good["replicas"]["after"] == pytest.approx(0.830, abs=0.002)
    # And the report weighs TP first because TPOT misses too.
    report = diagnose(case_log("overloaded"), slo=CASE_SLO, **case.deployment.diagnose_kwargs())
    keys = [s.key for s in report.suggestions]
    assert keys.index("tensor_parallel") < keys.index("add_replica")


# --- known causes built in the simulator by changing one setting --------------------------------


def test_interference_goes_when_chunked_prefill_is_on():
    """8k-token documents in 30 % of requests on a V0-like engine: every document's prefill
    stalls all decodes (ITL p99 ≈ 0.26 s against a median gap of 8.6 ms), and the stalls make
    TPOT p90 miss. Chunked prefill removes the stalls; with real step times each chunk still
    costs its compute, so TPOT p90 falls only from 22 to 17 ms while ITL p99 falls twelvefold."""
    w = Workload(500, rate=3, prompt_tokens=Empirical((8000,) * 3 + (200,) * 7),
                 output_tokens=LogNormal(32, 0.3, 16, 1024), seed=11)  # fmt: skip
    off = Deployment(engine=LONG_V0_ENGINE, profile="pytorch")  # the case studies' profile
    report = run(w, off)
    assert report.cause == "interference"
    assert "enable_chunked_prefill" in [s.key for s in report.suggestions]
    before = report.finding("decode").evidence
    assert before["stalls"] > 100 and before["stalls_in_prefill_share"] == 1.0
    assert before["itl_s_p99"] > 20 * before["itl_s_p50"]
    assert before["tpot_p90_without_stalls_s"] < CASE_SLO["tpot_s"] < before["tpot_p90_s"]
    on = replace(
        off, engine=replace(LONG_V0_ENGINE, chunked_prefill=True, max_num_batched_tokens=384)
    )
    fixed = run(w, on)
    assert fixed.verdict == "ok" and already_on(fixed, on) == []
    after = fixed.finding("decode").evidence
    assert after["stalls"] == 0
    assert after["itl_s_p99"] < before["itl_s_p99"] / 10
    # TPOT moves far less than ITL p99: the prefill work is spread, not removed.
    assert after["tpot_p90_s"] > 0.7 * before["tpot_p90_s"]


def test_decode_stalls_on_a_hand_made_log():
    """Two requests: b's prefill (scheduled 1.0 s, first token 1.5 s) runs inside a 0.5 s gap
    of a's tokens (its other gaps 0.01 s); c's single 0.3 s gap has no prefill beside it."""
    a = np.r_[np.arange(0.1, 1.0, 0.01), np.arange(1.5, 2.0, 0.01)]
    b = np.arange(1.5, 2.0, 0.01)
    c = np.r_[np.arange(3.0, 3.5, 0.01), np.arange(3.8, 4.0, 0.01)]
    frame = pd.DataFrame(
        {
            "request_id": ["a", "b", "c"],
            "start_ts": [0.0, 0.9, 2.9],
            "scheduled_ts": [0.0, 1.0, 2.95],
            "first_token_ts": [a[0], b[0], c[0]],
            "end_ts": [a[-1], b[-1], c[-1]],
            "input_tokens": [100, 5000, 100],
            "output_tokens": [a.size, b.size, c.size],
            "token_ts": [a, b, c],
        }
    )
    log = read_requests(frame)
    m = request_metrics(log)
    stalls = decode_stalls(log.requests, m, factor=5.0)
    assert stalls.attrs["median_gap_s"] == pytest.approx(0.01)
    assert stalls["n_stalls"].tolist() == [1, 0, 1]
    assert stalls["stalls_in_prefill"].tolist() == [1, 0, 0]
    # a: 0.99 s → 1.50 s is 0.51 s, 0.50 s beyond a median gap; c: 3.49 → 3.80 s.
    assert stalls["stall_s"].to_numpy() == pytest.approx([0.5, 0.0, 0.3], abs=1e-9)
    # Without its stall, a decodes at the median gap.
    assert stalls.loc[0, "tpot_without_stalls_s"] == pytest.approx(0.01, abs=1e-9)
    assert decode_stalls(log.requests.drop(columns="token_ts"), m, 5.0) is None


def test_interference_with_big_chunks_suggests_smaller_chunks_not_chunking():
    w = Workload(500, rate=2, prompt_tokens=Empirical((24000,) + (300,) * 4),
                 output_tokens=LogNormal(64, 0.3, 16, 1024), seed=6)  # fmt: skip
    d = Deployment(engine=replace(V1_ENGINE, max_num_batched_tokens=8192))
    report = run(w, d, slo={"ttft_s": 3.0, "tpot_s": 0.02})  # TTFT is not the question here
    assert report.cause == "interference"
    keys = [s.key for s in report.suggestions]
    assert "enable_chunked_prefill" not in keys and "smaller_prefill_chunk" in keys
    assert already_on(report, d) == []


def test_load_with_chunked_prefill_on_is_overload_not_interference():
    """The issue's case: 8B on an H100, chunked prefill already on, heavy load: TPOT misses
    because of the batch, and nobody should be told to turn chunked prefill on. (The issue
    said 20 req/s; with realistic step times one H100 no longer keeps up at 20/s, so TTFT
    misses too; at 15/s it keeps up and only TPOT misses, the situation meant here.) The
    quietest tenth still decodes ~75 together, so "slow even at low load" must not be read
    from them: one request alone (step-time estimate) takes ~8 ms."""
    d = Deployment(engine=V1_ENGINE)
    report = run(Workload(1200, rate=15, seed=12, **LONG_CHAT), d)
    assert report.cause == "overload" and report.primary.step == "decode"
    assert already_on(report, d) == []
    keys = [s.key for s in report.suggestions]
    assert {"tensor_parallel", "add_replica", "lower_max_num_seqs"} <= set(keys)
    for s in report.suggestions:
        assert s.trades  # each says what it costs
    # Same load, half of it: fine.
    assert run(Workload(1200, rate=7.5, seed=12, **LONG_CHAT), d).verdict == "ok"
    # Without the deployment the fit, extrapolated to one request, says the same.
    bare = run(Workload(1200, rate=15, seed=12, **LONG_CHAT), d, know_deployment=False)
    assert bare.cause == "overload" and bare.primary.step == "decode"


def test_kv_pressure_from_memory_utilisation_and_fp8_kv_not_suggested_twice():
    w = Workload(500, rate=4, prompt_tokens=LogNormal(2000, 0.4, 16, 8192),
                 output_tokens=LogNormal(600, 0.4, 8, 4096), seed=13)  # fmt: skip
    tight = Deployment(engine=replace(V0_ENGINE, gpu_memory_utilization=0.3))
    report = run(w, tight)
    assert report.cause == "kv_pressure"
    keys = [s.key for s in report.suggestions]
    assert keys[0] == "raise_gpu_memory_utilization" and "kv_cache_fp8" in keys
    fp8 = replace(tight, kv_dtype="fp8", weight_dtype="fp8")
    again = run(w, fp8)
    if again.cause == "kv_pressure":
        assert already_on(again, fp8) == []
        assert "kv_cache_fp8" not in [s.key for s in again.suggestions]
    roomy = Deployment(engine=V0_ENGINE)
    assert run(w, roomy).cause is None


def test_too_slow_on_a_slower_gpu_only():
    w = Workload(200, rate=0.3, seed=14, **CHAT)
    slow = run(w, Deployment(gpu="l4", engine=V1_ENGINE))
    assert slow.cause == "too_slow" and slow.primary.step == "decode"
    assert 1 <= slow.primary.evidence["low_load_tpot_over_floor"] < 3  # the hardware limit
    assert "speculative_decoding" in [s.key for s in slow.suggestions]
    assert run(w, Deployment(gpu="h100-sxm", engine=V1_ENGINE)).verdict == "ok"


def test_head_of_line_needs_long_prompts():
    short = {"output_tokens": LogNormal(64, 0.3, 16, 1024), "seed": 15}
    d = Deployment(engine=V1_ENGINE)
    report = run(Workload(500, rate=1.0, prompt_tokens=Empirical((60000,) + (300,) * 19),
                          **short), d)  # fmt: skip
    assert report.cause == "head_of_line" and report.primary.step == "queueing"
    assert report.primary.evidence["prompt_ahead_of_slow_mean_tokens"] > 10000
    assert already_on(report, d) == []
    # Same GPU, same rate, short prompts only: nothing to block the queue.
    assert run(Workload(500, rate=1.0, prompt_tokens=300, **short), d).verdict == "ok"


def test_long_prompts_at_light_load_are_too_slow_not_queueing():
    report = diagnose(case_log("long_prompts"), slo=CASE_SLO)
    assert report.cause == "too_slow" and report.primary.step == "prefill"
    # The queueing step must not say "meets its target" while TTFT misses.
    queueing = report.finding("queueing")
    assert "meets" not in queueing.detail
    assert queueing.evidence["ttft_p90_s"] > CASE_SLO["ttft_s"]


def test_a_ramp_is_overloaded_in_its_last_windows_and_the_window_is_named():
    w = RampWorkload(900, rate=3, rate_end=40, seed=16, **LONG_CHAT)
    report = run(w, Deployment(engine=V1_ENGINE))
    assert report.cause == "overload"
    saturation = report.finding("saturation")
    assert saturation.verdict == "problem"
    first_window = int(saturation.evidence["window"].split("/")[0])
    assert first_window >= 6  # the tail, not the start, of the ramp


def test_the_realistic_sample_log_ramps_into_overload():
    """data/requests_realistic.csv ramps 3 → 9 req/s against an engine that saturates near
    7/s (data/README.md): the whole-run average hides it, the windows do not."""
    log = read_requests(DATA / "requests_realistic.csv", on_error="report")
    report = diagnose(log)
    assert report.cause == "overload"
    window = report.finding("saturation").evidence["window"]
    assert int(window.split("/")[0]) >= 8


def test_failures_come_first():
    frame = pd.read_csv(DATA / CASE_STUDIES["healthy"].data_file)
    frame["error"] = np.where(np.arange(len(frame)) % 20 == 0, "timeout", "")  # 5 %
    report = diagnose(read_requests(frame), slo=CASE_SLO)
    assert report.cause == "failures" and report.primary.step == "failures"
    assert report.primary.evidence["failed_fraction"] == pytest.approx(0.05)
    assert "'timeout'" in report.primary.detail


def test_a_traceback_is_named_by_its_last_line_and_a_closed_connection_is_the_clients():
    # vLLM 0.33's bench serve against llama-server: 2 of 40 failed, each error a whole
    # traceback ending in aiohttp's "Can not write request body" (a connection the server had
    # closed): the report names that last line, once, and says whose failure it is
    log = read_requests(Path(__file__).parent / "fixtures/vllm_0_33_bench_serve_llama_server.json")
    detail = diagnose(log, slo=CASE_SLO).finding("failures").detail
    assert "Traceback" not in detail and "\n" not in detail
    assert "'aiohttp.client_exceptions.ClientOSError: [Errno None] Can not write request" in detail
    assert "failure of the client, not the server" in detail
    frame = pd.read_csv(DATA / CASE_STUDIES["healthy"].data_file)
    frame["error"] = np.where(np.arange(len(frame)) % 20 == 0, "timeout", "")
    assert "client" not in diagnose(read_requests(frame), slo=CASE_SLO).primary.detail


@pytest.mark.parametrize(
    ("text", "line", "stale"),
    [
        (
            "Traceback (most recent call last):\n  File x\nValueError: bad\n\n",
            "ValueError: bad",
            False,
        ),
        ("ClientOSError(None, 'Can not write request body for http://h/v1')", None, True),
        ("ClientOSError: Cannot write to closing transport", None, True),
        # a crash or a kill disconnects every request in flight: the server's failure
        ("ServerDisconnectedError: Server disconnected", None, False),
        (pd.NA, "", False),
        ("HTTP 503: busy\nmore", "HTTP 503: busy", False),
        (None, "", False),
        (float("nan"), "", False),
        ("x" * 500, "x" * 199 + "…", False),
    ],
)
def test_error_line_and_stale_connection(text, line, stale):
    assert error_line(text) == (str(text) if line is None else line)
    assert stale_connection(text) is stale


def test_every_request_failed_is_a_failure_not_a_crash():
    frame = pd.read_csv(DATA / CASE_STUDIES["healthy"].data_file).head(60)
    frame["error"] = "out of memory"
    frame["first_token_ts"] = np.nan
    frame["end_ts"] = frame["start_ts"] + 1.0
    report = diagnose(read_requests(frame, on_error="report"), slo=CASE_SLO)
    assert report.verdict == "problem" and report.cause == "failures"


# --- not enough data ---------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 3, 20, MIN_REQUESTS - 1])
def test_too_few_requests_is_not_enough_data_never_ok(n):
    # The overloaded log's first arrivals already wait: TTFT up to seconds.
    frame = pd.read_csv(DATA / CASE_STUDIES["overloaded"].data_file)
    frame = frame.sort_values("start_ts").tail(n)
    report = diagnose(read_requests(frame), slo=CASE_SLO)
    assert report.verdict == "not_enough_data" and report.cause is None
    assert report.headline.startswith("not enough data")
    assert "misses a target" in report.headline  # says what it sees, and that it is not healthy
    assert all(f.verdict == "cant_tell" for f in report.findings if f.step != "failures")
    workload = report.finding("workload")
    assert workload.too_few and workload.min_requests == MIN_REQUESTS


def test_a_five_request_export_is_not_enough_data():
    report = diagnose(read_requests(DATA / "vllm_bench_detailed.json"))
    assert report.verdict == "not_enough_data"
    assert "too_slow" not in str(report)


def test_headline_never_contradicts_the_steps():
    for name in CASE_STUDIES:
        report = diagnose(case_log(name), slo=CASE_SLO)
        verdicts = [f.verdict for f in report.findings]
        assert report.headline.startswith(report.verdict.replace("_", " "))
        if report.verdict == "ok":
            assert "problem" not in verdicts and not report.missed
        if report.verdict == "problem":
            assert report.cause in CAUSES
            assert report.cause == "unexplained" or "problem" in verdicts


def test_a_missed_target_nobody_can_explain_is_unexplained():
    findings = [Finding(step, "cant_tell", {}, "no data", missing=("x",), samples=60,
                        min_requests=50) for step in STEPS]  # fmt: skip
    findings[0] = Finding("workload", "ok", {}, "enough", samples=60, min_requests=50)
    report = Diagnosis(findings, CASE_SLO, missed={"ttft": 3.0})
    assert report.verdict == "problem" and report.cause == "unexplained"
    assert report.headline.startswith("problem: unexplained")


def test_memory_cant_tell_without_preemptions_or_deployment():
    bare = pd.read_csv(DATA / CASE_STUDIES["kv_exhausted"].data_file).drop(
        columns=SIMULATOR_COLUMNS
    )
    report = diagnose(read_requests(bare), slo=CASE_SLO)
    memory = report.finding("memory")
    assert memory.verdict == "cant_tell"
    assert memory.missing == ("preemptions column or a /metrics scrape", "model and gpu")
    # The symptom is still found, and the deployment or a scrape brings back the cause.
    assert report.cause == "overload"
    case = CASE_STUDIES["kv_exhausted"]
    with_deployment = diagnose(
        read_requests(bare), slo=CASE_SLO, **case.deployment.diagnose_kwargs()
    )
    assert with_deployment.cause == "kv_pressure"
    assert with_deployment.finding("memory").evidence["peak_share_of_capacity"] >= 0.95
    with_scrape = diagnose(
        read_requests(bare), slo=CASE_SLO, server=read_scrape(DATA / "vllm_metrics_v1.txt")
    )
    assert with_scrape.cause == "kv_pressure"
    assert with_scrape.finding("memory").evidence["server_preemptions"] == 182


# --- the scrape ---------------------------------------------------------------------------------


def test_scrape_reads_v0_and_v1_names():
    v1 = read_scrape(DATA / "vllm_metrics_v1.txt")
    assert (v1.waiting, v1.running, v1.kv_usage, v1.preemptions) == (131, 22, 0.987, 182)
    assert dict(v1.names)["kv_usage"] == "vllm:kv_cache_usage_perc"
    v0 = read_scrape(DATA / "vllm_metrics_v0.txt")
    assert dict(v0.names)["kv_usage"] == "vllm:gpu_cache_usage_perc" and v0.swapped == 0
    both = combine([v0, v1])  # before and after: the counter's increase
    assert both.preemptions == 182 and both.kv_usage == 0.987 and both.scrapes == 2


def test_scrape_sums_engines_and_refuses_what_is_not_a_scrape():
    text = (
        "# TYPE vllm:num_requests_waiting gauge\n"
        'vllm:num_requests_waiting{engine="0"} 3\nvllm:num_requests_waiting{engine="1"} 4\n'
        "# TYPE vllm:kv_cache_usage_perc gauge\n"
        'vllm:kv_cache_usage_perc{engine="0"} 0.5\nvllm:kv_cache_usage_perc{engine="1"} 0.7\n'
    )
    s = parse_scrape(text)
    assert s.waiting == 7 and s.kv_usage == 0.7 and s.preemptions is None
    with pytest.raises(ValueError, match="not Prometheus text"):
        parse_scrape("hello {")
    with pytest.raises(ValueError, match="no vLLM metric"):
        parse_scrape("node_load1 0.5\n")
    a_healthy_server = diagnose(case_log("healthy"), slo=CASE_SLO,
                                server=read_scrape(DATA / "vllm_metrics_v0.txt"))  # fmt: skip
    assert a_healthy_server.verdict == "ok"


# --- signals by hand ----------------------------------------------------------------------------


def frame4():
    return pd.DataFrame(
        {
            "request_id": ["r0", "r1", "r2", "r3"],
            "start_ts": [0.0, 1.0, 2.0, 2.5],
            "first_token_ts": [0.5, 1.2, 3.0, 3.5],
            "end_ts": [3.0, 1.5, 4.0, 5.0],
            "input_tokens": [10, 20, 30, 40],
            "output_tokens": [5] * 4,
        }
    )


def test_decoding_together_by_hand():
    m = request_metrics(read_requests(frame4()))
    d = decoding_together(m)
    # r1 decodes 1.2–1.5 with r0: 2 together. r2 decodes 3.0–4.0: r0 ended at 3.0, r3 joins
    # at 3.5 → 1 for 0.5 s, 2 for 0.5 s = 1.5. r0 decodes 0.5–3.0: alone except 1.2–1.5 (r1)
    # → (2.5 + 0.3) / 2.5 = 1.12.
    assert d[1] == pytest.approx(2.0)
    assert d[2] == pytest.approx(1.5)
    assert d[0] == pytest.approx(2.8 / 2.5)


def test_waiting_and_work_ahead_by_hand():
    m = request_metrics(read_requests(frame4()))
    # Without scheduled_ts, waiting = arrival → first token. At t = 2.6: r2 (2.0–3.0) and r3.
    assert waiting_at(m, np.array([2.6, 0.1, 3.2])).tolist() == [2.0, 1.0, 1.0]
    count, tokens = work_ahead(m)
    # r3 arrives at 2.5 behind r2 (first token at 3.0): one request of 30 prompt tokens.
    assert count.tolist() == [0, 0, 0, 1] and tokens.tolist() == [0, 0, 0, 30]


def test_overlapping_prefill_tokens_by_hand():
    frame = pd.DataFrame(
        {
            "request_id": ["a", "b"],
            "start_ts": [0.0, 2.0],
            "first_token_ts": [1.0, 3.0],
            "end_ts": [5.0, 3.5],
            "input_tokens": [100, 400],
            "output_tokens": [10, 5],
        }
    )
    rates = overlapping_prefill_tokens(request_metrics(read_requests(frame)))
    # b's 400 prompt tokens run during a's 4-second decode; nothing overlaps b's decode.
    assert rates[0] == pytest.approx(400 / 4, rel=0.01)
    assert rates[1] == pytest.approx(0.0, abs=1e-9)


def test_rank_correlation_needs_enough_pairs():
    x = np.arange(30, dtype=float)
    assert rank_correlation(x, x**3) == pytest.approx(1.0)
    assert rank_correlation(x, -x) == pytest.approx(-1.0)
    assert np.isnan(rank_correlation(x[:5], x[:5]))  # five points prove nothing
    assert np.isnan(rank_correlation(x, np.ones_like(x)))  # no spread


# --- report, tables, bad input -------------------------------------------------------------------


def test_report_renders_and_finding_validates():
    report = diagnose(case_log("prefill_interference"), slo=CASE_SLO)
    assert str(report).startswith("problem: interference (step decode)")
    assert "trades:" in str(report)
    assert "<table>" in report._repr_html_()
    assert list(report.to_frame().index) == list(STEPS)
    data = json.loads(json.dumps(report.to_dict()))
    assert data["verdict"] == "problem" and data["cause"] == "interference"
    assert [s["step"] for s in data["steps"]] == list(STEPS)
    with pytest.raises(ValueError, match="verdict='bad'"):
        Finding("decode", "bad", {}, "")
    with pytest.raises(ValueError, match="cause='slow'"):
        Finding("decode", "problem", {}, "", cause="slow")
    with pytest.raises(ValueError, match="step='gpu'"):
        report.finding("gpu")


def test_procedure_and_causes_tables():
    table = procedure_table()
    assert list(table.index) == list(STEPS)
    assert table.loc["memory", "chapter"] == "04_memory_budget"
    assert (table["min_requests"] >= 20).all()
    assert set(causes_table().index) == set(CAUSES) >= {
        "overload", "head_of_line", "interference", "kv_pressure", "too_slow", "failures",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"slo": {"ttft": 1}}, "slo key 'ttft'"),
        ({"slo": {"ttft_s": -1}}, r"slo\['ttft_s'\]=-1"),
        ({"slo": {"ttft_s": float("nan")}}, r"slo\['ttft_s'\]=nan"),
        ({"model": "llama-3.1-8b"}, "model='llama-3.1-8b' must be a Model"),
        ({"gpu": "h100"}, "gpu='h100' must be a GPU"),
        ({"engine": {"block_size": 16}}, "engine=.*must be an llminfer.sim.engines.EngineConfig"),
        ({"replicas": 0}, "replicas=0"),
        ({"server": ["x"]}, "ServerMetrics"),
    ],
)
def test_bad_input_raises_naming_the_parameter(kwargs, message):
    with pytest.raises(ValueError, match=message):
        diagnose(case_log("healthy"), **kwargs)


# --- command line -------------------------------------------------------------------------------


def test_cli_diagnose_exit_status_and_json(capsys):
    path = str(DATA / CASE_STUDIES["prefill_interference"].data_file)
    code = main(["diagnose", path, "--model", "llama-3.1-8b", "--gpu", "h100-sxm",
                 "--slo", "ttft=1s,tpot=20ms", "--engine", "chunked_prefill=off",
                 "--json"])  # fmt: skip
    data = json.loads(capsys.readouterr().out)
    assert code == DIAGNOSE_EXIT["problem"] == 1
    assert data["cause"] == "interference" and data["verdict"] == "problem"
    assert data["suggestions"][0]["key"] == "enable_chunked_prefill"
    healthy = str(DATA / CASE_STUDIES["healthy"].data_file)
    assert main(["diagnose", healthy, "--slo", "ttft=1s,tpot=20ms"]) == 0
    assert capsys.readouterr().out.splitlines()[1].startswith("ok")
    assert main(["diagnose", str(DATA / "vllm_bench_detailed.json")]) == 3
    assert "not enough data" in capsys.readouterr().out


def test_cli_engine_and_scrape(capsys):
    path = str(DATA / CASE_STUDIES["busy"].data_file)
    code = main(["diagnose", path, "--slo", "ttft=1s,tpot=20ms", "--json",
                 "--engine", "chunked_prefill=on,chunk=2048,max_num_seqs=256"])  # fmt: skip
    data = json.loads(capsys.readouterr().out)
    assert code == 1 and data["cause"] == "overload"
    assert "enable_chunked_prefill" not in [s["key"] for s in data["suggestions"]]
    bare = str(DATA / CASE_STUDIES["kv_exhausted"].data_file)
    assert main(["diagnose", bare, "--metrics", str(DATA / "vllm_metrics_v1.txt")]) == 1
    assert "server_preemptions = 182" in capsys.readouterr().out
    assert parse_engine("chunked_prefill=on,chunk=512").max_num_batched_tokens == 512


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--engine", "chunky=on"], "--engine 'chunky=on'"),
        (["--engine", "chunked_prefill=maybe"], "on or off"),
        (["--engine", "gpu_memory_utilization=2"], "gpu_memory_utilization=2"),
        (["--model", "llama-3.1-8b"], "--model and --gpu go together"),
        (["--replicas", "0"], "--replicas 0"),
        (["--metrics", "no-such-scrape.txt"], "no-such-scrape.txt"),
    ],
)
def test_cli_diagnose_bad_input_exits_2(argv, message, capsys):
    path = str(DATA / CASE_STUDIES["healthy"].data_file)
    assert main(["diagnose", path, *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and message in err and "Traceback" not in err


def test_cli_lists_models_and_gpus(capsys):
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "llama-3.1-8b" in out and "max_context" in out
    assert main(["gpus", "--json"]) == 0
    gpus = json.loads(capsys.readouterr().out)
    h100 = next(g for g in gpus if g["key"] == "h100-sxm")
    assert h100["memory_bandwidth"] == pytest.approx(3.35e12)


def test_widget_follows_its_controls():
    from llminfer.widgets import DiagnosisExplorer

    w = DiagnosisExplorer(case="kv_exhausted")
    assert w.result.cause == "kv_pressure" and w.figure is not None
    w.controls["fixed"].value = True
    assert w.result.verdict == "ok"
    w.controls["tpot_ms"].value = w.controls["tpot_ms"].min
    assert w.result.verdict == "problem"
    w.controls["case"].value = "busy"
    assert w.error is None and w.result.cause is not None


def test_model_and_gpu_enable_the_bandwidth_floor():
    report = diagnose(case_log("healthy"), slo=CASE_SLO, model=get_model("llama-3.1-8b"),
                      gpu=get_gpu("h100-sxm"))  # fmt: skip
    decode = report.finding("decode")
    assert 1 <= decode.evidence["low_load_tpot_over_floor"] < 3


@pytest.mark.parametrize("name", [n for n, c in CASE_STUDIES.items() if c.expected])
def test_same_cause_without_scheduled_ts(name):
    """Most tools log no scheduled_ts: the wait is then estimated from the requests that
    arrived to an empty queue, and the cause must not change."""
    case = CASE_STUDIES[name]
    frame = read_requests(DATA / case.data_file).requests.drop(columns=["scheduled_ts"])
    report = diagnose(read_requests(frame), slo=CASE_SLO, **case.deployment.diagnose_kwargs())
    assert report.cause == case.expected
    for step in ("queueing", "prefill"):
        assert "measured" not in report.finding(step).detail
