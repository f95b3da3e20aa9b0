"""Chapters 3 and 5: what a serving engine is told to do, as the simulator reads it.

``EngineConfig`` holds an engine's scheduling knobs under vLLM's names (the batch token budget,
the sequence cap, chunked prefill, prefix caching, the KV block size, preemption and the
batching policy) and llama.cpp's (its micro-batches and slots: ``ubatch_split``, ``n_ubatch``),
each checked when it is made; ``V1_ENGINE`` and ``V0_ENGINE`` are vLLM's two schedulers' defaults,
and ``kv_capacity_blocks`` the KV blocks an engine gets from chapter 4's memory plan.
``llminfer.sim.simulate`` serves a workload with one; the toy server
(``llminfer.serve``) and ``diagnose`` describe their engines with the same class. Used by
notebooks 03, 05, 07 and 08.
"""

from __future__ import annotations

from dataclasses import dataclass

from llminfer.cost.memory import plan_memory
from llminfer.sim.ubatches import UBATCH_SPLITS
from llminfer.specs.checks import check_int, check_number
from llminfer.specs.hardware import GPU
from llminfer.specs.models import Model

POLICIES = ("continuous", "static")


@dataclass(frozen=True)
class EngineConfig:
    """A serving engine's scheduler and cache settings (names as in vLLM).

    The defaults are vLLM v0.11.0's V1 engine behind its OpenAI-compatible server on a GPU with
    ≥ 70 GiB of memory (``EngineArgs._set_default_args``, ``vllm/engine/arg_utils.py``):
    chunked prefill and prefix caching on, 8,192 tokens and 1,024 sequences per step. vLLM V0's
    defaults are ``EngineConfig(chunked_prefill=False, prefix_caching=False, max_num_seqs=256,
    max_num_batched_tokens=8192)`` (``V0_ENGINE``).

    - ``policy``: ``"continuous"`` (iteration-level batching) or ``"static"`` (a batch runs to
      completion before the next is admitted; KV reserved for the final length).
    - ``max_num_seqs``: most sequences in one step (unset: 1,024 capped by the token budget with
      chunked prefill, as V1; else 256, as V0); ``max_num_batched_tokens``: most tokens in one
      step (prefill tokens + one per decoding sequence). Without chunked prefill every prompt
      must fit it whole (vLLM then sets it to the model's context length).
    - ``chunked_prefill``: split long prompts over steps and mix them with decodes (unset: on
      for ``"continuous"``, off for ``"static"``).
    - ``block_size``: tokens per KV block; ``gpu_memory_utilization``: share of GPU memory the
      engine may use (weights, reserve and KV cache).
    - ``prefix_caching``: reuse the KV blocks of shared prompt prefixes (unset: as
      ``chunked_prefill``'s default).
    - ``long_prefill_token_threshold``: most new tokens one request's prefill chunk gets in one
      step (0 = no cap, vLLM's default), as vLLM V1's scheduler applies it: to running and to
      newly admitted requests alike, ``if 0 < threshold < num_new_tokens: num_new_tokens =
      threshold``, and not at all in a step when only one request is in the system (running +
      waiting), "there is nobody to starve" (vLLM 0.33.0 ``vllm/v1/core/sched/scheduler.py``
      L754-763, L844-845, L1332-1333; 0.11.0 L216-219, L424-427, without the one-request
      exemption). Needs ``chunked_prefill``. With ``long_prefill_token_threshold_adaptive``
      (vLLM 0.33.0, default off) the cap is floored at a fair share of the step's token budget,
      ``max(threshold, max_num_batched_tokens // requests in the system)`` (L764-769).
      vLLM V0's ``max_num_partial_prefills`` / ``max_long_partial_prefills`` are not modelled:
      V1's scheduler never reads them (0.11.0 falls back to V0 when they are set; 0.33.0 no
      longer has them).
    - ``handoff_steps``: how many step ends a request that arrives while the engine is busy
      waits before the scheduler sees it, counting the end of the step it arrived during (0 and
      1 alike: at the next step, as vLLM and llama.cpp, whose HTTP front end runs beside the
      engine). A server whose engine computes each step inside
      the event loop that also reads requests gets one loop turn per step, and the front end
      needs a few turns per request (read, parse, submit): the toy server ``llminfer serve`` in
      its real-compute mode, measured at 3-4 (``ServeConfig.engine_config``). Requests that
      arrive while the engine is idle are handed over at once.
    - ``request_setup_s``: seconds the engine's own thread spends on each new request before
      the step that first schedules it, one request after another, every step waiting meanwhile;
      a request that arrives during that time is set up in the same pass and joins the same
      step. llama.cpp's server loop takes every queued task (``process_single_task``: pick and
      launch a slot, save the idle slots to its RAM prompt cache) before each ``update_slots``
      (0.3.36 ``tools/server/server-queue.cpp`` ``start_loop`` L299-310, ``process_new_tasks``
      L138-161, which takes tasks posted meanwhile too):
      2 requests sent 1.1 ms apart to an idle server were launched 1.4 ms apart and shared
      one prefill step (``llama-server -v --log-timestamps``, 0.3.36, the toy-shaped GGUF of
      ``benchmarks/bench_fit_sweep.py``, 2026-12-03). 0 (the default): no such time, as vLLM,
      whose front end does that work beside the engine.
    - ``ubatch_split``: ``None`` (the default: a step is one forward pass, as vLLM runs it), or
      how llama.cpp splits a step's batch into forward passes of ``n_ubatch`` tokens (512),
      each reading the weights again (``llminfer.sim.ubatches``): ``"simple"``, one KV
      cache for all slots (``llama-server --kv-unified``, or ``--parallel`` left automatic),
      the tokens in order, ``n_ubatch`` a pass; ``"equal"``, each slot its own KV stream (an
      explicit ``--parallel N``, llama.cpp 0.3.36's default then), one pass per run of
      consecutive slot ids. Requests then take slots as llama-server gives them (the least
      recently used idle slot of ``max_num_seqs``), and each pass is timed by the step model
      on its own: decoding slots 0, 2, 4 and 6 cost four weight passes, slots 0-3 one (measured:
      39.8 ms a token against 20.5 ms, ``llminfer.sim.ubatches``). ``n_ubatch`` other than 512
      needs a ``ubatch_split``.

    Introduced in: notebooks/05_optimizations.ipynb
    """

    policy: str = "continuous"
    max_num_seqs: int | None = None
    max_num_batched_tokens: int = 8192
    chunked_prefill: bool | None = None
    block_size: int = 16
    gpu_memory_utilization: float = 0.9
    prefix_caching: bool | None = None
    long_prefill_token_threshold: int = 0
    long_prefill_token_threshold_adaptive: bool = False
    handoff_steps: int = 0
    request_setup_s: float = 0.0
    ubatch_split: str | None = None
    n_ubatch: int = 512

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"policy={self.policy!r} must be one of {', '.join(POLICIES)}")
        check_int("max_num_batched_tokens", self.max_num_batched_tokens, 1)
        # Unset switches follow the policy: V1 (both on) for continuous, off for static.
        continuous = self.policy == "continuous"
        for name in ("chunked_prefill", "prefix_caching"):
            if getattr(self, name) is None:
                object.__setattr__(self, name, continuous)
        if self.max_num_seqs is None:
            # V1 caps its default 1,024 by the token budget; V0's default was 256.
            seqs = min(1024, self.max_num_batched_tokens) if self.chunked_prefill is True else 256
            object.__setattr__(self, "max_num_seqs", seqs)
        check_int("max_num_seqs", self.max_num_seqs, 1)
        check_int("handoff_steps", self.handoff_steps, 0)
        check_number("request_setup_s", self.request_setup_s)
        if self.ubatch_split is not None and self.ubatch_split not in UBATCH_SPLITS:
            raise ValueError(
                f"ubatch_split={self.ubatch_split!r} must be None (one pass a step) or one of "
                f"{', '.join(UBATCH_SPLITS)} (llama.cpp's micro-batches)"
            )
        check_int("n_ubatch", self.n_ubatch, 1)
        if self.ubatch_split is None and self.n_ubatch != 512:
            raise ValueError(
                f"n_ubatch={self.n_ubatch} has no effect with ubatch_split=None (one pass a "
                "step); set ubatch_split='simple' or 'equal' (llama.cpp's micro-batches)"
            )
        check_int("block_size", self.block_size, 1)
        u = self.gpu_memory_utilization
        if isinstance(u, bool) or not isinstance(u, (int, float)) or not 0 < u <= 1:
            raise ValueError(f"gpu_memory_utilization={u!r} must be in (0, 1]")
        for name in ("chunked_prefill", "prefix_caching"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name}={getattr(self, name)!r} must be True or False")
        if self.policy == "static" and (self.chunked_prefill or self.prefix_caching):
            raise ValueError(
                "policy='static' runs whole batches without chunked_prefill or prefix_caching; "
                "set both to False or use policy='continuous'"
            )
        check_int("long_prefill_token_threshold", self.long_prefill_token_threshold, 0)
        if not isinstance(self.long_prefill_token_threshold_adaptive, bool):
            raise ValueError(
                "long_prefill_token_threshold_adaptive="
                f"{self.long_prefill_token_threshold_adaptive!r} must be True or False"
            )
        if self.long_prefill_token_threshold and not self.chunked_prefill:
            raise ValueError(
                f"long_prefill_token_threshold={self.long_prefill_token_threshold} caps a "
                "request's prefill chunk per step, which needs chunked_prefill=True (vLLM V1); "
                "set it to 0 or turn chunked_prefill on"
            )
        if self.chunked_prefill and self.max_num_batched_tokens < self.max_num_seqs:
            raise ValueError(
                f"max_num_batched_tokens={self.max_num_batched_tokens} must be >= "
                f"max_num_seqs={self.max_num_seqs} with chunked_prefill (every running sequence "
                "needs one token per step)"
            )


