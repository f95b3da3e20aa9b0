"""llama.cpp's forward passes and slots (``llminfer.sim.ubatches``): the split rules of
``src/llama-batch.cpp`` (0.3.36) worked by hand, the slot rule of ``get_available_slot``, the
simulator timing each pass on its own, and the live measurement they explain
(``data/measurements/llama_server_slot_passes.csv``, ``benchmarks/measure_llama_slots.py``)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from llminfer import get_gpu, get_model
from llminfer.sim.engines import EngineConfig
from llminfer.sim.simulate import simulate
from llminfer.sim.ubatches import lru_slot, server_batch, split_equal, split_simple
from llminfer.sim.workload import Workload

MEASURED = Path(__file__).resolve().parents[1] / "data/measurements/llama_server_slot_passes.csv"


def test_decoding_slots_pass_per_run_of_consecutive_ids():
    assert split_equal(server_batch([0, 1, 2, 3], {})) == [[(0, 1), (1, 1), (2, 1), (3, 1)]]
    assert split_equal(server_batch([6, 0, 4, 2], {})) == [[(0, 1)], [(2, 1)], [(4, 1)], [(6, 1)]]
    assert len(split_equal(server_batch([0, 1, 3, 4, 5, 7], {}))) == 3
    # one unified cache: the order does not matter, one pass
    assert split_simple(server_batch([0, 2, 4, 6], {})) == [[(0, 1), (2, 1), (4, 1), (6, 1)]]


def test_mixed_step_worked_by_hand():
    """Decodes on slots 0, 1, 3 and 128-token prompts on 2 and 4. The batch is [0, 1, 3, 2, 4]
    (decodes first). Pass 1 starts at 0, takes 1, skips 3 (not 2), takes the prompt of 2, and
    gives each one token (the decodes have one); pass 2 starts at 3 and takes 4; then the rest
    of each prompt alone (4 does not follow 2)."""
    batch = server_batch([0, 1, 3], {4: 128, 2: 128})
    assert batch == [(0, 1), (1, 1), (3, 1), (2, 128), (4, 128)]
    assert split_equal(batch) == [
        [(0, 1), (1, 1), (2, 1)],
        [(3, 1), (4, 1)],
        [(2, 127)],
        [(4, 127)],
    ]
    # unified: the tokens in order, 512 a pass
    assert split_simple(batch) == [[(0, 1), (1, 1), (3, 1), (2, 128), (4, 128)]]


def test_token_cap_per_pass():
    """Seven 128-token prompts on slots 0-6: 512 // 7 = 73 tokens each, then the 55 left."""
    passes = split_equal(server_batch([], dict.fromkeys(range(7), 128)))
    assert [sorted({t for _, t in p}) for p in passes] == [[73], [55]]
    assert all(len(p) == 7 for p in passes)
    simple = split_simple(server_batch([], dict.fromkeys(range(7), 128)))
    assert [sum(t for _, t in p) for p in simple] == [512, 384]
    assert simple[0][-1] == (3, 128) and simple[1][0] == (4, 128)
    assert sum(t for p in split_equal([(0, 3000)], 512) for _, t in p) == 3000


def test_bad_batches_are_refused():
    with pytest.raises(ValueError, match="n_ubatch"):
        split_equal([(0, 1)], 0)
    with pytest.raises(ValueError, match="twice"):
        split_simple([(0, 1), (0, 2)])
    with pytest.raises(ValueError, match="tokens"):
        split_equal([(0, 0)])
    with pytest.raises(ValueError, match="no idle slot"):
        lru_slot([-1.0], [])
    with pytest.raises(ValueError, match="ubatch_split"):
        EngineConfig(ubatch_split="unified")
    with pytest.raises(ValueError, match="n_ubatch"):
        EngineConfig(ubatch_split="equal", n_ubatch=0)


def test_slot_rule():
    never = [-1.0] * 8
    assert lru_slot(never, range(8)) == 7  # llama-server's first request lands on its last slot
    assert lru_slot([5.0, -1.0, 2.0, -1.0], [0, 1, 2, 3]) == 3
    assert lru_slot([5.0, 4.0, 2.0, 2.0], [0, 1, 2, 3]) == 2  # freed together: lowest first
    assert lru_slot([5.0, 4.0, 2.0, 2.0], [0, 1]) == 1


