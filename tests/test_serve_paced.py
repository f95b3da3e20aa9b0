"""The paced server (``serve --paced``): its steps are the step model's, its scheduling is the
real engine's, so with a fake clock it reproduces ``simulate`` exactly, and over real HTTP it
stays within 15 % of it (TTFT and TPOT p50).
"""

import numpy as np
import pandas as pd
import pytest

from llminfer.bench import accounting, arrival_window_tps, bench, records_frame, simulate_sweep
from llminfer.bench.results import load_workloads
from llminfer.cli import main
from llminfer.logs.summary import summarize
from llminfer.serve import ServeConfig, ServerProcess, ToyEngine, build_model, parse_paced
from llminfer.serve.engine import CATCH_UP_S, paced_token
from llminfer.sim.engines import kv_capacity_blocks
from llminfer.sim.simulate import simulate
from llminfer.sim.workload import Workload

PACED = "llama-3.1-8b:h100-sxm:vllm"


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds


def _closed_loop(config, workload, cpu_s=0.0):
    """Serve ``workload``'s closed loop on a paced engine with a fake clock, as the server's
    event loop does (the CPU work between steps takes ``cpu_s``); per request (start, first
    token, end, tokens)."""
    clock = FakeClock()
    engine = ToyEngine(
        build_model("tiny"), config, clock=clock, sleep=clock.sleep, record_steps=True
    )
    rows = list(workload.requests().itertuples())
    sent, done = [0], {}

    def send():
        if sent[0] == len(rows):
            return
        row, start, times = rows[sent[0]], clock(), []
        sent[0] += 1

        def listener(event, rid=row.request_id):
            times.append(event[2])
            if event[1][1] is not None:
                done[rid] = (start, times[0], times[-1], len(times))
                send()

        engine.submit([1] * int(row.prompt_tokens), int(row.output_tokens), listener)

    for _ in range(min(workload.concurrency, len(rows))):
        send()
    while engine.has_work():
        if engine.begin_step():
            clock.sleep(max(engine.due_s - clock(), 0.0))
        engine.end_step()
        clock.t += cpu_s  # streaming the tokens, reading requests: before the next plan
    return engine, done


@pytest.mark.parametrize(
    ("knobs", "workload"),
    [  # chunked prompts (700 tokens, 512 a step) and a queue; then a full KV cache
        ({"max_num_batched_tokens": 512}, Workload(20, concurrency=6, prompt_tokens=700,
                                                   output_tokens=20)),
        ({"num_kv_blocks": 120}, Workload(12, concurrency=4, prompt_tokens=300,
                                          output_tokens=200)),
    ],
)  # fmt: skip
def test_paced_engine_with_a_fake_clock_is_simulate_step_for_step(knobs, workload):
    config = ServeConfig(paced=PACED, max_num_seqs=4, **knobs)
    engine, done = _closed_loop(config, workload)
    sim = simulate(workload, **config.simulate_kwargs())
    np.testing.assert_allclose([s[1] for s in engine.step_log], sim.steps["duration_s"])
    np.testing.assert_allclose([s[0] for s in engine.step_log], sim.steps["time"], atol=1e-9)
    assert engine.preemptions_total == sim.preemptions
    req = sim.requests
    ours = np.array(list(done.values()))
    for column, theirs in ((1, req.first_token_ts), (2, req.end_ts)):
        np.testing.assert_allclose(
            np.sort(ours[:, column] - ours[:, 0]), np.sort(theirs - req.start_ts), atol=1e-9
        )
    assert (ours[:, 3] == workload.output_tokens).all() and engine.late_steps == 0


def test_cpu_work_overlaps_the_step_until_it_outlasts_it():
    workload = Workload(4, concurrency=2, prompt_tokens=64, output_tokens=10)
    config = ServeConfig(paced=PACED, max_num_seqs=2)
    ideal, _ = _closed_loop(config, workload)
    step_s = min(s[1] for s in ideal.step_log)
    hidden, _ = _closed_loop(config, workload, cpu_s=0.5 * step_s)  # planning < a step
    assert [s[0] for s in hidden.step_log] == pytest.approx([s[0] for s in ideal.step_log])
    assert hidden.late_steps == 0
    late, _ = _closed_loop(config, workload, cpu_s=2 * step_s)  # CPU work > a step: late
    assert late.late_steps == len(late.step_log) - 1  # all but the first
    assert step_s < late.max_late_s <= CATCH_UP_S + 2 * step_s  # behind, then the clock restarts
    # a short stall is caught up: the steps after it keep the predicted timeline
    clock = FakeClock()
    engine = ToyEngine(
        build_model("tiny"), config, clock=clock, sleep=clock.sleep, record_steps=True
    )
    engine.submit([1] * 64, 20, lambda event: None)
    for k in range(20):
        engine.begin_step()
        clock.sleep(max(engine.due_s - clock(), 0.0))
        engine.end_step()
        clock.t += 3 * step_s if k == 5 else 0.0  # the process waits for the CPU once
    ends = np.array([s[0] + s[1] for s in engine.step_log])
    assert engine.late_steps >= 2 and clock() == pytest.approx(ends[-1])
    assert ends[-1] == pytest.approx(sum(s[1] for s in engine.step_log))  # back on time


