"""Chapters 3 and 5: a discrete-event, iteration-level simulation of one inference server.

The engine works like vLLM's scheduler, one model step at a time:

- Requests wait in a FIFO queue until the scheduler admits them; a step runs prefill tokens
  and/or one decode token for every running sequence. With ``chunked_prefill`` a step mixes
  both under the ``max_num_batched_tokens`` budget (decodes first); without it a step is either
  a prefill batch or a decode batch, and waiting prompts go first (vLLM's V0 default).
- ``policy="static"`` admits a new batch only when the previous one has completely finished and
  reserves each request's final length up front; ``"continuous"`` refills the batch at every step
  and allocates KV blocks as sequences grow (PagedAttention).
- The paged KV cache holds ``plan_memory(...).capacity_tokens // block_size`` blocks (chapter 4).
  When a decoding sequence needs a block and none is free, the most recently admitted request is
  preempted: its blocks are freed, it returns to the head of the queue and later recomputes its
  prompt plus the tokens it had generated (vLLM's recompute preemption).
- With ``prefix_caching`` the full blocks of a shared prefix stay cached after the first request
  computed them; later requests of the same group skip those tokens. Unreferenced cached blocks
  are evicted, least recently used first, when memory is needed.
- Each step lasts ``step_timer(...)`` seconds from ``llminfer.roofline`` for its mix of prefill
  tokens, attended pairs, decoding sequences and their context. A request's first token comes from
  the step that finishes its prefill, each later token from one decode step, so with one request in
  flight TTFT and TPOT equal ``roofline.estimate_latency``.

Timestamps are seconds from the first arrival. The request log has the article's schema
(``request_id, start_ts, first_token_ts, end_ts, input_tokens, output_tokens``) plus
``scheduled_ts``, ``preemptions`` and ``cached_prefix_tokens``.
"""

from __future__ import annotations

import heapq
import math
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from llminfer.hardware import GPU
from llminfer.memory import plan_memory
from llminfer.models import Model
from llminfer.workload import Workload

#: (prefill_tokens, prefill_attended, decode_seqs, decode_context_tokens,
#:  prefill_cached_tokens) -> seconds, as ``llminfer.roofline.StepTimer`` takes them.
StepTime = Callable[[int, int, int, int, int], float]

POLICIES = ("continuous", "static")


def _check_int(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name}={value!r} must be an integer >= {minimum}")
    return int(value)


@dataclass(frozen=True)
class EngineConfig:
    """A serving engine's scheduler and cache settings (names as in vLLM).

    - ``policy``: ``"continuous"`` (iteration-level batching) or ``"static"`` (a batch runs to
      completion before the next is admitted; KV reserved for the final length).
    - ``max_num_seqs``: most sequences in one step; ``max_num_batched_tokens``: most tokens in
      one step (prefill tokens + one per decoding sequence).
    - ``chunked_prefill``: split long prompts over steps and mix them with decodes.
    - ``block_size``: tokens per KV block; ``gpu_memory_utilization``: share of GPU memory the
      engine may use (weights, reserve and KV cache).
    - ``prefix_caching``: reuse the KV blocks of shared prompt prefixes.

    Introduced in: notebooks/05_optimizations.ipynb
    """

    policy: str = "continuous"
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    chunked_prefill: bool = False
    block_size: int = 16
    gpu_memory_utilization: float = 0.9
    prefix_caching: bool = False

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"policy={self.policy!r} must be one of {', '.join(POLICIES)}")
        _check_int("max_num_seqs", self.max_num_seqs, 1)
        _check_int("max_num_batched_tokens", self.max_num_batched_tokens, 1)
        _check_int("block_size", self.block_size, 1)
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
        if self.chunked_prefill and self.max_num_batched_tokens < self.max_num_seqs:
            raise ValueError(
                f"max_num_batched_tokens={self.max_num_batched_tokens} must be >= "
                f"max_num_seqs={self.max_num_seqs} with chunked_prefill (every running sequence "
                "needs one token per step)"
            )


