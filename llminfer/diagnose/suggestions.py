"""What to change for each cause ``diagnose`` names, what each change costs, and what it trades.

Every suggestion is a setting of a modern engine or of the deployment, in the flags of the
engine named by ``Setup.engine_kind`` (``ENGINE_KINDS``: vLLM, the default; llama.cpp's
llama-server — slots, threads, batch sizes, GGUF quantisation types; SGLang) — not
continuous batching or PagedAttention, which every current engine already has. A suggestion is
left out when the deployment already has it (chunked prefill on, KV cache already FP8, ...);
when the engine's settings are unknown, a suggestion that depends on them says "if" instead.

``suggest`` orders its suggestions by cost, cheapest first (``COSTS``): an engine **setting** on
the same hardware, then **software** (another checkpoint or a draft model, with accuracy to
re-check), then **hardware** (more GPUs). Within a tier the one most likely to cure the cause
comes first. Try them in that order, one change at a time, and measure after each.

A suggestion's ``action`` and ``trades`` are in the learner's language (``llminfer.set_language``)
at the time ``suggest`` makes it; its ``key`` and ``cost`` are what a program tests.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from llminfer.language import N_, _, get_language
from llminfer.sim.engines import EngineConfig

#: Below this many tokens a prefill chunk already leaves decodes running between chunks.
SMALL_CHUNK_TOKENS = 2048
#: gpu_memory_utilization at or above this leaves nothing worth raising.
HIGH_MEMORY_UTILIZATION = 0.9
_NARROW = {"fp8", "int8", "int4", "fp4", "nvfp4"}
#: What a change costs, cheapest first: ``suggest`` orders by this.
COSTS = {
    "setting": N_("an engine flag on the same hardware: restart and measure"),
    "software": N_(
        "another checkpoint or model to add (quantised weights, a draft model): "
        "accuracy to re-check"
    ),
    "hardware": N_("more GPUs (or a second pool of them)"),
}
# TRANSLATORS: the three costs of a change, as a suggestion shows them in brackets
# ("[setting] ..."): an engine setting, software (another checkpoint), hardware (more GPUs).
COST_NAMES = {"setting": N_("setting"), "software": N_("software"), "hardware": N_("hardware")}


def _named(key: str, names: dict[str, str]) -> str:
    """``key`` as a report shows it: the key itself in English (what a program tests), its
    translated name in another language (the key where ``names`` has none)."""
    if get_language() == "en" or key not in names:
        return key
    return _(names[key])


#: The engines whose flags ``suggest`` speaks: vLLM (the default), llama.cpp's llama-server and
#: SGLang. ``scrape.ServerMetrics.engine`` names them as ``vLLM``, ``llama.cpp``, ``SGLang``.
ENGINE_KINDS = ("vllm", "llamacpp", "sglang")
#: vLLM flag → SGLang's (``python -m sglang.launch_server --help``, 0.5).
SGLANG_FLAGS = {
    "--tensor-parallel-size": "--tp",
    "--max-num-seqs": "--max-running-requests",
    "--max-num-batched-tokens": "--chunked-prefill-size",
    "--gpu-memory-utilization": "--mem-fraction-static",
    "--kv-cache-dtype fp8": "--kv-cache-dtype fp8_e5m2",
}
#: vLLM suggestions SGLang has no flag for, or has on by default: chunked prefill
#: (``--chunked-prefill-size`` sets it), prefix caching (RadixAttention), the per-request cap.
_SGLANG_DROPS = {"enable_chunked_prefill", "prefix_caching", "long_prefill_threshold"}


@dataclass(frozen=True)
class Suggestion:
    """One change: ``key`` (stable name a program can test), ``action`` (what to set, vLLM
    option names where they exist), ``trades`` (what it gives up), ``cost`` (one of ``COSTS``:
    setting, software, hardware), ``chapter`` that explains it.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """

    key: str
    action: str
    trades: str
    chapter: str = "05_optimizations"
    cost: str = "setting"

    def __post_init__(self) -> None:
        if self.cost not in COSTS:
            raise ValueError(f"cost={self.cost!r} must be one of {', '.join(COSTS)}")

    def __str__(self) -> str:
        return _("[{cost}] {action} — trades: {trades}").format(
            cost=_named(self.cost, COST_NAMES), action=self.action, trades=self.trades
        )


@dataclass(frozen=True)
class Setup:
    """What ``diagnose`` knows of the deployment: ``engine`` (None = unknown), GPUs per
    replica ``n_gpus``, ``replicas``, dtypes; and what the log showed: ``tpot_misses`` (TPOT
    misses its target too), ``decoding_p50`` (requests decoding together, median).

    Introduced in: notebooks/07_troubleshooting.ipynb
    """

    engine: EngineConfig | None = None
    n_gpus: int = 1
    replicas: int = 1
    weight_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    tpot_misses: bool = False
    decoding_p50: float = float("nan")
    engine_kind: str = "vllm"
    slot_limited: bool = False

    def __post_init__(self) -> None:
        if self.engine_kind not in ENGINE_KINDS:
            raise ValueError(
                f"engine_kind={self.engine_kind!r} must be one of {', '.join(ENGINE_KINDS)}"
            )


def _replica(s: Setup) -> Suggestion:
    return Suggestion(
        "add_replica",
        _(
            "add a replica ({replicas} → {more}, each on {n_gpus} GPU(s)) behind the load balancer"
        ).format(replicas=s.replicas, more=s.replicas + 1, n_gpus=s.n_gpus),
        _(
            "GPUs; each replica sees a smaller share of the load, but a request alone is no "
            "faster: it cures a queue, not a TPOT that misses at the load each replica still gets"
        ),
        cost="hardware",
    )


def _tp(s: Setup) -> Suggestion:
    return Suggestion(
        "tensor_parallel",
        _(
            "tensor parallelism {n_gpus} → {more} GPUs per replica (--tensor-parallel-size {more})"
        ).format(n_gpus=s.n_gpus, more=2 * s.n_gpus),
        _(
            "GPUs and an all-reduce every layer; every step gets faster (more FLOP/s and "
            "bandwidth) and the KV cache grows, but throughput per GPU falls"
        ),
        cost="hardware",
    )


def _quantise(s: Setup) -> Suggestion | None:
    if s.weight_dtype in _NARROW:
        return None
    return Suggestion(
        "quantise_weights",
        _("quantise the weights ({dtype} → fp8, W8A8 on Hopper; or int4 weight-only)").format(
            dtype=s.weight_dtype
        ),
        _(
            "accuracy to re-check on your task; weights read per decode step halve (fp8) and "
            "the memory freed goes to the KV cache"
        ),
        cost="software",
    )


def _kv_fp8(
    s: Setup, gain: str = N_("twice the tokens fit in the same memory")
) -> Suggestion | None:
    """``gain``: what FP8 buys (English, marked for the catalog; translated here)."""
    if s.kv_dtype in _NARROW:
        return None
    return Suggestion(
        "kv_cache_fp8",
        _("store the KV cache in FP8 (--kv-cache-dtype fp8, now {dtype})").format(dtype=s.kv_dtype),
        _("a small accuracy risk from the scale factors; {gain}").format(gain=_(gain)),
        "04_memory_budget",
    )


def _memory_utilization(s: Setup) -> Suggestion | None:
    e = s.engine
    if e is not None and e.gpu_memory_utilization >= HIGH_MEMORY_UTILIZATION:
        return None
    now = (
        _("now {value:g}").format(value=e.gpu_memory_utilization) if e else _("if it is below 0.9")
    )
    return Suggestion(
        "raise_gpu_memory_utilization",
        _("raise --gpu-memory-utilization to 0.9–0.95 ({now})").format(now=now),
        _(
            "memory other processes on the GPU could use, and less headroom against "
            "out-of-memory in activations"
        ),
        "04_memory_budget",
    )


def _fewer_seqs(s: Setup, purpose: str) -> Suggestion | None:
    """``purpose``: why (English, marked for the catalog; translated here)."""
    e = s.engine
    target = s.decoding_p50
    if e is not None and target == target and e.max_num_seqs <= max(1, int(target) // 2):
        return None
    now = _("now {value}").format(value=e.max_num_seqs) if e else _("from its current value")
    return Suggestion(
        "lower_max_num_seqs",
        # TRANSLATORS: {now} is "now 256" or "from its current value"; {purpose} says why.
        _("lower --max-num-seqs ({now}) {purpose}").format(now=now, purpose=_(purpose)),
        _(
            "fewer requests run at once: throughput falls and the queue (TTFT) grows under the "
            "same load"
        ),
    )


def _chunked_on(s: Setup) -> Suggestion | None:
    e = s.engine
    if e is not None and e.chunked_prefill:
        return None
    action = _(
        "turn on chunked prefill (--enable-chunked-prefill, with --max-num-batched-tokens "
        "≤ {tokens})"
    ).format(tokens=SMALL_CHUNK_TOKENS)
    return Suggestion(
        "enable_chunked_prefill",
        action + ("" if e else _(", if it is off")),
        _("long prompts' own TTFT rises a little (their prefill is split over several steps)"),
    )


def _smaller_chunk(s: Setup) -> Suggestion | None:
    e = s.engine
    if e is None or not e.chunked_prefill or e.max_num_batched_tokens <= SMALL_CHUNK_TOKENS:
        return None
    return Suggestion(
        "smaller_prefill_chunk",
        _("lower --max-num-batched-tokens {now} → {tokens} (smaller prefill chunks)").format(
            now=e.max_num_batched_tokens, tokens=SMALL_CHUNK_TOKENS
        ),
        _("more steps per long prompt: its TTFT and the prefill throughput fall a little"),
    )


def _disaggregate() -> Suggestion:
    return Suggestion(
        "disaggregate",
        _("disaggregate prefill and decode onto separate GPUs (DistServe-style)"),
        _(
            "at least two GPU pools to size, and a KV-cache transfer per request over the "
            "interconnect"
        ),
        cost="hardware",
    )


def _speculative() -> Suggestion:
    return Suggestion(
        "speculative_decoding",
        _("speculative decoding (a draft model or n-gram/EAGLE proposer)"),
        _(
            "a draft's compute and memory; pays at small batches only — at large batches the "
            "verification is no longer a free decode step"
        ),
        cost="software",
    )


def _separate_long() -> Suggestion:
    return Suggestion(
        "separate_long_prompts",
        _("send long prompts to their own replica (a router that looks at the prompt length)"),
        _("a replica that idles when long prompts are rare, and a router to run"),
        cost="hardware",
    )


def _long_prefill_cap(s: Setup) -> Suggestion | None:
    e = s.engine
    if e is not None and (not e.chunked_prefill or e.long_prefill_token_threshold > 0):
        return None  # needs chunked prefill (suggested first); or already capped
    return Suggestion(
        "long_prefill_threshold",
        _(
            "cap each request's prefill chunk per step (--long-prefill-token-threshold, vLLM "
            "V1; default 0 = no cap): a few hundred tokens, well below --max-num-batched-tokens, "
            "so prompts admitted behind a long one get budget in the same step"
        )
        + ("" if e else _(" (needs chunked prefill)")),
        _(
            "the long prompts' own TTFT rises (their prefill takes more steps), and the short "
            "requests now decode in steps that carry long-prompt chunks (TPOT)"
        ),
    )


def _prefix_caching(s: Setup) -> Suggestion | None:
    e = s.engine
    if e is not None and e.prefix_caching:
        return None
    return Suggestion(
        "prefix_caching",
        _("turn on prefix caching (--enable-prefix-caching)") + ("" if e else _(", if it is off")),
        _("KV memory held by cached blocks; helps only prompts that share a prefix"),
    )


def _more_slots(s: Setup) -> Suggestion:
    e = s.engine
    now = e.max_num_seqs if e is not None else None
    more = f"{now} → {2 * now}" if now else _("raised from its current value")
    if s.engine_kind == "llamacpp":
        return Suggestion(
            "more_slots",
            _(
                "more slots (llama-server --parallel {more}; raise -c with it: the context is "
                "split between the slots)"
            ).format(more=more),
            _(
                "each slot's context is -c / --parallel, and more requests decode together: "
                "TPOT rises a little; requests stop waiting for a free slot"
            ),
        )
    flag = "--max-running-requests" if s.engine_kind == "sglang" else "--max-num-seqs"
    return Suggestion(
        "more_slots",
        _("more slots ({flag} {more})").format(flag=flag, more=more),
        _(
            "more requests decode together (TPOT rises) and share the KV cache; requests stop "
            "waiting for a free slot"
        ),
    )


def _stagger() -> Suggestion:
    return Suggestion(
        "stagger_arrivals",
        _(
            "measure with arrivals spread out (an open-loop rate, or users started at staggered "
            "times): a closed loop whose users start together keeps sending their prompts in "
            "one burst"
        ),
        _("nothing on the server; the figures then describe the traffic the service will see"),
        "03_metrics",
    )


def _cpp_threads() -> Suggestion:
    return Suggestion(
        "threads",
        _(
            "set llama-server --threads (decode) and --threads-batch (prompt) to the physical "
            "cores (default: all logical ones on some builds); on a GPU offload all layers "
            "(-ngl 99)"
        ),
        _("cores other processes on the machine could use"),
    )


def _cpp_batch(bigger: bool) -> Suggestion:
    if bigger:
        return Suggestion(
            "batch_size",
            _(
                "raise llama-server's batch sizes (-b 2048 -ub 512 or more, ub ≤ b) so prompts "
                "prefill in fewer, larger batches"
            ),
            _("memory for the larger compute buffers; decodes wait longer behind a prompt batch"),
        )
    return Suggestion(
        "batch_size",
        _(
            "lower llama-server's batch sizes (-b / -ub, e.g. 512 / 256) so a long prompt is "
            "prefilled in smaller pieces between the other slots' decode steps"
        ),
        _("the long prompts' own TTFT rises a little (more, smaller batches)"),
    )


def _cpp_quant(s: Setup) -> Suggestion | None:
    if s.weight_dtype in ("int4", "fp4", "nvfp4"):
        return None
    if s.weight_dtype in ("int8", "fp8"):  # a Q8_0 file already: only 4-bit is narrower
        what = _("a more quantised GGUF (Q8_0 → Q4_K_M: about half the bytes)")
    else:
        what = _(
            "a more quantised GGUF ({dtype} → Q8_0, or Q4_K_M: about a quarter of the "
            "bytes of bf16)"
        ).format(dtype=s.weight_dtype)
    return Suggestion(
        "quantise_weights",
        what,
        _(
            "accuracy to re-check on your task; fewer bytes read per decode step and more room "
            "for the KV cache"
        ),
        cost="software",
    )


def _cpp_kv(s: Setup) -> Suggestion | None:
    if s.kv_dtype in _NARROW:
        return None
    return Suggestion(
        "kv_cache_q8",
        _(
            "quantise the KV cache (llama-server --cache-type-k q8_0 --cache-type-v q8_0, with "
            "-fa on)"
        ),
        _("a small accuracy risk; twice the tokens fit in the same memory"),
        "04_memory_budget",
    )


def _cpp_kv_unified(s: Setup) -> Suggestion | None:
    """``--kv-unified`` where the server may run a step as one pass per run of consecutive busy
    slots (``EngineConfig.ubatch_split == "equal"``, or not known; more than one slot) and at
    least 2 but fewer requests decode together than it has slots (or that is not known): their
    slots scatter."""
    e = s.engine
    if e is not None and (e.ubatch_split == "simple" or e.max_num_seqs <= 1):
        return None  # one cache already, or one slot: one KV stream, passes as unified
    if s.decoding_p50 < 2:  # one request decoding is one pass whatever its slot (NaN: unknown)
        return None
    if e is not None and s.decoding_p50 >= e.max_num_seqs:
        return None
    return Suggestion(
        "kv_unified",
        _(
            "keep --parallel N and add llama-server --kv-unified (-kvu), one KV cache for all "
            "slots: without it each slot has its own KV stream, and a decode step runs one "
            "forward pass, reading all the weights, per block of consecutive busy slots"
        ),
        _(
            "the slots share one pool of -c tokens instead of -c / --parallel each (a long "
            "request may take more than its share, and the pool can run out); attention spans "
            "every slot's KV cells"
        ),
    )


def _cpp_draft() -> Suggestion:
    return Suggestion(
        "speculative_decoding",
        _("speculative decoding with a small draft GGUF of the same family (llama-server -md)"),
        _("the draft's memory and compute; pays with few slots busy"),
        cost="software",
    )


def _cpp_replica() -> Suggestion:
    return Suggestion(
        "add_replica",
        _("another llama-server on its own GPU or machine behind the load balancer"),
        _("a second machine or GPU; each server sees a smaller share of the load"),
        cost="hardware",
    )


def _suggest_llamacpp(cause: str, s: Setup, detail: str) -> list[Suggestion | None]:
    slots = [_more_slots(s)] if s.slot_limited else []
    if cause == "lockstep_prefill":
        return [_stagger(), _cpp_batch(True), _cpp_threads(), _cpp_quant(s)]
    if cause in ("overload", "slot_queue"):
        if cause == "slot_queue" and not slots:
            slots = [_more_slots(s)]
        return [*slots, _cpp_threads(), _cpp_batch(True), _cpp_quant(s), _cpp_replica()]
    if cause == "kv_pressure":
        fewer = Suggestion(
            "lower_max_num_seqs",
            _(
                "fewer slots (llama-server --parallel) or a larger -c, so each slot holds its "
                "requests' context"
            ),
            _("fewer requests run at once: the queue (TTFT) grows under the same load"),
        )
        return [_cpp_kv(s), fewer, _cpp_quant(s)]
    if cause in ("head_of_line", "interference"):
        return [_cpp_batch(False), _separate_long() if cause == "head_of_line" else None]
    if cause == "too_slow":
        if detail == "ttft":
            return [_cpp_threads(), _cpp_batch(True), _cpp_quant(s)]
        return [_cpp_threads(), _cpp_kv_unified(s), _cpp_quant(s), _cpp_kv(s), _cpp_draft()]
    raise ValueError(f"cause={cause!r} is not one of llminfer.diagnose.findings.CAUSES")


def _for_sglang(out: list[Suggestion | None]) -> list[Suggestion]:
    fitted = []
    for sug in out:
        if sug is None or sug.key in _SGLANG_DROPS:
            continue
        action = sug.action
        for old, new in SGLANG_FLAGS.items():
            action = action.replace(old, new)
        fitted.append(replace(sug, action=action))
    return fitted


def suggest(cause: str | None, setup: Setup, detail: str = "") -> tuple[Suggestion, ...]:
    """The changes worth trying for ``cause`` (see ``llminfer.diagnose.findings.CAUSES``),
    cheapest first (``COSTS``: settings, then software, then hardware; within a tier the likeliest
    cure first), leaving out what ``setup`` already has. ``detail`` narrows a cause: ``"ttft"`` or
    ``"tpot"`` for ``too_slow`` and ``overload``.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    if cause is None or cause in ("failures", "unexplained"):
        return ()
    if setup.engine_kind == "llamacpp":
        out = _suggest_llamacpp(cause, setup, detail)
    elif cause == "lockstep_prefill":
        out = [_stagger(), _chunked_on(setup), _prefix_caching(setup), _tp(setup)]
    elif cause == "slot_queue":
        out = [_more_slots(setup), _memory_utilization(setup), _replica(setup), _tp(setup)]
    elif cause == "overload":
        # Two replicas double throughput; TP = 2 also shortens every step. When TPOT misses too,
        # the load each replica would still carry keeps TPOT high: TP first.
        scale = (
            [_tp(setup), _replica(setup)]
            if setup.tpot_misses
            else [
                _replica(setup),
                _tp(setup),
            ]
        )
        if setup.slot_limited:
            scale.insert(0, _more_slots(setup))
        rest = [_quantise(setup)]
        if detail == "tpot":
            rest.append(_fewer_seqs(setup, N_("to cap the batch that sets TPOT")))
            rest.append(_smaller_chunk(setup))
        out = scale + rest
    elif cause == "kv_pressure":
        out = [
            _memory_utilization(setup),
            _kv_fp8(setup),
            _fewer_seqs(setup, N_("so the requests admitted fit the cache")),
            _quantise(setup),
            _tp(setup),
        ]
    elif cause == "head_of_line":
        out = [
            _chunked_on(setup),
            _long_prefill_cap(setup),
            _prefix_caching(setup),
            _separate_long(),
            _tp(setup),
            _disaggregate(),
        ]
    elif cause == "interference":
        out = [_chunked_on(setup), _smaller_chunk(setup), _disaggregate()]
    elif cause == "too_slow":
        if detail == "ttft":
            out = [_tp(setup), _prefix_caching(setup), _quantise(setup)]
        else:
            out = [
                _quantise(setup),
                _kv_fp8(
                    setup,
                    N_(
                        "each decode step reads half the KV bytes, which at long contexts are "
                        "most of what it reads"
                    ),
                ),
                _speculative(),
                _tp(setup),
            ]
    else:
        raise ValueError(f"cause={cause!r} is not one of llminfer.diagnose.findings.CAUSES")
    if setup.engine_kind == "sglang":
        out = _for_sglang(out)
    kept = [s for s in out if s is not None]
    rank = list(COSTS)
    return tuple(sorted(kept, key=lambda s: rank.index(s.cost)))  # stable: order within a tier
