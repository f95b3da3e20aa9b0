"""A finite run's arrival window and drain (``SimResult.phases``) and a log's time window
(``summarize(window=…)``), against numbers worked out by hand."""

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llminfer import get_gpu, get_model, read_requests, summarize
from llminfer.logs.window import since_first_start, window_log
from llminfer.sim.engines import EngineConfig
from llminfer.sim.loadsweep import sweep
from llminfer.sim.simulate import SimResult, simulate
from llminfer.sim.workload import Uniform, Workload

LLAMA8 = get_model("llama-3.1-8b")
H100 = get_gpu("h100-sxm")


def hand_run() -> SimResult:
    """Two requests: r0 arrives at 0 s, r1 (the last arrival) at 1 s. Five steps:

    | step | start | s   | prefill | decoding | batch | KV blocks | tokens emitted at the end |
    |------|-------|-----|---------|----------|-------|-----------|---------------------------|
    | 0    | 0.0   | 0.5 | r0 (8)  | 0        | 1     | 1         | r0 @ 0.5                  |
    | 1    | 0.5   | 0.5 | -       | 1        | 1     | 1         | r0 @ 1.0                  |
    | 2    | 1.0   | 0.5 | r1 (8)  | 1        | 2     | 2         | r0 @ 1.5, r1 @ 1.5        |
    | 3    | 1.5   | 0.5 | -       | 1        | 1     | 1         | r1 @ 2.0                  |
    | 4    | 2.0   | 1.0 | -       | 1        | 1     | 1         | r1 @ 3.0                  |
    """
    requests = pd.DataFrame(
        {
            "request_id": ["r0", "r1"],
            "start_ts": [0.0, 1.0],
            "first_token_ts": [0.5, 1.5],
            "end_ts": [1.5, 3.0],
            "input_tokens": [8, 8],
            "output_tokens": [3, 3],
            "scheduled_ts": [0.0, 1.0],
            "token_ts": [np.array([0.5, 1.0, 1.5]), np.array([1.5, 2.0, 3.0])],
        }
    )
    steps = pd.DataFrame(
        {
            "time": [0.0, 0.5, 1.0, 1.5, 2.0],
            "duration_s": [0.5, 0.5, 0.5, 0.5, 1.0],
            "batch_size": [1, 1, 2, 1, 1],
            "prefill_tokens": [8, 0, 8, 0, 0],
            "decode_seqs": [0, 1, 1, 1, 1],
            "kv_blocks": [1, 1, 2, 1, 1],
            "waiting": [0, 0, 0, 0, 0],
            "output_tokens": [1, 1, 2, 1, 1],
        }
    )
    return SimResult(requests, steps, 0, 10, 16, Workload(2, rate=1.0), EngineConfig())


def test_phases_of_a_hand_built_run():
    table = hand_run().phases()
    a, d = table.loc["arrivals"], table.loc["drain"]
    # arrivals = [0, 1): steps 0 and 1, one token (at 0.5; the one at 1.0 is the drain's)
    assert (a.start_s, a.end_s, a.duration_s) == (0.0, 1.0, 1.0)
    assert (a.steps, a.decode_steps, a.prefill_steps) == (2, 1, 1)
    assert (a.decode_batch_mean, a.running_batch_mean) == (1.0, 1.0)
    assert a.decode_only_step_s == 0.5
    assert a.prefill_time_share == 0.5 and a.busy_share == 1.0
    assert (a.output_tokens, a.output_tps, a.completed) == (1, 1.0, 0)
    assert a.kv_blocks_mean == 1.0 and a.kv_used_share == 0.1
    assert math.isnan(a.itl_s_p50) and math.isnan(a.tpot_s_p99)  # no gap ends before 1 s
    # drain = [1, 3]: steps 2-4, five tokens, both completions, every gap
    assert (d.start_s, d.end_s, d.duration_s) == (1.0, 3.0, 2.0)
    assert (d.steps, d.decode_steps, d.prefill_steps) == (3, 3, 1)
    assert d.decode_batch_mean == 1.0 and math.isclose(d.running_batch_mean, 4 / 3)
    assert d.decode_only_step_s == 0.75  # steps 3 and 4
    assert d.prefill_time_share == 0.5 / 2.0 and d.busy_share == 1.0
    assert (d.output_tokens, d.output_tps, d.completed) == (5, 2.5, 2)
    assert math.isclose(d.kv_blocks_mean, 4 / 3)
    # gaps 0.5, 0.5 (r0) and 0.5, 1.0 (r1): pooled p50 0.5, p99 0.5 + 0.97 * 0.5
    assert d.itl_s_p50 == 0.5 and math.isclose(d.itl_s_p99, 0.985)
    # per request: r0 0.5, r1 0.75 -> p50 0.625
    assert math.isclose(d.tpot_s_p50, 0.625)


