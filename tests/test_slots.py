"""Issue 22: ``diagnose`` knows the server's slots. Requests sent together on as many slots as
users (a closed loop in lockstep) wait for each other's prefill, not for a slot: never
``overload``. More users than slots queue for a slot: "more slots" comes first. Suggestions
speak the flags of the engine that served the log (vLLM, llama.cpp, SGLang)."""

from __future__ import annotations

import heapq
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from llminfer import read_requests
from llminfer.cli import parse_engine
from llminfer.diagnose.findings import CAUSES
from llminfer.diagnose.run import diagnose
from llminfer.diagnose.scrape import parse_scrape
from llminfer.diagnose.signals import in_flight_peak
from llminfer.diagnose.suggestions import ENGINE_KINDS, Setup, suggest
from llminfer.sim.engines import EngineConfig

PREFILL_S, TPOT_S, OUTPUT = 0.15, 0.02, 64


def lockstep_log(seed: int, users: int = 8, rounds: int = 10, pause_s: float = 0.0):
    """``users`` send together each round; the server prefills them one after another (in
    arrival order) and decodes them in one batch, so they all finish together and the next round
    starts at once: a closed loop in step, never more in flight than ``users``."""
    rng = np.random.default_rng(seed)
    rows, t = [], 0.0
    for _ in range(rounds):
        starts = np.sort(t + rng.uniform(0, 0.005, users))
        prefill = PREFILL_S * rng.uniform(0.9, 1.1, users)
        first = np.maximum.accumulate(starts) + np.cumsum(prefill)
        end = first[-1] + OUTPUT * TPOT_S
        rows += [(s, f, end) for s, f in zip(starts, first, strict=True)]
        t = end + pause_s
    return _frame(rows)


def slot_queue_log(seed: int, users: int = 16, slots: int = 4, per_user: int = 6):
    """``users`` in a closed loop on ``slots``: a request waits for a free slot (FCFS)."""
    rng = np.random.default_rng(seed)
    free = [0.0] * slots
    pending = [(float(u) * 0.01, u) for u in range(users)]
    heapq.heapify(pending)
    sent = dict.fromkeys(range(users), 0)
    rows = []
    while pending:
        start, user = heapq.heappop(pending)
        slot_free = heapq.heappop(free)
        first = max(start, slot_free) + PREFILL_S * rng.uniform(0.9, 1.1)
        end = first + OUTPUT * TPOT_S * rng.uniform(0.9, 1.1)
        heapq.heappush(free, end)
        rows.append((start, first, end))
        sent[user] += 1
        if sent[user] < per_user:
            heapq.heappush(pending, (end, user))
    return _frame(rows)


def _frame(rows) -> pd.DataFrame:
    start, first, end = (np.array(c) for c in zip(*rows, strict=True))
    return pd.DataFrame(
        {
            "request_id": np.arange(len(start)),
            "start_ts": start,
            "first_token_ts": first,
            "end_ts": end,
            "input_tokens": 512,
            "output_tokens": OUTPUT,
        }
    )


def causes(report) -> set[str]:
    return {f.cause for f in report.findings if f.cause}


@pytest.mark.parametrize("kind", ENGINE_KINDS)
@pytest.mark.parametrize("slots", ["parallel=8", "max_num_seqs=8"])
def test_lockstep_at_8_users_on_8_slots_is_not_overload(kind, slots):
    verdicts = set()
    for seed in (0, 1, 2):
        log = lockstep_log(seed)
        assert in_flight_peak(log) == 8
        report = diagnose(log, engine=parse_engine(slots), engine_kind=kind)
        assert report.cause == "lockstep_prefill", report
        assert "overload" not in causes(report) and "too_slow" not in causes(report)
        queue = report.finding("queueing").evidence
        assert queue["in_flight_peak"] <= queue["slots"] == 8
        assert 3 < queue["ttft_p50_in_single_prefills"] < 8  # TTFT ≈ k single prefills
        assert report.suggestions[0].key == "stagger_arrivals"
        verdicts.add((report.verdict, report.cause))
    assert len(verdicts) == 1


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_more_users_than_slots_is_a_slot_queue_and_more_slots_comes_first(seed):
    log = slot_queue_log(seed)
    assert in_flight_peak(log) == 16
    report = diagnose(log, engine=parse_engine("parallel=4"), engine_kind="llamacpp")
    assert report.cause == "slot_queue", report
    (queue,) = [f for f in report.findings if f.cause == "slot_queue"]
    assert queue.detail.endswith("waited for a free slot: a slot queue"), queue.detail  # no " :"
    first = report.suggestions[0]
    assert first.key == "more_slots" and "--parallel 4 → 8" in first.action
    assert first.cost == "setting"


def test_the_scrape_names_the_engine_kind():
    scrape = parse_scrape("llamacpp:requests_processing 4\nllamacpp:requests_deferred 12\n")
    report = diagnose(slot_queue_log(0), engine=parse_engine("parallel=4"), server=scrape)
    assert "--parallel" in report.suggestions[0].action
    vllm = diagnose(slot_queue_log(0), engine=parse_engine("max_num_seqs=4"))
    assert "--max-num-seqs 4 → 8" in vllm.suggestions[0].action
    with pytest.raises(ValueError, match="engine_kind"):
        diagnose(slot_queue_log(0), engine_kind="tgi")