def _run(split, users, prompt=48, output=24, requests=None):
    engine = EngineConfig(max_num_seqs=8, max_num_batched_tokens=2048, chunked_prefill=True,
                          prefix_caching=False, ubatch_split=split)  # fmt: skip
    # requests of different lengths, so the users drift apart and their slots scatter
    work = Workload(requests or 4 * users, concurrency=users, prompt_tokens=(prompt, 2 * prompt),
                    output_tokens=(output, 2 * output), seed=3)  # fmt: skip

    def step_time(prefill, attended, seqs, context, cached):
        return 1e-3 + 1e-5 * (prefill + seqs)  # 1 ms a pass (the weights) + 10 us a token

    model, gpu = get_model("llama-3.1-8b"), get_gpu("h100-sxm")
    return simulate(work, model, gpu, engine, step_time=step_time, capacity_blocks=4096)


def test_each_pass_is_timed_on_its_own():
    result = _run("equal", 4)
    steps, requests = result.steps, result.requests
    tokens = steps.prefill_tokens + steps.decode_seqs
    expected = 1e-3 * steps.forward_passes + 1e-5 * tokens
    assert (steps.duration_s - expected).abs().max() < 1e-12
    assert steps.forward_passes.max() > 1 and (steps.forward_passes >= 1).all()
    assert set(requests.slot_id) <= set(range(8)) and requests.slot_id.iloc[0] == 7
    # never two running requests on one slot: each slot's requests follow one another
    for _, group in requests.groupby("slot_id"):
        group = group.sort_values("scheduled_ts")
        assert (group.scheduled_ts.iloc[1:].to_numpy() >= group.end_ts.iloc[:-1].to_numpy()).all()
    one = _run(None, 4)
    assert "forward_passes" not in one.steps and "slot_id" not in one.requests
    assert (
        one.steps.duration_s - (1e-3 + 1e-5 * (one.steps.prefill_tokens + one.steps.decode_seqs))
    ).abs().max() < 1e-12
    # scattered slots cost passes: slower than one pass a step, never faster
    assert result.requests.end_ts.max() > one.requests.end_ts.max()
    simple = _run("simple", 4)
    assert (simple.steps.forward_passes == 1).all()  # every step under 512 tokens
    long = _run("simple", 2, prompt=700, output=2, requests=2)
    assert long.steps.forward_passes.max() >= 2  # a long prompt takes passes of 512


def test_one_user_is_one_pass_per_step():
    result = _run("equal", 1)
    assert (result.steps.forward_passes == 1).all()
    # one user moves down the slots it has not used yet: 7, 6, 5, 4
    assert result.requests.slot_id.tolist() == [7, 6, 5, 4]


def test_measured_scattered_slots_cost_a_pass_each():
    """llama-server 0.3.36, one thread, 4 layers of hidden 1,024 (F32): decoding on slots 0, 2,
    4, 6 costs four single-sequence passes (split_equal: 4 passes); on slots 0-3 one pass of 4;
    with --kv-unified both are one pass (split_simple)."""
    table = pd.read_csv(MEASURED)
    part = table[table.part == "chosen_slots"]
    ms = part.groupby(["kv", "slots"])["ms_per_token"].median()
    single = ms["per_slot", "0"]
    for kv, split in (("per_slot", split_equal), ("unified", split_simple)):
        passes = {s: len(split(server_batch([int(x) for x in s.split("-")], {})))
                  for s in ("0-1-2-3", "0-2-4-6")}  # fmt: skip
        assert passes == ({"0-1-2-3": 1, "0-2-4-6": 4} if kv == "per_slot" else
                          {"0-1-2-3": 1, "0-2-4-6": 1})  # fmt: skip
        # a pass of 4 sequences costs about twice one (one thread: 4 rows of compute) ...
        assert 1.7 * single < ms[kv, "0-1-2-3"] < 2.6 * single
    # ... four passes four times one; one unified pass the same as consecutive slots
    assert 3.6 * single < ms["per_slot", "0-2-4-6"] < 4.4 * single
    assert abs(ms["unified", "0-2-4-6"] / ms["unified", "0-1-2-3"] - 1) < 0.15


