"""vLLM V1's ``long_prefill_token_threshold`` in the simulator's scheduler.

vLLM 0.33.0 ``vllm/v1/core/sched/scheduler.py``: ``if 0 < threshold < num_new_tokens:
num_new_tokens = threshold`` for running (L844-845) and waiting (L1332-1333) requests; the cap is
0 when only one request is in the system (L754-763); the adaptive floor is
``max(threshold, input_budget // num_eligible_reqs)`` (L764-769). Default 0 = off
(``vllm/config/scheduler.py`` L79-84).
"""

from __future__ import annotations

import pytest

from llminfer import get_gpu, get_model
from llminfer.sim.engines import EngineConfig
from llminfer.sim.simulate import simulate
from llminfer.sim.workload import Empirical, Workload

LLAMA8 = get_model("llama-3.1-8b")
H100 = get_gpu("h100-sxm")


def _first_step_prefill(engine: EngineConfig, n: int) -> int:
    """Prefill tokens of the first step when n 5,000-token prompts arrive together."""
    workload = Workload(n, concurrency=n, prompt_tokens=5000, output_tokens=2, seed=1)
    return int(simulate(workload, LLAMA8, H100, engine).steps.prefill_tokens.iloc[0])


def test_default_is_off_as_in_vllm():
    assert EngineConfig().long_prefill_token_threshold == 0
    assert EngineConfig().long_prefill_token_threshold_adaptive is False
    # off: the first prompt takes 5,000 tokens, the second the 3,192 left of the 8,192 budget
    assert _first_step_prefill(EngineConfig(), 2) == 8192


def test_threshold_caps_each_request_chunk_per_step():
    engine = EngineConfig(long_prefill_token_threshold=1000)
    assert _first_step_prefill(engine, 2) == 2000  # 1,000 each
    assert _first_step_prefill(engine, 3) == 3000


def test_threshold_is_not_applied_to_a_request_alone():
    # "When it is the only request there is nobody to starve" (vLLM 0.33.0 L754-763)
    engine = EngineConfig(long_prefill_token_threshold=1000)
    assert _first_step_prefill(engine, 1) == 5000


def test_adaptive_floor_is_the_budget_fair_share():
    engine = EngineConfig(
        long_prefill_token_threshold=1000, long_prefill_token_threshold_adaptive=True
    )
    assert _first_step_prefill(engine, 2) == 8192  # max(1000, 8192 // 2) = 4,096 each
    assert _first_step_prefill(engine, 4) == 8192  # max(1000, 2048) each
    # without the floor the same four get 1,000 each
    assert _first_step_prefill(EngineConfig(long_prefill_token_threshold=1000), 4) == 4000


def test_threshold_lets_short_prompts_past_a_long_one():
    # one 30k-token prompt among 200-token ones: the cap leaves budget for the short ones
    workload = Workload(
        120,
        rate=2.0,
        prompt_tokens=Empirical((30000,) + (200,) * 9),
        output_tokens=32,
        seed=3,
    )
    base = EngineConfig(max_num_batched_tokens=2048, max_num_seqs=256)
    capped = EngineConfig(
        max_num_batched_tokens=2048, max_num_seqs=256, long_prefill_token_threshold=512
    )
    before = simulate(workload, LLAMA8, H100, base).requests
    after = simulate(workload, LLAMA8, H100, capped).requests
    short_b = before[before.input_tokens == 200]
    short_a = after[after.input_tokens == 200]
    ttft_b = (short_b.first_token_ts - short_b.start_ts).max()
    ttft_a = (short_a.first_token_ts - short_a.start_ts).max()
    assert ttft_a < ttft_b / 2
    # the long prompts pay: their TTFT does not fall
    long_b = before[before.input_tokens == 30000]
    long_a = after[after.input_tokens == 30000]
    assert (long_a.first_token_ts - long_a.start_ts).mean() >= (
        long_b.first_token_ts - long_b.start_ts
    ).mean()


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"long_prefill_token_threshold": -1}, "long_prefill_token_threshold"),
        ({"long_prefill_token_threshold": 1.5}, "long_prefill_token_threshold"),
        (
            {"long_prefill_token_threshold": 512, "chunked_prefill": False},
            "long_prefill_token_threshold",
        ),
        ({"long_prefill_token_threshold_adaptive": 1}, "long_prefill_token_threshold_adaptive"),
    ],
)
def test_bad_threshold_names_the_parameter(kwargs, name):
    with pytest.raises(ValueError, match=name):
        EngineConfig(**kwargs)
