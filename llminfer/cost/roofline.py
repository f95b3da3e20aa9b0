"""Chapter 2's cost model: FLOPs and bytes of one forward step, and the roofline.

One forward step of a decoder does some floating-point work (FLOP) and moves some bytes through
device memory. A GPU finishes it no sooner than ``FLOP ÷ FLOP/s`` and no sooner than
``bytes ÷ bytes/s``; whichever is longer decides whether the step is compute-bound or
memory-bound (the roofline model, Williams, Waterman & Patterson, CACM 2009). Prefill pushes
many tokens through the weights at once (many FLOP per byte); decode pushes one token per
sequence (few FLOP per byte).

Everything here is per GPU: with tensor parallelism over ``tp`` GPUs each one does ``1/tp`` of
the FLOPs, reads ``1/tp`` of the weights and exchanges activations with the others.

Counting conventions (all stated in ``step_cost``'s docstring) are shared by ``step_cost``,
``StepTimer`` and ``llminfer.cost.latency.estimate_latency``: they go through the same arithmetic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from llminfer.cost.memory import kv_elements_per_token_per_layer, kv_heads_per_gpu, weight_bytes
from llminfer.cost.moe import expert_params, expert_touch_share
from llminfer.specs.checks import check_int
from llminfer.specs.hardware import GPU
from llminfer.specs.models import Model, llama_param_count
from llminfer.units import BLOCK_SCALES, bytes_per_element, check_dtype, format_bytes

#: Bytes per activation element: engines keep activations in 16 bits whatever the weights.
ACTIVATION_BYTES = 2
#: Latency of one hop of a ring all-reduce, seconds. nccl-tests on a DGX-A100 measured a ring
#: all-reduce of 8-128 bytes at 10 µs on 2 GPUs and 33.7 µs on 8 GPUs, about 2.4 µs for each of
#: the 2(n−1) ring steps (github.com/NVIDIA/nccl-tests/issues/123); NVLink SHARP with CUDA
#: graphs gets ~6 µs on 2 H100s (github.com/NVIDIA/nccl/issues/1259).
ALLREDUCE_HOP_LATENCY_S = 2.5e-6

PHASES = ("prefill", "decode")


@dataclass(frozen=True)
class Efficiency:
    """Achievable fractions of a GPU's peaks: ``compute`` of FLOP/s, ``memory`` of bytes/s.

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """

    compute: float
    memory: float

    def __post_init__(self) -> None:
        for name in ("compute", "memory"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"efficiency.{name}={value!r} must be a number in (0, 1]")
            if not 0 < value <= 1:
                raise ValueError(f"efficiency.{name}={value!r} must be in (0, 1]")


#: Default achievable fractions of peak, from published measurements:
#:
#: - compute 0.6: the FlashAttention repository's GPT training reaches 189 TFLOP/s per A100,
#:   "60.6% model FLOPs utilization" (github.com/Dao-AILab/flash-attention README); the
#:   FlashAttention-2 paper (arXiv:2307.08691) measures its attention forward pass at 50-73 % of
#:   the A100's peak, against 25-40 % for FlashAttention-1.
#: - memory 0.8: Nsight Compute on an H100 SXM5 serving a 70B model measured coalesced matrix
#:   loads at 2.8 TB/s (84 % of 3.35 TB/s) and MLP weight loads at 2.6 TB/s (78 %)
#:   (mikamirai.com/blog/gpu-memory-bandwidth); decode is mostly such weight streaming.
#:
#: Measure your own engine: these are typical, not guaranteed.
DEFAULT_EFFICIENCY = Efficiency(compute=0.6, memory=0.8)
IDEAL = Efficiency(compute=1.0, memory=1.0)


def as_efficiency(efficiency: Efficiency | float | tuple[float, float] | None) -> Efficiency:
    """``None`` → ``DEFAULT_EFFICIENCY``; a number → both fractions; a pair → (compute, memory).

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    if efficiency is None:
        return DEFAULT_EFFICIENCY
    if isinstance(efficiency, Efficiency):
        return efficiency
    if isinstance(efficiency, (int, float)) and not isinstance(efficiency, bool):
        return Efficiency(efficiency, efficiency)
    if isinstance(efficiency, tuple) and len(efficiency) == 2:
        return Efficiency(*efficiency)
    raise ValueError(
        f"efficiency={efficiency!r} must be None, a number in (0, 1], a (compute, memory) pair "
        "or an Efficiency"
    )


