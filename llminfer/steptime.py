"""Chapter 2's realistic step time: the roofline floor plus what real kernels pay on top of it.

The roofline (``llminfer.roofline``) gives the physical floor of one engine step: no sooner than
``FLOP ÷ peak FLOP/s`` and no sooner than ``bytes ÷ peak bytes/s``. Real steps, timed on an
NVIDIA H200 (``data/measurements/``), take 1.2–3× that floor, for reasons a roofline cannot hold:

- **Kernels run one after another.** A step is a sequence of kernels (per layer: norms, the
  QKV/O/MLP matrix multiplies, RoPE, attention, activations). Each has its own roofline; their
  times add, so the weights' matrix multiplies, attention over the KV cache and the elementwise
  kernels are timed separately and summed, not folded into one ``max``.
- **Fixed time per kernel.** Even replayed from a CUDA graph, every kernel costs a few µs to
  start, fill the GPU and drain; a decode step of one sequence pays it ~30 times per layer.
  ``layer_overhead_s`` per layer holds it (so it scales with ``n_layers``).
- **Matrix multiplies reach a fraction of peak, less with few tokens.** A GEMM over ``T`` token
  rows computes in tiles of 64–128 rows, so a step of ``T`` tokens costs as if it had
  ``T + matmul_pad_tokens`` rows, at ``matmul_efficiency`` of peak FLOP/s.
- **Weight streaming and tensor-core work overlap only partly.** Near the ridge point a GEMM is
  neither purely memory- nor compute-bound: ``(t_compute^p + t_memory^p)^(1/p)`` with
  ``p = overlap_exponent`` replaces ``max`` (p → ∞ gives the roofline's hard max, p = 1 no
  overlap at all).
- **Decode attention needs parallel work to reach full bandwidth.** A FlashAttention decode
  kernel (PyTorch SDPA) runs one thread block per (sequence, KV head); with ``batch × KV heads``
  blocks the KV reads reach ``min(1, blocks ÷ (SMs × attention_blocks_per_sm))`` of the
  bandwidth they reach on a full GPU. Batch 1 of Llama-3.1-8B has 8 blocks for 132 SMs: a
  long context is read at about a tenth of the bandwidth.
- **Prefill attention** runs at ``attention_efficiency`` of peak FLOP/s.

Every constant is a field of ``StepModel``; ``H200_REFERENCE`` holds the values fitted to the
measured H200 steps and ``llminfer.calibration.calibrate`` fits them to your own timings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

if TYPE_CHECKING:
    from llminfer.hardware import GPU

#: How an engine runs a step's kernels: replayed from a CUDA graph, or launched one by one.
EXECUTIONS = ("graph", "eager")
#: The kinds of work ``step_terms`` times, in order.
TERMS = ("fixed", "matmul", "attention", "elementwise", "comm", "host")
#: Fractions of a peak: each in (0, 1].
_FRACTIONS = (
    "matmul_efficiency",
    "weight_bandwidth_efficiency",
    "kv_bandwidth_efficiency",
    "attention_efficiency",
)


@dataclass(frozen=True)
class StepModel:
    """Constants of the realistic step time (see the module docstring for the physics).

    - ``matmul_efficiency``: fraction of the dense peak FLOP/s the weight matrix multiplies
      reach with many tokens in the step.
    - ``matmul_pad_tokens``: tokens a GEMM behaves as if it had in addition (tile padding and
      partly idle SMs with few rows), tokens.
    - ``weight_bandwidth_efficiency``: fraction of peak bandwidth when streaming weights and
      activations (a large device-to-device copy reaches about this).
    - ``overlap_exponent``: p of the smooth maximum ``(a^p + b^p)^(1/p)`` of a GEMM's compute and
      weight-streaming times; ≥ 1.
    - ``kv_bandwidth_efficiency``: fraction of peak bandwidth decode attention reads the KV cache
      at when it has enough thread blocks.
    - ``attention_blocks_per_sm``: (sequence, KV head) blocks per SM that saturate bandwidth.
    - ``kv_split_tokens``: 0 when decode attention runs one block per (sequence, KV head), as
      PyTorch's SDPA does; else the context length per extra block of a split-KV kernel
      ("flash-decoding": vLLM's and TensorRT-LLM's decode kernels split long contexts so a
      small batch still fills the GPU), tokens.
    - ``attention_efficiency``: fraction of peak FLOP/s of prefill attention (FlashAttention).
    - ``activation_traffic_factor``: bytes the elementwise kernels move, as a multiple of the
      roofline's activation count (unfused RoPE, GQA head expansion, separate SiLU and
      multiply move more than the minimum); ≥ 1.
    - ``layer_overhead_s``: fixed seconds per layer per step (kernel start/drain in a CUDA
      graph), seconds.
    - ``host_decode_s_per_layer`` / ``host_prefill_s_per_layer``: CPU seconds per layer to
      launch a decode / prefill step's kernels one by one from Python, seconds.
    - ``execution``: ``"graph"`` (the step is replayed from a CUDA graph, as serving engines
      run decode: no CPU launch cost) or ``"eager"`` (kernels launched one by one: the step
      takes the longer of the GPU's time and the CPU's launch time).

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """

    matmul_efficiency: float
    matmul_pad_tokens: float
    weight_bandwidth_efficiency: float
    overlap_exponent: float
    kv_bandwidth_efficiency: float
    attention_blocks_per_sm: float
    attention_efficiency: float
    activation_traffic_factor: float
    layer_overhead_s: float
    kv_split_tokens: float = 0.0
    host_decode_s_per_layer: float = 0.0
    host_prefill_s_per_layer: float = 0.0
    execution: str = "graph"
    source: str = field(default="custom", compare=False)

    def __post_init__(self) -> None:
        if self.execution not in EXECUTIONS:
            raise ValueError(f"execution={self.execution!r} must be one of {', '.join(EXECUTIONS)}")
        for f in fields(self):
            if f.name in ("source", "execution"):
                continue
            value = getattr(self, f.name)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float, np.floating))
                or not math.isfinite(value)
            ):
                raise ValueError(f"{f.name}={value!r} must be a finite number")
            if f.name in _FRACTIONS and not 0 < value <= 1:
                raise ValueError(f"{f.name}={value!r} must be in (0, 1] (a fraction of a peak)")
        for name in ("overlap_exponent", "activation_traffic_factor"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)!r} must be >= 1")
        if self.attention_blocks_per_sm <= 0:
            raise ValueError(
                f"attention_blocks_per_sm={self.attention_blocks_per_sm!r} must be > 0"
            )
        for name in (
            "kv_split_tokens",
            "matmul_pad_tokens",
            "layer_overhead_s",
            "host_decode_s_per_layer",
            "host_prefill_s_per_layer",
        ):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}={getattr(self, name)!r} must be >= 0")

    @property
    def eager(self) -> bool:
        """True when kernels are launched one by one (CPU launch time can set the step time)."""
        return self.execution == "eager"


#: Fitted to all 44 timed steps of Llama-3.1-8B (BF16) on one NVIDIA H200 SXM, measured
#: 2026-11-30 (``data/measurements/h200_llama-3.1-8b_steps.csv``; method and caveats in its
#: README), by ``llminfer.calibration.calibrate``: least squares on log(model ÷ measured), with
#: two constants held rather than fitted: ``weight_bandwidth_efficiency`` = 4.18 ÷ 4.8 TB/s,
#: the device-to-device copy the same machine measured, and ``activation_traffic_factor`` = 2,
#: our estimate of the reference engine's unfused elementwise passes (timings alone cannot tell
#: it apart from the matmul efficiency). Every step lands within 7 %; fitted on half of the
#: steps, the model predicts the other half within 10 % (tests/test_steptime.py). The host
#: constants (eager rows only) are fitted on three steps and describe that Python script, not
#: the GPU. The reference engine is plain PyTorch: vLLM and TensorRT-LLM fuse kernels and split
#: long KV caches across SMs ("flash-decoding"), so they are somewhat faster at batch 1.
H200_REFERENCE = StepModel(
    matmul_efficiency=0.6053,
    matmul_pad_tokens=7.76,
    weight_bandwidth_efficiency=4.18 / 4.8,
    overlap_exponent=1.550,
    kv_bandwidth_efficiency=0.9072,
    attention_blocks_per_sm=0.7293,
    attention_efficiency=0.5321,
    activation_traffic_factor=2.0,
    layer_overhead_s=60.56e-6,
    host_decode_s_per_layer=356.0e-6,
    host_prefill_s_per_layer=632.6e-6,
    execution="graph",
    source="fitted to data/measurements/h200_llama-3.1-8b_steps.csv (H200, 2026-11-30)",
)

#: The realistic model every ``StepTimer`` uses unless told otherwise (a GPU's own
#: ``step_model``, e.g. from ``calibrate``, comes first).
DEFAULT_STEP_MODEL = H200_REFERENCE


def smooth_max(a, b, p: float):
    """``(a^p + b^p)^(1/p)``: between ``max(a, b)`` (p → ∞) and ``a + b`` (p = 1), seconds in,
    seconds out; numpy arrays work too.

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    return (a**p + b**p) ** (1 / p)


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


