"""Answers to notebook 01's "Try it" questions, computed with llminfer."""

from llminfer.cost.latency import estimate_latency, request_breakdown
from llminfer.exercises import Exercise
from llminfer.language import N_
from llminfer.specs.models import tensor_parallel_sizes
from llminfer.specs.presets import get_gpu, get_model


def _ttft_ratio() -> float:
    model, gpu = get_model("llama-3.1-8b"), get_gpu("h100-sxm")
    long = estimate_latency(model, gpu, 32768, 256).ttft_s
    return long / estimate_latency(model, gpu, 2048, 256).ttft_s


def _h200_tpot_ms() -> float:
    return estimate_latency(get_model("llama-3.1-8b"), get_gpu("h200"), 2048, 256).tpot_s * 1e3


def _decode_share_128() -> float:
    est = estimate_latency(get_model("llama-3.1-8b"), get_gpu("h100-sxm"), 2048, 128)
    stages = request_breakdown(est, network_s=0.050, queue_s=0.200)
    return 100 * stages["decode"] / sum(stages.values())


def _gpus_for_70b() -> int:
    model, gpu = get_model("llama-3.1-70b"), get_gpu("h100-sxm")
    for n in tensor_parallel_sizes(model, 64):
        if estimate_latency(model, gpu, 2048, 256, n_gpus=n).fits:
            return n
    raise AssertionError("no tensor-parallel degree up to 64 fits")


EXERCISES: tuple[Exercise, ...] = (
    Exercise(
        "01.1",
        N_(
            "Prompt 32,768 instead of 2,048 tokens (Llama-3.1-8B, one H100 SXM): by what factor "
            "does prefill (TTFT without queueing) grow?"
        ),
        _ttft_ratio,
        unit="×",
        rel_tol=0.05,
        hint=N_("16× more tokens, plus attention whose work grows with the square of the prompt."),
    ),
    Exercise(
        "01.2",
        N_(
            "On an h200 instead of an h100-sxm, what is TPOT for the 2,048-in / 256-out request, "
            "in ms?"
        ),
        _h200_tpot_ms,
        unit="ms",
        rel_tol=0.03,
        hint=N_(
            "decode is memory-bound: the floor falls with 4.8 vs 3.35 TB/s; the fixed time per "
            "layer does not."
        ),
    ),
    Exercise(
        "01.3",
        N_(
            "With 128 output tokens (network 50 ms, queue 200 ms), what percentage of the "
            "end-to-end time is decode?"
        ),
        _decode_share_128,
        unit="%",
        rel_tol=0.03,
        hint=N_("decode = 127 steps × TPOT; divide by the sum of all four stages."),
    ),
    Exercise(
        "01.4",
        N_(
            "Llama-3.1-70B in BF16 on H100 SXMs: with how many GPUs (tensor parallel) does the "
            "2,048-in / 256-out estimate first report fits=True?"
        ),
        _gpus_for_70b,
        unit="GPUs",
        rel_tol=0.0,
        hint=N_("141 GB of weights; each H100 reports 81,559 MiB and vLLM uses 90 % of it."),
    ),
)
