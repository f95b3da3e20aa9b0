"""The serving simulator: invariants, agreement with chapter 2's estimate, policies, bad input."""

import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llminfer import get_gpu, get_model
from llminfer.cost.latency import estimate_latency
from llminfer.cost.steptime import step_timer
from llminfer.sim.engines import V0_ENGINE, EngineConfig, kv_capacity_blocks
from llminfer.sim.loadsweep import best_load, compare_engines, itl_stats, knee, max_goodput, sweep
from llminfer.sim.runcache import RunCache
from llminfer.sim.simulate import simulate
from llminfer.sim.workload import Empirical, LogNormal, Uniform, Workload
from llminfer.specs.stepmodel import PROFILES

LLAMA8 = get_model("llama-3.1-8b")
H100 = get_gpu("h100-sxm")


def _check_invariants(result, workload):
    req = result.requests
    # every request finishes
    assert len(req) == workload.n_requests
    assert req[["start_ts", "scheduled_ts", "first_token_ts", "end_ts"]].notna().all().all()
    # each request's timestamps are ordered
    assert (req.start_ts <= req.scheduled_ts).all()
    assert (req.scheduled_ts < req.first_token_ts).all()
    assert (req.first_token_ts <= req.end_ts).all()
    single = req.output_tokens == 1
    assert (req.first_token_ts[single] == req.end_ts[single]).all()
    assert (req.first_token_ts[~single] < req.end_ts[~single]).all()
    # tokens are conserved: every output token comes from exactly one step
    assert result.steps.output_tokens.sum() == req.output_tokens.sum()
    # every prompt token not served from the prefix cache is computed at least once
    assert result.steps.prefill_tokens.sum() >= (req.input_tokens - req.cached_prefix_tokens).sum()
    if result.preemptions == 0:
        assert (
            result.steps.prefill_tokens.sum() == (req.input_tokens - req.cached_prefix_tokens).sum()
        )
    assert result.preemptions == req.preemptions.sum()
    # KV blocks in use never exceed capacity; the batch respects max_num_seqs
    assert result.steps.kv_blocks.max() <= result.capacity_blocks
    assert (result.steps.decode_seqs <= result.engine.max_num_seqs).all()
    assert (result.steps.duration_s > 0).all()
    # steps follow each other without overlap
    ends = result.steps.time + result.steps.duration_s
    assert (result.steps.time.iloc[1:].to_numpy() >= ends.iloc[:-1].to_numpy() - 1e-12).all()
    _check_token_times(result)


def _check_token_times(result):
    """token_ts: one time per output token, first = first_token_ts, last = end_ts, never
    decreasing, every time the end of some step; so TPOT is the mean of the request's ITLs."""
    req = result.requests
    step_ends = set((result.steps.time + result.steps.duration_s).round(12))
    for row in req.itertuples():
        ts = row.token_ts
        assert len(ts) == row.output_tokens
        assert ts[0] == row.first_token_ts
        assert ts[-1] == row.end_ts
        assert (np.diff(ts) > 0).all()  # one token per step per sequence
        assert set(np.round(ts, 12)) <= step_ends
        if row.output_tokens > 1:
            tpot = (row.end_ts - row.first_token_ts) / (row.output_tokens - 1)
            assert np.diff(ts).mean() == pytest.approx(tpot, rel=1e-9)


def _tps(result):
    req = result.requests
    return req.output_tokens.sum() / (req.end_ts.max() - req.start_ts.min())


ENGINES = [
    EngineConfig(),
    V0_ENGINE,
    EngineConfig(chunked_prefill=True, max_num_batched_tokens=512, max_num_seqs=64),
    EngineConfig(policy="static", max_num_seqs=32),
    EngineConfig(prefix_caching=True, chunked_prefill=False, block_size=32),
    EngineConfig(prefix_caching=True, chunked_prefill=True, max_num_batched_tokens=1024),
    EngineConfig(max_num_batched_tokens=1024, long_prefill_token_threshold=256),
]