def _terms(parts: StepParts, peak: float, bw: float, sm_count, sm: StepModel) -> tuple:
    """(fixed, matmul, attention, elementwise, comm, host) seconds: ``step_terms`` without the
    dictionary, for the simulator's hot loop."""
    tokens = parts.tokens
    if not tokens:
        return 0.0, 0.0, 0.0, 0.0, 0.0, 0.0
    p = sm.overlap_exponent
    # GEMMs: padded rows at the matmul efficiency, weights streamed at the weight bandwidth.
    t_mm = parts.linear_flops * (1 + sm.matmul_pad_tokens / tokens) / (peak * sm.matmul_efficiency)
    t_w = parts.weight_bytes / (bw * sm.weight_bandwidth_efficiency)
    matmul = (t_mm**p + t_w**p) ** (1 / p)
    # Decode attention: KV reads at a bandwidth limited by the blocks the kernel can spread.
    blocks = parts.decode_seqs * parts.kv_heads
    if sm_count and blocks and sm.kv_split_tokens:  # split-KV: one more block per split
        splits = parts.decode_context_tokens / sm.kv_split_tokens
        blocks = parts.kv_heads * (parts.decode_seqs + splits)
        share = np.minimum(1.0, blocks / (sm_count * sm.attention_blocks_per_sm))
    elif sm_count and blocks:
        share = min(1.0, blocks / (sm_count * sm.attention_blocks_per_sm))
    else:  # no decode, or an unknown SM count: assume enough blocks
        share = 1.0
    attention = smooth_max(
        parts.decode_kv_read_bytes / (bw * sm.kv_bandwidth_efficiency * share),
        parts.decode_attention_flops / (peak * sm.attention_efficiency),
        p,
    ) + smooth_max(
        parts.prefill_attention_flops / (peak * sm.attention_efficiency),
        parts.prefill_kv_read_bytes / (bw * sm.kv_bandwidth_efficiency),
        p,
    )
    elementwise = (parts.activation_bytes * sm.activation_traffic_factor + parts.kv_write_bytes) / (
        bw * sm.weight_bandwidth_efficiency
    )
    host = parts.n_layers * (
        sm.host_prefill_s_per_layer if parts.prefill_tokens else sm.host_decode_s_per_layer
    )
    fixed = parts.n_layers * sm.layer_overhead_s
    return fixed, matmul, attention, elementwise, parts.comm_s, host