VLLM_ONLY = (
    "--tensor-parallel-size",
    "--max-num-seqs",
    "--enable-chunked-prefill",
    "W8A8",
    "--gpu-memory-utilization",
    "--max-num-batched-tokens",
    "--kv-cache-dtype",
)
CASES = [c for c in CAUSES if c not in ("failures", "unexplained")]


@pytest.mark.parametrize("cause", CASES)
@pytest.mark.parametrize("detail", ["", "ttft", "tpot"])
@pytest.mark.parametrize("engine", [None, EngineConfig(max_num_seqs=4)])
def test_suggestions_speak_the_engines_flags(cause, detail, engine):
    keys = {}
    for kind in ENGINE_KINDS:
        out = suggest(cause, Setup(engine=engine, engine_kind=kind, slot_limited=True), detail)
        ranks = [["setting", "software", "hardware"].index(s.cost) for s in out]
        assert ranks == sorted(ranks) and out, (kind, [s.key for s in out])
        keys[kind] = [s.key for s in out]
        text = " ".join(s.action for s in out)
        if kind == "llamacpp":
            assert not any(flag in text for flag in VLLM_ONLY), text
            assert "tensor_parallel" not in keys[kind]
        if kind == "sglang":
            assert not any(flag in text for flag in VLLM_ONLY[:3]), text
    if cause in ("overload", "slot_queue"):
        for kind in ENGINE_KINDS:
            assert keys[kind][0] == "more_slots", (kind, keys[kind])


def test_llamacpp_gets_slots_threads_batch_and_gguf_quantisation():
    setup = Setup(engine=EngineConfig(max_num_seqs=4), engine_kind="llamacpp", slot_limited=True)
    out = suggest("overload", setup, "ttft")
    assert [s.key for s in out] == [
        "more_slots", "threads", "batch_size", "quantise_weights", "add_replica",
    ]  # fmt: skip
    text = " ".join(s.action for s in out)
    for flag in ("--parallel", "--threads", "-ub", "Q4_K_M", "Q8_0"):
        assert flag in text, flag
    # the GGUF's own format decides what "more quantised" means: Q8_0 goes to Q4_K_M, 4-bit stays
    by_dtype = {
        dtype: {
            s.key: s.action
            for s in suggest("overload", Setup(**{**vars(setup), "weight_dtype": dtype}), "ttft")
        }
        for dtype in ("fp32", "int8", "int4")
    }
    assert by_dtype["fp32"]["quantise_weights"].startswith("a more quantised GGUF (fp32 → Q8_0")
    assert by_dtype["int8"]["quantise_weights"] == (
        "a more quantised GGUF (Q8_0 → Q4_K_M: about half the bytes)"
    )
    assert "quantise_weights" not in by_dtype["int4"]
    sglang = suggest("overload", Setup(engine_kind="sglang"), "ttft")
    assert "--tp 2" in " ".join(s.action for s in sglang)
    hol = " ".join(s.action for s in suggest("head_of_line", Setup(engine_kind="sglang")))
    assert "--enable-chunked-prefill" not in hol and "--enable-prefix-caching" not in hol
    with pytest.raises(ValueError, match="engine_kind"):
        Setup(engine_kind="tgi")


def test_cli_server_kind_and_parallel(tmp_path, capsys):
    from llminfer.cli import main

    path = tmp_path / "lockstep.csv"
    lockstep_log(0).to_csv(path, index=False)
    argv = ["diagnose", str(path), "--engine", "parallel=8", "--server-kind", "llamacpp"]
    assert main([*argv, "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["cause"] == "lockstep_prefill"
    assert any("-ub" in s["action"] for s in data["suggestions"])
    assert parse_engine("parallel=8").max_num_seqs == 8


def test_an_open_loop_or_unknown_slots_is_never_lockstep():
    log = lockstep_log(0)
    assert "lockstep_prefill" not in causes(diagnose(log))  # slots unknown
    bursts = lockstep_log(0, pause_s=0.5)  # bursts on their own clock, not as answers end
    report = diagnose(bursts, engine=parse_engine("parallel=8"))
    assert "ttft" in report.missed and "lockstep_prefill" not in causes(report)


def test_a_closed_loop_without_slots_asks_for_them():
    assert any("parallel=N" in note for note in diagnose(lockstep_log(0)).notes)


def test_a_failure_without_an_end_is_not_a_user_in_flight():
    # vLLM 0.33's bench serve --max-concurrency 4 against llama-server: 2 of 40 failed, and
    # vLLM records no end for them (latency 0): still 4 in flight at most, not 6
    path = Path(__file__).parent / "fixtures/vllm_0_33_bench_serve_llama_server.json"
    log = read_requests(path)
    assert (
        log.n_failed == 2
        and log.requests.loc[log.requests["status"] == "failed", "end_ts"].isna().all()
    )
    assert in_flight_peak(log.requests) == 4