@pytest.mark.parametrize("engine", ENGINES, ids=lambda e: repr(e)[12:80])
@pytest.mark.parametrize("capacity", [None, 400])
def test_invariants_hold_for_every_engine(engine, capacity):
    workload = Workload(
        300,
        rate=30,
        prompt_tokens=LogNormal(600, 0.8, high=3000),
        output_tokens=(1, 400),
        shared_prefix_tokens=256,
        prefix_groups=3,
        prefix_share=0.7,
        seed=3,
    )
    result = simulate(workload, LLAMA8, H100, engine, capacity_blocks=capacity)
    _check_invariants(result, workload)
    if capacity is not None and engine.policy == "continuous":
        assert result.preemptions > 0  # 400 blocks of 16-32 tokens force preemptions


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(1, 60),
    rate=st.sampled_from([0.5, 5.0, 50.0, math.inf]),
    seqs=st.integers(1, 40),
    block=st.sampled_from([1, 8, 16, 64]),
    capacity=st.integers(130, 2000),
    chunked=st.booleans(),
    prefix=st.booleans(),
    seed=st.integers(0, 1000),
)
def test_invariants_property(n, rate, seqs, block, capacity, chunked, prefix, seed):
    workload = Workload(
        n,
        rate=rate,
        prompt_tokens=(1, 1000),
        output_tokens=(1, 300),
        shared_prefix_tokens=100,
        prefix_groups=2,
        seed=seed,
    )
    engine = EngineConfig(
        max_num_seqs=seqs,
        # without chunking every prompt (up to 1,000 tokens) must fit one step
        max_num_batched_tokens=max(seqs, 256 if chunked else 1000),
        block_size=block,
        chunked_prefill=chunked,
        prefix_caching=prefix,
    )
    capacity = max(capacity, math.ceil(1300 / block))
    _check_invariants(simulate(workload, LLAMA8, H100, engine, capacity_blocks=capacity), workload)


def test_closed_loop_keeps_at_most_concurrency_requests_in_flight():
    workload = Workload(200, concurrency=8, prompt_tokens=256, output_tokens=(10, 100))
    result = simulate(workload, LLAMA8, H100)
    _check_invariants(result, workload)
    req = result.requests.sort_values("start_ts")
    events = sorted(
        [(t, 1) for t in req.start_ts] + [(t, -1) for t in req.end_ts], key=lambda e: (e[0], e[1])
    )
    in_flight = np.cumsum([d for _, d in events])
    assert in_flight.max() == 8
    assert result.steps.batch_size.max() <= 8


# --- agreement with chapter 2 -----------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "gpu", "n_gpus", "prompt", "output"),
    [
        ("llama-3.1-8b", "h100-sxm", 1, 1024, 80),
        ("llama-3.1-8b", "a100-80gb-sxm", 1, 4096, 96),
        ("llama-3.1-70b", "h100-sxm", 4, 512, 64),
        ("qwen2.5-7b", "l40s", 1, 200, 2),
    ],
)
def test_one_request_in_flight_matches_estimate_latency(model, gpu, n_gpus, prompt, output):
    m, g = get_model(model), get_gpu(gpu)
    result = simulate(
        Workload(1, rate=1.0, prompt_tokens=prompt, output_tokens=output), m, g, n_gpus=n_gpus
    )
    row = result.requests.iloc[0]
    estimate = estimate_latency(m, g, prompt, output, n_gpus=n_gpus)
    assert row.first_token_ts - row.start_ts == pytest.approx(estimate.ttft_s, rel=1e-12)
    tpot = (row.end_ts - row.first_token_ts) / (output - 1)
    assert tpot == pytest.approx(estimate.tpot_s, rel=1e-9)


def test_one_user_closed_loop_matches_estimate_for_every_request():
    workload = Workload(20, concurrency=1, prompt_tokens=(50, 2000), output_tokens=(2, 50))
    result = simulate(workload, LLAMA8, H100)
    for row in result.requests.itertuples():
        estimate = estimate_latency(LLAMA8, H100, row.input_tokens, row.output_tokens)
        assert row.first_token_ts - row.start_ts == pytest.approx(estimate.ttft_s, rel=1e-12)
        assert row.end_ts - row.start_ts == pytest.approx(estimate.e2e_s, rel=1e-9)


# --- policies ---------------------------------------------------------------------------


@pytest.mark.parametrize("rate", [2.0, 8.0, 20.0, math.inf])
@pytest.mark.parametrize("seed", [0, 1])
def test_continuous_throughput_is_never_below_static(rate, seed):
    workload = Workload(
        400,
        rate=rate,
        prompt_tokens=LogNormal(400, 1.0, high=4000),
        output_tokens=LogNormal(150, 1.0, high=2000),
        seed=seed,
    )
    continuous = simulate(workload, LLAMA8, H100, EngineConfig(max_num_seqs=64))
    static = simulate(workload, LLAMA8, H100, EngineConfig(policy="static", max_num_seqs=64))
    assert _tps(continuous) >= _tps(static)