def test_summary_windows_of_a_hand_built_run():
    run = hand_run()
    arrivals = run.summary(window="arrivals")
    assert arrivals.n_requests == 0 and arrivals.window_s == 1.0 and arrivals.output_tps == 1.0
    drain = run.summary(window="drain")
    assert drain.n_requests == 2 and drain.window_s == 2.0
    assert drain.output_tps == 2.5 and drain.rps == 1.0  # 5 tokens and 2 requests in 2 s
    whole = run.summary()
    assert whole.window_s == 3.0 and whole.output_tps == 2.0  # all 6 tokens in 3 s
    with pytest.raises(ValueError, match="window='steady'"):
        run.summary(window="steady")


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(2, 40),
    rate=st.floats(0.5, 200),
    seed=st.integers(0, 1000),
    chunked=st.booleans(),
)
def test_phases_partition_the_run(n, rate, seed, chunked):
    """Arrival + drain steps are all steps, tokens all tokens, completions all requests."""
    engine = EngineConfig(chunked_prefill=chunked, prefix_caching=False)
    workload = Workload(
        n, rate=rate, prompt_tokens=Uniform(8, 600), output_tokens=Uniform(1, 60), seed=seed
    )
    run = simulate(workload, LLAMA8, H100, engine=engine)
    table = run.phases()
    assert table["steps"].sum() == len(run.steps)
    assert table["decode_steps"].sum() == (run.steps.decode_seqs > 0).sum()
    assert table["output_tokens"].sum() == run.steps.output_tokens.sum()
    assert table["completed"].sum() == n
    assert table.loc["arrivals", "end_s"] == table.loc["drain", "start_s"]
    assert math.isclose(table["duration_s"].sum(), run.requests.end_ts.max())
    assert run.summary(window="arrivals").n_requests + run.summary(window="drain").n_requests == n


def test_phases_rejects_bad_percentiles():
    with pytest.raises(ValueError, match="percentiles"):
        hand_run().phases(percentiles=(0,))


def test_sweep_can_report_the_arrival_window():
    workload = Workload(60, rate=1, prompt_tokens=Uniform(100, 800), output_tokens=Uniform(20, 200))
    run_table = sweep(workload, LLAMA8, H100, rates=[40])
    arrivals = sweep(workload, LLAMA8, H100, rates=[40], window="arrivals")
    run = simulate(replace(workload, rate=40), LLAMA8, H100)
    phases = run.phases()
    assert arrivals.loc[0, "output_tps"] == phases.loc["arrivals", "output_tps"]
    assert arrivals.loc[0, "mean_batch"] == phases.loc["arrivals", "decode_batch_mean"]
    assert run_table.loc[0, "window_s"] > arrivals.loc[0, "window_s"]
    assert arrivals.loc[0, "drain_step_share"] == run_table.loc[0, "drain_step_share"]
    with pytest.raises(ValueError, match="window="):
        sweep(workload, LLAMA8, H100, rates=[1], window="steady")


# --- a time window of a log ---------------------------------------------------------------


def window_frame() -> pd.DataFrame:
    """Four requests on a clock starting at 100 s; the window [101, 103) completes r1 and r2."""
    return pd.DataFrame(
        {
            "request_id": ["r0", "r1", "r2", "r3"],
            "start_ts": [100.0, 100.5, 101.0, 102.0],
            "first_token_ts": [100.2, 100.7, 101.5, 102.5],
            "end_ts": [100.9, 101.5, 102.9, 104.0],
            "input_tokens": [10, 20, 30, 40],
            "output_tokens": [2, 3, 4, 5],
        }
    )


