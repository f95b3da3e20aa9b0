"""Step 0 (is the measurement sound?) and the load sweep as a step."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from llminfer import get_gpu, get_model
from llminfer.diagnose.measurement import (
    arrival_window_rates,
    load_sweep,
    measurement_step,
    sweep_verdict,
)
from llminfer.sim.engines import EngineConfig
from llminfer.sim.simulate import simulate
from llminfer.sim.workload import Workload

LLAMA8 = get_model("llama-3.1-8b")
H100 = get_gpu("h100-sxm")
SLO = {"ttft_s": 1.0, "tpot_s": 0.02}
ENGINE = EngineConfig(max_num_batched_tokens=2048, max_num_seqs=256)


def _log(n=200, rate=4.0, **kw):
    w = Workload(n, rate=rate, prompt_tokens=512, output_tokens=(32, 128), seed=2, **kw)
    return simulate(w, LLAMA8, H100, ENGINE).requests.drop(columns=["token_ts"])


def test_a_simulated_open_loop_run_passes_step_0():
    table = measurement_step(_log(), intended_rps=4.0)
    assert list(table.index) == ["clocks", "warm_up", "drain", "load_generator"]
    assert (table["verdict"] == "ok").all(), table


def test_two_clocks_are_caught():
    log = _log()
    # a server clock running ~30+ ms behind the client's: nobody seems scheduled on arrival
    log[["first_token_ts", "end_ts"]] += 0.05
    log["scheduled_ts"] = log["first_token_ts"] - 1e-3
    row = measurement_step(log).loc["clocks"]
    assert row["verdict"] == "warn" and row["evidence"]["shortest_wait_s"] > 0.02
    no_stamp = measurement_step(log.drop(columns=["scheduled_ts"])).loc["clocks", "verdict"]
    assert no_stamp == "cant_tell"


def test_slow_first_requests_are_warm_up():
    log = _log()
    first = log.sort_values("start_ts").index[:10]
    log.loc[first, ["first_token_ts", "end_ts"]] += 2.0
    log.loc[first, "scheduled_ts"] = log.loc[first, "start_ts"]
    row = measurement_step(log).loc["warm_up"]
    assert row["verdict"] == "warn" and row["evidence"]["first_ttft_p50_s"] > 2.0


def test_drain_and_arrival_window_rates():
    # 600 requests at 60/s overload one H100: the drain is long and the served rate over the
    # arrival window is below the offered one; the whole-run rate counts the drain
    log = _log(n=600, rate=60.0)
    rates = arrival_window_rates(log)
    assert rates["served_rps"] < 0.9 * rates["offered_rps"]
    assert rates["drain_s"] > 0.2 * rates["window_s"]
    assert measurement_step(log).loc["drain", "verdict"] == "warn"
    # by hand: completions inside the arrival window over its length
    t0, t1 = log.start_ts.min(), log.start_ts.max()
    assert rates["served_rps"] == pytest.approx((log.end_ts <= t1).sum() / (t1 - t0))


def test_a_closed_loop_is_named_and_a_slow_generator_too():
    w = Workload(200, concurrency=8, prompt_tokens=512, output_tokens=64, seed=2)
    closed = simulate(w, LLAMA8, H100, ENGINE).requests.drop(columns=["token_ts"])
    assert measurement_step(closed).loc["load_generator", "verdict"] == "warn"
    # asked for 8/s, sent 4/s
    row = measurement_step(_log(), intended_rps=8.0).loc["load_generator"]
    assert row["verdict"] == "warn" and row["evidence"]["intended_rps"] == 8.0


def test_load_sweep_finds_the_knee_and_the_capacity():
    logs = {f"{r:g}/s": _log(n=300, rate=r) for r in (2.0, 8.0, 150.0)}
    table = load_sweep(logs, SLO)
    assert list(table.index) == ["2/s", "8/s", "150/s"]
    assert table.loc["2/s", "within_targets"] and table.loc["2/s", "keeps_up"]
    assert not table.loc["150/s", "keeps_up"]
    verdict = sweep_verdict(table)
    assert verdict["capacity_rps"] == table["served_rps"].max()
    assert verdict["max_good_offered_rps"] == table[table.within_targets].offered_rps.max()
    assert verdict["capacity_rps"] < table.loc["150/s", "offered_rps"] and verdict["saturated"]
    assert sweep_verdict(table.iloc[:2])["saturated"] is False  # 2/s and 8/s: a lower bound


@pytest.mark.parametrize("bad", [0, -1.0, math.inf, True, "4"])
def test_bad_intended_rate_names_the_parameter(bad):
    with pytest.raises(ValueError, match="intended_rps"):
        measurement_step(_log(n=60), intended_rps=bad)


def test_bad_sweep_input_is_refused():
    with pytest.raises(ValueError, match="logs"):
        load_sweep({}, SLO)
    with pytest.raises(ValueError, match="tpot_s"):
        load_sweep({"a": _log(n=60)}, {"ttft_s": 1.0})
    one = pd.DataFrame(
        {"request_id": ["a"], "start_ts": [0.0], "first_token_ts": [0.1], "end_ts": [0.2],
         "input_tokens": [1], "output_tokens": [2]}
    )  # fmt: skip
    with pytest.raises(ValueError, match="at least 2"):
        arrival_window_rates(one)
    assert np.isfinite(arrival_window_rates(_log(n=60))["served_rps"])


def test_a_seeded_poisson_schedule_below_its_mean_rate_is_not_a_slow_generator():
    log = _log(n=80, rate=4.0)
    sent = arrival_window_rates(log)["offered_rps"]
    # 80 arrivals: chance alone puts the sent rate within 1 − 3/√79 ≈ 66 % of the asked one
    assert measurement_step(log, intended_rps=sent / 0.75).loc["load_generator", "verdict"] == "ok"
    assert measurement_step(log, intended_rps=sent / 0.6).loc["load_generator", "verdict"] == "warn"