@pytest.mark.parametrize("rate", [1.0, 10.0, 40.0])
@pytest.mark.parametrize("chunked", [False, True])
def test_prefix_caching_never_raises_ttft(rate, chunked):
    workload = Workload(
        400,
        rate=rate,
        prompt_tokens=(1500, 3000),
        output_tokens=(20, 200),
        shared_prefix_tokens=1024,
        prefix_groups=4,
        prefix_share=0.8,
        seed=7,
    )
    base = EngineConfig(chunked_prefill=chunked)
    off = simulate(workload, LLAMA8, H100, base).requests
    on = simulate(
        workload, LLAMA8, H100, EngineConfig(prefix_caching=True, chunked_prefill=chunked)
    )
    on = on.requests
    ttft_off, ttft_on = off.first_token_ts - off.start_ts, on.first_token_ts - on.start_ts
    assert ttft_on.mean() <= ttft_off.mean()
    for q in (0.5, 0.9, 0.99, 1.0):
        assert ttft_on.quantile(q) <= ttft_off.quantile(q) + 1e-12
    assert (on.cached_prefix_tokens > 0).mean() > 0.5
    assert (on.cached_prefix_tokens % 16 == 0).all()


def test_prefix_hit_skips_whole_blocks_only():
    # one group, prompt 1000 with a 300-token prefix: 18 blocks of 16 = 288 tokens reusable
    workload = Workload(
        3, concurrency=1, prompt_tokens=1000, output_tokens=5, shared_prefix_tokens=300
    )
    req = simulate(workload, LLAMA8, H100, EngineConfig(prefix_caching=True)).requests
    assert req.cached_prefix_tokens.tolist() == [0, 288, 288]


def test_static_batching_reserves_final_lengths_and_never_preempts():
    workload = Workload(100, rate=math.inf, prompt_tokens=500, output_tokens=500)
    # 100 blocks of 16 tokens hold one request's 1000 tokens (63 blocks), not two
    result = simulate(workload, LLAMA8, H100, EngineConfig(policy="static"), capacity_blocks=100)
    assert result.preemptions == 0
    assert result.steps.batch_size.max() == 1
    paged = simulate(workload, LLAMA8, H100, EngineConfig(), capacity_blocks=100)
    assert paged.steps.batch_size.max() >= 2  # paging admits on the prompt's blocks
    assert paged.preemptions > 0  # ... and pays with preemptions when they grow


def test_capacity_comes_from_plan_memory():
    from llminfer import plan_memory

    engine = EngineConfig(block_size=32, gpu_memory_utilization=0.8)
    plan = plan_memory(LLAMA8, H100, gpu_memory_utilization=0.8, block_size=32)
    assert kv_capacity_blocks(LLAMA8, H100, engine) == plan.capacity_tokens // 32


def test_simulation_is_deterministic():
    workload = Workload(200, rate=10, prompt_tokens=LogNormal(300), output_tokens=(1, 99), seed=5)
    a = simulate(workload, LLAMA8, H100)
    b = simulate(workload, LLAMA8, H100)
    pd.testing.assert_frame_equal(a.requests, b.requests)
    pd.testing.assert_frame_equal(a.steps, b.steps)


def test_workload_lengths_do_not_depend_on_the_rate():
    a = Workload(50, rate=1, prompt_tokens=(1, 100), output_tokens=LogNormal(50)).requests()
    b = Workload(50, rate=9, prompt_tokens=(1, 100), output_tokens=LogNormal(50)).requests()
    assert a.prompt_tokens.tolist() == b.prompt_tokens.tolist()
    assert a.output_tokens.tolist() == b.output_tokens.tolist()
    assert (b.arrival_s.iloc[1:] < a.arrival_s.iloc[1:]).all()


def test_poisson_arrivals_have_the_requested_rate():
    arrivals = Workload(20000, rate=4.0, seed=1).requests().arrival_s
    gaps = np.diff(arrivals)
    assert gaps.mean() == pytest.approx(0.25, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, rel=0.05)  # exponential: CV = 1
    bursty = np.diff(Workload(20000, rate=4.0, burstiness=0.25, seed=1).requests().arrival_s)
    assert bursty.std() / bursty.mean() == pytest.approx(2.0, rel=0.08)  # gamma: CV = 1/√k