def test_window_counts_requests_completed_inside_it():
    log = read_requests(window_frame())
    s = summarize(log, window=(101.0, 103.0))
    assert s.n_requests == 2 and s.window_s == 2.0
    assert s.rps == 1.0 and s.output_tps == (3 + 4) / 2 and s.input_tps == (20 + 30) / 2
    assert s.table.loc["ttft_s", "count"] == 2 and math.isclose(s.table.loc["ttft_s", "max"], 0.5)
    assert s.window_from == "window, tokens of completed requests"
    assert "[101.000, 103.000)" in str(s)
    # the slice filtered on start_ts and summarised over its own span: the trap
    naive = summarize(window_frame()[lambda f: (f.start_ts >= 101) & (f.start_ts < 103)])
    assert naive.window_s == 3.0 and naive.rps == 2 / 3


def test_window_with_token_times_counts_tokens_emitted_inside_it():
    frame = window_frame()
    frame["token_ts"] = [
        np.array([100.2, 100.9]),
        np.array([100.7, 101.1, 101.5]),
        np.array([101.5, 102.0, 102.5, 102.9]),
        np.array([102.5, 102.9, 103.2, 103.6, 104.0]),
    ]
    s = summarize(read_requests(frame), window=(101.0, 103.0))
    # r1: 101.1, 101.5; r2: all 4; r3: 102.5, 102.9 (not complete, still emitting)
    assert s.output_tps == (2 + 4 + 2) / 2 and s.n_requests == 2
    assert s.window_from == "window, tokens emitted"


def test_window_log_carries_the_window_to_every_summary():
    log = read_requests(window_frame())
    part = window_log(log, 101.0, 103.0)
    assert list(part.requests.request_id) == ["r1", "r2"] and part.source.window_s == 2.0
    slo = {"ttft_s": 0.4}
    assert (
        summarize(part, slo=slo).to_dict() == summarize(log, slo=slo, window=(101, 103)).to_dict()
    )
    assert "window [101, 103)" in str(part.source)
    assert since_first_start(log, 1, 3) == (101.0, 103.0)
    grouped = summarize(log, by="request_id", window=(101.0, 103.0))
    assert grouped.total.n_requests == 2


@pytest.mark.parametrize(
    "bad", [(3, 1), (1, 1), (0, math.inf), (math.nan, 1), "01", (1,), (True, 2)]
)
def test_bad_windows_are_refused(bad):
    with pytest.raises(ValueError, match="window="):
        summarize(window_frame(), window=bad)
    with pytest.raises(ValueError, match="window="):
        window_log(read_requests(window_frame()), None, 1)


def test_the_realistic_logs_last_two_minutes():
    """The issue's figures: inside [480 s, 600 s) the log completes ~7.8 requests/s."""
    big = read_requests(Path(__file__).resolve().parents[1] / "data" / "requests_realistic.csv")
    late = summarize(big, window=since_first_start(big, 480, 600))
    assert late.window_s == 120.0 and round(late.rps, 1) == 7.8
    assert 1700 < late.output_tps < 1800


def test_window_counts_each_token_of_a_multi_token_chunk():
    frame = window_frame().iloc[:2].copy()
    frame["token_ts"] = [np.array([100.2, 100.9]), np.array([100.7, 101.5])]
    frame["chunk_tokens"] = [np.array([1, 1]), np.array([1, 2])]
    s = summarize(read_requests(frame), window=(101.0, 102.0))
    assert s.output_tps == 2.0  # r1's last chunk carries two tokens, at 101.5 s


def test_max_goodput_judges_the_window_it_is_given():
    from llminfer.sim.loadsweep import max_goodput

    workload = Workload(60, rate=1, prompt_tokens=Uniform(100, 800), output_tokens=Uniform(20, 200))
    found = max_goodput(workload, LLAMA8, H100, {"ttft_s": 0.5}, rates=[2, 40], window="arrivals")
    table = sweep(workload, LLAMA8, H100, rates=[2, 40], slo={"ttft_s": 0.5}, window="arrivals")
    assert list(found.table["ttft_s_p99"]) == list(table["ttft_s_p99"])
