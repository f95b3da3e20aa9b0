"""An iteration-level inference engine for ``ToyModel`` that really runs on the CPU.

It works like vLLM's scheduler, one model step at a time, with the knobs of
``llminfer.sim.engines.EngineConfig`` under the same names:

- new requests wait in a FIFO queue; a step admits them while fewer than ``max_num_seqs``
  sequences run, the step's token budget ``max_num_batched_tokens`` lasts and the KV cache has
  free blocks (continuous batching: the batch is refilled at every step);
- with ``chunked_prefill`` a long prompt is split over steps and shares each step with the
  decodes (decodes first, as vLLM V1 does); without it a step is either prompts or decodes;
- all sequences that feed one token this step go through the weights together: one batched
  matrix product per weight matrix for the whole batch (``decode_batch``), which is why eight
  streams cost little more than one;
- the KV cache is counted in blocks of ``block_size`` tokens with a fixed capacity
  (``num_kv_blocks``); when a running sequence needs a block and none is free, the most recently
  admitted sequence is preempted: its blocks are freed, it goes back to the head of the queue and
  later recomputes its prompt and the tokens it had generated (vLLM's recompute preemption).

Greedy decoding, no end-of-sequence token: a request for ``max_tokens`` gets exactly that many.

**Paced mode** (``ServeConfig(paced="llama-3.1-8b:h100-sxm:vllm")``, ``serve --paced``): the
same scheduler, KV blocks and preemption, but each step lasts as long as the step model
predicts for a real model on a real GPU — ``llminfer.cost.steptime.step_timer(model, gpu,
profile=...)`` for the step's prefill tokens, attended pairs, decoding sequences and their
context, exactly the arguments ``llminfer.sim.simulate`` times its steps with — and the KV cache
holds what ``plan_memory`` leaves for that model on that GPU (``kv_capacity_blocks``), unless
``num_kv_blocks`` is given. The numpy forward is skipped: a paced step computes nothing, so
a busy laptop cannot stretch it. Each generated token is instead a fixed function of the
previous token and its position (``paced_token``), so answers are deterministic, their text
decodes as in the real mode and a request for ``max_tokens`` still gets exactly that many;
they are not the toy model's argmax. Timing (``ToyEngine.begin_step``): a step starts when the
GPU it stands for is free (the previous step's predicted end) and its inputs have arrived,
whichever is later, and its tokens go out at start + predicted seconds; the CPU work between
steps (streaming the last step's tokens, planning the next) overlaps the "GPU" time, as it
does in vLLM, whose API server streams while the engine core runs the next step. A step whose
CPU work outlasts its predicted time is *late* (``late_steps``, ``max_late_s``): its tokens go
out at once, and the following steps catch up with the predicted timeline (up to
``CATCH_UP_S`` behind; no step starts before its inputs arrived), so a moment of CPU
starvation delays tokens without slowing the run; a CPU that is short for longer makes the run
slower than the prediction, never faster.
"""

from __future__ import annotations

import collections
import itertools
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from llminfer.cost.roofline import attended_pairs
from llminfer.cost.steptime import StepTimer
from llminfer.cost.toy import ToyModel
from llminfer.serve.config import ServeConfig
from llminfer.specs.models import Model

#: Paced mode: seconds a late engine may fall behind its predicted timeline and still catch up
#: (the next steps' tokens go out without waiting until it is back on time). A GPU does not
#: stop while the server's process waits for a CPU that other programs hold; further behind
#: than this (a suspended laptop), the timeline restarts from now.
CATCH_UP_S = 0.2


