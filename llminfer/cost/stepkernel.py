"""The realistic step time of one ``StepTimer``, with its constants folded in once (internal).

``llminfer.cost.steptime.step_seconds`` builds a ``StepParts`` record and walks the ``StepModel``'s
physics for every step: readable, and a few µs of Python each time. The simulator times
hundreds of thousands of steps of one model on one GPU, where almost every product of
constants (peak FLOP/s × matmul efficiency, bandwidth × KV efficiency, layers × overhead, the
weights' streaming time raised to the overlap exponent...) is the same at every step.
``StepKernel`` computes those products once and then performs, per step, the remaining
floating-point operations of ``step_seconds`` **in the same order on the same operands**, so it
returns the same seconds to the last bit (tests/test_steptime.py compares them on a grid of
models, GPUs, dtypes and step models), at a fraction of the cost:

- ``kernel(pt, pa, ds, dc, pc)``: one step, as ``StepTimer.__call__`` takes it;
- ``kernel.decode(ds, context)``: a stretch of decode-only steps of ``ds`` sequences, one per
  entry of ``context`` (numpy), as ``StepTimer.decode_steps``; everything that does not depend
  on the context (matrix multiplies, elementwise kernels, fixed time, all-reduces) is computed
  once per batch size and cached.

Two shortcuts keep the bits: a term of ``0.0`` is not added (``x + 0.0 == x``), and the
smooth maximum of two zeros (a step without prompt tokens or without decodes) is ``0.0``.
"""

from __future__ import annotations

import numpy as np

from llminfer.cost.splitkv import bandwidth_share


class StepKernel:
    """``step_seconds`` for one cost model (``llminfer.cost.roofline._CostModel``), GPU peak FLOP/s
    ``peak`` and bandwidth ``bw`` (bytes/s), ``sm_count`` and ``StepModel`` ``sm``; ``comm``
    gives the all-reduce seconds of a step of so many tokens (None on one GPU). Seconds out.

    Introduced in: notebooks/05_optimizations.ipynb
    """

    def __init__(self, costs, peak: float, bw: float, sm_count, sm, comm=None) -> None:
        c = costs
        self._comm = comm
        # Cost counts (_CostModel.parts).
        self.lf, self.lh = c.linear_flops, c.lm_head_flops
        self.ag, self.asl = c.attn_global, c.attn_sliding
        self.kg, self.ks = c.kv_global, c.kv_sliding
        self.ka, self.act = c.kv_all, c.activation
        self.window = c.window
        self.sw = c.shared_weight_bytes
        self.moe = bool(c.n_experts)
        self.ebne, self.miss = c.expert_bytes * c.n_experts, c.miss
        self.kvh = c.kv_heads
        n_layers = c.model.n_layers
        # StepModel physics (steptime._terms): the same products, computed once.
        self.p = p = sm.overlap_exponent
        self.inv_p = 1 / p
        self.pad = sm.matmul_pad_tokens
        self.single_row = sm.single_row_matmul_factor
        self.pm = peak * sm.matmul_efficiency
        self.bww = bw * sm.weight_bandwidth_efficiency
        self.bk = bw * sm.kv_bandwidth_efficiency
        self.pa = peak * sm.attention_efficiency
        self.atf = sm.activation_traffic_factor
        self.sm_count, self.sm = sm_count, sm
        self.splits = bool(sm_count and (sm.kv_split_tokens or sm.max_kv_splits))
        self.fixed = n_layers * sm.layer_overhead_s
        self.host_decode = n_layers * sm.host_decode_s_per_layer
        self.host_prefill = n_layers * sm.host_prefill_s_per_layer
        self.eager = sm.execution == "eager"
        # Dense models stream the same weights every step: their time^p is a constant.
        self.twp = None if self.moe else (self.sw / self.bww) ** p
        self._decode_cache: dict[int, tuple] = {}

    def _matmul(self, tokens, ds) -> float:
        """Seconds of the weights' GEMMs of a step of ``tokens`` tokens, ``ds`` of them decodes."""
        p = self.p
        linear = self.lf * tokens + self.lh * ds
        t_mm = linear * (1 + self.pad / tokens) / self.pm
        if self.moe:
            weights = self.sw + self.ebne * (1 - self.miss**tokens)
            twp = (weights / self.bww) ** p
        else:
            twp = self.twp
        matmul = (t_mm**p + twp) ** self.inv_p
        if tokens == 1 and self.single_row != 1:  # as steptime._terms: a one-row product
            matmul = matmul * self.single_row
        return matmul

    def __call__(self, pt: int, pa: int, ds: int, dc: int, pc: int = 0) -> float:
        """Seconds of one step (``StepTimer.__call__``'s arguments)."""
        tokens = pt + ds
        if not tokens:
            return 0.0
        p, w = self.p, self.window
        matmul = self._matmul(tokens, ds)
        # Decode attention: KV reads at a bandwidth share set by the blocks the kernel spreads.
        if ds or dc:
            decode_attn = self.ag * (dc + ds)
            decode_kv = self.kg * dc
            if w:
                decode_attn += self.asl * min(dc + ds, ds * w)
                decode_kv += self.ks * min(dc, ds * w)
            share = bandwidth_share(ds, self.kvh, dc, self.sm_count, self.sm)
            a, b = decode_kv / (self.bk * share), decode_attn / self.pa
            attention = (a**p + b**p) ** (1 / p)
        else:
            attention = 0.0
        if pa or pc:  # prefill attention and the cached tokens its chunks read
            prefill_attn = self.ag * pa
            prefill_kv = self.kg * pc
            if w:
                prefill_attn += self.asl * min(pa, pt * w)
                prefill_kv += self.ks * min(pc, pt * w)
            a, b = prefill_attn / self.pa, prefill_kv / self.bk
            attention = attention + (a**p + b**p) ** (1 / p)
        elementwise = (self.act * tokens * self.atf + self.ka * tokens) / self.bww
        device = self.fixed + matmul + attention + elementwise
        if self._comm is not None:
            device = device + self._comm(tokens)
        if self.eager:
            return max(device, self.host_prefill if pt else self.host_decode)
        return device

    def decode(self, ds: int, context: np.ndarray) -> np.ndarray:
        """Seconds of decode-only steps of ``ds`` sequences, one per entry of ``context``
        (float array of their summed cached tokens)."""
        if not ds:
            return np.zeros_like(context)
        const = self._decode_cache.get(ds)
        if const is None:
            elementwise = (self.act * ds * self.atf + self.ka * ds) / self.bww
            comm = self._comm(ds) if self._comm is not None else 0.0
            # Without a split rule the share depends on the batch alone: computed once.
            share = (
                None if self.splits else bandwidth_share(ds, self.kvh, 0, self.sm_count, self.sm)
            )
            const = (self.fixed + self._matmul(ds, ds), elementwise, comm, share)
            self._decode_cache[ds] = const
        fixed_matmul, elementwise, comm, share = const
        p, w = self.p, self.window
        decode_attn = self.ag * (context + ds)
        decode_kv = self.kg * context
        if w:
            decode_attn += self.asl * np.minimum(context + ds, ds * w)
            decode_kv += self.ks * np.minimum(context, ds * w)
        if share is None:
            share = bandwidth_share(ds, self.kvh, context, self.sm_count, self.sm)
        a = decode_kv / (self.bk * share)
        b = decode_attn / self.pa
        seconds = fixed_matmul + (a**p + b**p) ** (1 / p)
        seconds += elementwise
        if comm:
            seconds += comm
        if self.eager:
            return np.maximum(seconds, self.host_decode)
        return seconds