def test_empirical_lengths_come_from_the_log():
    log = pd.DataFrame({"input_tokens": [1024, 4096, 512], "output_tokens": [80, 96, 64]})
    lengths = Empirical.from_log(log, "input_tokens")
    drawn = Workload(100, rate=1, prompt_tokens=lengths).requests().prompt_tokens
    assert set(drawn) <= {1024, 4096, 512} and len(set(drawn)) == 3
    assert Uniform(2, 4).mean() == 3


# --- bad configuration ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"max_num_seqs": 0}, "max_num_seqs"),
        ({"block_size": 0}, "block_size"),
        ({"block_size": 1.5}, "block_size"),
        ({"block_size": "16"}, "block_size"),
        ({"max_num_batched_tokens": -1}, "max_num_batched_tokens"),
        ({"policy": "greedy"}, "policy"),
        ({"gpu_memory_utilization": 1.5}, "gpu_memory_utilization"),
        ({"policy": "static", "chunked_prefill": True}, "static"),
    ],
)
def test_bad_engine_config_names_the_parameter(kwargs, name):
    with pytest.raises(ValueError, match=name):
        EngineConfig(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"n_requests": 0, "rate": 1}, "n_requests"),
        ({"n_requests": 10}, "rate"),
        ({"n_requests": 10, "rate": 1, "concurrency": 2}, "concurrency"),
        ({"n_requests": 10, "rate": 0}, "rate"),
        ({"n_requests": 10, "rate": 1, "prompt_tokens": 0}, "prompt_tokens"),
        ({"n_requests": 10, "rate": 1, "output_tokens": (5, 2)}, "output_tokens"),
        ({"n_requests": 10, "rate": 1, "burstiness": 0}, "burstiness"),
    ],
)
def test_bad_workload_names_the_parameter(kwargs, name):
    with pytest.raises(ValueError, match=name):
        Workload(**kwargs)


def test_requests_too_long_for_the_model_or_the_cache_are_refused():
    with pytest.raises(ValueError, match="max_context"):
        simulate(Workload(1, rate=1, prompt_tokens=200_000), LLAMA8, H100)
    with pytest.raises(ValueError, match="KV cache holds only"):
        simulate(Workload(1, rate=1, prompt_tokens=2000), LLAMA8, H100, capacity_blocks=10)
    with pytest.raises(ValueError, match="no KV cache"):
        simulate(Workload(1, rate=1), get_model("llama-3.1-70b"), H100)


# --- sweeps and goodput (chapter 3) -------------------------------------------------------

SWEEP_WORKLOAD = Workload(
    400, rate=1.0, prompt_tokens=LogNormal(800, 0.8, high=8000), output_tokens=(50, 400), seed=2
)
RATES = [1, 2, 4, 8, 16, 32, 64]


@pytest.fixture(scope="module")
def rate_sweep():
    return sweep(SWEEP_WORKLOAD, LLAMA8, H100, rates=RATES, slo={"ttft_s": 0.5})


def test_sweep_throughput_rises_then_flattens_while_latency_climbs(rate_sweep):
    tps = rate_sweep.output_tps.to_numpy()
    assert tps[-1] > 5 * tps[0]
    assert tps[-1] < 1.25 * tps[-2]  # flattened at the top
    ttft = rate_sweep.ttft_s_p99.to_numpy()
    assert ttft[-1] > 10 * ttft[0]
    assert rate_sweep.mean_batch.is_monotonic_increasing
    assert knee(rate_sweep) in RATES[2:]


def test_sweep_rows_are_the_metrics_summary(rate_sweep):
    point = simulate(replace(SWEEP_WORKLOAD, rate=8), LLAMA8, H100)
    summary = point.summary(percentiles=(50, 90, 99), slo={"ttft_s": 0.5}).to_dict()
    row = rate_sweep.set_index("rate").loc[8]
    for key in ("output_tps", "rps", "ttft_s_p99", "tpot_s_p50", "goodput_rps"):
        assert row[key] == pytest.approx(summary[key])
    assert point.log.requests.shape[0] == SWEEP_WORKLOAD.n_requests