def attended_pairs(new_tokens: int, cached_tokens: int) -> int:
    """(query, key) pairs causal attention scores when ``new_tokens`` follow ``cached_tokens``.

    Each new token attends to every cached token and to the new tokens up to itself:
    ``new·cached + new·(new+1)/2``. A 2,048-token prompt: 2,098,176 pairs. One decode token
    after ``c`` cached ones: ``c + 1``.

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    check_int("new_tokens", new_tokens, 0)
    check_int("cached_tokens", cached_tokens, 0)
    return new_tokens * cached_tokens + new_tokens * (new_tokens + 1) // 2


def compute_dtype(weight_dtype: str, gpu: GPU) -> str:
    """The number format the matrix multiplies run in for ``weight_dtype`` weights on ``gpu``.

    bf16/fp16/fp32 weights compute in their own format; fp8 and fp4 weights (and the
    block-scaled mxfp4/nvfp4) use the GPU's fp8 or fp4 tensor cores when it has them; on a GPU
    without FP4 (Hopper, H20, MI325X) 4-bit weights are dequantised and multiplied in 16 bits,
    so FP4 FLOP/s exist only where the data sheet lists them. int8 and int4 weights are taken
    as weight-only quantisation (W8A16, W4A16): dequantised and multiplied in 16 bits. A
    missing 16-bit rate falls back bf16 → fp16 → fp32 (Apple GPUs publish only fp32).

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    weight_dtype = check_dtype(weight_dtype, "weight_dtype")
    supported = gpu.supported_dtypes
    if weight_dtype in BLOCK_SCALES:  # mxfp4/nvfp4 run on FP4 tensor cores where there are any
        weight_dtype = "fp4"
    if weight_dtype in ("fp8", "fp4", "fp16", "fp32", "bf16") and weight_dtype in supported:
        return weight_dtype
    for fallback in ("bf16", "fp16", "fp32"):
        if fallback in supported:
            return fallback
    raise ValueError(
        f"gpu={gpu.name!r} lists no dense matrix-multiply rate (bf16, fp16 or fp32) to compute "
        f"{weight_dtype} weights with; give it one (e.g. GPU(..., fp32_flops=...))"
    )


class StepParts(NamedTuple):
    """Work of one step split by the kernels that do it, per GPU (all sequences together).

    FLOP: ``linear_flops`` (weight matrix multiplies, LM head included), ``prefill_attention_
    flops``, ``decode_attention_flops``. Bytes: ``weight_bytes``, ``decode_kv_read_bytes``,
    ``prefill_kv_read_bytes`` (cached tokens prompt chunks attend to), ``kv_write_bytes``,
    ``activation_bytes``. Counts: ``tokens`` (new tokens), ``decode_seqs``,
    ``decode_context_tokens`` (cached tokens they attend to), ``prefill_tokens``.
    ``comm_s``: tensor-parallel all-reduce seconds. ``n_layers``, ``kv_heads`` (per GPU).
    Byte and FLOP fields may be numpy arrays (many decode steps at once); counts are numbers.

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """

    linear_flops: float
    prefill_attention_flops: float
    decode_attention_flops: float
    weight_bytes: float
    decode_kv_read_bytes: float
    prefill_kv_read_bytes: float
    kv_write_bytes: float
    activation_bytes: float
    tokens: int
    decode_seqs: int
    decode_context_tokens: float
    prefill_tokens: int
    comm_s: float
    n_layers: int
    kv_heads: int


@dataclass(frozen=True)
class Cost:
    """Work of one forward step on one GPU: FLOP, bytes through device memory, and bytes sent
    to the other GPUs (tensor parallelism).

    ``memory_bytes`` = weights + KV read + KV written + activations. ``n_allreduce`` counts the
    all-reduces (two per layer when ``tp > 1``). ``parts``: the same work split by kernel kind
    (``llminfer.cost.steptime.StepParts``), which the realistic step time needs.

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """

    flops: float
    weight_bytes: float
    kv_read_bytes: float
    kv_write_bytes: float
    activation_bytes: float
    comm_bytes: float
    n_allreduce: int
    tokens: int
    tp: int
    weight_dtype: str
    kv_dtype: str
    model: str = ""
    parts: StepParts | None = None

    @property
    def memory_bytes(self) -> float:
        return self.weight_bytes + self.kv_read_bytes + self.kv_write_bytes + self.activation_bytes

    def __str__(self) -> str:
        return (
            f"{self.flops / 1e12:.3f} TFLOP, {format_bytes(self.memory_bytes, binary=False)} "
            f"moved (weights {format_bytes(self.weight_bytes, binary=False)}, KV read "
            f"{format_bytes(self.kv_read_bytes, binary=False)}), "
            f"{arithmetic_intensity(self):.1f} FLOP/byte"
        )


