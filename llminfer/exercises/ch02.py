"""Answers to notebook 02's "Try it" questions, computed by llminfer."""

from dataclasses import replace

from llminfer.cost.flash import flash2_traffic
from llminfer.cost.latency import estimate_latency, profile_table
from llminfer.cost.memory import kv_cache_bytes
from llminfer.cost.roofline import bound, decode_crossover_batch, step_cost
from llminfer.cost.toy import ToyModel
from llminfer.exercises import Exercise
from llminfer.language import N_
from llminfer.specs.presets import get_gpu, get_model


def _decode_bound_at_batch_1024() -> str:
    cost = step_cost(get_model("llama-3.1-8b"), batch=1024, new_tokens=1, context_tokens=16)
    return bound(cost, get_gpu("h100-sxm"))


def _fp8_ttft_speedup() -> float:
    # on the H200: section 2 of the notebook already prints the H100's answer
    llama, h200 = get_model("llama-3.1-8b"), get_gpu("h200")
    bf16 = estimate_latency(llama, h200, 2048, 2)
    fp8 = estimate_latency(llama, h200, 2048, 2, weight_dtype="fp8")
    return bf16.ttft_s / fp8.ttft_s


def _weight_only_fp8_ttft_speedup() -> float:
    llama, h200 = get_model("llama-3.1-8b"), get_gpu("h200")
    no_fp8_cores = replace(h200, fp8_flops=None)  # FP8 weights, BF16 matmuls: weight-only
    bf16 = estimate_latency(llama, h200, 2048, 2)
    fp8 = estimate_latency(llama, no_fp8_cores, 2048, 2, weight_dtype="fp8")
    return bf16.ttft_s / fp8.ttft_s


def _crossover_70b() -> int:
    return decode_crossover_batch(get_model("llama-3.1-70b"), get_gpu("h100-sxm"), 128)


def _mha_cache_growth() -> float:
    gqa = ToyModel(n_layers=2, hidden_size=64, n_heads=4, n_kv_heads=2, vocab_size=256, seed=0)
    mha = ToyModel(n_layers=2, hidden_size=64, n_heads=4, n_kv_heads=4, vocab_size=256, seed=0)
    tokens = 28  # the notebook's 16-token prompt and 12 generated tokens
    return kv_cache_bytes(mha.config, tokens, "fp32") / kv_cache_bytes(gqa.config, tokens, "fp32")


def _half_height_tiles() -> float:
    # FlashAttention-2's sm86/sm89 causal tile (64 x 64) against its A100/H100 one (128 x 64)
    h100_tiles = flash2_traffic(32768, 128, 32, 8, block_rows=128, block_cols=64)
    ada_tiles = flash2_traffic(32768, 128, 32, 8, block_rows=64, block_cols=64)
    return ada_tiles.kv_stream_bytes / h100_tiles.kv_stream_bytes


def _batch_2_split_speedup() -> float:
    # one decode step of 2 sequences of 32,768 tokens: the plain engine over the split-KV one
    # (the notebook's prose gives batch 1's and batch 4's ratios)
    table = profile_table(get_model("llama-3.1-8b"), get_gpu("h100-sxm"), [2], [32768])
    return float(table["ratio"].iloc[0])


EXERCISES: tuple[Exercise, ...] = (
    Exercise(
        key="02.1",
        question=N_(
            "Llama-3.1-8B decodes a batch of 1,024 sequences with 16 cached tokens each on an "
            "H100 SXM. At peak rates, is the step compute- or memory-bound?"
        ),
        compute=_decode_bound_at_batch_1024,
        accept=("compute-bound",),
        hint=N_("Intensity ≈ batch for decode with short caches; compare it with the ridge (295)."),
    ),
    Exercise(
        key="02.2",
        question=N_(
            "With FP8 weights *and* FP8 activations (W8A8) on an H200, by what factor does TTFT of "
            "a 2,048-token prompt shrink against BF16 on the same GPU?"
        ),
        compute=_fp8_ttft_speedup,
        unit="×",
        rel_tol=0.03,
        hint=N_("Compare estimate_latency(..., weight_dtype='fp8').ttft_s with the BF16 one."),
    ),
    Exercise(
        key="02.3",
        question=N_(
            "And on the H200 with FP8 weights but BF16 matrix multiplies (weight-only FP8)? By "
            "what factor does TTFT shrink?"
        ),
        compute=_weight_only_fp8_ttft_speedup,
        unit="×",
        rel_tol=0.03,
        hint=N_("A GPU without an FP8 rate (replace(h200, fp8_flops=None)) computes in BF16."),
    ),
    Exercise(
        key="02.4",
        question=N_(
            "At what batch does Llama-3.1-70B's decode cross the H100's ridge with 128 cached "
            "tokens per sequence?"
        ),
        compute=_crossover_70b,
        unit="sequences",
        rel_tol=0.0,
        abs_tol=1,
        hint=N_("decode_crossover_batch(get_model('llama-3.1-70b'), h100, 128)"),
    ),
    Exercise(
        key="02.5",
        question=N_(
            "Rebuild the small toy with n_kv_heads=4 (plain multi-head attention): by what "
            "factor does with_cache.cache_bytes grow?"
        ),
        compute=_mha_cache_growth,
        unit="×",
        hint=N_("The KV cache stores n_kv_heads × head_dim per token per layer."),
    ),
    Exercise(
        key="02.6",
        question=N_(
            "FlashAttention-2 uses 64-row query tiles for causal attention on RTX 40xx-class GPUs "
            "instead of 128. For one Llama-3.1-8B layer at 32,768 tokens, by what factor does the "
            "K/V traffic streamed into SRAM (flash2_traffic(...).kv_stream_bytes) grow?"
        ),
        compute=_half_height_tiles,
        unit="×",
        hint=N_("Each K/V tile serves B_r query rows: half the rows, twice the tile loads."),
    ),
    Exercise(
        key="02.7",
        question=N_(
            "Llama-3.1-8B on one H100 SXM decodes 2 sequences of 32,768 cached tokens each: how "
            "many times longer is the step under the measured 'pytorch' profile than under 'vllm'?"
        ),
        compute=_batch_2_split_speedup,
        unit="×",
        hint=N_("profile_table(llama3, h100, [2], [32768]): its 'ratio' and 'splits' columns"),
    ),
)