def test_a_repeated_run_comes_from_the_cache_as_a_copy(monkeypatch):
    from llminfer.sim import simulate as module

    monkeypatch.setattr(module, "_RUNS", RunCache(3, module._copy_run))
    calls = []
    real = module.Scheduler
    monkeypatch.setattr(module, "Scheduler", lambda *a: calls.append(1) or real(*a))
    work = Workload(30, rate=2.0, output_tokens=(5, 20), seed=4)
    first = simulate(work, LLAMA8, H100, profile="pytorch")
    first.requests.loc[0, "end_ts"] = -1.0  # the caller's copy: the cache keeps its own
    with pytest.raises(ValueError, match="read-only"):
        first.requests["token_ts"].iloc[0][0] = -1.0  # the token times are shared: read-only
    again = simulate(work, LLAMA8, H100, profile="pytorch")
    assert len(calls) == 1 and again.requests.loc[0, "end_ts"] > 0
    pd.testing.assert_frame_equal(again.steps, first.steps)
    assert again.log is not simulate(work, LLAMA8, H100, profile="pytorch").log  # each its own
    assert again.preemptions == first.preemptions
    # another argument is another run; a step_time function is never kept
    simulate(work, LLAMA8, H100, profile=PROFILES["pytorch"])  # the same profile by value
    assert len(calls) == 1
    simulate(work, LLAMA8, H100, kv_dtype="fp8", profile="pytorch")
    simulate(work, LLAMA8, H100)  # the default profile, not "pytorch"
    assert len(calls) == 3
    timer = step_timer(LLAMA8, H100)
    for _ in range(2):
        simulate(work, LLAMA8, H100, step_time=timer)
    assert len(calls) == 5
    for seed in range(5):  # bounded: the oldest run goes first
        simulate(replace(work, seed=seed), LLAMA8, H100)
    assert len(module._RUNS) == 3
    with pytest.raises(ValueError, match="workload"):
        simulate([work], LLAMA8, H100)  # not keyed on, and still refused in the run's words


def test_a_repeated_sweep_comes_from_the_cache_as_a_copy(monkeypatch):
    from llminfer.sim import loadsweep

    fresh = RunCache(loadsweep.SWEEP_CACHE_SIZE, pd.DataFrame.copy)
    monkeypatch.setattr(loadsweep, "_SWEEPS", fresh)
    calls = []
    real = loadsweep.simulate
    monkeypatch.setattr(loadsweep, "simulate", lambda *a, **k: calls.append(1) or real(*a, **k))
    work = Workload(40, rate=1.0, output_tokens=(5, 20), seed=3)
    first = sweep(work, LLAMA8, H100, rates=[1, 4], slo={"ttft_s": 0.5})
    first.loc[0, "rps"] = -1.0  # the caller's copy: the cache keeps its own
    again = sweep(work, LLAMA8, H100, rates=(1, 4), slo={"ttft_s": 0.5})
    assert len(calls) == 2 and again.loc[0, "rps"] > 0
    pd.testing.assert_frame_equal(again.drop(columns="rps"), first.drop(columns="rps"))
    # any argument changed is another sweep; a callable step time is never cached (it could
    # change behind the same identity)
    sweep(work, LLAMA8, H100, rates=[1, 4], slo={"ttft_s": 0.4})
    assert len(calls) == 4
    timer = step_timer(LLAMA8, H100)
    for _ in range(2):
        sweep(work, LLAMA8, H100, rates=[1], step_time=timer)
    assert len(calls) == 6
    # bounded: the oldest table goes first
    for seed in range(loadsweep.SWEEP_CACHE_SIZE + 2):
        sweep(replace(work, seed=seed), LLAMA8, H100, rates=[1])
    assert len(loadsweep._SWEEPS) == loadsweep.SWEEP_CACHE_SIZE
    # bad arguments still get the sweep's own messages, not an error of the cache's key, and
    # not a valid twin's table: True, 1 and 1.0 are equal in Python, {} and None are both falsy
    with pytest.raises(ValueError, match="slo"):
        sweep(work, LLAMA8, H100, rates=[1], slo=[0.5])
    with pytest.raises(ValueError, match="percentile"):
        sweep(work, LLAMA8, H100, rates=[1], percentiles=99)
    sweep(work, LLAMA8, H100, rates=[1], percentiles=(50, 99), slo={"ttft_s": 1.0})
    for bad in (
        {"rates": [True]},
        {"percentiles": (50, True)},
        {"slo": {"ttft_s": True}},
        {"slo": {}},
    ):
        with pytest.raises(ValueError):
            sweep(work, LLAMA8, H100, **({"rates": [1], "percentiles": (50, 99)} | bad))
    # a table's dtypes are those of its own call: rates 1.0 give a float column after rates 1
    assert sweep(work, LLAMA8, H100, rates=[1.0])["rate"].dtype == float
    # a generator of percentiles is read once, for the key and the sweep alike
    spent = sweep(work, LLAMA8, H100, rates=[1], percentiles=(q for q in (50, 99)))
    assert "ttft_s_p99" in spent and "ttft_s_p99" in sweep(work, LLAMA8, H100, rates=[1])