def step_terms(parts: StepParts, gpu: GPU, compute_dtype: str, sm: StepModel) -> dict:
    """Seconds of each kind of work in one step under ``sm``; their sum is the step time.

    Keys: ``fixed`` (per-layer overhead), ``matmul`` (weights' GEMMs: smooth max of compute and
    weight streaming), ``attention`` (prefill FLOPs and decode KV reads), ``elementwise``
    (activations and KV writes), ``comm`` (all-reduces), ``host`` (CPU launch time; it counts
    only in eager execution, see ``step_seconds``). Works on numpy arrays as on numbers.

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    values = _terms(parts, gpu.peak_flops(compute_dtype), gpu.memory_bandwidth, gpu.sm_count, sm)
    return dict(zip(TERMS, values, strict=True))


def _seconds(parts: StepParts, peak: float, bw: float, sm_count, sm: StepModel):
    fixed, matmul, attention, elementwise, comm, host = _terms(parts, peak, bw, sm_count, sm)
    device = fixed + matmul + attention + elementwise + comm
    if sm.execution == "eager":  # the CPU launches faster than the GPU runs, or not
        return np.maximum(device, host)
    return device


def step_seconds(parts: StepParts, gpu: GPU, compute_dtype: str, sm: StepModel):
    """Seconds of one step: the sum of ``step_terms`` on the GPU, or the CPU's launch time when
    that is longer (eager execution only). Works on numpy arrays as on numbers.

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    return _seconds(parts, gpu.peak_flops(compute_dtype), gpu.memory_bandwidth, gpu.sm_count, sm)
