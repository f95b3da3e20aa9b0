"""Chapter 4: the article's numbers, hand-computed cases, properties and bad input."""

import math

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from llminfer import (
    check_tensor_parallel,
    estimate_latency,
    get_gpu,
    get_model,
    kv_cache_bytes,
    kv_cache_gib,
    kv_capacity_tokens,
    list_models,
    max_concurrency,
    plan_memory,
    step_timer,
    tensor_parallel_sizes,
    weight_bytes,
)
from llminfer.cost.memory import (
    allocated_kv_tokens,
    default_reserve_bytes,
    kv_bytes_per_token,
    kv_heads_per_gpu,
    kv_utilization,
)
from llminfer.cost.memory_tables import concurrency_table, kv_per_token_table
from llminfer.units import GB, GiB, KiB

LLAMA8 = get_model("llama-3.1-8b")


# --- the article's worked examples (GUIDE.md, chapter 4) ---------------------------------


def test_article_weights_70b():
    assert weight_bytes(70e9, "bf16") == 140 * GB
    assert weight_bytes(70e9, "fp16") == 140 * GB
    assert weight_bytes(70e9, "int8", group_size=None) == 70 * GB
    assert weight_bytes(70e9, "int4", group_size=None) == 35 * GB


def test_article_kv_cache_gib():
    per_token = kv_cache_gib(layers=32, kv_heads=8, head_dim=128, tokens=1) * GiB
    assert per_token == 128 * KiB
    single = kv_cache_gib(layers=32, kv_heads=8, head_dim=128, tokens=8192)
    concurrent = kv_cache_gib(layers=32, kv_heads=8, head_dim=128, tokens=8192, concurrency=16)
    assert f"single request: {single:.2f} GiB" == "single request: 1.00 GiB"
    assert f"16 concurrent requests: {concurrent:.2f} GiB" == "16 concurrent requests: 16.00 GiB"


def test_kv_cache_bytes_agrees_with_the_article_function():
    assert (
        kv_cache_bytes(LLAMA8, 8192, concurrency=16) == kv_cache_gib(32, 8, 128, 8192, 2, 16) * GiB
    )


# --- architectures ------------------------------------------------------------------------


def test_deepseek_v3_mla_is_70272_bytes_per_token():
    deepseek = get_model("deepseek-v3")
    assert kv_cache_bytes(deepseek, 1) == 61 * 576 * 2 == 70_272
    assert kv_cache_bytes(deepseek, 1, tp=8) == 70_272  # the latent is replicated, not sharded


def test_falcon_7b_has_one_kv_head():
    assert kv_cache_bytes(get_model("falcon-7b"), 1, kv_dtype="fp16") == 32 * 2 * 1 * 64 * 2


def test_sliding_window_caps_the_cache():
    mistral = get_model("mistral-7b-v0.1")  # every layer uses a 4,096-token window
    assert kv_cache_bytes(mistral, 8192) == kv_cache_bytes(mistral, 4096) == 131_072 * 4096
    gemma = get_model("gemma-2-9b")  # 21 window layers + 21 global layers
    per_layer_token = 2 * 8 * 256 * 2
    assert kv_cache_bytes(gemma, 8192) == (21 * 8192 + 21 * 4096) * per_layer_token
    assert kv_cache_bytes(gemma, 1000) == 42 * 1000 * per_layer_token


def test_tensor_parallel_shards_kv_heads():
    llama70 = get_model("llama-3.1-70b")  # 8 KV heads
    assert kv_cache_bytes(llama70, 1, tp=2) == 80 * 2 * 4 * 128 * 2
    assert kv_cache_bytes(llama70, 1, tp=8) == 80 * 2 * 1 * 128 * 2
    assert kv_cache_bytes(llama70, 1, tp=16) == 80 * 2 * 1 * 128 * 2  # a head is replicated


# vLLM's rule (vllm-project/vllm, vllm/config.py ModelConfig.verify_with_parallel_config:
# "Total number of attention heads must be divisible by tensor parallel size"; and
# vllm/model_executor/layers/linear.py QKVParallelLinear: tp >= kv heads -> 1 head per GPU,
# replicas = divide(tp, kv heads), else divide(kv heads, tp)).
def test_tensor_parallel_sizes_follow_vllm():
    assert tensor_parallel_sizes(LLAMA8, 64) == [1, 2, 4, 8, 16, 32]
    assert tensor_parallel_sizes(get_model("qwen2.5-7b"), 28) == [1, 2, 4, 28]  # 28 heads, 4 KV
    assert tensor_parallel_sizes(get_model("falcon-7b"), 100) == [1, 71]  # 71 heads, MQA
    # MLA: one latent per token, only the 128 attention heads must split.
    assert tensor_parallel_sizes(get_model("deepseek-v3"), 128) == [1, 2, 4, 8, 16, 32, 64, 128]
    assert [kv_heads_per_gpu(LLAMA8, tp) for tp in (1, 2, 4, 8, 16, 32)] == [8, 4, 2, 1, 1, 1]


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: kv_cache_bytes(LLAMA8, 1000, tp=3), "tp=3"),
        (lambda: kv_bytes_per_token(LLAMA8, tp=6), "tp=6"),
        (lambda: plan_memory(LLAMA8, get_gpu("h100-sxm"), n_gpus=3), "n_gpus=3"),
        (lambda: estimate_latency(LLAMA8, get_gpu("h100-sxm"), 10, 10, n_gpus=3), "n_gpus=3"),
        (lambda: step_timer(LLAMA8, get_gpu("h100-sxm"), n_gpus=12), "n_gpus=12"),
        (lambda: kv_cache_bytes(get_model("qwen2.5-7b"), 10, tp=7), "tp=7"),
    ],
)
def test_uneven_tensor_parallel_is_refused(call, name):
    # Llama-3.1-8B at TP 3 used to store 8 // 3 = 2 KV heads per GPU: 6 of its 8 heads.
    with pytest.raises(ValueError, match=rf"{name}: .*allowed: 1, 2, 4"):
        call()