@dataclass
class SimResult:
    """What a simulation produced.

    - ``requests``: one row per request in the article's log schema plus ``scheduled_ts``,
      ``preemptions``, ``cached_prefix_tokens`` and ``prefix_group``; ``log`` is the same data
      as a ``llminfer.logs.RequestLog``.
    - ``steps``: one row per engine step: ``time`` (start, s), ``duration_s``, ``batch_size``,
      ``prefill_tokens``, ``decode_seqs``, ``kv_blocks`` (in use at the step), ``waiting``
      (queue length) and ``output_tokens`` (tokens the step produced).
    - ``preemptions``: total recompute preemptions; ``capacity_blocks``: KV blocks available.

    Introduced in: notebooks/05_optimizations.ipynb
    """

    requests: pd.DataFrame
    steps: pd.DataFrame
    preemptions: int
    capacity_blocks: int
    block_size: int
    workload: Workload
    engine: EngineConfig
    _log: object = field(default=None, repr=False)

    @property
    def log(self):
        """The requests as a ``RequestLog`` (chapter 6's reader), so every analytic applies."""
        if self._log is None:
            from llminfer.logs import read_requests

            self._log = read_requests(self.requests)
        return self._log

    def summary(self, **kwargs):
        """``llminfer.metrics.summarize`` of the log; keyword arguments pass through."""
        from llminfer.metrics import summarize

        return summarize(self.log, **kwargs)


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


def simulate(
    workload: Workload,
    model: Model,
    gpu: GPU,
    engine: EngineConfig = EngineConfig(),
    n_gpus: int = 1,
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
    step_time: StepTime | None = None,
    capacity_blocks: int | None = None,
) -> SimResult:
    """Serve ``workload`` with ``model`` on ``n_gpus`` × ``gpu`` and record every request and step.

    ``step_time`` replaces the roofline step cost (a callable taking prefill tokens, attended
    pairs, decoding sequences, their context tokens and the cached tokens prompt chunks attend
    to, returning seconds), e.g. to replay a measured profile; ``capacity_blocks`` replaces the
    KV capacity from ``plan_memory``.
    Deterministic for a given workload seed.

    Introduced in: notebooks/05_optimizations.ipynb
    """
    from llminfer.roofline import attended_pairs, step_timer

    if not isinstance(workload, Workload):
        raise ValueError(f"workload={workload!r} must be a llminfer.simulate.Workload")
    if not isinstance(engine, EngineConfig):
        raise ValueError(f"engine={engine!r} must be an EngineConfig")
    if step_time is None:
        step_time = step_timer(
            model, gpu, n_gpus=n_gpus, weight_dtype=weight_dtype, kv_dtype=kv_dtype
        )
    if capacity_blocks is None:
        capacity_blocks = kv_capacity_blocks(model, gpu, engine, n_gpus, weight_dtype, kv_dtype)
    capacity_blocks = _check_int("capacity_blocks", capacity_blocks, 1)
    table = workload.requests()
    longest = int((table["prompt_tokens"] + table["output_tokens"]).max())
    if longest > model.max_context:
        raise ValueError(
            f"workload has a request of {longest} tokens (prompt + output), more than "
            f"{model.name}'s max_context={model.max_context}"
        )
    if math.ceil(longest / engine.block_size) > capacity_blocks:
        raise ValueError(
            f"workload has a request of {longest} tokens but the KV cache holds only "
            f"{capacity_blocks * engine.block_size} tokens; shorten it or add memory"
        )
    sim = _Engine(table, workload, engine, capacity_blocks, step_time, attended_pairs)
    sim.run()
    return sim.result()