def test_max_goodput_is_the_highest_rate_meeting_the_slo(rate_sweep):
    slo = {"ttft_s": 0.5, "tpot_s": 0.03}
    result = max_goodput(SWEEP_WORKLOAD, LLAMA8, H100, slo, rates=RATES, percentile=99)
    table = result.table.set_index("rate")
    passing = [
        r for r in RATES if table.loc[r, "ttft_s_p99"] <= 0.5 and table.loc[r, "tpot_s_p99"] <= 0.03
    ]
    assert passing and result.load == max(passing)
    assert result.load < max(RATES)  # the highest throughput is not allowed
    assert best_load(rate_sweep, {"ttft_s": 1e-6}) is None
    strict = max_goodput(SWEEP_WORKLOAD, LLAMA8, H100, {"ttft_s": 1e-6}, rates=[1, 2])
    assert strict.load is None and not strict.table.meets_slo.any()


def test_closed_loop_sweep():
    workload = Workload(200, concurrency=1, prompt_tokens=512, output_tokens=(20, 200))
    table = sweep(workload, LLAMA8, H100, concurrencies=[1, 4, 16, 64])
    assert table.output_tps.is_monotonic_increasing
    assert table.tpot_s_p50.is_monotonic_increasing


def test_compare_engines_labels_rows():
    workload = Workload(
        100, rate=20, prompt_tokens=1000, output_tokens=50, shared_prefix_tokens=512
    )
    table = compare_engines(
        workload,
        LLAMA8,
        H100,
        {"plain": EngineConfig(prefix_caching=False), "prefix": EngineConfig()},
    )
    assert list(table.index) == ["plain", "prefix"]
    assert table.loc["plain", "cached_share"] == 0
    assert table.loc["prefix", "cached_share"] == pytest.approx(512 / 1000, rel=0.05)
    with pytest.raises(ValueError, match="rates"):
        sweep(workload, LLAMA8, H100)


@pytest.mark.parametrize(
    "workload, engine",
    [
        (Workload(300, rate=2.0, prompt_tokens=LogNormal(400), output_tokens=(20, 300), seed=3),
         EngineConfig()),
        (Workload(300, rate=40.0, prompt_tokens=LogNormal(800), output_tokens=(20, 300), seed=4),
         EngineConfig(chunked_prefill=True, max_num_batched_tokens=1024)),
        (Workload(200, concurrency=8, prompt_tokens=(100, 900), output_tokens=(10, 200),
                  think_time_s=0.5, seed=5), EngineConfig(policy="static", max_num_seqs=8)),
        (Workload(300, rate=6.0, prompt_tokens=2000, output_tokens=(200, 700),
                  shared_prefix_tokens=1024, prefix_groups=3, seed=6),
         EngineConfig(prefix_caching=True, gpu_memory_utilization=0.3)),
        (Workload(40, rate=0.5, prompt_tokens=30000, output_tokens=(500, 3000), seed=7),
         EngineConfig(gpu_memory_utilization=0.28)),
        # llama.cpp's micro-batches: a stretch's passes are those of its decoding slots
        (Workload(120, concurrency=6, prompt_tokens=(100, 900), output_tokens=(20, 300),
                  seed=8), EngineConfig(max_num_seqs=8, ubatch_split="equal")),
        (Workload(200, rate=30.0, prompt_tokens=(100, 900), output_tokens=(20, 300), seed=9),
         EngineConfig(max_num_seqs=16, ubatch_split="simple", n_ubatch=8)),
    ],
)  # fmt: skip
def test_decode_stretches_change_nothing(workload, engine, monkeypatch):
    """The scheduler's shortcuts change no result. Reference: the main loop alone, one step
    per iteration. Running the few decode steps before the next event in a tight loop
    (``_run_decode_singles``) gives the same bits; running longer stretches of identical
    decode steps in one vectorised go (a StepTimer's ``decode_steps``; a plain step-time
    function has none) agrees to 1e-12 (numpy's vectorised power and a running sum round
    differently in the last bit)."""
    from llminfer.sim.scheduler import Scheduler

    timer = step_timer(LLAMA8, H100)

    def one_at_a_time(*args):
        return timer(*args)

    fast = simulate(workload, LLAMA8, H100, engine, step_time=timer)
    singles = simulate(workload, LLAMA8, H100, engine, step_time=one_at_a_time)
    with monkeypatch.context() as m:
        m.setattr(Scheduler, "_run_decode_singles", lambda self: None)
        m.setattr(Scheduler, "_run_decode_stretch", lambda self: None)
        slow = simulate(workload, LLAMA8, H100, engine, step_time=timer)
    assert fast.preemptions == singles.preemptions == slow.preemptions
    pd.testing.assert_frame_equal(singles.steps, slow.steps, check_exact=True)
    pd.testing.assert_frame_equal(singles.requests, slow.requests, check_exact=True)
    pd.testing.assert_frame_equal(fast.steps, slow.steps, rtol=1e-12)
    pd.testing.assert_frame_equal(fast.requests, slow.requests, rtol=1e-12)