def _tied_embeddings(m: Model) -> bool:
    """Whether ``m``'s parameter count is the Llama count with one shared embedding/LM head."""
    if m.is_moe or m.kv_lora_rank is not None:
        return False
    tied = llama_param_count(
        m.n_layers,
        m.hidden_size,
        m.n_heads,
        m.n_kv_heads,
        m.head_dim,
        m.intermediate_size,
        m.vocab_size,
        tie_word_embeddings=True,
    )
    return m.n_params == tied


class _CostModel:
    """Per-token and per-pair coefficients of one model, dtypes and tensor-parallel degree."""

    def __init__(self, model: Model, weight_dtype: str, kv_dtype: str, tp: int) -> None:
        if not isinstance(model, Model):
            raise ValueError(f"model={model!r} must be a Model (see llminfer.get_model)")
        self.model = model
        self.weight_dtype = check_dtype(weight_dtype, "weight_dtype")
        self.kv_dtype = check_dtype(kv_dtype, "kv_dtype")
        self.tp = check_int("tp", tp, 1)
        m = model
        embed = m.vocab_size * m.hidden_size
        # Matrix multiplies per token: every active parameter except the embedding table (a
        # lookup) and the LM head (counted per sampled sequence below), 2 FLOP per parameter.
        # A model with tied embeddings stores that matrix once (Llama-3.2-1B): subtract it once.
        copies = 1 if _tied_embeddings(m) else 2
        self.linear_flops = 2 * max(0, m.n_active_params - copies * embed) / tp
        self.lm_head_flops = 2 * embed / tp
        if m.kv_lora_rank is not None:  # MLA, absorbed form: scores over the latent + rope key
            qk_dim, v_dim = m.kv_lora_rank + m.qk_rope_head_dim, m.kv_lora_rank
        else:
            qk_dim = v_dim = m.head_dim
        per_pair = 2 * (qk_dim + v_dim) * m.n_heads / tp  # QKᵀ and scores·V
        self.attn_global = per_pair * m.n_global_layers
        self.attn_sliding = per_pair * m.n_sliding_layers
        self.window = m.sliding_window or 0
        kv_layer = kv_elements_per_token_per_layer(m, tp) * bytes_per_element(self.kv_dtype)
        self.kv_global = kv_layer * m.n_global_layers
        self.kv_sliding = kv_layer * m.n_sliding_layers
        self.kv_all = kv_layer * m.n_layers
        # KV heads one GPU holds: at least one (replicated when tp > n_kv_heads).
        # MLA decode kernels spread over query heads (every head reads the one latent).
        if m.kv_lora_rank is not None:
            self.kv_heads = max(1, m.n_heads // tp)
        else:  # replicated when tp > n_kv_heads, as the KV cache is
            self.kv_heads = kv_heads_per_gpu(m, tp)
        bytes_per_param = weight_bytes(m.n_params, self.weight_dtype) / m.n_params
        # The input embedding is a gather: a step reads the rows of its own tokens, not the
        # table. The LM head reads its whole matrix. Tied embeddings are one matrix, which the
        # LM head reads; an untied input table is left out of the per-step weight read.
        gathered = 0 if _tied_embeddings(m) else embed
        if m.is_moe:  # routed experts counted as llminfer.cost.moe counts them
            e, k = m.n_experts, m.experts_per_token
            per_expert = expert_params(m)
            shared = max(0.0, m.n_params - e * per_expert - gathered)
            self.shared_weight_bytes = shared * bytes_per_param / tp
            self.expert_bytes = per_expert * bytes_per_param / tp
            self.n_experts, self.miss = e, 1 - k / e
        else:
            self.shared_weight_bytes = (m.n_params - gathered) * bytes_per_param / tp
            self.expert_bytes, self.n_experts, self.miss = 0.0, 0, 1.0
        q_dim, kv_dim = m.n_heads * m.head_dim, m.n_kv_heads * m.head_dim
        # Plus the gathered embedding rows: one row of ``hidden`` numbers per token.
        embedding_row = m.hidden_size * bytes_per_param / tp
        if m.is_moe:  # MoE layers: the k routed and the shared experts' FFN activations
            n_moe = m.n_moe_layers
            width = m.moe_intermediate_size or m.intermediate_size
            moe_ffn = 3 * width * (m.experts_per_token + m.n_shared_experts) / tp
            attn_side = 10 * m.hidden_size + (2 * q_dim + 2 * kv_dim) / tp
            dense_ffn = 3 * m.intermediate_size / tp
            elements = m.n_layers * attn_side + (m.n_layers - n_moe) * dense_ffn + n_moe * moe_ffn
            self.activation = elements * ACTIVATION_BYTES + embedding_row
        else:
            elements = 10 * m.hidden_size + (2 * q_dim + 2 * kv_dim + 3 * m.intermediate_size) / tp
            self.activation = elements * ACTIVATION_BYTES * m.n_layers + embedding_row
        if tp > 1:
            self.n_allreduce = 2 * m.n_layers
            self.comm_per_token = self.n_allreduce * 2 * (tp - 1) / tp * m.hidden_size * 2
        else:
            self.n_allreduce, self.comm_per_token = 0, 0.0

    def parts(self, pt: int, pa: int, ds: int, dc: int, pc: int, comm_s: float = 0.0) -> StepParts:
        """The step's work split by kernel kind (``llminfer.cost.steptime.StepParts``)."""
        tokens = pt + ds
        w = self.window
        prefill_attn = self.attn_global * pa
        decode_attn = self.attn_global * (dc + ds)
        decode_kv = self.kv_global * dc
        prefill_kv = self.kv_global * pc
        if w:  # np.minimum, not min: StepTimer.decode_steps passes dc as an array
            prefill_attn += self.attn_sliding * np.minimum(pa, pt * w)
            decode_attn += self.attn_sliding * np.minimum(dc + ds, ds * w)
            decode_kv += self.kv_sliding * np.minimum(dc, ds * w)
            prefill_kv += self.kv_sliding * np.minimum(pc, pt * w)
        weights = self.shared_weight_bytes
        if self.n_experts:
            k = self.model.experts_per_token
            weights += (
                self.expert_bytes * self.n_experts * expert_touch_share(self.n_experts, k, tokens)
            )
        return StepParts(
            linear_flops=self.linear_flops * tokens + self.lm_head_flops * ds,
            prefill_attention_flops=prefill_attn,
            decode_attention_flops=decode_attn,
            weight_bytes=weights,
            decode_kv_read_bytes=decode_kv,
            prefill_kv_read_bytes=prefill_kv,
            kv_write_bytes=self.kv_all * tokens,
            activation_bytes=self.activation * tokens,
            tokens=tokens,
            decode_seqs=ds,
            decode_context_tokens=dc,
            prefill_tokens=pt,
            comm_s=comm_s,
            n_layers=self.model.n_layers,
            kv_heads=self.kv_heads,
        )

    def components(self, pt: int, pa: int, ds: int, dc: int, pc: int) -> tuple:
        """(flops, weight, kv_read, kv_write, activation, comm bytes, tokens) of one step."""
        q = self.parts(pt, pa, ds, dc, pc)
        return (
            q.linear_flops + q.prefill_attention_flops + q.decode_attention_flops,
            q.weight_bytes,
            q.decode_kv_read_bytes + q.prefill_kv_read_bytes,
            q.kv_write_bytes,
            q.activation_bytes,
            self.comm_per_token * q.tokens,
            q.tokens,
        )

    def cost(self, pt: int, pa: int, ds: int, dc: int, pc: int = 0) -> Cost:
        flops, w, kv_r, kv_w, act, comm, tokens = self.components(pt, pa, ds, dc, pc)
        parts = self.parts(pt, pa, ds, dc, pc)
        return Cost(
            flops=flops,
            weight_bytes=w,
            kv_read_bytes=kv_r,
            kv_write_bytes=kv_w,
            activation_bytes=act,
            comm_bytes=comm,
            n_allreduce=self.n_allreduce if tokens else 0,
            tokens=tokens,
            tp=self.tp,
            weight_dtype=self.weight_dtype,
            kv_dtype=self.kv_dtype,
            model=self.model.name,
            parts=parts,
        )


def _step_counts(batch: int, new_tokens: int, context_tokens: int, phase: str | None) -> tuple:
    """Map a uniform batch onto the (pt, pa, ds, dc, pc) counts a ``StepTimer`` takes."""
    check_int("batch", batch, 1)
    check_int("new_tokens", new_tokens, 1)
    check_int("context_tokens", context_tokens, 0)
    if phase is None:
        phase = "decode" if new_tokens == 1 and context_tokens >= 1 else "prefill"
    if phase not in PHASES:
        raise ValueError(f"phase={phase!r} must be one of {', '.join(PHASES)} or None")
    if phase == "decode":
        if new_tokens != 1:
            raise ValueError(f"new_tokens={new_tokens} must be 1 in a decode step")
        return 0, 0, batch, batch * context_tokens, 0
    pairs = attended_pairs(new_tokens, context_tokens)
    return batch * new_tokens, batch * pairs, 0, 0, batch * context_tokens


def step_cost(
    model: Model,
    batch: int,
    new_tokens: int,
    context_tokens: int,
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
    tp: int = 1,
    phase: str | None = None,
) -> Cost:
    """FLOP, bytes and communication of one forward step, per GPU.

    ``batch`` sequences each push ``new_tokens`` new tokens through the model with
    ``context_tokens`` tokens already in their KV cache. Prefill: ``new_tokens`` = the prompt,
    ``context_tokens`` = 0 (or a cached prefix). Decode: ``new_tokens`` = 1 and
    ``context_tokens`` = the tokens so far. ``phase`` is inferred ("decode" when one new token
    follows a non-empty cache) unless given.

    Counted (T = tokens in the step, P = attended (query, key) pairs, see ``attended_pairs``):

    - FLOP: ``2 × (active params − 2·vocab·hidden) × T`` for the linear layers (the embedding
      is a lookup), ``2·vocab·hidden`` per decoding sequence for the LM head (prefill computes
      logits only for its last token; that one row is left out, < 1 % of any prefill longer
      than a few dozen tokens), and ``2·(d_qk + d_v)·heads`` per pair per layer for QKᵀ and
      scores·V (MLA: d_qk = kv_lora_rank + rope dim, d_v = kv_lora_rank).
    - Weights: every matrix once per step, except the input embedding table: its lookup is
      a gather that reads only the rows of the step's T tokens (``T × hidden`` numbers,
      counted with the activations, since they scale with T). The LM head reads its whole
      ``vocab × hidden`` matrix; a model with tied embeddings (Llama-3.2-1B) stores and reads
      that one matrix once. Llama-3.1-8B (untied): 16.06 GB stored, 15.01 GB read by a decode
      step (its 1.05 GB input table is not read). With ``tp`` GPUs the table is split by
      vocabulary, as vLLM's ``VocabParallelEmbedding`` does.
      Mixture of experts: the shared part plus the experts the step's T tokens touch, assuming
      each token picks its k of E experts uniformly and independently:
      ``E·(1 − (1 − k/E)^T)`` experts per layer on average (``llminfer.cost.moe``; one
      expert's size is ``moe.expert_params``). Everything on one GPU group: expert
      parallelism is ``llminfer.sim.expert_parallel``.
    - KV cache: read for every cached token, written for every new one; sliding-window layers
      read at most ``window`` tokens per sequence (capped as ``min(sum, window × count)``,
      exact for a uniform batch and an upper bound otherwise).
    - Activations: each linear layer's input read and output written once in 16 bits, plus
      norms and residual adds: ``(10·h + 2·q + 2·kv + 3·I) × 2 B`` per token per layer, and
      the token's embedding row (``h`` numbers in the weights' format) once. In a MoE layer
      ``3·I`` becomes ``3·I_moe·(k + shared experts)``; dense layers of a MoE model
      (``n_dense_layers``) keep ``3·I``.
    - Tensor parallelism (``tp`` GPUs): FLOP, weights, KV heads and sharded activations ÷ tp;
      two all-reduces per layer of ``T × h × 2 B``, a ring sending ``2(tp−1)/tp`` of it.

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    counts = _step_counts(batch, new_tokens, context_tokens, phase)
    return _CostModel(model, weight_dtype, kv_dtype, tp).cost(*counts)


def mixed_step_cost(
    model: Model,
    prefill_tokens: int,
    prefill_pairs: int,
    decode_seqs: int,
    decode_context_tokens: int,
    prefill_cached_tokens: int = 0,
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
    tp: int = 1,
) -> Cost:
    """``step_cost`` for a step as an engine schedules it: ``prefill_tokens`` prompt tokens
    (attending ``prefill_pairs`` (query, key) pairs and ``prefill_cached_tokens`` cached
    tokens) and ``decode_seqs`` decoding sequences over ``decode_context_tokens`` cached
    tokens, together — the counts a simulator's step-time callable receives. Same
    conventions as ``step_cost``.

    Introduced in: notebooks/09_mixture_of_experts.ipynb
    """
    for name, value in (
        ("prefill_tokens", prefill_tokens),
        ("prefill_pairs", prefill_pairs),
        ("decode_seqs", decode_seqs),
        ("decode_context_tokens", decode_context_tokens),
        ("prefill_cached_tokens", prefill_cached_tokens),
    ):
        check_int(name, value, 0)
    costs = _CostModel(model, weight_dtype, kv_dtype, tp)
    return costs.cost(
        prefill_tokens, prefill_pairs, decode_seqs, decode_context_tokens, prefill_cached_tokens
    )


def arithmetic_intensity(cost: Cost) -> float:
    """FLOP per byte of device-memory traffic (FLOP/byte): ``cost.flops / cost.memory_bytes``.

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    if cost.memory_bytes <= 0:
        raise ValueError("cost moves no bytes; arithmetic intensity is undefined")
    return cost.flops / cost.memory_bytes


def ridge_point(gpu: GPU, dtype: str = "bf16") -> float:
    """FLOP per byte at which ``gpu``'s compute and bandwidth limits meet (FLOP/byte).

    ``peak FLOP/s ÷ bytes/s``: H100 SXM in BF16, 989.4 TFLOP/s ÷ 3.35 TB/s ≈ 295 FLOP/byte.
    A step with lower arithmetic intensity is memory-bound.

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    return gpu.peak_flops(dtype) / gpu.memory_bandwidth


def bound(cost: Cost, gpu: GPU, efficiency: Efficiency | float | tuple | None = 1.0) -> str:
    """ "compute" or "memory": which limit sets the step's time on ``gpu``.

    With the default ``efficiency=1.0`` this compares arithmetic intensity with the ridge
    point at peak rates; pass ``efficiency=None`` for the achievable rates of
    ``DEFAULT_EFFICIENCY``.

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    eff = as_efficiency(efficiency)
    flops_rate = gpu.peak_flops(compute_dtype(cost.weight_dtype, gpu)) * eff.compute
    t_compute = cost.flops / flops_rate
    t_memory = cost.memory_bytes / (gpu.memory_bandwidth * eff.memory)
    return "compute" if t_compute >= t_memory else "memory"


def _link_bandwidth(gpu: GPU, tp: int) -> float:
    if tp == 1:
        return math.inf
    link = gpu.interconnect_bandwidth or gpu.pcie_bandwidth
    if link is None:
        raise ValueError(
            f"n_gpus={tp}: {gpu.name} lists no GPU-to-GPU link (interconnect or PCIe) to "
            "all-reduce over; use n_gpus=1"
        )
    return link


def decode_crossover_batch(
    model: Model,
    gpu: GPU,
    context_tokens: int,
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
    n_gpus: int = 1,
    max_batch: int = 65536,
) -> int | None:
    """Smallest batch at which a decode step turns compute-bound at peak rates, or None.

    Each sequence holds ``context_tokens`` cached tokens. More sequences share one read of the
    weights, so intensity rises with batch, but each brings its own KV cache to read: with a
    long context the KV traffic keeps the step memory-bound at any batch (then None).

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    check_int("context_tokens", context_tokens, 1)
    check_int("max_batch", max_batch, 1)
    costs = _CostModel(model, weight_dtype, kv_dtype, n_gpus)

    def is_compute(b: int) -> bool:
        return bound(costs.cost(0, 0, b, b * context_tokens), gpu) == "compute"

    if not is_compute(max_batch):
        return None
    low, high = 0, max_batch  # is_compute(high) holds; find the smallest such batch
    while high - low > 1:
        middle = (low + high) // 2
        if is_compute(middle):
            high = middle
        else:
            low = middle
    return high