class _Engine:
    """The event loop. Per-request state lives in Python lists (fast scalar access)."""

    def __init__(self, table, workload, engine, capacity, step_time, attended_pairs):
        self.cfg = engine
        self.workload = workload
        self.capacity = capacity
        self.step_time = step_time
        self.attended = attended_pairs
        self.bs = engine.block_size
        n = len(table)
        self.n = n
        self.ids = table["request_id"].tolist()
        self.prompt = table["prompt_tokens"].tolist()
        self.output = table["output_tokens"].tolist()
        self.group = table["prefix_group"].tolist()
        prefix = table["prefix_tokens"].tolist()
        # Tokens of the shared prefix this request could reuse: whole blocks only.
        self.prefix_blocks = [p // self.bs for p in prefix]
        self.arrival = [0.0] * n
        self.scheduled = [math.nan] * n
        self.first = [math.nan] * n
        self.end = [math.nan] * n
        self.cached_log = [0] * n
        self.preempt_count = [0] * n
        self.gen = [0] * n  # tokens generated so far
        self.target = list(self.prompt)  # KV tokens to compute before the next token
        self.computed = [0] * n  # KV tokens present (including cached prefix)
        self.blocks = [0] * n  # blocks held (shared prefix blocks included)
        self.shared = [0] * n  # of which shared prefix blocks
        self.ref = [-1] * n  # prefix group referenced, -1 = none
        self.epoch = [0] * n
        self.base = [0] * n  # decode: kv tokens = base + decode counter
        self._finish_at = [0] * n  # decode counter value at which a decoding request ends
        self.admitted_once = [False] * n
        # Arrivals: a heap of (time, index). Closed loop releases requests as others end.
        if workload.closed_loop:
            k = min(workload.concurrency, n)
            self.arrivals = [(0.0, i) for i in range(k)]
            self.next_release = k
        else:
            times = table["arrival_s"].tolist()
            self.arrivals = [(t, i) for i, t in enumerate(times)]
            self.next_release = n
        heapq.heapify(self.arrivals)
        # Scheduler state.
        self.t = 0.0
        self.decode_counter = 0
        self.waiting: deque[int] = deque()
        self.running: dict[int, None] = {}  # insertion order = admission order
        self.prefilling: list[int] = []  # running requests still computing their prompt
        self.decoding: set[int] = set()
        self.sum_base = 0
        self.finish_heap: list[tuple[int, int, int]] = []
        self.block_heap: list[tuple[int, int, int]] = []
        self.done = 0
        self.preemptions = 0
        # KV blocks: private to a request, shared by a referenced prefix, cached but idle.
        self.private_blocks = 0
        self.pinned_blocks = 0
        self.idle: OrderedDict[int, int] = OrderedDict()  # group -> blocks, LRU first
        self.idle_blocks = 0
        self.group_blocks: dict[int, int] = {}  # group -> cached blocks
        self.group_refs: dict[int, int] = {}
        # Step records.
        self.rec_time: list[float] = []
        self.rec_dur: list[float] = []
        self.rec_batch: list[int] = []
        self.rec_prefill: list[int] = []
        self.rec_decode: list[int] = []
        self.rec_blocks: list[int] = []
        self.rec_waiting: list[int] = []
        self.rec_tokens: list[int] = []

    # --- blocks ---------------------------------------------------------------------------

    def _available(self) -> int:
        return self.capacity - self.private_blocks - self.pinned_blocks - self.idle_blocks

    def _reserve(self, n: int) -> bool:
        """True when ``n`` free blocks exist, evicting idle cached prefixes (LRU) if needed."""
        while self._available() < n and self.idle:
            group, blocks = self.idle.popitem(last=False)
            self.idle_blocks -= blocks
            del self.group_blocks[group]
        return self._available() >= n

    def _release(self, i: int) -> None:
        self.private_blocks -= self.blocks[i] - self.shared[i]
        self.blocks[i] = self.shared[i] = 0
        group = self.ref[i]
        if group >= 0:
            self.ref[i] = -1
            self.group_refs[group] -= 1
            if self.group_refs[group] == 0:
                blocks = self.group_blocks[group]
                self.pinned_blocks -= blocks
                self.idle[group] = blocks
                self.idle_blocks += blocks

    # --- admission --------------------------------------------------------------------------

    def _cache_lookup(self, i: int) -> int:
        """Blocks of request i's prompt already cached (prefix caching), 0 otherwise."""
        if not self.cfg.prefix_caching:
            return 0
        group = self.group[i]
        if group < 0 or group not in self.group_blocks:
            return 0
        return min(self.group_blocks[group], self.prefix_blocks[i])

    def _admit(self, i: int, new_tokens_cap: int | None, full_reserve: bool) -> int:
        """Try to admit waiting request i; returns its first chunk of tokens (0 = not admitted)."""
        hit = self._cache_lookup(i)
        cached = hit * self.bs
        remaining = self.target[i] - cached
        chunk = remaining if new_tokens_cap is None else min(remaining, new_tokens_cap)
        if chunk <= 0:
            return 0
        # Static batching reserves the final length up front; paging only what is computed.
        need_tokens = self.prompt[i] + self.output[i] if full_reserve else cached + chunk
        need = math.ceil(need_tokens / self.bs) - hit
        if hit:
            group = self.group[i]
            if self.group_refs.get(group, 0) == 0 and group in self.idle:
                # Re-reference an idle cached prefix: it stops being evictable.
                blocks = self.idle.pop(group)
                self.idle_blocks -= blocks
                self.pinned_blocks += blocks
                self.group_refs[group] = 0
            if not self._reserve(need):
                self._unpin_if_unused(group)
                return 0
            self.group_refs[group] += 1
            self.ref[i] = group
        elif not self._reserve(need):
            return 0
        self.private_blocks += need
        self.blocks[i] = need + hit
        self.shared[i] = hit
        self.computed[i] = cached
        if not self.admitted_once[i]:
            self.admitted_once[i] = True
            self.scheduled[i] = self.t
            self.cached_log[i] = cached
        self.running[i] = None
        self.prefilling.append(i)
        return chunk

    def _unpin_if_unused(self, group: int) -> None:
        if self.group_refs.get(group, 0) == 0 and group in self.group_blocks:
            blocks = self.group_blocks[group]
            self.pinned_blocks -= blocks
            self.idle[group] = blocks
            self.idle_blocks += blocks

    # --- preemption and completion ----------------------------------------------------------

    def _leave(self, i: int) -> None:
        del self.running[i]
        if i in self.decoding:
            self.decoding.discard(i)
            self.sum_base -= self.base[i]
            self.gen[i] = self.output[i] - (self._finish_at[i] - self.decode_counter)
        else:
            self.prefilling.remove(i)
        self.epoch[i] += 1
        self._release(i)

    def _preempt_latest(self) -> int:
        i = next(reversed(self.running))
        self._leave(i)
        self.preemptions += 1
        self.preempt_count[i] += 1
        self.target[i] = self.prompt[i] + self.gen[i]
        self.computed[i] = 0
        self.waiting.appendleft(i)
        return i

    def _finish(self, i: int, t_end: float) -> None:
        self.end[i] = t_end
        self.done += 1
        if self.next_release < self.n:
            j = self.next_release
            self.next_release += 1
            heapq.heappush(self.arrivals, (t_end + self.workload.think_time_s, j))

    # --- the loop ---------------------------------------------------------------------------

    def run(self) -> None:
        chunked = self.cfg.chunked_prefill
        static = self.cfg.policy == "static"
        while self.done < self.n:
            while self.arrivals and self.arrivals[0][0] <= self.t:
                t_arr, i = heapq.heappop(self.arrivals)
                self.arrival[i] = t_arr
                self.waiting.append(i)
            if not self.running and not self.waiting:
                self.t = self.arrivals[0][0]
                continue
            if chunked:
                scheduled = self._step_chunked()
            elif static:
                scheduled = self._step_static()
            else:
                scheduled = self._step_plain()
            if not scheduled:
                if self.running:
                    self._preempt_latest()
                    continue
                if self.arrivals and not self.waiting:
                    self.t = max(self.t, self.arrivals[0][0])
                    continue
                raise RuntimeError("scheduler is stuck: no request can be admitted")

    def _step_plain(self) -> bool:
        """vLLM V0 without chunked prefill: a prefill batch if any prompt can start, else decode."""
        budget = self.cfg.max_num_batched_tokens
        batch: list[tuple[int, int]] = []
        tokens = 0
        while self.waiting and len(self.running) < self.cfg.max_num_seqs:
            i = self.waiting[0]
            if batch and tokens + self.target[i] > budget:
                break
            chunk = self._admit(i, None, full_reserve=False)
            if not chunk:
                break
            self.waiting.popleft()
            batch.append((i, chunk))
            tokens += chunk
        if batch:
            self._run_step(batch, decode=False)
            return True
        return self._decode_only()

    def _step_static(self) -> bool:
        """Static batching: admit a whole batch only when the last one has finished."""
        if not self.running:
            while self.waiting and len(self.running) < self.cfg.max_num_seqs:
                if not self._admit(self.waiting[0], None, full_reserve=True):
                    break
                self.waiting.popleft()
        if self.prefilling:
            budget = self.cfg.max_num_batched_tokens
            batch, tokens = [], 0
            for i in self.prefilling:
                chunk = self.target[i] - self.computed[i]
                if batch and tokens + chunk > budget:
                    break
                batch.append((i, chunk))
                tokens += chunk
            self._run_step(batch, decode=False)
            return True
        return self._decode_only()

    def _decode_only(self) -> bool:
        if not self.decoding:
            return False
        self._grow_decode_blocks()
        if not self.decoding:
            return True  # everything was preempted; the next iteration re-admits
        self._run_step([], decode=True)
        return True

    def _step_chunked(self) -> bool:
        """Chunked prefill: decodes first, then running prompts, then new prompts, one budget."""
        if self.decoding:
            self._grow_decode_blocks()
        budget = self.cfg.max_num_batched_tokens - len(self.decoding)
        batch: list[tuple[int, int]] = []
        for i in list(self.prefilling):
            if budget <= 0:
                break
            chunk = min(self.target[i] - self.computed[i], budget)
            need = math.ceil((self.computed[i] + chunk) / self.bs) - self.blocks[i]
            if need > 0:
                if not self._reserve(need):
                    continue
                self.private_blocks += need
                self.blocks[i] += need
            batch.append((i, chunk))
            budget -= chunk
        while budget > 0 and self.waiting and len(self.running) < self.cfg.max_num_seqs:
            i = self.waiting[0]
            chunk = self._admit(i, budget, full_reserve=False)
            if not chunk:
                break
            self.waiting.popleft()
            batch.append((i, chunk))
            budget -= chunk
        if not batch and not self.decoding:
            return False
        self._run_step(batch, decode=bool(self.decoding))
        return True

    def _grow_decode_blocks(self) -> None:
        """Give every decoding sequence that crosses a block boundary this step a new block,
        preempting the most recently admitted request while none is free."""
        heap, d = self.block_heap, self.decode_counter
        while heap and heap[0][0] <= d:
            _, epoch, i = heapq.heappop(heap)
            if epoch != self.epoch[i]:
                continue
            while not self._reserve(1):
                if self._preempt_latest() == i:
                    break
            if epoch != self.epoch[i]:
                continue
            self.private_blocks += 1
            self.blocks[i] += 1
            self._push_block_event(i)

    def _push_block_event(self, i: int) -> None:
        need_at = self.blocks[i] * self.bs - self.base[i]
        if need_at < self._finish_at[i]:
            heapq.heappush(self.block_heap, (need_at, self.epoch[i], i))

    def _run_step(self, batch: list[tuple[int, int]], decode: bool) -> None:
        n_decode = len(self.decoding) if decode else 0
        context = self.sum_base + n_decode * self.decode_counter if decode else 0
        prefill_tokens = attended = cached = 0
        for i, chunk in batch:
            attended += self.attended(chunk, self.computed[i])
            prefill_tokens += chunk
            cached += self.computed[i]
        duration = self.step_time(prefill_tokens, attended, n_decode, context, cached)
        self.rec_time.append(self.t)
        self.rec_dur.append(duration)
        self.rec_batch.append(len(batch) + n_decode)
        self.rec_prefill.append(prefill_tokens)
        self.rec_decode.append(n_decode)
        self.rec_blocks.append(self.private_blocks + self.pinned_blocks + self.idle_blocks)
        self.rec_waiting.append(len(self.waiting))
        produced = n_decode
        self.t += duration
        t_end = self.t
        if decode:
            self.decode_counter += 1
            heap, d = self.finish_heap, self.decode_counter
            while heap and heap[0][0] <= d:
                _, epoch, i = heapq.heappop(heap)
                if epoch != self.epoch[i]:
                    continue
                self.gen[i] = self.output[i]
                self.decoding.discard(i)
                self.sum_base -= self.base[i]
                del self.running[i]
                self.epoch[i] += 1
                self._release(i)
                self._finish(i, t_end)
        for i, chunk in batch:
            self.computed[i] += chunk
            if self.computed[i] < self.target[i]:
                continue
            self.prefilling.remove(i)
            self._share_prefix(i)
            self.gen[i] += 1
            produced += 1
            if math.isnan(self.first[i]):
                self.first[i] = t_end
            if self.gen[i] >= self.output[i]:
                del self.running[i]
                self.epoch[i] += 1
                self._release(i)
                self._finish(i, t_end)
                continue
            self.decoding.add(i)
            self.base[i] = self.target[i] - self.decode_counter
            self.sum_base += self.base[i]
            self._finish_at[i] = self.decode_counter + self.output[i] - self.gen[i]
            heapq.heappush(self.finish_heap, (self._finish_at[i], self.epoch[i], i))
            self._push_block_event(i)
        self.rec_tokens.append(produced)

    def _share_prefix(self, i: int) -> None:
        """After a miss computed its prompt, its full prefix blocks become the group's cache."""
        group = self.group[i]
        if not self.cfg.prefix_caching or group < 0 or self.shared[i]:
            return
        blocks = self.prefix_blocks[i]
        if blocks == 0 or group in self.group_blocks:
            return
        self.group_blocks[group] = blocks
        self.group_refs[group] = 1
        self.private_blocks -= blocks
        self.pinned_blocks += blocks
        self.shared[i] = blocks
        self.ref[i] = group

    def result(self) -> SimResult:
        requests = pd.DataFrame(
            {
                "request_id": self.ids,
                "start_ts": self.arrival,
                "first_token_ts": self.first,
                "end_ts": self.end,
                "input_tokens": self.prompt,
                "output_tokens": self.output,
                "scheduled_ts": self.scheduled,
                "preemptions": self.preempt_count,
                "cached_prefix_tokens": self.cached_log,
                "prefix_group": self.group,
            }
        )
        steps = pd.DataFrame(
            {
                "time": self.rec_time,
                "duration_s": self.rec_dur,
                "batch_size": self.rec_batch,
                "prefill_tokens": self.rec_prefill,
                "decode_seqs": self.rec_decode,
                "kv_blocks": self.rec_blocks,
                "waiting": self.rec_waiting,
                "output_tokens": self.rec_tokens,
            }
        )
        return SimResult(
            requests=requests,
            steps=steps,
            preemptions=self.preemptions,
            capacity_blocks=self.capacity,
            block_size=self.bs,
            workload=self.workload,
            engine=self.cfg,
        )


def _loads(rates, concurrencies) -> tuple[str, list]:
    if (rates is None) == (concurrencies is None):
        raise ValueError("give exactly one of rates (open loop) or concurrencies (closed loop)")
    kind, values = ("rate", rates) if rates is not None else ("concurrency", concurrencies)
    values = list(values)
    if not values:
        raise ValueError(f"{kind} list is empty; give at least one load")
    return kind, values


def sweep(
    workload: Workload,
    model: Model,
    gpu: GPU,
    rates: Sequence[float] | None = None,
    concurrencies: Sequence[int] | None = None,
    engine: EngineConfig = EngineConfig(),
    percentiles: Sequence[float] = (50, 90, 99),
    slo: dict[str, float] | None = None,
    **simulate_kwargs,
) -> pd.DataFrame:
    """Simulate ``workload`` at each request rate (open loop) or concurrency (closed loop).

    One row per load: the load (``rate`` or ``concurrency`` column), ``preemptions``,
    ``mean_batch`` (sequences per decode step) and every field of
    ``llminfer.metrics.summarize(...).to_dict()`` (rps, output_tps, ttft_s_p99, ...). The same
    seed draws the same lengths at every load, so rows differ only in load.

    Introduced in: notebooks/03_metrics.ipynb
    """
    from llminfer.metrics import summarize

    kind, values = _loads(rates, concurrencies)
    rows = []
    for value in values:
        if kind == "rate":
            point = replace(workload, rate=value, concurrency=None)
        else:
            point = replace(workload, rate=None, concurrency=value)
        result = simulate(point, model, gpu, engine, **simulate_kwargs)
        decode = result.steps.loc[result.steps.decode_seqs > 0, "decode_seqs"]
        summary = summarize(result.log, percentiles=percentiles, slo=slo).to_dict()
        rows.append(
            {
                kind: value,
                "preemptions": result.preemptions,
                "mean_batch": float(decode.mean()) if len(decode) else 0.0,
                **summary,
            }
        )
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class Goodput:
    """The highest load meeting an SLO: ``load`` (None when even the lowest fails), its
    ``row`` of the sweep, and the whole sweep ``table`` with a ``meets_slo`` column.

    Introduced in: notebooks/03_metrics.ipynb
    """

    kind: str
    load: float | None
    row: pd.Series | None
    table: pd.DataFrame
    slo: dict[str, float]
    percentile: float


def max_goodput(
    workload: Workload,
    model: Model,
    gpu: GPU,
    slo: dict[str, float],
    rates: Sequence[float] | None = None,
    concurrencies: Sequence[int] | None = None,
    percentile: float = 99,
    engine: EngineConfig = EngineConfig(),
    **simulate_kwargs,
) -> Goodput:
    """The highest load whose ``percentile`` of every SLO metric meets its target.

    ``slo`` maps ``ttft_s``, ``tpot_s`` or ``e2e_s`` to seconds, e.g. ``{"ttft_s": 0.5,
    "tpot_s": 0.05}`` with ``percentile=99`` asks for p99 TTFT ≤ 0.5 s and p99 TPOT ≤ 50 ms.
    Loads are the given grid; the answer is the highest grid point that passes.

    Introduced in: notebooks/03_metrics.ipynb
    """
    if not isinstance(slo, dict) or not slo:
        raise ValueError(f"slo={slo!r} must be a dict such as {{'ttft_s': 0.5}}")
    kind, values = _loads(rates, concurrencies)
    table = sweep(
        workload,
        model,
        gpu,
        rates=values if kind == "rate" else None,
        concurrencies=values if kind == "concurrency" else None,
        engine=engine,
        percentiles=(50, percentile),
        slo=slo,
        **simulate_kwargs,
    )
    stat = f"p{percentile:g}"
    passes = np.ones(len(table), dtype=bool)
    for metric, target in slo.items():
        column = table[f"{metric}_{stat}"].to_numpy(dtype=float)
        passes &= np.nan_to_num(column, nan=0.0) <= target
    table["meets_slo"] = passes
    good = table[passes]
    if good.empty:
        return Goodput(kind, None, None, table, dict(slo), percentile)
    best = good.loc[good[kind].idxmax()]
    return Goodput(kind, float(best[kind]), best, table, dict(slo), percentile)


__all__ = [
    "EngineConfig",
    "Goodput",
    "SimResult",
    "Workload",
    "kv_capacity_blocks",
    "max_goodput",
    "simulate",
    "sweep",
]