# --- the V1-like default engine (issue 12) ----------------------------------------------


def test_default_engine_is_vllm_v1_on_a_large_gpu():
    # vLLM v0.11.0, vllm/engine/arg_utils.py EngineArgs._set_default_args: V1 turns chunked
    # prefill and prefix caching on; OPENAI_API_SERVER on a GPU >= 70 GiB (not A100): 8192
    # batched tokens, 1024 sequences; CacheConfig block_size 16, gpu_memory_utilization 0.9.
    e = EngineConfig()
    assert (e.chunked_prefill, e.prefix_caching) == (True, True)
    assert (e.max_num_batched_tokens, e.max_num_seqs) == (8192, 1024)
    assert (e.block_size, e.gpu_memory_utilization, e.policy) == (16, 0.9, "continuous")
    # V1 caps the default max_num_seqs by the token budget
    assert EngineConfig(max_num_batched_tokens=512).max_num_seqs == 512
    # the V0 spelling other code relies on keeps meaning prefill-only steps, 256 sequences
    v0 = EngineConfig(
        chunked_prefill=False, prefix_caching=False, max_num_seqs=256, max_num_batched_tokens=8192
    )
    assert v0 == V0_ENGINE
    assert EngineConfig(chunked_prefill=False).max_num_seqs == 256
    static = EngineConfig(policy="static")
    assert (static.chunked_prefill, static.prefix_caching, static.max_num_seqs) == (
        False,
        False,
        256,
    )


def test_v1_chunks_a_long_prompt_and_mixes_it_with_decodes():
    budget = 2048
    engine = EngineConfig(max_num_batched_tokens=budget)
    workload = Workload(
        40,
        rate=20.0,
        prompt_tokens=LogNormal(400, 1.2, high=30_000),
        output_tokens=(50, 300),
        seed=4,
    )
    result = simulate(workload, LLAMA8, H100, engine)
    _check_invariants(result, workload)
    steps = result.steps
    # one token budget per step: prefill tokens + one per decoding sequence
    assert (steps.prefill_tokens + steps.decode_seqs <= budget).all()
    # long prompts are split: some step carries a chunk that fills what decodes left
    mixed = steps[(steps.prefill_tokens > 0) & (steps.decode_seqs > 0)]
    assert len(mixed) > 0
    assert ((mixed.prefill_tokens + mixed.decode_seqs) == budget).any()
    # decodes never stop for a prompt: while anything decodes, every step decodes
    longest = int(result.requests.input_tokens.max())
    assert longest > budget
    n_prefill_steps = (steps.prefill_tokens > 0).sum()
    assert n_prefill_steps >= math.ceil(longest / budget)


def test_v0_steps_are_prefill_only_or_decode_only_and_stall_decodes():
    workload = Workload(
        40, rate=20.0, prompt_tokens=LogNormal(400, 1.2, high=8000), output_tokens=(50, 300)
    )
    v0 = simulate(workload, LLAMA8, H100, V0_ENGINE)
    v1 = simulate(workload, LLAMA8, H100, EngineConfig())
    assert not ((v0.steps.prefill_tokens > 0) & (v0.steps.decode_seqs > 0)).any()
    assert ((v1.steps.prefill_tokens > 0) & (v1.steps.decode_seqs > 0)).any()
    # a prefill-only step is a gap in every running stream: V0's worst ITL is longer
    itl_v0, itl_v1 = itl_stats(v0.log), itl_stats(v1.log)
    assert itl_v0["itl_s_p99"] > itl_v1["itl_s_p99"]