#: vLLM V1's defaults (v0.11.0, OpenAI server, GPU >= 70 GiB): chunked prefill, prefix cache.
V1_ENGINE = EngineConfig()
#: vLLM V0's defaults: prefill-only steps that stall decodes, no prefix cache, 256 sequences.
V0_ENGINE = EngineConfig(
    chunked_prefill=False, prefix_caching=False, max_num_seqs=256, max_num_batched_tokens=8192
)


def kv_capacity_blocks(
    model: Model,
    gpu: GPU,
    engine: EngineConfig = EngineConfig(),
    n_gpus: int = 1,
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
) -> int:
    """KV blocks the engine gets: ``plan_memory(...).capacity_tokens // block_size``.

    Raises ValueError (with the memory plan's reason) when no block fits.

    Introduced in: notebooks/05_optimizations.ipynb
    """
    plan = plan_memory(
        model,
        gpu,
        n_gpus=n_gpus,
        weight_dtype=weight_dtype,
        kv_dtype=kv_dtype,
        gpu_memory_utilization=engine.gpu_memory_utilization,
        block_size=engine.block_size,
        context_tokens=min(model.max_context, 4096),
    )
    blocks = plan.capacity_tokens // engine.block_size
    if blocks < 1:
        raise ValueError(f"model={model.name!r} leaves no KV cache on {gpu.name}: {plan.reason}")
    return blocks
