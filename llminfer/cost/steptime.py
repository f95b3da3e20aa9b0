"""Chapter 2's realistic step time: the roofline floor plus what real kernels pay on top of it.

The roofline (``llminfer.cost.roofline``) gives the physical floor of one engine step: no sooner
than
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
  ``T + matmul_pad_tokens`` rows, at ``matmul_efficiency`` of peak FLOP/s. One row (a decode
  step of one sequence) is a matrix-vector product, which libraries run by another kernel:
  ``single_row_matmul_factor`` scales that step's matmul time (1 on the H200 profiles).
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
measured H200 steps and ``llminfer.cost.calibration.calibrate`` fits them to your own timings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from llminfer.cost.roofline import (
    ALLREDUCE_HOP_LATENCY_S,
    Cost,
    Efficiency,
    StepParts,
    _CostModel,
    _link_bandwidth,
    as_efficiency,
    compute_dtype,
)
from llminfer.cost.splitkv import bandwidth_share
from llminfer.cost.stepkernel import StepKernel
from llminfer.specs.models import check_tensor_parallel
from llminfer.specs.stepmodel import DEFAULT_STEP_MODEL, StepModel, get_profile

if TYPE_CHECKING:
    from llminfer.specs.hardware import GPU
    from llminfer.specs.models import Model

#: The kinds of work ``step_terms`` times, in order.
TERMS = ("fixed", "matmul", "attention", "elementwise", "comm", "host")


def smooth_max(a, b, p: float):
    """``(a^p + b^p)^(1/p)``: between ``max(a, b)`` (p → ∞) and ``a + b`` (p = 1), seconds in,
    seconds out; numpy arrays work too.

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    return (a**p + b**p) ** (1 / p)


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
    if tokens == 1 and sm.single_row_matmul_factor != 1:  # one row: a matrix-vector kernel
        matmul = matmul * sm.single_row_matmul_factor
    # Decode attention: KV reads at a bandwidth limited by the blocks the kernel can spread.
    share = bandwidth_share(
        parts.decode_seqs, parts.kv_heads, parts.decode_context_tokens, sm_count, sm
    )
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


