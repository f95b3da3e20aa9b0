"""Suggestions come cheapest first: engine settings, then software, then hardware."""

from __future__ import annotations

from dataclasses import replace

import pytest

from llminfer.cli import parse_engine
from llminfer.diagnose.findings import CAUSES
from llminfer.diagnose.suggestions import COSTS, Setup, Suggestion, suggest
from llminfer.sim.engines import EngineConfig

SETUPS = [
    Setup(),
    Setup(engine=EngineConfig(), tpot_misses=True),
    Setup(engine=EngineConfig(chunked_prefill=False, prefix_caching=False, max_num_seqs=256)),
    Setup(engine=EngineConfig(gpu_memory_utilization=0.5), kv_dtype="fp8", weight_dtype="fp8"),
]
CASES = [
    (c, d) for c in CAUSES if c not in ("failures", "unexplained") for d in ("", "ttft", "tpot")
]


@pytest.mark.parametrize("setup", SETUPS)
@pytest.mark.parametrize(("cause", "detail"), CASES)
def test_every_cause_lists_settings_then_software_then_hardware(setup, cause, detail):
    out = suggest(cause, setup, detail)
    ranks = [list(COSTS).index(s.cost) for s in out]
    assert ranks == sorted(ranks), [(s.key, s.cost) for s in out]
    assert len({s.key for s in out}) == len(out)


def test_costs_are_what_the_change_needs():
    cost = {}
    for setup in SETUPS:
        for cause, detail in CASES:
            for s in suggest(cause, setup, detail):
                cost[s.key] = s.cost
    assert cost["tensor_parallel"] == cost["add_replica"] == cost["disaggregate"] == "hardware"
    assert cost["quantise_weights"] == cost["speculative_decoding"] == "software"
    for key in ("kv_cache_fp8", "raise_gpu_memory_utilization", "enable_chunked_prefill",
                "long_prefill_threshold", "lower_max_num_seqs", "prefix_caching"):  # fmt: skip
        assert cost[key] == "setting", key


def test_head_of_line_tries_the_long_prefill_cap_before_any_gpu():
    v1 = EngineConfig(max_num_batched_tokens=2048, max_num_seqs=256, prefix_caching=False)
    keys = [s.key for s in suggest("head_of_line", Setup(engine=v1))]
    assert keys[0] == "long_prefill_threshold"
    assert keys.index("tensor_parallel") > keys.index("long_prefill_threshold")
    # already capped: not suggested again; chunked prefill off: turn it on first
    capped = EngineConfig(max_num_batched_tokens=2048, long_prefill_token_threshold=256)
    assert "long_prefill_threshold" not in [s.key for s in suggest("head_of_line", Setup(capped))]
    v0 = EngineConfig(chunked_prefill=False, prefix_caching=False)
    keys = [s.key for s in suggest("head_of_line", Setup(engine=v0))]
    assert keys[0] == "enable_chunked_prefill" and "long_prefill_threshold" not in keys


def test_overload_lists_hardware_last():
    keys = [s.key for s in suggest("overload", Setup(engine=EngineConfig()), "tpot")]
    assert keys[-2:] in (["tensor_parallel", "add_replica"], ["add_replica", "tensor_parallel"])


def test_a_suggestion_names_its_cost_and_refuses_an_unknown_one():
    s = Suggestion("k", "do it", "nothing", cost="software")
    assert str(s).startswith("[software] do it")
    with pytest.raises(ValueError, match="cost"):
        Suggestion("k", "do it", "nothing", cost="free")


def test_llamacpp_scattered_slots_suggest_one_kv_cache():
    """Fewer requests decoding than slots, each slot its own KV stream (an explicit --parallel,
    no -kvu: llminfer.sim.ubatches): a decode step pays a weight pass per run of consecutive busy
    slots, so --kv-unified comes after the threads; not where the server already has it, not
    with every slot busy, and never for vLLM."""
    per_slot = EngineConfig(max_num_seqs=8, ubatch_split="equal")

    def keys(engine, decoding, kind="llamacpp"):
        setup = Setup(engine=engine, engine_kind=kind, decoding_p50=decoding)
        return [s.key for s in suggest("too_slow", setup, "tpot")]

    assert keys(per_slot, 4.0)[:2] == ["threads", "kv_unified"]
    assert "kv_unified" in keys(None, float("nan"))  # nothing known: worth a try
    assert "kv_unified" not in keys(replace(per_slot, ubatch_split="simple"), 4.0)
    assert "kv_unified" not in keys(per_slot, 8.0)
    assert "kv_unified" not in keys(per_slot, 4.0, "vllm")
    # one request decoding is one pass whatever its slot; one slot is one KV stream
    assert "kv_unified" not in keys(per_slot, 1.0) and "kv_unified" not in keys(None, 0.5)
    assert "kv_unified" not in keys(EngineConfig(max_num_seqs=1, ubatch_split="equal"), 1.0)
    assert "kv_unified" in keys(per_slot, 2.0)
    out = suggest("too_slow", Setup(engine=per_slot, engine_kind="llamacpp", decoding_p50=3.0),
                  "tpot")  # fmt: skip
    assert "--kv-unified" in next(s.action for s in out if s.key == "kv_unified")
    assert parse_engine("parallel=8,kv_unified=on").ubatch_split == "simple"
    assert parse_engine("parallel=8,kv_unified=off").ubatch_split == "equal"
    assert parse_engine("parallel=8,kv_unified=on,n_ubatch=256").n_ubatch == 256
    with pytest.raises(ValueError, match="no effect"):
        parse_engine("parallel=8,n_ubatch=256")  # one pass a step: n_ubatch would be ignored
    assert parse_engine("parallel=8").ubatch_split is None