def paced_token(previous: int, position: int, vocab_size: int) -> int:
    """The token a paced engine emits after ``previous`` at ``position``: a fixed mix of both,
    modulo ``vocab_size`` — deterministic, the same after a preemption's recompute, and cheap.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    return (previous * 7919 + position * 104729 + 17) % vocab_size


class KVPool:
    """The KV cache's storage: per layer, K and V arrays of ``slots × kv heads × max_len ×
    head_dim``; a running sequence owns one slot. ``np.zeros`` maps pages lazily, so memory is
    committed only where tokens are written. ``cache(slot)`` gives the per-layer (K, V) views
    that ``ToyModel.forward`` writes a prompt into.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """

    def __init__(self, model: ToyModel, slots: int, max_len: int) -> None:
        c = model.config
        shape = (slots, c.n_kv_heads, max_len, c.head_dim)
        self.k = [np.zeros(shape, model.dtype) for _ in range(c.n_layers)]
        self.v = [np.zeros(shape, model.dtype) for _ in range(c.n_layers)]
        self.free = list(range(slots - 1, -1, -1))

    def cache(self, slot: int) -> list[tuple[np.ndarray, np.ndarray]]:
        return [(k[slot], v[slot]) for k, v in zip(self.k, self.v, strict=True)]


def decode_batch(model: ToyModel, ids, positions, pool: KVPool, slots) -> np.ndarray:
    """Logits (batch × vocab) for one new token of each sequence, all in one pass.

    ``ids[b]`` sits at position ``positions[b]`` of the sequence in ``pool`` slot ``slots[b]``,
    whose cache already holds positions ``0 … positions[b] − 1``. Every operation, attention
    included, runs once for the whole batch (attention over a padded, masked context), so the
    per-step cost of launching work is shared by all sequences. Equals
    ``model.forward([ids[b]], positions[b], pool.cache(slots[b]))`` row by row.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    c = model.config
    n_batch, d = len(ids), c.head_dim
    group, half = c.n_heads // c.n_kv_heads, c.head_dim // 2
    pos = np.asarray(positions, dtype=np.int64)
    rows = np.asarray(slots, dtype=np.int64)
    cos, sin = model._cos[pos][:, None, :], model._sin[pos][:, None, :]

    def rope(x: np.ndarray) -> np.ndarray:  # x: batch × heads × d, each row its own position
        x1, x2 = x[..., :half], x[..., half:]
        return np.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)

    x = model.embed[np.asarray(ids)]
    scale = np.sqrt(d)
    longest = int(pos.max()) + 1
    pad = (np.arange(longest)[None, :] > pos[:, None])[:, None, None, :]
    for i, layer in enumerate(model.layers):
        hidden = model._rms_norm(x, layer["attn_norm"])
        q = rope((hidden @ layer["wq"]).reshape(n_batch, c.n_heads, d))
        k = rope((hidden @ layer["wk"]).reshape(n_batch, c.n_kv_heads, d))
        v = (hidden @ layer["wv"]).reshape(n_batch, c.n_kv_heads, d)
        pool.k[i][rows, :, pos] = k
        pool.v[i][rows, :, pos] = v
        keys = pool.k[i][rows, :, :longest]  # batch × kv heads × longest × d (a gather)
        values = pool.v[i][rows, :, :longest]
        qg = q.reshape(n_batch, c.n_kv_heads, group, d)
        scores = np.where(pad, -np.inf, qg @ keys.transpose(0, 1, 3, 2) / scale)
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        probs = (scores / scores.sum(axis=-1, keepdims=True)).astype(model.dtype)
        out = probs @ values  # batch × kv heads × group × d
        x = x + out.reshape(n_batch, c.n_heads * d) @ layer["wo"]
        hidden = model._rms_norm(x, layer["mlp_norm"])
        gate = hidden @ layer["w_gate"]
        x = x + ((gate / (1 + np.exp(-gate))) * (hidden @ layer["w_up"])) @ layer["w_down"]
    return model._rms_norm(x, model.final_norm) @ model.lm_head