def as_step_model(
    efficiency: StepModel | Efficiency | float | tuple | None,
    gpu: GPU,
    profile: str | StepModel | None = None,
) -> StepModel | Efficiency:
    """What a ``StepTimer`` times with.

    ``profile`` names the engine (``"vllm"``, the default, or ``"pytorch"``, the measured plain
    engine; see ``llminfer.specs.stepmodel.PROFILES``) or is a ``StepModel`` (e.g. from
    ``calibrate``). Left at None it is the GPU's own ``step_model`` (set by ``calibrate``) or
    the default profile. ``efficiency`` instead asks for the plain roofline at fractions of the
    peaks (an ``Efficiency``, a number or a pair; see ``as_efficiency``: no overheads) — or,
    as before profiles existed, a ``StepModel``. Giving both is refused.

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    if efficiency is not None and profile is not None:
        raise ValueError(
            f"profile={profile!r} and efficiency={efficiency!r} both choose the step-time "
            "arithmetic; pass one (profile= for an engine, efficiency= for the plain roofline)"
        )
    if profile is not None:
        return get_profile(profile)
    if efficiency is None:
        return getattr(gpu, "step_model", None) or DEFAULT_STEP_MODEL
    if isinstance(efficiency, StepModel):
        return efficiency
    return as_efficiency(efficiency)


class StepTimer:
    """Seconds of one engine step on one GPU (of ``n_gpus``), from precomputed coefficients.

    ``timer(prefill_tokens, prefill_attended, decode_seqs, decode_context_tokens)``:

    - ``prefill_tokens``: new prompt tokens processed in the step, all sequences together;
    - ``prefill_attended``: (query, key) pairs those prompt tokens attend to, summed over
      sequences (``attended_pairs(new, cached)`` for each);
    - ``decode_seqs``: sequences producing one token each;
    - ``decode_context_tokens``: tokens already in those sequences' KV caches, summed;
    - ``prefill_cached_tokens`` (optional, default 0): cached tokens the prompt chunks attend
      to (a chunked prefill or a prefix-cache hit), read from the KV cache.

    A step mixing prefill and decode is one forward pass: the weights are read once.

    ``efficiency`` chooses the arithmetic (see ``as_step_model``). By default the realistic
    ``StepModel`` of ``llminfer.cost.steptime`` (kernels summed, fixed per-layer time, matmul and
    attention efficiencies fitted to a real H200): what the simulator and ``estimate_latency``
    report. An ``Efficiency`` (or a number, or a pair) gives the plain roofline
    ``max(FLOP ÷ (peak × compute eff.), bytes ÷ (bandwidth × memory eff.))``; ``IDEAL`` (1.0)
    is the physical floor. All-reduce time is added, not overlapped. Plain float arithmetic, a
    few µs per call; it equals ``step_time(step_cost(...), gpu, efficiency)`` for the same step.

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """

    def __init__(
        self,
        model: Model,
        gpu: GPU,
        n_gpus: int = 1,
        weight_dtype: str = "bf16",
        kv_dtype: str = "bf16",
        efficiency: StepModel | Efficiency | float | tuple | None = None,
        profile: str | StepModel | None = None,
    ) -> None:
        check_tensor_parallel(model, n_gpus, "n_gpus")  # engines refuse uneven head splits
        self._costs = _CostModel(model, weight_dtype, kv_dtype, n_gpus)
        self.model, self.gpu, self.n_gpus = model, gpu, n_gpus
        self.efficiency = as_step_model(efficiency, gpu, profile)
        self.realistic = isinstance(self.efficiency, StepModel)
        self.compute_dtype = compute_dtype(self._costs.weight_dtype, gpu)
        if self.realistic:  # roofline rates for the bound label: at the model's efficiencies
            rates = (self.efficiency.matmul_efficiency, self.efficiency.weight_bandwidth_efficiency)
        else:
            rates = (self.efficiency.compute, self.efficiency.memory)
        self._peak = gpu.peak_flops(self.compute_dtype)
        self._flops_rate = self._peak * rates[0]
        self._bytes_rate = gpu.memory_bandwidth * rates[1]
        self._link = _link_bandwidth(gpu, n_gpus)
        self._allreduce_latency = 2 * (n_gpus - 1) * ALLREDUCE_HOP_LATENCY_S
        # The realistic arithmetic with its constants folded in: same bits, less Python.
        self._kernel = None
        if self.realistic:
            comm = self._comm if n_gpus > 1 else None
            self._kernel = StepKernel(
                self._costs, self._peak, gpu.memory_bandwidth, gpu.sm_count, self.efficiency, comm
            )

    def _comm(self, tokens) -> float:
        if self.n_gpus == 1:
            return 0.0
        comm = self._costs.comm_per_token * tokens / self._link
        return comm + self._costs.n_allreduce * self._allreduce_latency

    def breakdown(
        self,
        prefill_tokens: int,
        prefill_attended: int,
        decode_seqs: int,
        decode_context_tokens: int,
        prefill_cached_tokens: int = 0,
    ) -> tuple[float, float, float]:
        """(compute seconds, memory seconds, communication seconds) of one step at this
        timer's compute and bandwidth fractions: the roofline's two terms, which say whether
        the step is compute- or memory-bound (the realistic time is ``timer(...)``)."""
        flops, w, kv_r, kv_w, act, _, tokens = self._costs.components(
            prefill_tokens,
            prefill_attended,
            decode_seqs,
            decode_context_tokens,
            prefill_cached_tokens,
        )
        if not tokens:
            return 0.0, 0.0, 0.0
        t_comm = self._comm(tokens)
        return flops / self._flops_rate, (w + kv_r + kv_w + act) / self._bytes_rate, t_comm

    def terms(
        self,
        prefill_tokens: int,
        prefill_attended: int,
        decode_seqs: int,
        decode_context_tokens: int,
        prefill_cached_tokens: int = 0,
    ) -> dict:
        """Seconds of the step by kind of work (``llminfer.cost.steptime.step_terms``); with a plain
        ``Efficiency`` the keys are ``compute``, ``memory`` and ``comm``."""
        if not self.realistic:
            t_c, t_m, t_x = self.breakdown(
                prefill_tokens,
                prefill_attended,
                decode_seqs,
                decode_context_tokens,
                prefill_cached_tokens,
            )
            return {"compute": t_c, "memory": t_m, "comm": t_x}
        parts = self._costs.parts(
            prefill_tokens,
            prefill_attended,
            decode_seqs,
            decode_context_tokens,
            prefill_cached_tokens,
        )
        parts = parts._replace(comm_s=self._comm(parts.tokens) if parts.tokens else 0.0)
        return step_terms(parts, self.gpu, self.compute_dtype, self.efficiency)

    def __call__(
        self,
        prefill_tokens: int,
        prefill_attended: int,
        decode_seqs: int,
        decode_context_tokens: int,
        prefill_cached_tokens: int = 0,
    ) -> float:
        if self._kernel is not None:  # = step_seconds(parts, ...), bit for bit
            return self._kernel(
                prefill_tokens,
                prefill_attended,
                decode_seqs,
                decode_context_tokens,
                prefill_cached_tokens,
            )
        t_compute, t_memory, t_comm = self.breakdown(
            prefill_tokens,
            prefill_attended,
            decode_seqs,
            decode_context_tokens,
            prefill_cached_tokens,
        )
        return max(t_compute, t_memory) + t_comm

    def decode_steps(self, decode_seqs: int, decode_context_tokens: np.ndarray) -> np.ndarray:
        """Seconds of decode-only steps, one per entry of ``decode_context_tokens``: the same
        as ``[self(0, 0, decode_seqs, c) for c in decode_context_tokens]``, vectorised, so the
        simulator can run a stretch of identical decode steps at once.

        Introduced in: notebooks/05_optimizations.ipynb
        """
        context = np.asarray(decode_context_tokens, dtype=float)
        if self._kernel is not None:  # = step_seconds(parts, ...) per entry, bit for bit
            return self._kernel.decode(decode_seqs, context)
        t_compute, t_memory, t_comm = self.breakdown(0, 0, decode_seqs, context)
        return np.maximum(t_compute, t_memory) + t_comm

    def cost(
        self,
        prefill_tokens: int,
        prefill_attended: int,
        decode_seqs: int,
        decode_context_tokens: int,
        prefill_cached_tokens: int = 0,
    ) -> Cost:
        """The ``Cost`` of the step this timer times."""
        return self._costs.cost(
            prefill_tokens,
            prefill_attended,
            decode_seqs,
            decode_context_tokens,
            prefill_cached_tokens,
        )


def step_timer(
    model: Model,
    gpu: GPU,
    n_gpus: int = 1,
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
    efficiency: StepModel | Efficiency | float | tuple | None = None,
    profile: str | StepModel | None = None,
) -> StepTimer:
    """A ``StepTimer`` for ``model`` on ``n_gpus`` × ``gpu`` (tensor parallel), timed as the
    engine ``profile`` runs it (``as_step_model``: default the GPU's own or ``"vllm"``).

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    return StepTimer(model, gpu, n_gpus, weight_dtype, kv_dtype, efficiency, profile)


def step_time(
    cost: Cost,
    gpu: GPU,
    efficiency: StepModel | Efficiency | float | tuple | None = None,
    profile: str | StepModel | None = None,
) -> float:
    """Seconds ``gpu`` needs for the step ``cost`` describes (same arithmetic as StepTimer:
    the engine ``profile`` by default, the plain roofline for an ``Efficiency``/number).

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    eff = as_step_model(efficiency, gpu, profile)
    if not cost.tokens:
        return 0.0
    t_comm = cost.comm_bytes / _link_bandwidth(gpu, cost.tp)
    t_comm += cost.n_allreduce * 2 * (cost.tp - 1) * ALLREDUCE_HOP_LATENCY_S
    dtype = compute_dtype(cost.weight_dtype, gpu)
    if isinstance(eff, StepModel):
        if cost.parts is None:
            raise ValueError("cost has no parts (build it with step_cost or StepTimer.cost)")
        return step_seconds(cost.parts._replace(comm_s=t_comm), gpu, dtype, eff)
    t_compute = cost.flops / (gpu.peak_flops(dtype) * eff.compute)
    t_memory = cost.memory_bytes / (gpu.memory_bandwidth * eff.memory)
    return max(t_compute, t_memory) + t_comm
