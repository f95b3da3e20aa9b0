"""The realistic step time against real timings: every measured H200 step, a hold-out fit,
published serving benchmarks, and calibration recovering known constants."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from llminfer import estimate_latency, get_gpu, get_model
from llminfer.cost.calibration import (
    DEFAULT_FIT,
    calibrate,
    compare_measurements,
    fit_step_model,
    read_measurements,
)
from llminfer.cost.roofline import IDEAL, attended_pairs, step_cost
from llminfer.cost.splitkv import kv_splits, wave_splits
from llminfer.cost.steptime import StepTimer, step_time
from llminfer.sim.engines import EngineConfig
from llminfer.sim.simulate import simulate
from llminfer.sim.workload import Workload
from llminfer.specs.stepmodel import (
    DEFAULT_STEP_MODEL,
    H200_REFERENCE,
    PROFILES,
    StepModel,
    get_profile,
)

CSV = Path(__file__).parent.parent / "data" / "measurements" / "h200_llama-3.1-8b_steps.csv"
LLAMA8 = get_model("llama-3.1-8b")
H200 = get_gpu("h200")


@pytest.fixture(scope="module")
def table():
    return compare_measurements(str(CSV), LLAMA8, H200, H200_REFERENCE)


def test_the_csv_holds_44_timed_steps_of_every_kind(table):
    assert len(table) == 44
    assert set(table["kind"]) == {
        "prefill",
        "prefill_graph",
        "decode_eager",
        "decode_graph",
        "mixed_step",
    }


def test_every_measured_8b_step_within_15_percent(table):
    worst = table.loc[(table["ratio"] - 1).abs().idxmax()]
    assert ((table["ratio"] - 1).abs() <= 0.15).all(), worst.to_dict()
    assert ((table["ratio"] - 1).abs() <= 0.08).all()  # what the fit actually reaches


def test_the_roofline_floor_is_never_above_a_measurement(table):
    assert (table["ideal_s"] <= table["measured_s"]).all()
    # real kernels reach at most ~3/4 of the floor, and a quarter at batch 1 with 32k context
    assert table["floor_ratio"].max() < 0.8
    one_long = table[(table["kind"] == "decode_graph") & (table["context"] == 32768)]
    assert one_long["floor_ratio"].item() == pytest.approx(0.229, abs=0.005)


def test_a_256_token_chunk_is_not_free_for_a_decode_batch(table):
    """Issue 12: the roofline's max() says a 256-token chunk costs a decode step of batch 32
    almost nothing; the GPU says 8.2 -> 14.2 ms. The model has to agree with the GPU."""
    mixed = table[table["kind"] == "mixed_step"].set_index("prefill_chunk")
    assert mixed.loc[0, "ms_median"] == pytest.approx(8.19, abs=0.01)
    assert mixed.loc[256, "ms_median"] == pytest.approx(14.22, abs=0.01)
    ideal_extra = mixed.loc[256, "ideal_s"] / mixed.loc[0, "ideal_s"]
    model_extra = mixed.loc[256, "model_s"] / mixed.loc[0, "model_s"]
    assert ideal_extra < 1.1  # the roofline: almost free
    assert model_extra == pytest.approx(14.22 / 8.19, rel=0.08)


def test_fitted_on_half_the_steps_the_model_predicts_the_other_half():
    steps = read_measurements(str(CSV))
    train, held_out = steps.iloc[::2], steps.iloc[1::2]
    start = replace(H200_REFERENCE, matmul_efficiency=0.7, layer_overhead_s=30e-6)
    fitted = fit_step_model(train, LLAMA8, H200, start, DEFAULT_FIT)
    held = compare_measurements(held_out[list(steps.columns[:11])], LLAMA8, H200, fitted)
    assert (held["ratio"] - 1).abs().max() < 0.10


def test_default_constants_are_the_fit_to_the_csv():
    fitted = calibrate(str(CSV), LLAMA8, H200).step_model
    for name in (*DEFAULT_FIT, "host_decode_s_per_layer", "host_prefill_s_per_layer"):
        assert getattr(fitted, name) == pytest.approx(getattr(H200_REFERENCE, name), rel=0.03)


# --- published serving benchmarks (other engines, other GPUs): within ±35 % --------------


def test_vllm_llama_8b_on_a100_40gb_at_one_request():
    """vLLM 0.23.0, Llama-3.1-8B-Instruct BF16, one A100 40GB, 1,024 tokens in / 128 out, one
    request at a time: ~75 tokens/s (johnmusgrave.com/p/vllm-throughput-latency-sweep-on)."""
    est = estimate_latency(LLAMA8, get_gpu("a100-40gb"), 1024, 128)
    assert est.tokens_per_s == pytest.approx(75, rel=0.35)


@pytest.mark.parametrize(
    ("prompt", "output", "ttft_ms", "itl_ms"),
    [(5000, 500, 406.77, 18.58), (500, 2000, 47.77, 18.91)],
)
def test_nim_llama_70b_fp8_on_two_h100_at_concurrency_1(prompt, output, ttft_ms, itl_ms):
    """NVIDIA NIM 1.8.0 (TensorRT-LLM), Llama-3.3-70B-Instruct (Llama-3.1-70B's shape) FP8,
    TP2 on 2 × H100 80GB, concurrency 1
    (docs.nvidia.com/nim/benchmarking/llm/1.0.0/performance)."""
    est = estimate_latency(
        get_model("llama-3.1-70b"), get_gpu("h100"), prompt, output, weight_dtype="fp8", n_gpus=2
    )
    assert est.ttft_s * 1e3 == pytest.approx(ttft_ms, rel=0.35)
    assert est.tpot_s * 1e3 == pytest.approx(itl_ms, rel=0.35)
    # TensorRT-LLM's decode attention splits long contexts over SMs ("multi-block mode, always
    # enabled"): the "vllm" profile, which splits as FlashAttention does, comes within 5 %.
    est = estimate_latency(
        get_model("llama-3.1-70b"),
        get_gpu("h100"),
        prompt,
        output,
        weight_dtype="fp8",
        n_gpus=2,
        profile="vllm",
    )
    assert est.tpot_s * 1e3 == pytest.approx(itl_ms, rel=0.05)


# --- engine profiles: split-KV decode attention ---------------------------------------------


def test_split_kv_profile_reads_a_long_context_at_full_bandwidth():
    """Llama-3.1-8B on one H100 SXM, batch 1, 32k tokens of context (issue 21): the plain engine
    reads the KV cache with 8 thread blocks for 132 SMs; the vLLM-like profile splits it."""
    h100 = get_gpu("h100-sxm")
    plain = estimate_latency(LLAMA8, h100, 32768, 256, profile="pytorch")
    split = estimate_latency(LLAMA8, h100, 32768, 256, profile="vllm")
    assert plain.tpot_s * 1e3 == pytest.approx(24.4, abs=0.1)
    assert split.tpot_s * 1e3 == pytest.approx(8.8, abs=0.1)
    assert split.ideal.tpot_s * 1e3 == pytest.approx(5.77, abs=0.01)
    assert estimate_latency(LLAMA8, h100, 32768, 256).tpot_s == split.tpot_s  # the default
    # at batch 64 the unsplit grid (512 blocks) already fills the GPU: the profiles agree
    wide = [estimate_latency(LLAMA8, h100, 2048, 64, batch=64, profile=p) for p in PROFILES]
    assert wide[0].tpot_s == pytest.approx(wide[1].tpot_s, rel=1e-12)


def test_wave_splits_follow_flashattention_3s_heuristic():
    """hopper/heuristics.h: no split at >= 0.8 x SMs blocks; else the smallest split count whose
    wave efficiency reaches 85 % of the best (worked by hand: 8 blocks on 132 SMs, at most 32
    splits: 8s/132 for s <= 16 peaks at 0.970 (s = 16); 0.85 x 0.970 = 0.824 -> s = 14)."""
    assert wave_splits(8, 132, 32) == 14
    assert wave_splits(64, 132, 32) == 2  # 128/132 = 0.97 at s = 2
    assert wave_splits(106, 132, 32) == 1  # 106 >= 0.8 x 132: the grid is full
    assert wave_splits(8, 132, 1) == 1
    # a context of at most four 128-token blocks is never split
    assert kv_splits(1, 8, 512, 132, 32) == 1
    assert kv_splits(1, 8, 513, 132, 32) == 5  # five blocks: the wave choice is capped at 5
    assert kv_splits(1, 8, 32768, 132, 32) == 14
    np.testing.assert_array_equal(kv_splits(1, 8, np.array([100, 32768]), 132, 32), [1, 14])


def test_a_profile_is_one_choice_and_a_calibrated_gpu_keeps_its_own():
    h100 = get_gpu("h100-sxm")
    with pytest.raises(ValueError, match=r"profile=.*efficiency="):
        StepTimer(LLAMA8, h100, efficiency=0.5, profile="vllm")
    with pytest.raises(ValueError, match="profile='sglang' is not an engine profile"):
        StepTimer(LLAMA8, h100, profile="sglang")
    with pytest.raises(ValueError, match="max_kv_splits"):
        replace(H200_REFERENCE, max_kv_splits=-1)
    mine = replace(h100, step_model=replace(H200_REFERENCE, layer_overhead_s=1e-4))
    assert StepTimer(LLAMA8, mine).efficiency.layer_overhead_s == 1e-4
    assert StepTimer(LLAMA8, mine, profile="vllm").efficiency == PROFILES["vllm"]
    assert get_profile("pytorch") is H200_REFERENCE
    assert DEFAULT_STEP_MODEL is PROFILES["vllm"]


# --- physics that must hold whatever the constants -----------------------------------------


@pytest.mark.parametrize("gpu", ["h100", "a100-80gb", "l40s", "mi300x", "b200"])
@pytest.mark.parametrize("model", ["llama-3.1-8b", "mixtral-8x7b", "gemma-2-9b", "deepseek-v3"])
def test_realistic_never_below_the_floor(model, gpu):
    m, g = get_model(model), get_gpu(gpu)
    real = StepTimer(m, g)
    ideal = StepTimer(m, g, efficiency=IDEAL)
    for args in [
        (4096, attended_pairs(4096, 0), 0, 0),
        (0, 0, 1, 100),
        (0, 0, 64, 64 * 3000),
        (256, attended_pairs(256, 2048), 32, 32 * 2048, 2048),
    ]:
        assert real(*args) >= ideal(*args) > 0


def test_fixed_time_scales_with_layers_and_small_batches_pay_it():
    sm = DEFAULT_STEP_MODEL
    half = replace(LLAMA8, name="half", n_layers=16, n_params=None, n_active_params=None)
    terms8 = StepTimer(LLAMA8, H200).terms(0, 0, 1, 1000)
    terms_half = StepTimer(half, H200).terms(0, 0, 1, 1000)
    assert terms8["fixed"] == pytest.approx(32 * sm.layer_overhead_s)
    assert terms_half["fixed"] == pytest.approx(16 * sm.layer_overhead_s)
    # at batch 1 the fixed time is a third of the step; at batch 256 far less
    step1 = StepTimer(LLAMA8, H200)(0, 0, 1, 1000)
    step256 = StepTimer(LLAMA8, H200)(0, 0, 256, 256_000)
    assert 0.25 < terms8["fixed"] / step1 < 0.4
    assert terms8["fixed"] / step256 < 0.12


def test_decode_steps_vectorised_equals_calls_and_step_time_equals_timer():
    timer = StepTimer(LLAMA8, H200)
    context = np.array([0, 1000, 50_000, 300_000])
    np.testing.assert_allclose(
        timer.decode_steps(32, context), [timer(0, 0, 32, int(c)) for c in context], rtol=1e-12
    )
    cost = step_cost(LLAMA8, 4, 1, 3000)
    assert step_time(cost, H200) == timer(0, 0, 4, 12_000)


# (model, GPU, GPUs, dtype, step model): dense, sliding-window, MoE, MLA; one GPU and tensor
# parallel; a GPU with no SM count; graph and eager execution; split-KV decode attention.
KERNEL_CASES = [
    ("llama-3.1-8b", "h200", 1, "bf16", H200_REFERENCE),
    ("llama-3.1-8b", "h100-sxm", 1, "fp8", replace(H200_REFERENCE, execution="eager")),
    ("llama-3.1-8b", replace(H200, sm_count=None), 1, "bf16", H200_REFERENCE),
    ("llama-3.1-70b", "h100-sxm", 4, "bf16", replace(H200_REFERENCE, kv_split_tokens=512)),
    ("mistral-7b-v0.1", "l40s", 1, "bf16", replace(H200_REFERENCE, kv_split_tokens=256)),
    ("gemma-2-9b", "h200", 1, "bf16", H200_REFERENCE),
    ("mixtral-8x7b-v0.1", "h100-sxm", 2, "bf16", replace(H200_REFERENCE, execution="eager")),
    ("gpt-oss-120b", "b200", 2, "fp8", H200_REFERENCE),
    ("deepseek-v3", "h200", 8, "fp8", H200_REFERENCE),
    ("llama-3.1-8b", "h100-sxm", 1, "bf16", PROFILES["vllm"]),
    ("llama-3.1-70b", "h100-sxm", 4, "fp8", PROFILES["vllm"]),
    ("gemma-2-9b", "h200", 1, "bf16", PROFILES["vllm"]),
    ("deepseek-v3", "h200", 8, "fp8", PROFILES["vllm"]),
    ("llama-3.1-8b", "h200", 1, "bf16", replace(H200_REFERENCE, single_row_matmul_factor=0.3)),
    ("mixtral-8x7b-v0.1", "h200", 1, "bf16", replace(H200_REFERENCE, single_row_matmul_factor=2)),
]


@pytest.mark.parametrize("model, gpu, n_gpus, dtype, sm", KERNEL_CASES)
def test_the_timers_fast_kernel_gives_step_seconds_to_the_last_bit(model, gpu, n_gpus, dtype, sm):
    """StepTimer times steps with llminfer.cost.stepkernel (constants folded in once, for the
    simulator); it must return exactly what step_seconds computes from the step's parts,
    one step at a time and for a stretch of decode steps."""
    from llminfer.cost.steptime import step_seconds

    model, gpu = get_model(model), get_gpu(gpu) if isinstance(gpu, str) else gpu
    timer = StepTimer(model, gpu, n_gpus, dtype, dtype, efficiency=sm)
    costs = timer._costs  # the readable reference arithmetic: parts, then step_seconds

    def reference(pt, pa, ds, dc, pc):
        if not pt + ds:
            return 0.0
        parts = costs.parts(pt, pa, ds, dc, pc, timer._comm(pt + ds))
        return step_seconds(parts, gpu, timer.compute_dtype, sm)

    rng = np.random.default_rng(0)
    steps = [(0, 0, 0, 0, 0), (1, 1, 0, 0, 0), (0, 0, 1, 0, 0), (0, 0, 1, 16, 0)]
    steps += [
        (2048, attended_pairs(2048, 0), 0, 0, 0),
        (512, attended_pairs(512, 7000), 0, 0, 7000),
    ]
    for _ in range(300):  # mixed steps: prompt chunks (some after cached tokens) plus decodes
        pt, cached, ds = (int(x) for x in rng.integers(0, [8192, 20_000, 300]))
        pt, cached = (pt, cached) if rng.random() < 0.7 else (0, 0)
        ds = max(ds, 0 if pt else 1)
        dc = int(ds * rng.integers(0, 30_000))
        steps.append((pt, attended_pairs(pt, cached), ds, dc, cached))
    for step in steps:
        assert timer(*step) == reference(*step), step
    context = rng.integers(0, 30_000, 200).astype(float)
    for ds in (1, 3, 64, 300):
        parts = costs.parts(0, 0, ds, ds * context, 0, timer._comm(ds))  # the array arithmetic
        expected = np.broadcast_to(step_seconds(parts, gpu, timer.compute_dtype, sm), (200,))
        np.testing.assert_array_equal(timer.decode_steps(ds, ds * context), expected)
    assert not timer.decode_steps(0, context).any()


def test_a_calibrated_gpu_is_accepted_by_estimate_simulate_and_step_timer():
    slow = replace(H200_REFERENCE, layer_overhead_s=200e-6)
    gpu = replace(H200, step_model=slow)
    assert StepTimer(LLAMA8, gpu).efficiency is slow
    fast_est, slow_est = (estimate_latency(LLAMA8, g, 100, 10) for g in (H200, gpu))
    assert slow_est.tpot_s - fast_est.tpot_s == pytest.approx(32 * (200 - 68.81) * 1e-6)
    assert slow_est.ideal.tpot_s == fast_est.ideal.tpot_s
    work = Workload(n_requests=20, rate=5.0, prompt_tokens=200, output_tokens=20, seed=1)
    engine = EngineConfig(
        chunked_prefill=False, prefix_caching=False, max_num_seqs=256, max_num_batched_tokens=8192
    )
    runs = [simulate(work, LLAMA8, g, engine=engine).requests for g in (H200, gpu)]
    e2e = [(r["end_ts"] - r["start_ts"]).mean() for r in runs]
    assert e2e[1] > e2e[0]


# --- calibrate recovers known constants ---------------------------------------------------


def _synthetic(sm: StepModel) -> pd.DataFrame:
    """Timings a GPU following ``sm`` exactly would give, on a grid of shapes."""
    rows = []
    for t in (8, 16, 32, 64, 128, 256, 512, 1024, 4096, 16384):
        rows.append({"kind": "prefill_graph", "batch": 1, "tokens": t})
    for b in (1, 4, 16, 64, 256, 1024):
        for c in (16, 256, 4096, 16384):
            rows.append({"kind": "decode_graph", "batch": b, "context": c})
    for chunk in (16, 64, 512, 2048):
        rows.append({"kind": "mixed_step", "batch": 16, "context": 2048, "prefill_chunk": chunk})
    frame = pd.DataFrame(rows)
    steps = read_measurements(frame.assign(ms_median=1.0))
    timer = StepTimer(LLAMA8, H200, efficiency=sm)
    seconds = [
        timer(*map(int, s))
        for s in steps[
            [
                "prefill_tokens",
                "prefill_attended",
                "decode_seqs",
                "decode_context_tokens",
                "prefill_cached_tokens",
            ]
        ].to_numpy()
    ]
    return frame.assign(ms_median=np.array(seconds) * 1e3)


def test_calibrate_recovers_known_constants_from_synthetic_timings():
    truth = replace(
        H200_REFERENCE,
        matmul_efficiency=0.45,
        matmul_pad_tokens=20.0,
        overlap_exponent=2.5,
        kv_bandwidth_efficiency=0.7,
        attention_blocks_per_sm=1.5,
        attention_efficiency=0.35,
        layer_overhead_s=25e-6,
    )
    fitted = calibrate(_synthetic(truth), LLAMA8, H200).step_model
    for name in DEFAULT_FIT:
        assert getattr(fitted, name) == pytest.approx(getattr(truth, name), rel=0.02), name


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (pd.DataFrame({"kind": ["decode_graph"], "batch": [1]}), "ms_median"),
        (
            pd.DataFrame({"kind": ["warmup"], "batch": [1], "ms_median": [1.0]}),
            "kind",
        ),
        (
            pd.DataFrame({"kind": ["decode_graph"], "batch": [1], "ms_median": [1.0]}),
            "context",
        ),
        (
            pd.DataFrame(
                {"kind": ["decode_graph"], "batch": [1], "context": [10], "ms_median": [-1.0]}
            ),
            "ms_median=-1.0",
        ),
        (
            pd.DataFrame(
                {"kind": ["prefill_graph"], "batch": [1.5], "tokens": [10], "ms_median": [1.0]}
            ),
            "batch=1.5",
        ),
        ("not a frame.txt", "No such file"),
    ],
)
def test_read_measurements_rejects_bad_tables(frame, message):
    with pytest.raises((ValueError, FileNotFoundError), match=message):
        read_measurements(frame)


def test_calibrate_needs_more_steps_than_constants():
    one = pd.DataFrame({"kind": ["decode_graph"], "batch": [1], "context": [10], "ms_median": [6]})
    with pytest.raises(ValueError, match="fewer than the 7 constants"):
        calibrate(one, LLAMA8, H200)
    with pytest.raises(ValueError, match="not a StepModel constant"):
        calibrate(one, LLAMA8, H200, fit=("speed",))


def test_step_model_rejects_bad_constants():
    with pytest.raises(ValueError, match=r"matmul_efficiency=1\.2"):
        replace(H200_REFERENCE, matmul_efficiency=1.2)
    with pytest.raises(ValueError, match=r"overlap_exponent=0\.5"):
        replace(H200_REFERENCE, overlap_exponent=0.5)
    with pytest.raises(ValueError, match="execution='lazy'"):
        replace(H200_REFERENCE, execution="lazy")
    with pytest.raises(ValueError, match="layer_overhead_s=nan"):
        replace(H200_REFERENCE, layer_overhead_s=float("nan"))
    with pytest.raises(ValueError, match="step_model="):
        replace(H200, step_model="fast")
    with pytest.raises(ValueError, match=r"single_row_matmul_factor=0\b"):
        replace(H200_REFERENCE, single_row_matmul_factor=0)


def test_the_single_row_factor_scales_only_a_one_row_steps_matmuls():
    from llminfer.cost.steptime import step_terms

    timer = StepTimer(LLAMA8, H200)
    costs = timer._costs
    fast = replace(H200_REFERENCE, single_row_matmul_factor=0.25)
    for tokens, expected in ((1, 0.25), (2, 1.0), (64, 1.0)):
        parts = costs.parts(0, 0, tokens, tokens * 500, 0, 0.0)
        plain = step_terms(parts, H200, timer.compute_dtype, H200_REFERENCE)
        scaled = step_terms(parts, H200, timer.compute_dtype, fast)
        assert scaled["matmul"] == pytest.approx(expected * plain["matmul"], rel=1e-12)
        assert {k: v for k, v in scaled.items() if k != "matmul"} == {
            k: v for k, v in plain.items() if k != "matmul"
        }
    # one prompt token is one row too
    parts = costs.parts(1, 1, 0, 0, 0, 0.0)
    plain = step_terms(parts, H200, timer.compute_dtype, H200_REFERENCE)["matmul"]
    assert step_terms(parts, H200, timer.compute_dtype, fast)["matmul"] == 0.25 * plain


def test_measure_gpu_steps_exits_cleanly_without_torch_or_gpu():
    import subprocess
    import sys

    script = Path(__file__).parent.parent / "benchmarks" / "measure_gpu_steps.py"
    done = subprocess.run(
        [sys.executable, str(script), "--quick", "--out", "/dev/null"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "nothing to measure" in done.stdout or "wrote" in done.stdout
