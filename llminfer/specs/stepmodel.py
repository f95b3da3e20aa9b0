"""What an engine's kernels achieve on a chip: the constants of chapter 2's realistic step time.

The roofline (``llminfer.cost.roofline``) is the physical floor of a step; how far above it real
kernels land depends on the engine — fused kernels or not, decode attention split across SMs
("flash-decoding") or one thread block per sequence and KV head, CUDA graphs or eager launches —
and is held by a ``StepModel``: fractions of the peaks, fixed times, the split rule. It sits with
the specs of the hardware and the model because it describes a given engine on a given chip,
not a cost: ``llminfer.cost.steptime`` turns it into seconds, and ``llminfer.cost.calibration``
fits one to your own step timings. A ``GPU`` may carry its own (``GPU.step_model``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

import numpy as np

#: How an engine runs a step's kernels: replayed from a CUDA graph, or launched one by one.
EXECUTIONS = ("graph", "eager")

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
#: README), by ``llminfer.cost.calibration.calibrate``: least squares on log(model ÷ measured), with
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