def test_itl_pools_the_gaps_that_make_up_tpot():
    workload = Workload(60, rate=15.0, prompt_tokens=(100, 3000), output_tokens=(1, 200), seed=2)
    result = simulate(workload, LLAMA8, H100)
    req = result.requests
    gaps = np.concatenate([np.diff(ts) for ts in req.token_ts])
    multi = req.output_tokens > 1
    decode = (req.end_ts - req.first_token_ts)[multi].sum()
    assert gaps.size == (req.output_tokens[multi] - 1).sum()
    assert gaps.sum() == pytest.approx(decode, rel=1e-9)  # token-weighted TPOT = mean ITL
    stats = itl_stats(result.log)
    assert stats["itl_s_mean"] == pytest.approx(gaps.mean(), rel=1e-9)
    assert stats["itl_s_p99"] == pytest.approx(np.percentile(gaps, 99), rel=1e-9)
    # summarize reads the same token times as it would a real streamed log
    summary = result.summary().to_dict()
    for key in ("itl_s_mean", "itl_s_p50", "itl_s_p99"):
        assert summary[key] == pytest.approx(stats[key], rel=1e-9)
    assert summary["itl_s_max"] == pytest.approx(gaps.max(), rel=1e-9)
    # one request alone: every gap is one decode step, so ITL = TPOT = estimate_latency's TPOT
    alone = simulate(Workload(1, rate=1.0, prompt_tokens=512, output_tokens=64), LLAMA8, H100)
    gaps = np.diff(alone.requests.token_ts[0])
    assert gaps.size == 63
    tpot = estimate_latency(LLAMA8, H100, prompt_tokens=512, output_tokens=64).tpot_s
    assert gaps.mean() == pytest.approx(tpot, rel=1e-3)


def test_token_times_survive_preemption():
    workload = Workload(80, rate=math.inf, prompt_tokens=(200, 800), output_tokens=(100, 400))
    for engine in (EngineConfig(), V0_ENGINE):
        result = simulate(workload, LLAMA8, H100, engine, capacity_blocks=200)
        assert result.preemptions > 0
        _check_invariants(result, workload)


# --- validation at construction (issue 11) ----------------------------------------------


@pytest.mark.parametrize("think", [math.inf, math.nan, -1.0, True])
def test_think_time_must_be_finite(think):
    with pytest.raises(ValueError, match="think_time_s"):
        Workload(10, concurrency=2, think_time_s=think)


@pytest.mark.parametrize("burst", [math.inf, math.nan])
def test_burstiness_must_be_finite(burst):
    with pytest.raises(ValueError, match="burstiness"):
        Workload(10, rate=1.0, burstiness=burst)


@pytest.mark.parametrize("value", [0.0, -0.01, math.nan, math.inf, "1 ms", None])
def test_bad_step_time_is_refused_before_the_run(value):
    with pytest.raises(ValueError, match="step_time returned"):
        simulate(Workload(5, rate=1.0), LLAMA8, H100, step_time=lambda *args: value)


def test_step_time_that_turns_bad_later_is_refused_with_the_step():
    def late(prefill, attended, seqs, context, cached=0):
        return math.nan if seqs > 3 else 0.01

    with pytest.raises(ValueError, match="step_time returned nan"):
        simulate(Workload(10, rate=math.inf, output_tokens=50), LLAMA8, H100, step_time=late)


def test_unchunked_prompt_larger_than_the_step_budget_is_refused():
    engine = EngineConfig(chunked_prefill=False, max_num_batched_tokens=2048)
    with pytest.raises(ValueError, match=r"prompt of 4000 tokens.*max_num_batched_tokens=2048"):
        simulate(Workload(3, rate=1.0, prompt_tokens=4000), LLAMA8, H100, engine)
    # with chunking the same prompt is split over steps
    result = simulate(
        Workload(3, rate=1.0, prompt_tokens=4000),
        LLAMA8,
        H100,
        EngineConfig(max_num_batched_tokens=2048),
    )
    assert result.steps.prefill_tokens.max() <= 2048