def test_tp_error_explains_kv_heads():
    with pytest.raises(ValueError, match="4 KV heads"):
        check_tensor_parallel(get_model("qwen2.5-7b"), 7)


def test_block_rounding():
    assert kv_cache_bytes(LLAMA8, 17, block_size=16) == kv_cache_bytes(LLAMA8, 32)
    assert kv_cache_bytes(LLAMA8, 16, block_size=16) == kv_cache_bytes(LLAMA8, 16)
    assert kv_cache_bytes(LLAMA8, 0, block_size=16) == 0


def test_fp8_cache_halves_bf16():
    assert kv_bytes_per_token(LLAMA8, "fp8") * 2 == kv_bytes_per_token(LLAMA8, "bf16")


def test_weight_scale_overhead():
    assert weight_bytes(70e9, "int4") == 35e9 + math.ceil(70e9 / 128) * 2
    assert weight_bytes(70e9, "int8", group_size=64) == 70e9 + math.ceil(70e9 / 64) * 2
    assert weight_bytes(70e9, "bf16", group_size=128) == 140e9  # no scales for 16-bit
    assert weight_bytes(LLAMA8) == 8_030_261_248 * 2


# --- capacity and concurrency, by hand -----------------------------------------------------


def test_capacity_and_concurrency_hand_computed():
    # 10 GiB budget, 128 KiB/token, blocks of 16 tokens = 2 MiB each → 5,120 blocks.
    assert kv_capacity_tokens(LLAMA8, 10 * GiB) == 5120 * 16
    assert max_concurrency(LLAMA8, 10 * GiB, 8192) == 5120 / 512
    assert max_concurrency(LLAMA8, 10 * GiB, 8200) == 5120 / 513  # 8,200 tokens need 513 blocks
    assert kv_capacity_tokens(LLAMA8, 2 * 1024**2 - 1) == 0  # less than one block


def test_plan_memory_hand_computed():
    h100 = get_gpu("h100-sxm")
    plan = plan_memory(LLAMA8, h100, reserve_bytes=2e9, context_tokens=8192, concurrency=16)
    budget = 81_559 * 2**20 * 0.9 - 8_030_261_248 * 2 - 2e9  # nvidia-smi: 81,559 MiB
    assert plan.kv_budget_bytes == pytest.approx(budget)
    assert plan.capacity_tokens == math.floor(budget / (16 * 131_072)) * 16
    assert plan.max_concurrency == pytest.approx(math.floor(budget / (16 * 131_072)) / 512)
    assert plan.kv_needed_bytes == 16 * 8192 * 131_072
    assert plan.fits
    assert sum(plan.breakdown().values()) == pytest.approx(81_559 * 2**20)


def test_plan_memory_says_why_it_does_not_fit():
    plan = plan_memory(get_model("llama-3.1-70b"), get_gpu("h100-sxm"))
    assert not plan.fits
    assert "weights (131.4 GiB)" in plan.reason and "exceed" in plan.reason  # 141.1 GB
    assert plan.capacity_tokens == 0 and plan.max_concurrency == 0
    tight = plan_memory(LLAMA8, get_gpu("l4"), context_tokens=131072, concurrency=4)
    assert not tight.fits and "short by" in tight.reason
    sharded = plan_memory(get_model("llama-3.1-70b"), get_gpu("h100-sxm"), n_gpus=4)
    assert sharded.fits and sharded.weight_bytes == pytest.approx(70_553_706_496 * 2 / 4)


def test_default_reserve_is_documented_formula():
    expected = GiB + 8192 * (4 * 4096 + 2 * 14336) * 2
    assert default_reserve_bytes(LLAMA8) == expected


def test_paged_blocks_waste_less_than_reservation():
    lengths = [100, 2000, 50, 4000]
    assert allocated_kv_tokens(lengths, reserve_tokens=4096) == 4 * 4096
    assert allocated_kv_tokens(lengths, block_size=16) == 112 + 2000 + 64 + 4000
    assert kv_utilization(lengths, reserve_tokens=4096) == 6150 / 16384
    assert kv_utilization(lengths, block_size=16) == 6150 / 6176
    with pytest.raises(ValueError, match="exactly one"):
        allocated_kv_tokens(lengths)
    with pytest.raises(ValueError, match="longer than reserve_tokens=1000"):
        allocated_kv_tokens(lengths, reserve_tokens=1000)