def test_one_huge_pass_is_the_unsplit_step():
    """With the real step model and passes that never cut (``n_ubatch`` above any step), the
    split simulation is the plain one: per-pass attended pairs, cached tokens and decode
    context add up to the unsplit step's, open and closed loop, chunked and V0."""
    model, gpu = get_model("llama-3.1-8b"), get_gpu("h100-sxm")
    works = [
        Workload(24, concurrency=4, prompt_tokens=(64, 900), output_tokens=(8, 40), seed=5),
        Workload(24, rate=30.0, prompt_tokens=(64, 900), output_tokens=(8, 40), seed=6),
    ]
    for base in (EngineConfig(max_num_seqs=8), EngineConfig(max_num_seqs=8, chunked_prefill=False,
                                                             prefix_caching=False)):  # fmt: skip
        for work in works:
            plain = simulate(work, model, gpu, base)
            huge = simulate(work, model, gpu, replace(base, ubatch_split="simple",
                                                      n_ubatch=10**6))  # fmt: skip
            assert (huge.steps.forward_passes == 1).all()
            gap = (huge.requests.end_ts - plain.requests.end_ts).abs().max()
            assert gap < 1e-9, gap


def test_passes_share_a_prompts_attention_as_the_whole_step_does():
    """A 1,000-token prompt cut into passes of 100: the attended pairs over the passes add up to
    the prompt's (each pass attends to the tokens before it), and the cached tokens per pass are
    the KV already there."""
    seen = []

    def step_time(prefill, attended, seqs, context, cached):
        seen.append((prefill, attended, cached))
        return 1e-3

    engine = EngineConfig(max_num_seqs=2, max_num_batched_tokens=2048, chunked_prefill=True,
                          prefix_caching=False, ubatch_split="simple", n_ubatch=100)  # fmt: skip
    work = Workload(1, concurrency=1, prompt_tokens=1000, output_tokens=2)
    result = simulate(work, get_model("llama-3.1-8b"), get_gpu("h100-sxm"), engine,
                      step_time=step_time, capacity_blocks=512)  # fmt: skip
    prefill = [s for s in seen[2:] if s[0]]  # after simulate's two probes of step_time
    assert [p for p, _, _ in prefill] == [100] * 10
    assert [c for _, _, c in prefill] == list(range(0, 1000, 100))
    assert sum(a for _, a, _ in prefill) == 1000 * 1001 // 2  # causal: token k attends k + 1
    assert result.steps.forward_passes.iloc[0] == 10


def test_slots_follow_one_another_under_preemption_and_every_policy():
    """A KV cache too small for the load (preemptions), static batching and V0's prefill-only
    steps: a slot is never held by two running requests, and every request gets one."""
    work = Workload(40, concurrency=6, prompt_tokens=(200, 600), output_tokens=(20, 120), seed=2)
    engines = [
        EngineConfig(max_num_seqs=6, ubatch_split="equal"),
        EngineConfig(
            max_num_seqs=6,
            policy="static",
            chunked_prefill=False,
            prefix_caching=False,
            ubatch_split="equal",
        ),
        EngineConfig(
            max_num_seqs=6, chunked_prefill=False, prefix_caching=False, ubatch_split="simple"
        ),
    ]
    model, gpu = get_model("llama-3.1-8b"), get_gpu("h100-sxm")
    preempted = 0
    for engine in engines:
        result = simulate(work, model, gpu, engine, capacity_blocks=90)
        requests = result.requests
        preempted += int(requests.preemptions.sum())
        assert requests.slot_id.between(0, 5).all()
        for _, group in requests.groupby("slot_id"):
            group = group.sort_values("first_token_ts")
            assert (
                group.first_token_ts.iloc[1:].to_numpy() >= group.end_ts.iloc[:-1].to_numpy()
            ).all()
    assert preempted > 0  # the first engine's cache is too small: the preemption path ran


def test_requests_freed_together_give_back_the_lowest_slot_first():
    """Two users, one step apart: slots 7 and 6 (never used, highest first), then 5 and 4; once
    every slot has been used, the one freed longest ago."""
    engine = EngineConfig(max_num_seqs=4, max_num_batched_tokens=2048, chunked_prefill=True,
                          prefix_caching=False, ubatch_split="equal")  # fmt: skip

    def step_time(prefill, attended, seqs, context, cached):
        return 1e-3

    work = Workload(8, concurrency=2, prompt_tokens=16, output_tokens=4)
    result = simulate(work, get_model("llama-3.1-8b"), get_gpu("h100-sxm"), engine,
                      step_time=step_time, capacity_blocks=512)  # fmt: skip
    slots = result.requests.sort_values("scheduled_ts").slot_id.tolist()
    # both users in lockstep: 3, 2 first (never used); then 1, 0; then 2 and 3 freed together
    # at the same time, the lowest first; and so on
    assert slots[:4] == [3, 2, 1, 0]
    assert slots[4:] == [2, 3, 0, 1]
