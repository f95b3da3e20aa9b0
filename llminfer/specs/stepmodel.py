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
from dataclasses import dataclass, field, fields, replace

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
    - ``single_row_matmul_factor``: the weights' matmul time of a step with exactly one token
      row (a decode step of one sequence), as a multiple of what the GEMM terms give; 1 (the
      default) when one row costs what the padding rule says. A one-row product is a
      matrix-vector product, and libraries run it by another kernel: numpy/OpenBLAS's GEMV
      (the toy server's ``w_gate``, 128 x 512: 3.4 us for one row, 17.1 for two, 15.3 for four,
      one thread, measured 2026-12-02), llama.cpp's and cuBLAS's GEMV paths. Below 1 when that
      kernel is faster than the GEMM line through larger batches; > 0.
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
    - ``max_kv_splits``: 0 when the engine never splits a sequence's KV across thread blocks;
      else the most splits its split-KV decode kernel uses, chosen by FlashAttention's rule
      (``llminfer.cost.splitkv``): vLLM passes 32 to FlashAttention under CUDA graphs
      (``flash_attn_max_num_splits_for_cuda_graph``, vLLM 0.33 ``vllm/config/attention.py``).
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
    max_kv_splits: int = 0
    single_row_matmul_factor: float = 1.0
    host_decode_s_per_layer: float = 0.0
    host_prefill_s_per_layer: float = 0.0
    execution: str = "graph"
    source: str = field(default="custom", compare=False)

    def __post_init__(self) -> None:
        if self.execution not in EXECUTIONS:
            raise ValueError(f"execution={self.execution!r} must be one of {', '.join(EXECUTIONS)}")
        for f in fields(self):
            if f.name in ("source", "execution", "max_kv_splits"):
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
        if self.single_row_matmul_factor <= 0:
            raise ValueError(
                f"single_row_matmul_factor={self.single_row_matmul_factor!r} must be > 0"
            )
        if self.attention_blocks_per_sm <= 0:
            raise ValueError(
                f"attention_blocks_per_sm={self.attention_blocks_per_sm!r} must be > 0"
            )
        if (
            isinstance(self.max_kv_splits, bool)
            or not isinstance(self.max_kv_splits, (int, np.integer))
            or self.max_kv_splits < 0
        ):
            raise ValueError(f"max_kv_splits={self.max_kv_splits!r} must be an integer >= 0")
        if self.max_kv_splits and self.kv_split_tokens:
            raise ValueError(
                "kv_split_tokens and max_kv_splits are two rules for the same split: set one"
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
#: it apart from the matmul efficiency). Every step lands within 7.1 %; fitted on half of the
#: steps, the model predicts the other half within 10 % (tests/test_steptime.py). The host
#: constants (eager rows only) are fitted on three steps and describe that Python script, not
#: the GPU. The reference engine is plain PyTorch: one thread block per (sequence, KV head) in
#: decode attention, so a long context at a small batch is read with a fraction of the SMs.
H200_REFERENCE = StepModel(
    matmul_efficiency=0.6073,
    matmul_pad_tokens=6.149,
    weight_bandwidth_efficiency=4.18 / 4.8,
    overlap_exponent=1.569,
    kv_bandwidth_efficiency=0.9068,
    attention_blocks_per_sm=0.7286,
    attention_efficiency=0.5286,
    activation_traffic_factor=2.0,
    layer_overhead_s=68.81e-6,
    host_decode_s_per_layer=356.0e-6,
    host_prefill_s_per_layer=632.6e-6,
    execution="graph",
    source="fitted to data/measurements/h200_llama-3.1-8b_steps.csv (H200, 2026-11-30)",
)

#: A vLLM-like engine on the same chip: the measured kernels' constants (no vLLM run was timed
#: here, so matmuls, fixed costs and elementwise traffic stay the plain-PyTorch engine's) with
#: the one difference that changes decode the most — split-KV ("flash-decoding") attention.
#: vLLM's FlashAttention backend lets FA3 split a long KV cache over thread blocks, at most 32
#: splits under CUDA graphs (vLLM 0.33 ``vllm/v1/attention/backends/flash_attn.py``,
#: ``vllm/config/attention.py``); SGLang (Triton, up to 8 splits; FlashInfer), TensorRT-LLM
#: (multi-block mode, "always enabled") and FlashInfer do the same. Decode runs from CUDA graphs
#: (vLLM V1's default ``FULL_AND_PIECEWISE``). Batch 1 at 32k tokens of Llama-3.1-8B on an H100:
#: 8.8 ms per token here against 24.4 ms for the plain engine (floor 5.8 ms;
#: tests/test_steptime.py).
VLLM_PROFILE = replace(
    H200_REFERENCE,
    max_kv_splits=32,
    source="vllm: the H200-fitted kernels with FlashAttention's split-KV decode (max 32 splits)",
)
#: Named engine profiles: ``"vllm"`` (split-KV decode attention, CUDA graphs), the default
#: everywhere, and ``"pytorch"``, the plain-PyTorch engine the H200 steps were measured on.
PROFILES: dict[str, StepModel] = {"vllm": VLLM_PROFILE, "pytorch": H200_REFERENCE}
DEFAULT_PROFILE = "vllm"

#: The realistic model every ``StepTimer`` uses unless told otherwise (a GPU's own
#: ``step_model``, e.g. from ``calibrate``, comes first): the default profile's.
DEFAULT_STEP_MODEL = PROFILES[DEFAULT_PROFILE]


def get_profile(profile: str | StepModel) -> StepModel:
    """The ``StepModel`` of an engine profile: a name in ``PROFILES`` (``"vllm"``,
    ``"pytorch"``) or a ``StepModel`` (e.g. from ``calibrate``), returned as it is.

    Raises ValueError for an unknown name or another type.

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    if isinstance(profile, StepModel):
        return profile
    if isinstance(profile, str) and profile in PROFILES:
        return PROFILES[profile]
    raise ValueError(
        f"profile={profile!r} is not an engine profile; use one of {', '.join(PROFILES)} "
        "or a StepModel (e.g. from llminfer.calibrate)"
    )
