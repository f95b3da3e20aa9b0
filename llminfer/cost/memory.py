"""Chapter 4's byte arithmetic: weights first, whatever is left belongs to the KV cache.

All results are bytes unless a name says otherwise (``kv_cache_gib`` returns GiB, as the
article's function does). GB = 10^9 bytes, GiB = 2^30 bytes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from llminfer.language import _
from llminfer.specs.checks import check_int, check_number
from llminfer.specs.hardware import GPU
from llminfer.specs.models import Model, check_tensor_parallel
from llminfer.units import GiB, bytes_per_element, check_dtype, format_bytes, is_block_scaled

#: Bytes of one quantisation scale (an fp16/bf16 number) stored per group of weights.
SCALE_BYTES = 2
#: Memory a serving engine keeps for itself besides weights, activations and KV cache: CUDA
#: context, cuBLAS/NCCL workspaces, CUDA graphs. A round 1 GiB; measure your own engine.
RUNTIME_OVERHEAD_BYTES = 1 * GiB
#: Tokens in the largest batch an engine profiles its activation peak with (vLLM's default
#: max_num_batched_tokens for online serving).
PROFILE_BATCH_TOKENS = 8192


#: Total device memory as CUDA reports it (``cudaMemGetInfo``; ``torch.cuda.mem_get_info()[1]``),
#: GiB, for presets where it is known. vLLM multiplies ``gpu_memory_utilization`` by this total,
#: not by nvidia-smi's (vLLM 0.11.0 ``vllm/v1/worker/gpu_worker.py`` L182-184 over
#: ``torch.cuda.mem_get_info()``; 0.33.0 ``vllm/v1/worker/utils.py`` L716-726). PyTorch's
#: out-of-memory message prints the same total ("GPU 0 has a total capacity of ...",
#: ``c10/cuda/CUDACachingAllocator.cpp``); public logs show 79.18-79.19 GiB on an H100 80GB
#: (nvidia-smi: 81,559 MiB = 79.65 GiB) and 139.80-139.81 GiB on an H200 (143,771 MiB =
#: 140.40 GiB). We take the larger value of each pair.
CUDA_TOTAL_GIB = {"NVIDIA H100 SXM5 80GB": 79.19, "NVIDIA H200 SXM 141GB": 139.81}
MEMORY_TOTALS = ("driver", "cuda")


def cuda_total_bytes(gpu: GPU) -> float:
    """Bytes CUDA reports as ``gpu``'s total memory, the base of vLLM's ``gpu_memory_utilization``.

    ``CUDA_TOTAL_GIB`` where known (H100 SXM 79.19 GiB, H200 139.81 GiB); otherwise the
    driver's ``gpu.memory_bytes`` (nvidia-smi), which is 0.4-0.6 GiB more on those two chips.

    Introduced in: notebooks/04_memory_budget.ipynb
    """
    known = CUDA_TOTAL_GIB.get(gpu.name)
    return known * GiB if known is not None else float(gpu.memory_bytes)


def _check_block_size(block_size: object, allow_none: bool) -> int | None:
    if block_size is None and allow_none:
        return None
    return check_int("block_size", block_size, minimum=1)


def kv_cache_gib(
    layers: int,
    kv_heads: int,
    head_dim: int,
    tokens: int,
    bytes_per_element: float = 2,
    concurrency: int = 1,
) -> float:
    """The article's estimate of KV-cache size, in GiB (bytes / 1024**3).

    ``2 × layers × kv_heads × head_dim × tokens × bytes_per_element × concurrency``; the 2 is
    one Key and one Value vector per head. 32 layers × 8 KV heads × 128 dims in BF16 is 128 KiB
    per token, so 8,192 tokens take 1.00 GiB.

    Introduced in: notebooks/04_memory_budget.ipynb
    """
    for name, value in (("layers", layers), ("kv_heads", kv_heads), ("head_dim", head_dim)):
        check_int(name, value, minimum=1)
    check_int("tokens", tokens)
    check_int("concurrency", concurrency, minimum=1)
    check_number("bytes_per_element", bytes_per_element, inclusive=False)
    bytes_per_request = 2 * layers * kv_heads * head_dim * tokens * bytes_per_element
    return bytes_per_request * concurrency / GiB


def kv_heads_per_gpu(model: Model, tp: int = 1) -> int:
    """KV heads one GPU stores when ``model`` is split over ``tp`` GPUs.

    ``n_kv_heads / tp`` when the heads split evenly; 1 when ``tp`` exceeds them (each GPU keeps
    a replica of the one head its query heads use, as vLLM's ``QKVParallelLinear`` does).
    A ``tp`` an engine refuses raises ValueError (``check_tensor_parallel``). Llama-3.1-8B:
    8 heads at TP 1, 2 at TP 4, 1 at TP 8 and at TP 16.

    Introduced in: notebooks/04_memory_budget.ipynb
    """
    tp = check_tensor_parallel(model, tp)
    return max(1, model.n_kv_heads // tp)


def kv_elements_per_token_per_layer(model: Model, tp: int = 1) -> int:
    """Elements one token adds to one layer's KV cache on one GPU.

    Standard attention: ``2 × kv_heads × head_dim`` (K and V), with tensor parallelism sharding
    KV heads as ``kv_heads_per_gpu`` says (``n_kv_heads / tp``, or one replicated head when tp
    exceeds the head count; a tp that does not divide raises ValueError). MLA:
    ``kv_lora_rank + qk_rope_head_dim`` (one shared latent, no separate K and V), replicated on
    every GPU.

    Introduced in: notebooks/04_memory_budget.ipynb
    """
    check_tensor_parallel(model, tp)
    if model.kv_lora_rank is not None:
        return model.kv_lora_rank + model.qk_rope_head_dim
    return 2 * kv_heads_per_gpu(model, tp) * model.head_dim


def kv_bytes_per_token(model: Model, kv_dtype: str = "bf16", tp: int = 1) -> float:
    """KV-cache bytes one token takes on one GPU, over all layers, before any window cap.

    Llama-3.1-8B in BF16: 32 layers × 2 × 8 heads × 128 × 2 B = 131,072 B (128 KiB);
    DeepSeek-V3 (MLA): 61 × 576 × 2 B = 70,272 B.

    Introduced in: notebooks/04_memory_budget.ipynb
    """
    return (
        model.n_layers
        * kv_elements_per_token_per_layer(model, tp)
        * bytes_per_element(check_dtype(kv_dtype, "kv_dtype"))
    )


def _stored_tokens(tokens: int, block_size: int | None) -> int:
    if block_size is None:
        return tokens
    return math.ceil(tokens / block_size) * block_size


def kv_cache_bytes(
    model: Model,
    tokens: int,
    kv_dtype: str = "bf16",
    concurrency: int = 1,
    block_size: int | None = None,
    tp: int = 1,
) -> int:
    """Bytes of KV cache on one GPU for ``concurrency`` sequences of ``tokens`` tokens each.

    - GQA/MQA enter through ``n_kv_heads``; MLA stores ``kv_lora_rank + qk_rope_head_dim``
      elements per token per layer.
    - Sliding-window layers hold at most ``sliding_window`` tokens; the others hold all.
    - ``block_size`` rounds each sequence up to whole blocks (paged allocation).
    - ``tp`` shards KV heads (``kv_heads_per_gpu``); a tp an engine refuses raises ValueError.

    Introduced in: notebooks/04_memory_budget.ipynb
    """
    check_int("tokens", tokens)
    check_int("concurrency", concurrency, minimum=1)
    block_size = _check_block_size(block_size, allow_none=True)
    per_element = bytes_per_element(check_dtype(kv_dtype, "kv_dtype"))
    elements = kv_elements_per_token_per_layer(model, tp)
    global_tokens = _stored_tokens(tokens, block_size)
    token_slots = model.n_global_layers * global_tokens
    if model.n_sliding_layers:
        window_tokens = _stored_tokens(min(tokens, model.sliding_window), block_size)
        token_slots += model.n_sliding_layers * window_tokens
    return math.ceil(token_slots * elements * per_element * concurrency)


def weight_bytes(model: Model | float, dtype: str = "bf16", group_size: int | None = 128) -> float:
    """Bytes of weights: parameters × bytes per parameter, plus quantisation scales.

    ``model`` is a ``Model`` (its ``n_params``) or a parameter count. For 8-bit and narrower
    formats (fp8, int8, int4, fp4) each group of ``group_size`` weights also stores one
    ``SCALE_BYTES`` = 2-byte scale::

        bytes = n_params × bytes_per_element(dtype) + ceil(n_params / group_size) × 2

    ``group_size=None`` leaves the scales out (the article's "theoretical" figure: 70B in BF16
    is 140 GB, in 8 bits 70 GB, in 4 bits 35 GB).

    The block-scaled formats ``mxfp4`` and ``nvfp4`` carry their scales in the format itself
    (``llminfer.units.BLOCK_SCALES``: 4.25 and 4.5 bits per weight), so ``group_size`` adds
    nothing to them: 1,000 weights in nvfp4 are 562.5 bytes, in mxfp4 531.25 bytes.

    Introduced in: notebooks/04_memory_budget.ipynb
    """
    n_params = model.n_params if isinstance(model, Model) else model
    if (
        isinstance(n_params, bool)
        or not isinstance(n_params, (int, float))
        or not math.isfinite(n_params)
        or n_params <= 0
    ):
        raise ValueError(f"model={model!r} must be a Model or a finite positive parameter count")
    dtype = check_dtype(dtype)
    total = n_params * bytes_per_element(dtype)
    if group_size is not None:
        check_int("group_size", group_size, minimum=1)
        if bytes_per_element(dtype) <= 1 and not is_block_scaled(dtype):
            total += math.ceil(n_params / group_size) * SCALE_BYTES
    return total


def kv_capacity_tokens(
    model: Model,
    kv_budget_bytes: float,
    kv_dtype: str = "bf16",
    block_size: int = 16,
    tp: int = 1,
) -> int:
    """Tokens of KV cache that fit in ``kv_budget_bytes`` on one GPU, counted as a paged
    engine counts them: whole blocks of ``block_size`` tokens in every layer.

    ``blocks = floor(budget / (block_size × kv_bytes_per_token))``; capacity = blocks ×
    block_size. Never negative.

    Introduced in: notebooks/04_memory_budget.ipynb
    """
    check_number("kv_budget_bytes", kv_budget_bytes)  # NaN and inf too: floor(inf) overflows
    block_size = _check_block_size(block_size, allow_none=False)
    return _num_blocks(model, kv_budget_bytes, kv_dtype, block_size, tp) * block_size


def _num_blocks(model: Model, budget: float, kv_dtype: str, block_size: int, tp: int) -> int:
    block_bytes = block_size * kv_bytes_per_token(model, kv_dtype, tp)
    return max(0, math.floor(budget / block_bytes))


def max_concurrency(
    model: Model,
    kv_budget_bytes: float,
    context_tokens: int,
    kv_dtype: str = "bf16",
    block_size: int = 16,
    tp: int = 1,
) -> float:
    """How many requests of ``context_tokens`` tokens the KV budget holds at once.

    Blocks available ÷ blocks one request needs — the "Maximum concurrency for N tokens per
    request: 3.13x" that vLLM logs at start-up. Sliding-window layers make a long request need
    fewer blocks than its length suggests.

    Introduced in: notebooks/04_memory_budget.ipynb
    """
    check_int("context_tokens", context_tokens, minimum=1)
    capacity = kv_capacity_tokens(model, kv_budget_bytes, kv_dtype, block_size, tp)
    blocks_available = capacity // block_size
    per_request = kv_cache_bytes(model, context_tokens, kv_dtype, block_size=block_size, tp=tp)
    block_bytes = block_size * kv_bytes_per_token(model, kv_dtype, tp)
    return blocks_available / (per_request / block_bytes)


def default_reserve_bytes(
    model: Model, tp: int = 1, batch_tokens: int = PROFILE_BATCH_TOKENS
) -> float:
    """A documented estimate of the memory an engine keeps for activations and its runtime,
    in bytes per GPU.

    ``RUNTIME_OVERHEAD_BYTES`` (1 GiB: CUDA context, workspaces, CUDA graphs) plus the
    activation peak of one forward pass over ``batch_tokens`` tokens in 16-bit numbers:
    ``batch_tokens × (4 × hidden_size + 2 × intermediate_size / tp) × 2`` bytes (residual
    stream, normed input, attention output and the MLP's gate and up projections alive at
    once). Engines such as vLLM measure this at start-up instead; pass ``reserve_bytes`` to
    ``plan_memory`` when you know your figure.

    Introduced in: notebooks/04_memory_budget.ipynb
    """
    check_int("tp", tp, minimum=1)
    check_int("batch_tokens", batch_tokens, minimum=1)
    activations = batch_tokens * (4 * model.hidden_size + 2 * model.intermediate_size / tp) * 2
    return RUNTIME_OVERHEAD_BYTES + activations


def allocated_kv_tokens(
    seq_tokens: Sequence[int],
    block_size: int | None = None,
    reserve_tokens: int | Sequence[int] | None = None,
) -> int:
    """Token slots an allocator sets aside for sequences of ``seq_tokens`` tokens.

    Exactly one policy: ``reserve_tokens`` reserves that many slots per sequence up front
    (contiguous allocation for the maximum length; a sequence of counts reserves a different
    amount per sequence, e.g. each request's final length); ``block_size`` allocates whole
    blocks as a sequence grows (PagedAttention), wasting at most ``block_size - 1`` slots per
    sequence.

    Introduced in: notebooks/04_memory_budget.ipynb
    """
    if (block_size is None) == (reserve_tokens is None):
        raise ValueError("give exactly one of block_size (paged) or reserve_tokens (contiguous)")
    lengths = [check_int("seq_tokens", t) for t in seq_tokens]
    if reserve_tokens is not None:
        if isinstance(reserve_tokens, int):
            reserves = [reserve_tokens] * len(lengths)
        else:
            reserves = list(reserve_tokens)
            if len(reserves) != len(lengths):
                raise ValueError(
                    f"reserve_tokens has {len(reserves)} entries but seq_tokens has {len(lengths)}"
                )
        for reserve in reserves:
            check_int("reserve_tokens", reserve, minimum=1)
        too_long = [(t, r) for t, r in zip(lengths, reserves, strict=True) if t > r]
        if too_long:
            raise ValueError(
                f"seq_tokens contains {too_long[0][0]}, longer than reserve_tokens={too_long[0][1]}"
            )
        return sum(reserves)
    block_size = _check_block_size(block_size, allow_none=False)
    return sum(_stored_tokens(t, block_size) for t in lengths)


def kv_utilization(
    seq_tokens: Sequence[int],
    block_size: int | None = None,
    reserve_tokens: int | Sequence[int] | None = None,
) -> float:
    """Share of allocated KV slots that hold real tokens (1.0 = no waste), for one policy of
    ``allocated_kv_tokens``.

    Introduced in: notebooks/04_memory_budget.ipynb
    """
    allocated = allocated_kv_tokens(seq_tokens, block_size, reserve_tokens)
    if allocated == 0:
        raise ValueError("seq_tokens must hold at least one non-empty sequence")
    return sum(seq_tokens) / allocated


@dataclass(frozen=True)
class MemoryPlan:
    """How one GPU's memory divides between weights, reserve and KV cache (bytes per GPU).

    ``free_bytes`` is what is left of the usable memory after weights, reserve and the KV
    cache that ``concurrency`` requests of ``context_tokens`` tokens need; negative when they
    do not fit. ``headroom_bytes`` is what ``gpu_memory_utilization`` keeps off limits.

    Introduced in: notebooks/04_memory_budget.ipynb
    """

    model: str
    gpu: str
    n_gpus: int
    weight_dtype: str
    kv_dtype: str
    memory_bytes: float
    usable_bytes: float
    weight_bytes: float
    reserve_bytes: float
    kv_budget_bytes: float
    kv_bytes_per_token: float
    block_size: int
    capacity_tokens: int
    context_tokens: int
    concurrency: int
    kv_needed_bytes: float
    max_concurrency: float
    fits: bool
    reason: str

    @property
    def free_bytes(self) -> float:
        return self.usable_bytes - self.weight_bytes - self.reserve_bytes - self.kv_needed_bytes

    @property
    def headroom_bytes(self) -> float:
        return self.memory_bytes - self.usable_bytes

    def breakdown(self) -> dict[str, float]:
        """Bytes per GPU by use, clipped at zero, summing to the GPU's memory when it fits."""
        kv_shown = min(self.kv_needed_bytes, max(0.0, self.kv_budget_bytes))
        return {
            "weights": self.weight_bytes,
            "reserve": self.reserve_bytes,
            "KV cache": kv_shown,
            "free": max(0.0, self.free_bytes),
            "headroom": self.headroom_bytes,
        }

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "free_bytes": self.free_bytes}

    def __str__(self) -> str:
        per_gpu = f" per GPU × {self.n_gpus}" if self.n_gpus > 1 else ""
        lines = [
            f"{self.model} on {self.gpu}{per_gpu} ({self.weight_dtype} weights, "
            f"{self.kv_dtype} KV cache)",
            f"  usable memory   {format_bytes(self.usable_bytes)}",
            f"  weights         {format_bytes(self.weight_bytes)}",
            f"  reserve         {format_bytes(self.reserve_bytes)}",
            f"  KV budget       {format_bytes(max(0.0, self.kv_budget_bytes))}"
            f" = {self.capacity_tokens:,} tokens at "
            f"{format_bytes(self.kv_bytes_per_token)} per token",
            f"  max concurrency {self.max_concurrency:.2f}x at {self.context_tokens:,} tokens",
            f"  {'fits' if self.fits else 'does not fit'}: {self.reason}",
        ]
        return "\n".join(lines)


def plan_memory(
    model: Model,
    gpu: GPU,
    n_gpus: int = 1,
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
    gpu_memory_utilization: float = 0.9,
    reserve_bytes: float | None = None,
    block_size: int = 16,
    context_tokens: int | None = None,
    concurrency: int = 1,
    memory_total: str = "driver",
) -> MemoryPlan:
    """Divide one GPU's memory: weights first, then a reserve, and the rest is KV cache.

    Weights are split evenly over ``n_gpus`` (tensor parallelism), and so are KV heads.
    ``gpu_memory_utilization`` is the share of memory the engine may use (vLLM's flag of that
    name; its default is 0.9 in vLLM 0.11.0 and 0.92 in 0.33.0, ``vllm/config/cache.py``) of
    ``memory_total``: ``"driver"`` (nvidia-smi's total, ``gpu.memory_bytes``) or ``"cuda"``
    (what ``torch.cuda.mem_get_info`` reports, ``cuda_total_bytes``), which is what vLLM
    multiplies. ``reserve_bytes`` defaults to ``default_reserve_bytes``. The plan fits when
    ``concurrency`` requests of ``context_tokens`` tokens (default: the model's maximum
    context) fit in the KV budget; otherwise ``reason`` says why and by how much.

    Introduced in: notebooks/04_memory_budget.ipynb
    """
    check_tensor_parallel(model, n_gpus, "n_gpus")
    check_int("concurrency", concurrency, minimum=1)
    weight_dtype = check_dtype(weight_dtype, "weight_dtype")
    kv_dtype = check_dtype(kv_dtype, "kv_dtype")
    block_size = _check_block_size(block_size, allow_none=False)
    if isinstance(gpu_memory_utilization, bool) or not (
        isinstance(gpu_memory_utilization, (int, float)) and 0 < gpu_memory_utilization <= 1
    ):
        raise ValueError(f"gpu_memory_utilization={gpu_memory_utilization!r} must be in (0, 1]")
    if context_tokens is None:
        context_tokens = model.max_context
    check_int("context_tokens", context_tokens, minimum=1)
    if reserve_bytes is None:
        reserve_bytes = default_reserve_bytes(model, tp=n_gpus)
    else:
        check_number("reserve_bytes", reserve_bytes)

    if memory_total not in MEMORY_TOTALS:
        raise ValueError(f"memory_total={memory_total!r} must be one of {', '.join(MEMORY_TOTALS)}")
    total = cuda_total_bytes(gpu) if memory_total == "cuda" else float(gpu.memory_bytes)
    usable = total * gpu_memory_utilization
    weights = weight_bytes(model, weight_dtype) / n_gpus
    budget = usable - weights - reserve_bytes
    per_token = kv_bytes_per_token(model, kv_dtype, tp=n_gpus)
    capacity = kv_capacity_tokens(model, max(0.0, budget), kv_dtype, block_size, n_gpus)
    concurrency_max = max_concurrency(
        model, max(0.0, budget), context_tokens, kv_dtype, block_size, n_gpus
    )
    needed = kv_cache_bytes(model, context_tokens, kv_dtype, concurrency, block_size, n_gpus)
    fits = budget > 0 and concurrency_max >= concurrency

    def gb(x: float) -> str:
        return format_bytes(x, binary=True)  # GiB, as nvidia-smi and the article count memory

    if budget <= 0:
        reason = _(
            "weights ({weights}) plus reserve ({reserve}) exceed the usable {usable} per GPU "
            "by {short}; use more GPUs or a narrower weight dtype"
        ).format(
            weights=gb(weights), reserve=gb(reserve_bytes), usable=gb(usable), short=gb(-budget)
        )
    elif context_tokens > model.max_context:
        fits = False  # the KV cache may hold it, but the model cannot read it
        reason = _(
            "context_tokens={context:,} is beyond {model}'s maximum context of {limit:,} tokens: "
            "a server refuses such a request"
        ).format(context=context_tokens, model=model.name, limit=model.max_context)
    elif not fits:
        reason = _(
            "{n} request(s) of {context:,} tokens need {needed} of KV cache but the budget is "
            "{budget} (short by {short}); at most {most:.2f} such requests fit"
        ).format(
            n=concurrency,
            context=context_tokens,
            needed=gb(needed),
            budget=gb(budget),
            short=gb(needed - budget),
            most=concurrency_max,
        )
    else:
        reason = _(
            "{n} request(s) of {context:,} tokens use {needed} of a {budget} KV budget; "
            "up to {most:.2f} would fit"
        ).format(
            n=concurrency,
            context=context_tokens,
            needed=gb(needed),
            budget=gb(budget),
            most=concurrency_max,
        )
    return MemoryPlan(
        model=model.name,
        gpu=gpu.name,
        n_gpus=n_gpus,
        weight_dtype=weight_dtype,
        kv_dtype=kv_dtype,
        memory_bytes=total,
        usable_bytes=usable,
        weight_bytes=weights,
        reserve_bytes=float(reserve_bytes),
        kv_budget_bytes=budget,
        kv_bytes_per_token=per_token,
        block_size=block_size,
        capacity_tokens=capacity,
        context_tokens=context_tokens,
        concurrency=concurrency,
        kv_needed_bytes=float(needed),
        max_concurrency=concurrency_max,
        fits=fits,
        reason=reason,
    )
