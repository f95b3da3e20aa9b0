"""Answers to notebook 04's "Try it" questions, computed with llminfer."""

import math

import numpy as np

from llminfer.cost.memory import kv_utilization, plan_memory
from llminfer.exercises import Exercise
from llminfer.language import N_
from llminfer.specs.models import tensor_parallel_sizes
from llminfer.specs.presets import get_gpu, get_model
from llminfer.units import GiB

WEIGHT_DTYPES_WIDEST_FIRST = ("bf16", "fp8", "int4")


def _falcon_on_l4() -> int:
    model = get_model("falcon-7b")
    plan = plan_memory(model, get_gpu("l4"), context_tokens=model.max_context)
    return math.floor(plan.max_concurrency)  # whole requests


def _widest_dtype_70b() -> str:
    for dtype in WEIGHT_DTYPES_WIDEST_FIRST:
        plan = plan_memory(
            get_model("llama-3.1-70b"), get_gpu("h100-sxm"), weight_dtype=dtype, context_tokens=8192
        )
        if plan.fits:
            return dtype
    return "none"


def _fp8_70b_concurrency() -> int:
    plan = plan_memory(
        get_model("llama-3.1-70b"), get_gpu("h100-sxm"), weight_dtype="fp8", context_tokens=8192
    )
    return math.floor(plan.max_concurrency)  # whole requests


def _deepseek_h200s() -> int:
    model, gpu = get_model("deepseek-v3"), get_gpu("h200")
    for n in tensor_parallel_sizes(model, 128):
        if plan_memory(model, gpu, n_gpus=n, weight_dtype="fp8", context_tokens=8192).fits:
            return n
    raise AssertionError("no tensor-parallel degree up to 128 fits")


def section6_lengths() -> list[int]:
    """The 1,000 request lengths of notebook 04's section 6 (seeded lognormal, ≤ 4,096 tokens).

    Introduced in: notebooks/04_memory_budget.ipynb
    """
    rng = np.random.default_rng(0)
    return np.minimum(rng.lognormal(np.log(600), 1.0, 1000).astype(int) + 1, 4096).tolist()


def _waste_block_256() -> float:
    return 100 * (1 - kv_utilization(section6_lengths(), block_size=256))


def _h100_gib() -> float:
    return get_gpu("h100-sxm").memory_bytes / GiB


EXERCISES: tuple[Exercise, ...] = (
    Exercise(
        "04.1",
        N_(
            "Falcon-7B at its full 2,048-token context on one l4: how many whole requests fit "
            "at once (a count: max_concurrency rounded down)?"
        ),
        _falcon_on_l4,
        unit="requests",
        rel_tol=0.02,
        hint=N_("Falcon-7B has one KV head (MQA): 8 KiB per token."),
    ),
    Exercise(
        "04.2",
        N_(
            "Llama-3.1-70B on one h100-sxm: which is the widest weight dtype (bf16, fp8, int4) "
            "with which one request of 8,192 tokens fits?"
        ),
        _widest_dtype_70b,
        hint=N_("fp8 and int8 take one byte per weight; bf16 takes two."),
        accept=("int8",),
    ),
    Exercise(
        "04.3",
        N_(
            "With those fp8 weights, how many whole requests of 8,192 tokens fit at once (a count: "
            "max_concurrency rounded down)?"
        ),
        _fp8_70b_concurrency,
        unit="requests",
        rel_tol=0.02,
        hint=N_("70.6 GB of weights leave a few GiB of KV budget at 320 KiB per token."),
    ),
    Exercise(
        "04.4",
        N_(
            "DeepSeek-V3 in fp8 on h200s (tensor parallel, 8,192-token context): how many GPUs at "
            "least?"
        ),
        _deepseek_h200s,
        unit="GPUs",
        rel_tol=0.0,
        hint=N_(
            "671B parameters at 1 byte each, 143,771 MiB per H200, and the TP must divide "
            "the 128 heads."
        ),
    ),
    Exercise(
        "04.5",
        N_(
            "Section 6's lengths with 256-token blocks instead of 16: what percentage of allocated "
            "KV slots is wasted (in per cent, e.g. 12.5, not the fraction 0.125)?"
        ),
        _waste_block_256,
        unit="%",
        rel_tol=0.03,
        hint=N_("each request wastes the unused tail of its last block."),
    ),
    Exercise(
        "04.6",
        N_("How many GiB does the driver report for an '80 GB' h100-sxm?"),
        _h100_gib,
        unit="GiB",
        rel_tol=0.002,
        hint=N_("nvidia-smi prints 81,559 MiB; 1 GiB = 1,024 MiB."),
    ),
)