def deliver(events: list) -> None:
    """Call each ``(listener, event)`` pair of one step, in order.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    for listener, event in events:
        listener(event)


#: An event sent to a request's listener: ``("token", (token_id, finish_reason), t_s)`` —
#: finish_reason is None until the last token, then ``"length"`` — or ``("error", message,
#: t_s)``; t_s on ``time.perf_counter``.
Event = tuple[str, object, float]


@dataclass(eq=False)
class EngineRequest:
    """One request inside the engine: its prompt ids, ``max_tokens`` and what happened to it
    (times on ``time.perf_counter``, seconds).

    Introduced in: notebooks/08_measure_a_server.ipynb
    """

    request_id: str
    prompt_ids: list[int]
    max_tokens: int
    listener: Callable[[Event], None]
    arrival_s: float
    output_ids: list[int] = field(default_factory=list)
    computed: int = 0  # tokens whose K and V are in the cache
    blocks: int = 0
    slot: int | None = None  # this request's KV pool slot while it runs
    scheduled_s: float | None = None
    first_token_s: float | None = None
    prefilled: bool = False  # its prompt (and any recomputed output) is in the cache
    preemptions: int = 0
    aborted: bool = False

    @property
    def all_ids(self) -> list[int]:
        return self.prompt_ids + self.output_ids


def _max_model_len(config: ServeConfig, model: Model) -> int:
    """The most tokens one request may hold: ``config.max_model_len``, else the model's context.
    ValueError, as vLLM refuses to start, for a ``max_model_len`` above the model's context
    (vLLM allows it only when told to by an environment variable) or more than the KV cache
    holds (one request of that length must fit)."""
    if config.max_model_len is None:
        return model.max_context
    if config.max_model_len > model.max_context:
        raise ValueError(
            f"max_model_len={config.max_model_len} is more than the model's maximum context "
            f"length of {model.max_context} tokens"
        )
    if config.max_model_len > config.capacity_tokens:
        raise ValueError(
            f"max_model_len={config.max_model_len} is more than the KV cache holds "
            f"({config.num_kv_blocks} blocks x {config.block_size} = {config.capacity_tokens} "
            "tokens); raise num_kv_blocks or lower max_model_len"
        )
    return config.max_model_len


class ToyEngine:
    """Continuous batching of ``ToyModel`` on the CPU: ``submit`` requests (from any thread),
    call ``step`` while ``has_work()``; the server calls it from its event loop.

    Counters for ``/metrics``: ``num_running``, ``num_waiting``, ``kv_usage`` (share of blocks
    in use, 0–1), ``preemptions_total``, ``steps_total``.

    With ``config.paced`` set, steps are timed by the step model (module docstring): the
    model only lends its vocabulary (the tokenizer's words). ``max_context``, the most tokens
    one request may hold, is ``config.max_model_len`` where given, else the model's context
    (the paced model's when paced). ``late_steps``/``max_late_s`` count steps whose CPU work
    outlasted their predicted time; ``step_log`` (when ``record_steps``) holds one
    ``(start_s, seconds, prefill_tokens, decode_seqs)`` per paced step. ``clock`` (seconds)
    and ``sleep`` replace ``time.perf_counter`` and ``time.sleep`` (a test's fake clock).

    Introduced in: notebooks/08_measure_a_server.ipynb
    """

    def __init__(
        self,
        model: ToyModel,
        config: ServeConfig = ServeConfig(),
        clock: Callable[[], float] = time.perf_counter,
        sleep: Callable[[float], None] = time.sleep,
        record_steps: bool = False,
    ) -> None:
        if not isinstance(model, ToyModel):
            raise ValueError(f"model={model!r} must be a llminfer.cost.toy.ToyModel")
        if not isinstance(config, ServeConfig):
            raise ValueError(f"config={config!r} must be a ServeConfig")
        self.model, self.config = model, config
        self.clock, self._sleep = clock, sleep
        self.vocab_size = model.config.vocab_size
        self.timer: StepTimer | None = None
        self.pool: KVPool | None = None
        if config.paced is None:
            self.max_context = _max_model_len(config, model.config)
            max_len = min(self.max_context, config.capacity_tokens)
            self.pool = KVPool(model, config.max_num_seqs, max_len)
        else:
            self.timer = config.step_timer()
            self.max_context = _max_model_len(config, self.timer.model)
        self.waiting: collections.deque[EngineRequest] = collections.deque()
        self.running: list[EngineRequest] = []
        self.free_blocks = config.num_kv_blocks
        self._events: list[tuple[Callable[[Event], None], Event]] = []
        self._pending: list[tuple[EngineRequest, int, str | None]] = []
        #: Paced mode: when the GPU this engine stands for is free again (end of the last step).
        self.free_at_s = -math.inf
        #: Paced mode: predicted seconds and due time of the step begun last (None: real mode).
        self.step_seconds: float | None = None
        self.due_s: float | None = None
        self.late_steps = 0
        self.max_late_s = 0.0
        self.step_log: list[tuple[float, float, int, int]] | None = [] if record_steps else None
        #: Delivers one step's events; the server replaces it to hand them to its event loop
        #: in one go (one wake-up per step, not one per token).
        self.dispatch: Callable[[list], None] = deliver
        self.preemptions_total = 0
        self.steps_total = 0
        self._incoming: collections.deque[EngineRequest] = collections.deque()
        self._lock = threading.Lock()
        self._ids = itertools.count()

    # --- the public side ---------------------------------------------------------------------

    def check_request(self, n_prompt: int, max_tokens: int) -> None:
        """ValueError unless a request of this size can ever run on this engine."""
        if n_prompt < 1:
            raise ValueError("prompt is empty: it must hold at least one token")
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValueError(f"max_tokens={max_tokens!r} must be an integer >= 1")
        total, limit = n_prompt + max_tokens, self.max_context
        if total > limit:
            raise ValueError(
                f"prompt ({n_prompt} tokens) + max_tokens ({max_tokens}) = {total} tokens is "
                f"more than this model's maximum context length of {limit} tokens"
            )
        if math.ceil(total / self.config.block_size) > self.config.num_kv_blocks:
            raise ValueError(
                f"{total} tokens need more than the KV cache's {self.config.capacity_tokens}"
            )
        if not self.config.chunked_prefill and n_prompt > self.config.max_num_batched_tokens:
            raise ValueError(
                f"prompt of {n_prompt} tokens exceeds max_num_batched_tokens="
                f"{self.config.max_num_batched_tokens} (chunked prefill is off)"
            )

    def submit(
        self, prompt_ids: list[int], max_tokens: int, listener: Callable[[Event], None]
    ) -> EngineRequest:
        """Queue a request; ``listener`` gets its events (called from the engine thread)."""
        self.check_request(len(prompt_ids), max_tokens)
        request = EngineRequest(
            f"req-{next(self._ids)}",
            [int(t) for t in prompt_ids],
            max_tokens,
            listener,
            self.clock(),
        )
        with self._lock:
            self._incoming.append(request)
        return request

    def abort(self, request: EngineRequest) -> None:
        """Stop generating for ``request`` (its client went away); freed at the next step."""
        request.aborted = True

    @property
    def num_running(self) -> int:
        return len(self.running)

    @property
    def num_waiting(self) -> int:
        return len(self.waiting) + len(self._incoming)

    @property
    def kv_usage(self) -> float:
        return 1.0 - self.free_blocks / self.config.num_kv_blocks

    def stop(self) -> None:
        """Fail every request still queued or running with an ``error`` event (shutdown)."""
        now = self.clock()
        pending = [*self.running, *self.waiting, *self._incoming]
        self.dispatch([(r.listener, ("error", "server shutting down", now)) for r in pending])
        self.running.clear(), self.waiting.clear(), self._incoming.clear()

    def has_work(self) -> bool:
        return bool(self.running or self.waiting or self._incoming)

    def step(self) -> int:
        """One engine step; returns how many tokens it computed (0 when idle). Paced, it
        sleeps until the step's predicted end before its tokens go out."""
        tokens = self.begin_step()
        if tokens and self.due_s is not None:
            delay = self.due_s - self.clock()
            if delay > 0:
                self._sleep(delay)
        self.end_step()
        return tokens

    def begin_step(self) -> int:
        """Plan and compute one step (paced: pick its tokens, time it); its tokens go out with
        ``end_step``, which the caller calls at ``due_s`` (paced; the server awaits that time
        without blocking its event loop) or at once. Returns the tokens computed (0: idle)."""
        with self._lock:
            self.waiting.extend(self._incoming)
            self._incoming.clear()
        self._drop_aborted()
        self.step_seconds = self.due_s = None
        plan = self._plan()
        if not plan:
            return 0
        now = self.clock()
        for request, _ in plan:
            if request.scheduled_s is None:
                request.scheduled_s = now
        tokens = self._compute(plan) if self.timer is None else self._pace(plan, now)
        self.steps_total += 1
        for request, n in plan:
            request.computed += n
            if request.computed < len(request.all_ids):
                continue  # a prompt chunk that is not the last one
            token = tokens[id(request)]
            request.prefilled = True
            request.output_ids.append(token)
            finished = len(request.output_ids) >= request.max_tokens
            if finished:
                self._finish(request)
            self._pending.append((request, token, "length" if finished else None))
        return sum(n for _, n in plan)

    def end_step(self) -> None:
        """Send the tokens of the step begun last to their listeners, stamped now."""
        done = self.clock()
        for request, token, reason in self._pending:
            request.first_token_s = request.first_token_s or done
            self._events.append((request.listener, ("token", (token, reason), done)))
        self._pending = []
        events, self._events = self._events, []
        if events:
            self.dispatch(events)

    def _compute(self, plan: list[tuple[EngineRequest, int]]) -> dict[int, int]:
        """The real mode: the numpy forward of the step; the greedy token of every request
        whose prompt is complete after it."""
        singles = [(r, n) for r, n in plan if n == 1]
        logits: dict[int, np.ndarray] = {}
        if singles:
            rows = decode_batch(
                self.model,
                [r.all_ids[r.computed] for r, _ in singles],
                [r.computed for r, _ in singles],
                self.pool,
                [r.slot for r, _ in singles],
            )
            logits.update({id(r): row for (r, _), row in zip(singles, rows, strict=True)})
        for request, n in plan:
            if n > 1:
                ids = request.all_ids[request.computed : request.computed + n]
                cache = self.pool.cache(request.slot)
                logits[id(request)] = self.model.forward(ids, request.computed, cache)[-1]
        return {
            id(r): int(np.argmax(logits[id(r)]))
            for r, n in plan
            if r.computed + n >= len(r.all_ids)
        }

    def _pace(self, plan: list[tuple[EngineRequest, int]], now: float) -> dict[int, int]:
        """The paced mode: time the step as ``simulate`` does, set ``due_s``, pick tokens."""
        prefill = attended = cached = decode_seqs = context = 0
        for request, n in plan:
            if request.prefilled and n == 1:  # a decode: one token over `computed` cached ones
                decode_seqs += 1
                context += request.computed
            else:  # a prompt (or recompute) chunk over the tokens already cached
                prefill += n
                attended += attended_pairs(n, request.computed)
                cached += request.computed
        seconds = float(self.timer(prefill, attended, decode_seqs, context, cached))
        # The step starts when the GPU is free and its inputs are here; CPU work meanwhile
        # (streaming the previous tokens, this plan) overlaps the previous step.
        start = max(self.free_at_s, max(r.arrival_s for r, _ in plan))
        due = start + seconds
        if due < now:  # the CPU took longer than the step: late, its tokens go out at once
            self.late_steps += 1
            self.max_late_s = max(self.max_late_s, now - due)
            if now - due > CATCH_UP_S:  # too far behind to catch up: restart the clock here
                start, due = now - seconds, now
        self.free_at_s, self.step_seconds, self.due_s = due, seconds, due
        if self.step_log is not None:
            self.step_log.append((start, seconds, prefill, decode_seqs))
        return {
            id(r): paced_token(r.all_ids[-1], len(r.all_ids), self.vocab_size)
            for r, n in plan
            if r.computed + n >= len(r.all_ids)
        }

    # --- scheduling --------------------------------------------------------------------------

    def _blocks(self, tokens: int) -> int:
        return math.ceil(tokens / self.config.block_size)

    def _reserve(self, request: EngineRequest, tokens: int) -> bool:
        need = self._blocks(tokens) - request.blocks
        if need > self.free_blocks:
            return False
        self.free_blocks -= max(need, 0)
        request.blocks += max(need, 0)
        return True

    def _finish(self, request: EngineRequest) -> None:
        self.free_blocks += request.blocks
        request.blocks = 0
        if request.slot is not None:
            if self.pool is not None:
                self.pool.free.append(request.slot)
            request.slot = None
        if request in self.running:
            self.running.remove(request)

    def _preempt(self, request: EngineRequest) -> None:
        self._finish(request)
        request.computed = 0
        request.prefilled = False
        request.preemptions += 1
        self.preemptions_total += 1
        self.waiting.appendleft(request)

    def _drop_aborted(self) -> None:
        for request in [r for r in self.running if r.aborted]:
            self._finish(request)
        self.waiting = collections.deque(r for r in self.waiting if not r.aborted)

    def _plan(self) -> list[tuple[EngineRequest, int]]:
        """(request, tokens to compute this step) for every request in the step."""
        budget = self.config.max_num_batched_tokens
        if not self.config.chunked_prefill:
            prompts = self._admit(budget, whole_prompts=True)
            if prompts:
                return prompts  # V0 without chunked prefill: prompts first, in a step of their own
        plan, preempted = [], False
        for request in list(self.running):
            if request not in self.running:
                continue  # preempted earlier in this loop
            n = min(len(request.all_ids) - request.computed, budget)
            if n <= 0:
                break
            while not self._reserve(request, request.computed + n):
                victim = self.running[-1]
                self._preempt(victim)
                preempted = True
                if victim is request:
                    break
            if request in self.running:
                plan.append((request, n))
                budget -= n
        if self.config.chunked_prefill and not preempted:
            plan += self._admit(budget, whole_prompts=False)
        return plan

    def _admit(self, budget: int, whole_prompts: bool) -> list[tuple[EngineRequest, int]]:
        plan = []
        while self.waiting and budget > 0 and len(self.running) < self.config.max_num_seqs:
            request = self.waiting[0]
            remaining = len(request.all_ids) - request.computed
            if whole_prompts and remaining > budget and plan:
                break
            n = remaining if whole_prompts else min(remaining, budget)
            if not self._reserve(request, request.computed + n):
                break
            self.waiting.popleft()
            self.running.append(request)
            request.slot = self.pool.free.pop() if self.pool is not None else 0
            plan.append((request, n))
            budget -= n
        return plan
