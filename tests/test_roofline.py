"""Chapter 2's cost model: reference points, the StepTimer contract, invariants, bad input."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llminfer import get_gpu, get_model, list_gpus, weight_bytes
from llminfer.cost.latency import estimate_latency
from llminfer.cost.memory import kv_bytes_per_token
from llminfer.cost.roofline import (
    DEFAULT_EFFICIENCY,
    Efficiency,
    arithmetic_intensity,
    as_efficiency,
    attended_pairs,
    bound,
    compute_dtype,
    decode_crossover_batch,
    ridge_point,
    step_cost,
)
from llminfer.cost.steptime import step_time, step_timer
from llminfer.specs.hardware import GPU, measure_machine
from llminfer.units import GB, MiB

LLAMA8 = get_model("llama-3.1-8b")
LLAMA2_7 = get_model("llama-2-7b")
H100 = get_gpu("h100-sxm")
A100 = get_gpu("a100-80gb")
#: Presets that publish a dense matrix rate (the M3 Max has none, see test below).
COMPUTE_GPUS = [name for name in list_gpus() if get_gpu(name).supported_dtypes]


# --- reference points (issue 4) ------------------------------------------------------------


def test_llama31_8b_decode_reads_15_01_gb_and_ideal_tpot_is_4_48_ms():
    cost = step_cost(LLAMA8, batch=1, new_tokens=1, context_tokens=1)
    # stored 16.06 GB; the 128,256 × 4,096 input table (1.05 GB) is gathered, one row read
    table = 128_256 * 4096 * 2
    assert weight_bytes(LLAMA8, "bf16") == 16_060_522_496 and table == 1_050_673_152
    assert cost.weight_bytes == 16_060_522_496 - table == 15_009_849_344
    assert cost.memory_bytes / GB == pytest.approx(15.02, abs=0.01)
    est = estimate_latency(LLAMA8, H100, prompt_tokens=1, output_tokens=2)
    assert est.ideal.tpot_s == pytest.approx(4.48e-3, abs=0.01e-3)
    assert est.ideal.tokens_per_s == pytest.approx(223, abs=0.5)
    assert est.decode_bound == est.ideal.decode_bound == "memory"


def test_embedding_lookup_reads_only_its_rows_and_tied_matrix_is_read_once():
    # untied: the input table is not read; each token of the step gathers one row (counted
    # with the activations, which scale with the tokens)
    one, many = (step_cost(LLAMA8, 1, t, 0) for t in (1, 2048))
    assert one.weight_bytes == many.weight_bytes == 16_060_522_496 - 128_256 * 4096 * 2
    per_layer = (10 * 4096 + 2 * 4096 + 2 * 1024 + 3 * 14336) * 2
    assert one.activation_bytes == 32 * per_layer + 4096 * 2
    # tied (Llama-3.2-1B): the LM head reads the one shared matrix, counted once
    tied = get_model("llama-3.2-1b")
    assert step_cost(tied, 1, 1, 1).weight_bytes == pytest.approx(weight_bytes(tied, "bf16"))
    # tensor parallelism splits the table by vocabulary (vLLM's VocabParallelEmbedding)
    tp2 = step_cost(LLAMA8, 1, 1, 1, tp=2).weight_bytes
    assert tp2 == pytest.approx((16_060_522_496 - 1_050_673_152) / 2)


def test_llama2_7b_prefill_of_2048_tokens_is_27_6_tflop_and_at_least_88_ms_on_a100():
    cost = step_cost(LLAMA2_7, batch=1, new_tokens=2048, context_tokens=0)
    # hand count: 2 FLOP per non-embedding parameter per token, plus QKᵀ and scores·V
    # (2·(128 + 128)·32 heads per pair per layer) over 2,048·2,049/2 causal pairs.
    non_embedding = LLAMA2_7.n_params - 2 * 32000 * 4096
    assert non_embedding == 6_476_271_616
    expected = 2 * non_embedding * 2048 + 2 * 256 * 32 * 32 * attended_pairs(2048, 0)
    assert cost.flops == pytest.approx(expected, rel=1e-12)
    assert cost.flops / 1e12 == pytest.approx(27.6, abs=0.05)
    assert A100.bf16_flops == 312e12
    assert step_time(cost, A100, efficiency=1.0) >= 0.088
    assert estimate_latency(LLAMA2_7, A100, 2048, 1).ideal.ttft_s >= 0.088


def test_ridge_point_of_h100_in_bf16():
    assert ridge_point(H100, "bf16") == pytest.approx(989.4e12 / 3.35e12)
    assert round(ridge_point(H100)) == 295


def test_attended_pairs():
    assert attended_pairs(2048, 0) == 2_098_176
    assert attended_pairs(1, 99) == 100
    assert attended_pairs(3, 2) == 3 * 2 + 6


# --- the StepTimer contract (used by the serving simulator) -------------------------------


@pytest.mark.parametrize("n_gpus", [1, 2])
@pytest.mark.parametrize("model", ["llama-3.1-8b", "mixtral-8x7b", "mistral-7b", "deepseek-v3"])
def test_step_timer_equals_step_cost_time(model, n_gpus):
    m, gpu = get_model(model), get_gpu("h200")
    timer = step_timer(m, gpu, n_gpus=n_gpus)
    prefill = step_cost(m, 3, 500, 0, tp=n_gpus)
    assert timer(1500, 3 * attended_pairs(500, 0), 0, 0) == step_time(prefill, gpu)
    decode = step_cost(m, 8, 1, 5000, tp=n_gpus)
    assert timer(0, 0, 8, 8 * 5000) == step_time(decode, gpu)
    chunk = step_cost(m, 1, 256, 1024, tp=n_gpus)  # chunked prefill after 1,024 cached tokens
    assert timer(256, attended_pairs(256, 1024), 0, 0, 1024) == step_time(chunk, gpu)
    mixed = timer.cost(512, 40_000, 30, 60_000)
    assert timer(512, 40_000, 30, 60_000) == step_time(mixed, gpu)


def test_a_mixed_step_reads_the_weights_once():
    timer = step_timer(LLAMA8, H100)
    mixed, prefill, decode = (
        timer.cost(512, attended_pairs(512, 0), 16, 16_000),
        timer.cost(512, attended_pairs(512, 0), 0, 0),
        timer.cost(0, 0, 16, 16_000),
    )
    assert mixed.weight_bytes == prefill.weight_bytes == decode.weight_bytes
    assert mixed.flops == pytest.approx(prefill.flops + decode.flops)
    assert timer(512, attended_pairs(512, 0), 16, 16_000) < timer(
        512, attended_pairs(512, 0), 0, 0
    ) + timer(0, 0, 16, 16_000)
    assert timer(0, 0, 0, 0) == 0.0


def test_estimate_latency_is_made_of_step_timer_steps():
    prompt, output, batch = 700, 40, 3
    timer = step_timer(LLAMA8, H100)
    est = estimate_latency(LLAMA8, H100, prompt, output, batch=batch)
    assert est.ttft_s == timer(batch * prompt, batch * attended_pairs(prompt, 0), 0, 0)
    steps = [timer(0, 0, batch, batch * (prompt + k - 1)) for k in range(1, output)]
    assert est.tpot_s == pytest.approx(sum(steps) / (output - 1), rel=1e-12)
    assert est.e2e_s == pytest.approx(est.ttft_s + (output - 1) * est.tpot_s)
    one = estimate_latency(LLAMA8, H100, prompt, 1)
    assert one.tpot_s == 0 and one.e2e_s == one.ttft_s


# How fast one StepTimer call is, per profile: benchmarks/bench_simulate.py (a timing).


# --- what the chapter claims --------------------------------------------------------------


@pytest.mark.parametrize("gpu", COMPUTE_GPUS)
def test_decode_memory_bound_and_long_prefill_compute_bound_at_batch_1(gpu):
    g = get_gpu(gpu)
    est = estimate_latency(LLAMA8, g, prompt_tokens=8192, output_tokens=16)
    assert est.decode_bound == est.ideal.decode_bound == "memory"
    assert est.prefill_bound == est.ideal.prefill_bound == "compute"
    assert bound(est.decode_cost, g) == "memory"
    assert bound(est.prefill_cost, g) == "compute"


def test_a_gpu_without_any_matrix_rate_is_refused_by_name():
    assert "m3-max" not in COMPUTE_GPUS
    with pytest.raises(ValueError, match="gpu='Apple M3 Max"):
        estimate_latency(LLAMA8, get_gpu("m3-max"), 100, 10)


def test_flops_shorten_long_prompt_ttft_but_bandwidth_sets_tpot():
    h100, h200 = (estimate_latency(LLAMA8, get_gpu(g), 16_384, 64) for g in ("h100", "h200"))
    # same GH100 compute, 43 % more bandwidth: same TTFT, shorter TPOT at the floor...
    assert h200.ideal.ttft_s == pytest.approx(h100.ideal.ttft_s, rel=0.01)
    assert h100.ideal.tpot_s / h200.ideal.tpot_s == pytest.approx(4800 / 3350, rel=0.02)
    # ...and realistically: elementwise kernels are memory-bound (TTFT 3.6 % apart) and the
    # fixed per-layer time does not shrink with bandwidth (TPOT less than 1.43x apart).
    assert h200.ttft_s == pytest.approx(h100.ttft_s, rel=0.05)
    assert 1.2 < h100.tpot_s / h200.tpot_s < 4800 / 3350


def test_decode_crossover_batch():
    b = decode_crossover_batch(LLAMA8, H100, context_tokens=1)
    assert 295 < b < 400  # ≈ ridge ÷ (FLOP per weight byte ≈ 0.87)
    assert bound(step_cost(LLAMA8, b, 1, 1), H100) == "compute"
    assert bound(step_cost(LLAMA8, b - 1, 1, 1), H100) == "memory"
    # 4,096 cached tokens per sequence: KV reads keep decode memory-bound at any batch
    assert decode_crossover_batch(LLAMA8, H100, context_tokens=4096) is None


def test_kv_read_and_sliding_window_cap():
    cost = step_cost(LLAMA8, batch=4, new_tokens=1, context_tokens=10_000)
    assert cost.kv_read_bytes == 4 * 10_000 * kv_bytes_per_token(LLAMA8)
    assert cost.kv_write_bytes == 4 * kv_bytes_per_token(LLAMA8)
    mistral = get_model("mistral-7b")  # every layer slides over 4,096 tokens
    capped = step_cost(mistral, batch=2, new_tokens=1, context_tokens=10_000)
    assert capped.kv_read_bytes == 2 * 4096 * kv_bytes_per_token(mistral)


def test_moe_reads_only_the_experts_a_batch_touches():
    mixtral = get_model("mixtral-8x7b")  # 8 experts, 2 per token
    per_expert = (mixtral.n_params - mixtral.n_active_params) / 6 * 2  # bytes, bf16
    table = 32000 * 4096 * 2  # the untied input embedding: gathered, not read
    shared = mixtral.n_params * 2 - 8 * per_expert - table
    one = step_cost(mixtral, 1, 1, 100)
    assert one.weight_bytes == pytest.approx(shared + 2 * per_expert)
    many = step_cost(mixtral, 1, 4096, 0)
    assert many.weight_bytes == pytest.approx(weight_bytes(mixtral, "bf16") - table)


def test_tensor_parallel_adds_two_allreduces_per_layer():
    one = step_cost(LLAMA8, 1, 1, 100)
    four = step_cost(LLAMA8, 1, 1, 100, tp=4)
    assert one.comm_bytes == 0 and one.n_allreduce == 0
    assert four.n_allreduce == 2 * 32
    assert four.comm_bytes == 2 * 32 * (2 * 3 / 4) * 4096 * 2  # ring: 2(n−1)/n × message
    assert four.flops == pytest.approx(one.flops / 4, rel=0.01)
    assert four.weight_bytes == pytest.approx(one.weight_bytes / 4)


@settings(max_examples=60, deadline=None)
@given(
    tp=st.sampled_from([2, 4, 8]),
    batch=st.integers(1, 256),
    new=st.integers(1, 4096),
    ctx=st.integers(0, 32_768),
    gpu=st.sampled_from(["h100-sxm", "a100-80gb", "b200", "l40s", "mi300x"]),
)
def test_tensor_parallel_time_never_below_compute_over_n(tp, batch, new, ctx, gpu):
    g = get_gpu(gpu)
    single = step_cost(LLAMA8, batch, new, ctx)
    compute_alone = single.flops / (g.peak_flops("bf16") * DEFAULT_EFFICIENCY.compute)
    assert step_time(step_cost(LLAMA8, batch, new, ctx, tp=tp), g) >= compute_alone / tp


@settings(max_examples=60, deadline=None)
@given(
    model=st.sampled_from(["llama-3.1-8b", "llama-3.1-70b", "mixtral-8x7b", "gemma-2-9b"]),
    gpu=st.sampled_from(COMPUTE_GPUS),
    prompt=st.integers(1, 20_000),
    output=st.integers(1, 64),
    batch=st.integers(1, 64),
    n_gpus=st.sampled_from([1, 2, 8]),
    eff=st.floats(0.05, 1.0),
)
def test_ideal_never_above_realistic(model, gpu, prompt, output, batch, n_gpus, eff):
    g = get_gpu(gpu)
    if n_gpus > 1 and g.interconnect_bandwidth is None and g.pcie_bandwidth is None:
        n_gpus = 1
    est = estimate_latency(
        get_model(model), g, prompt, output, batch, n_gpus=n_gpus, efficiency=eff
    )
    assert 0 < est.ideal.ttft_s <= est.ttft_s
    assert 0 <= est.ideal.tpot_s <= est.tpot_s
    assert est.ideal.e2e_s <= est.e2e_s
    assert est.ideal.ideal is None


@settings(max_examples=40, deadline=None)
@given(batch=st.integers(1, 64), new=st.integers(1, 2048), ctx=st.integers(0, 8192))
def test_more_tokens_never_cost_less(batch, new, ctx):
    a = step_cost(LLAMA8, batch, new, ctx)
    b = step_cost(LLAMA8, batch + 1, new, ctx)
    c = step_cost(LLAMA8, batch, new, ctx + 1)
    assert b.flops > a.flops and b.memory_bytes > a.memory_bytes
    assert c.flops >= a.flops and c.memory_bytes >= a.memory_bytes
    assert arithmetic_intensity(a) > 0


# --- dtypes and efficiency -----------------------------------------------------------------


def test_compute_dtype():
    assert compute_dtype("fp8", H100) == "fp8"
    assert compute_dtype("fp8", A100) == "bf16"  # no FP8 on Ampere: weight-only
    assert compute_dtype("int4", H100) == "bf16"
    assert compute_dtype("bf16", get_gpu("m2-ultra")) == "fp32"
    fp8 = estimate_latency(LLAMA8, H100, 8192, 32, weight_dtype="fp8")
    bf16 = estimate_latency(LLAMA8, H100, 8192, 32)
    assert fp8.ttft_s < bf16.ttft_s and fp8.tpot_s < bf16.tpot_s


def test_efficiency_forms():
    assert as_efficiency(None) == DEFAULT_EFFICIENCY
    assert as_efficiency(0.5) == Efficiency(0.5, 0.5)
    assert as_efficiency((0.7, 0.9)) == Efficiency(0.7, 0.9)
    with pytest.raises(ValueError, match=r"efficiency\.compute=1\.5"):
        as_efficiency(1.5)
    with pytest.raises(ValueError, match="efficiency="):
        as_efficiency("fast")


# --- bad input names the parameter ----------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"prompt_tokens": 0}, "prompt_tokens=0"),
        ({"prompt_tokens": -5}, "prompt_tokens=-5"),
        ({"output_tokens": 0}, "output_tokens=0"),
        ({"batch": 0}, "batch=0"),
        ({"n_gpus": 0}, "n_gpus=0"),
        ({"weight_dtype": "fp12"}, "weight_dtype='fp12'"),
        ({"kv_dtype": "int3"}, "kv_dtype='int3'"),
        ({"n_gpus": 2, "gpu": get_gpu("m2-ultra")}, "n_gpus=2"),
    ],
)
def test_estimate_latency_rejects_bad_input(kwargs, name):
    args = {"model": LLAMA8, "gpu": H100, "prompt_tokens": 100, "output_tokens": 10, **kwargs}
    with pytest.raises(ValueError, match=name.replace("(", r"\(")):
        estimate_latency(**args)


@pytest.mark.parametrize(
    ("args", "name"),
    [
        ((0, 1, 0), "batch=0"),
        ((1, 0, 0), "new_tokens=0"),
        ((1, -1, 0), "new_tokens=-1"),
        ((1, 1, -3), "context_tokens=-3"),
    ],
)
def test_step_cost_rejects_bad_input(args, name):
    with pytest.raises(ValueError, match=name):
        step_cost(LLAMA8, *args)
    with pytest.raises(ValueError, match="tp=0"):
        step_cost(LLAMA8, 1, 1, 1, tp=0)
    with pytest.raises(ValueError, match="phase='middle'"):
        step_cost(LLAMA8, 1, 1, 1, phase="middle")


# --- this machine ---------------------------------------------------------------------------


def test_measure_machine_returns_a_usable_spec():
    machine = measure_machine(n_bytes=8 * MiB, n=128, repeats=1)
    assert isinstance(machine, GPU)
    # a busy shared machine can be slow (BLAS threads contend); any real rate will do
    assert machine.memory_bandwidth > 1e7 and machine.fp32_flops > 1e7
    assert compute_dtype("fp32", machine) == "fp32"
    assert ridge_point(machine, "fp32") > 0
    with pytest.raises(ValueError, match="n_bytes=10"):
        measure_machine(n_bytes=10)