def test_tables():
    table = kv_per_token_table([get_model(n) for n in list_models()], context_tokens=8192)
    assert table.loc["Falcon-7B", "attention"] == "MQA"
    assert table.loc["DeepSeek-V3", "kv_bytes_per_token_bf16"] == 70_272
    assert table.loc["Mistral-7B-v0.1", "request_bytes_bf16"] == 131_072 * 4096
    curve = concurrency_table({"8B": (LLAMA8, get_gpu("h100-sxm"))}, [1024, 8192])
    assert list(curve["max_concurrency"]) == sorted(curve["max_concurrency"], reverse=True)


# --- properties ----------------------------------------------------------------------------

models = st.sampled_from([get_model(n) for n in list_models()])


@given(models, st.integers(0, 200_000), st.integers(1, 64), st.sampled_from(["bf16", "fp8"]))
def test_kv_linear_in_tokens_and_concurrency(model, tokens, concurrency, dtype):
    one = kv_cache_bytes(model, tokens, dtype)
    assert kv_cache_bytes(model, tokens, dtype, concurrency=concurrency) == one * concurrency
    if model.sliding_window is None:
        assert one == tokens * kv_cache_bytes(model, 1, dtype)


@given(models, st.floats(0, 1e12), st.sampled_from([1, 16, 32]), st.sampled_from([1, 2, 8]))
def test_capacity_never_negative_and_within_budget(model, budget, block, tp):
    assume(tp in tensor_parallel_sizes(model, tp))  # e.g. Falcon-7B's 71 heads: TP 1 or 71
    capacity = kv_capacity_tokens(model, budget, block_size=block, tp=tp)
    assert capacity >= 0 and capacity % block == 0
    assert capacity * kv_bytes_per_token(model, tp=tp) <= budget


# --- bad input ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: kv_cache_bytes(LLAMA8, -1), "tokens=-1"),
        (lambda: kv_cache_bytes(LLAMA8, 10, kv_dtype="int3"), "kv_dtype='int3'"),
        (lambda: kv_cache_bytes(LLAMA8, 10, concurrency=0), "concurrency=0"),
        (lambda: kv_cache_bytes(LLAMA8, 10, block_size=0), "block_size=0"),
        (lambda: kv_cache_bytes(LLAMA8, 10, tp=0), "tp=0"),
        (lambda: kv_cache_gib(0, 8, 128, 10), "layers=0"),
        (lambda: kv_cache_gib(32, 8, 128, -5), "tokens=-5"),
        (lambda: weight_bytes(LLAMA8, "int3"), "dtype='int3'"),
        (lambda: weight_bytes(-1), "model=-1"),
        (lambda: kv_capacity_tokens(LLAMA8, -1), "kv_budget_bytes=-1"),
        (lambda: max_concurrency(LLAMA8, 1e9, 0), "context_tokens=0"),
        (lambda: plan_memory(LLAMA8, get_gpu("h100-sxm"), n_gpus=0), "n_gpus=0"),
        (
            lambda: plan_memory(LLAMA8, get_gpu("h100-sxm"), gpu_memory_utilization=1.5),
            "gpu_memory_utilization=1.5",
        ),
        (lambda: plan_memory(LLAMA8, get_gpu("h100-sxm"), weight_dtype="q4"), "weight_dtype='q4'"),
        (lambda: get_model("no-such-model"), "name='no-such-model'"),
    ],
)
def test_bad_input_names_parameter_and_value(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_gpu_memory_utilization_applies_to_the_cuda_total_as_vllm_does():
    from llminfer.cost.memory import CUDA_TOTAL_GIB, cuda_total_bytes, plan_memory

    h100, llama = get_gpu("h100-sxm"), get_model("llama-3.1-8b")
    # nvidia-smi 81,559 MiB = 79.65 GiB; CUDA (torch.cuda.mem_get_info) 79.19 GiB
    assert round(h100.memory_bytes / 2**30, 2) == 79.65
    assert cuda_total_bytes(h100) == CUDA_TOTAL_GIB[h100.name] * 2**30 == 79.19 * 2**30
    driver = plan_memory(llama, h100, gpu_memory_utilization=0.9)
    cuda = plan_memory(llama, h100, gpu_memory_utilization=0.9, memory_total="cuda")
    assert cuda.usable_bytes == pytest.approx(0.9 * 79.19 * 2**30)
    assert (driver.usable_bytes - cuda.usable_bytes) / 2**30 == pytest.approx(0.41, abs=0.005)
    assert cuda.capacity_tokens < driver.capacity_tokens
    # a GPU without a known CUDA total falls back to the driver's figure
    a100 = get_gpu("a100-80gb")
    assert cuda_total_bytes(a100) == a100.memory_bytes
    with pytest.raises(ValueError, match="memory_total='smi'"):
        plan_memory(llama, h100, memory_total="smi")