def test_paced_tokens_are_exact_and_deterministic():
    config = ServeConfig(paced=PACED)
    engine = ToyEngine(build_model("tiny"), config, clock=FakeClock(), sleep=lambda s: None)
    got = [[], []]
    for events in got:
        engine.submit([3, 1, 4, 1, 5], 7, events.append)
    while engine.has_work():
        engine.step()
    tokens = [[e[1][0] for e in events] for events in got]
    assert tokens[0] == tokens[1] and len(tokens[0]) == 7
    assert tokens[0][0] == paced_token(5, 5, engine.vocab_size)
    assert [e[1][1] for e in got[0]][-2:] == [None, "length"]


def test_paced_config_takes_its_kv_cache_from_plan_memory():
    model, gpu, profile = parse_paced(PACED)
    config = ServeConfig(paced=PACED, max_num_seqs=8)
    assert profile == "vllm" and model.name == "Llama-3.1-8B"
    assert config.num_kv_blocks == kv_capacity_blocks(model, gpu, config.engine_config())
    assert ServeConfig(paced=PACED, num_kv_blocks=50).num_kv_blocks == 50
    assert ServeConfig().num_kv_blocks == 1024 and ServeConfig().paced is None
    assert "--paced" in config.command_line() and parse_paced("llama-3.1-8b:h100-sxm")[2] == "vllm"
    engine = ToyEngine(build_model("tiny"), config)
    assert engine.max_context == model.max_context and engine.pool is None


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("llama-3.1-8b", "MODEL:GPU"),
        ("llama-3.1-8b:h100-sxm:fast", "profile 'fast'"),
        ("no-such-model:h100-sxm", "no-such-model"),
        ("llama-3.1-8b:h100-sxm:vllm:x", "MODEL:GPU"),
    ],
)
def test_bad_paced_specs_say_what_is_allowed(spec, match):
    with pytest.raises(ValueError, match=match):
        ServeConfig(paced=spec)


def test_bad_memory_share_is_refused_in_either_mode():
    for paced in (None, PACED):
        with pytest.raises(ValueError, match=r"gpu_memory_utilization=1\.5"):
            ServeConfig(paced=paced, gpu_memory_utilization=1.5)


def test_the_command_refuses_a_bad_paced_spec_in_one_line(capsys):
    assert main(["serve", "--paced", "llama-3.1-8b"]) == 2
    err = capsys.readouterr().err
    assert "MODEL:GPU" in err and "Traceback" not in err and len(err.splitlines()) == 1


def test_load_workloads_are_the_same_for_measurement_and_prediction():
    workload = Workload(8, concurrency=1, prompt_tokens=64, output_tokens=8)
    kind, points = load_workloads(workload, concurrencies=[1, 8], requests_per_user=2)
    assert kind == "concurrency" and [p.n_requests for _, p in points] == [8, 16]
    with pytest.raises(ValueError, match="requests_per_user"):
        load_workloads(workload, rates=[1.0], requests_per_user=2)


def test_paced_server_over_http_matches_simulate_within_15_percent():
    config = ServeConfig(paced=PACED, max_num_seqs=4, max_num_batched_tokens=8192)
    workload = Workload(24, concurrency=8, prompt_tokens=256, output_tokens=24, seed=0)
    prediction = simulate(workload, **config.simulate_kwargs())
    # the run is short by construction (plus the server's start, ~2 s): no wall-clock assert,
    # which a machine busy with other work would break
    assert prediction.requests["end_ts"].max() < 1.5
    with ServerProcess(config=config, shutdown_after=120) as server:
        run = bench(server.url, workload, "paced-llama-3.1-8b")
        assert accounting(run)["failed"] == 0
        measured = summarize(records_frame(run.records)).to_dict()
    predicted = prediction.summary().to_dict()
    for key in ("ttft_s_p50", "tpot_s_p50"):  # 8 users, 4 slots: a queue hides HTTP's delays
        assert measured[key] == pytest.approx(predicted[key], rel=0.15), key
    assert "paced steps" in server.output()


def test_simulate_sweep_has_sweep_server_rows_and_columns():
    config = ServeConfig(paced=PACED, max_num_seqs=2)
    workload = Workload(2, concurrency=1, prompt_tokens=32, output_tokens=4)
    predicted, logs = simulate_sweep(
        workload, concurrencies=[1, 4], requests_per_user=1, **config.simulate_kwargs()
    )
    assert [len(logs[c]) for c in (1, 4)] == [2, 4]
    assert list(predicted["concurrency"]) == [1, 4] and (predicted["failed"] == 0).all()
    summary_keys = set(summarize(logs[1], percentiles=(50, 90, 99)).to_dict())
    expected = {"concurrency", "failed", "decode_tps", "arrival_tps", *summary_keys}
    assert expected == set(predicted.columns)


def test_arrival_window_tps_counts_tokens_between_the_first_and_last_start():
    frame = pd.DataFrame(
        {
            "start_ts": [0.0, 0.0, 2.0],
            "status": ["ok", "ok", "ok"],
            "token_ts": [np.array([0.5, 1.0, 2.5]), np.array([1.5, 3.0]), np.array([2.2, 2.4])],
            "chunk_tokens": [np.array([1, 2, 1]), np.array([1, 1]), np.array([1, 1])],
        }
    )
    assert arrival_window_tps(frame) == pytest.approx((1 + 2 + 1) / 2.0)
    assert np.isnan(arrival_window_tps(frame.iloc[:2]))
