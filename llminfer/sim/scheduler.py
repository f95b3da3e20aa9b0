"""The scheduler behind ``llminfer.sim.simulate``: the event loop, one engine step at a time
(internal).

``Scheduler`` admits waiting requests, builds each step's batch (vLLM V1's one token budget with
chunked prefill and its optional per-request cap ``long_prefill_token_threshold``, V0's
prefill-or-decode steps, or static batches), preempts the most recently
admitted request when the KV cache is full, and records every step and token. Its per-request
state lives in plain Python lists because the loop touches single elements, where lists beat
numpy arrays. Decoding sequences grow by one KV token per decode step, so instead of touching
every sequence each step the scheduler keeps a global decode counter and two heaps of future
events (the step at which a sequence finishes, the step at which it needs its next block): a
step costs O(events), not O(batch).

Two concepts live beside it: the KV blocks (who holds how many, the prefix cache, LRU eviction)
are a ``llminfer.sim.kvblocks.BlockPool``; stretches of identical decode-only steps skip the loop's
per-step Python in ``llminfer.sim.decodestretch``; llama.cpp's slots and the forward passes a
step is split into (``EngineConfig.ubatch_split``) are ``llminfer.sim.ubatches``. Step records
keep one entry per step only for what changes from step to step; the rest is stored once per run
of identical steps (``llminfer.sim.records`` turns them into the tables).

Per-token times cost no per-token Python either: every decode step gives one token to every
decoding sequence, so the scheduler records the end time of each decode step once
(``decode_end[k]`` ends the step that moved the counter to k + 1) and, per request, the counter
range it decoded over; ``tables()`` slices those ranges into each request's ``token_ts``.
"""

from __future__ import annotations

import heapq
import math
from collections import deque

from llminfer.sim.arrivals import admit_arrivals, send
from llminfer.sim.decodestretch import run_singles, run_stretch
from llminfer.sim.kvblocks import BlockPool
from llminfer.sim.records import record_run, tables, token_times
from llminfer.sim.ubatches import decode_groups, free_slot, init_slots, passes_time, take_slot


class Scheduler:
    """The event loop over a workload's drawn requests (``Workload.requests()``), for one
    ``EngineConfig``, ``capacity`` KV blocks and a step-time function (seconds). ``run()`` then
    ``tables()`` gives the request and step DataFrames.

    Introduced in: notebooks/05_optimizations.ipynb
    """

    def __init__(self, table, workload, engine, capacity, step_time, attended_pairs):
        self.cfg = engine
        self.workload = workload
        self.step_time = step_time
        # Vectorised decode-only steps (a StepTimer has them; a plain function does not).
        self.stretch_timer = getattr(step_time, "decode_steps", None)
        self.stretch_too_short: tuple | None = None  # (arrival, sequences, sum_base): no fit
        self.attended = attended_pairs
        self.bs = engine.block_size
        n = len(table)
        self.n = n
        self.capacity = capacity  # KV blocks
        self.ids = table["request_id"].tolist()
        self.prompt = table["prompt_tokens"].tolist()
        self.output = table["output_tokens"].tolist()
        self.group = table["prefix_group"].tolist()
        prefix = table["prefix_tokens"].tolist()
        # Tokens of the shared prefix this request could reuse: whole blocks only.
        self.prefix_blocks = [p // self.bs for p in prefix]
        self.arrival = [0.0] * n  # send time (start_ts), s
        self.scheduled = [math.nan] * n
        self.first = [math.nan] * n
        self.end = [math.nan] * n
        self.cached_log = [0] * n
        self.preempt_count = [0] * n
        self.gen = [0] * n  # tokens generated so far
        self.target = list(self.prompt)  # KV tokens to compute before the next token
        self.computed = [0] * n  # KV tokens present (including cached prefix)
        self.epoch = [0] * n
        self.base = [0] * n  # decode: kv tokens = base + decode counter
        self.finish_at = [0] * n  # decode counter value at which a decoding request ends
        self.admitted_once = [False] * n
        # Per-token emission: a token time (float, from a finished prefill) or a decode counter
        # range (start, end) per stretch of decoding; decode_start = counter when decoding began.
        self.emits: list[list] = [[] for _ in range(n)]
        self.decode_start = [0] * n
        self.decode_end: list[float] = []
        # Arrivals: a heap of (time, index). Closed loop releases requests as others end.
        # Each entry's time is when the engine can schedule the request: the server handles
        # each, request_latency_s, from its send (``arrival``, the log's start_ts) or once one
        # of its request_handlers is free (llminfer.sim.arrivals). A closed loop's sends are
        # spaced at least send_gap_s apart (one load generator).
        self.latency = workload.request_latency_s
        self.send_gap = workload.send_gap_s if workload.closed_loop else 0.0
        self.last_send = -math.inf
        # when each of the server's request handlers is next free (None: one per request)
        handlers = workload.request_handlers
        self.handler_free = None if handlers is None else [-math.inf] * min(handlers, n)
        self.arrivals = []
        # Arrived while the engine was busy, not yet handed to the scheduler (handoff_steps):
        # [step ends still to wait, request]; `steps_seen` counts the step ends so far.
        self.handoff = engine.handoff_steps
        self.setup = engine.request_setup_s
        self.handing: list[list[int]] = []
        self.steps_seen = 0
        if workload.closed_loop:
            k = min(workload.concurrency, n)
            for i in range(k):
                self._send(i, 0.0)
            self.next_release = k
        else:
            for i, t in enumerate(table["arrival_s"].tolist()):
                self._send(i, t)
            self.next_release = n
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
        self.kv = BlockPool(capacity, n)
        # Step records: one entry per step for what changes from step to step (start, duration,
        # blocks in use); one entry per run of identical steps (a single step, or a decode
        # stretch: rec_repeat steps) for batch size, prefill tokens, decoding sequences, queue
        # length and tokens produced, which a stretch keeps constant.
        self.rec_time: list[float] = []
        self.rec_dur: list[float] = []
        self.rec_blocks: list[int] = []
        self.rec_repeat: list[int] = []
        self.rec_batch: list[int] = []
        self.rec_prefill: list[int] = []
        self.rec_decode: list[int] = []
        self.rec_waiting: list[int] = []
        self.rec_tokens: list[int] = []
        # llama.cpp's slots and forward passes (EngineConfig.ubatch_split; llminfer.sim.ubatches)
        init_slots(self, engine, n)
        self.rec_passes: list[int] = []

    # --- admission --------------------------------------------------------------------------

    def _cache_lookup(self, i: int) -> int:
        """Blocks of request i's prompt already cached (prefix caching), 0 otherwise."""
        if not self.cfg.prefix_caching:
            return 0
        group = self.group[i]
        if group < 0:
            return 0
        return min(self.kv.cached(group), self.prefix_blocks[i])

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
        if not self.kv.allocate(i, need, self.group[i], hit):
            return 0
        self.computed[i] = cached
        if not self.admitted_once[i]:
            self.admitted_once[i] = True
            self.scheduled[i] = self.t
            self.cached_log[i] = cached
        self.running[i] = None
        self.prefilling.append(i)
        if self.split:
            self._take_slot(i)
        return chunk

    # --- preemption and completion ----------------------------------------------------------

    def _leave(self, i: int) -> None:
        del self.running[i]
        if i in self.decoding:
            self.decoding.discard(i)
            self.sum_base -= self.base[i]
            self.gen[i] = self.output[i] - (self.finish_at[i] - self.decode_counter)
            if self.decode_counter > self.decode_start[i]:
                self.emits[i].append((self.decode_start[i], self.decode_counter))
        else:
            self.prefilling.remove(i)
        self.epoch[i] += 1
        self.kv.release(i)
        if self.split:
            self._free_slot(i, self.t)

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
        if self.split:
            self._free_slot(i, t_end)
        if self.next_release < self.n:
            j = self.next_release
            self.next_release += 1
            self._send(j, t_end + self.workload.think_time_s)

    # --- the loop ---------------------------------------------------------------------------

    def run(self) -> None:
        chunked = self.cfg.chunked_prefill
        static = self.cfg.policy == "static"
        while self.done < self.n:
            self._admit_arrivals()
            if not self.running and not self.waiting:
                self.t = self.arrivals[0][0]
                continue
            if chunked:
                scheduled = self._step_chunked()
            elif static:
                scheduled = self._step_static()
            else:
                scheduled = self._step_plain()
            if (
                scheduled
                and self.decoding
                and not self.waiting
                and not self.prefilling
                and not self.handing  # its hand-over counts step ends one by one
            ):
                self._run_decode_stretch()  # many identical decode steps at once, or
                self._run_decode_singles()  # the few left before the next event
            if not scheduled:
                if self.running:
                    self._preempt_latest()
                    continue
                if self.arrivals and not self.waiting:
                    self.t = max(self.t, self.arrivals[0][0])
                    continue
                raise RuntimeError("scheduler is stuck: no request can be admitted")

    # How requests reach the engine (llminfer.sim.arrivals), as methods.
    _send = send
    _admit_arrivals = admit_arrivals

    # The decode shortcuts (llminfer.sim.decodestretch), as methods so that a test can switch
    # them off and compare with the main loop alone.
    _run_decode_stretch = run_stretch
    _run_decode_singles = run_singles

    # The records and their tables (llminfer.sim.records), as methods.
    record_run = record_run
    token_times = token_times
    tables = tables

    # llama.cpp's slots and forward passes (llminfer.sim.ubatches), as methods.
    _take_slot = take_slot
    _free_slot = free_slot
    _passes_time = passes_time
    _decode_groups = decode_groups

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
        if not self.prefilling and not self.waiting:  # decodes only: nothing to chunk or admit
            if self.decoding:
                self._grow_decode_blocks()
            if not self.decoding:
                return False
            self._run_step([], decode=True)
            return True
        preempted_before = self.preemptions
        if self.decoding:
            self._grow_decode_blocks()
        cap = self._long_prefill_cap()
        budget = self.cfg.max_num_batched_tokens - len(self.decoding)
        batch: list[tuple[int, int]] = []
        for i in list(self.prefilling):
            if budget <= 0:
                break
            chunk = min(self.target[i] - self.computed[i], cap, budget)
            need = math.ceil((self.computed[i] + chunk) / self.bs) - self.kv.blocks[i]
            if need > 0:
                if not self.kv.reserve(need):
                    continue
                self.kv.grant(i, need)
            batch.append((i, chunk))
            budget -= chunk
        # vLLM V1 admits no waiting request in a step that had to preempt a running one.
        admit = self.preemptions == preempted_before
        while admit and budget > 0 and self.waiting and len(self.running) < self.cfg.max_num_seqs:
            i = self.waiting[0]
            chunk = self._admit(i, min(budget, cap), full_reserve=False)
            if not chunk:
                break
            self.waiting.popleft()
            batch.append((i, chunk))
            budget -= chunk
        if not batch and not self.decoding:
            return False
        self._run_step(batch, decode=bool(self.decoding))
        return True

    def _long_prefill_cap(self) -> float:
        """Most new tokens one request's prefill chunk may take this step: vLLM V1's
        ``long_prefill_token_threshold`` (0 = no cap), not applied when only one request is in
        the system (running + waiting: "there is nobody to starve", vLLM 0.33.0
        ``vllm/v1/core/sched/scheduler.py`` L754-763), floored at the budget's fair share with
        the adaptive option (L764-769)."""
        threshold = self.cfg.long_prefill_token_threshold
        eligible = len(self.running) + len(self.waiting)
        if threshold <= 0 or eligible <= 1:
            return math.inf
        if self.cfg.long_prefill_token_threshold_adaptive:
            threshold = max(threshold, self.cfg.max_num_batched_tokens // eligible)
        return threshold

    def _grow_decode_blocks(self) -> None:
        """Give every decoding sequence that crosses a block boundary this step a new block,
        preempting the most recently admitted request while none is free."""
        heap, d = self.block_heap, self.decode_counter
        while heap and heap[0][0] <= d:
            _, epoch, i = heapq.heappop(heap)
            if epoch != self.epoch[i]:
                continue
            while not self.kv.reserve(1):
                if self._preempt_latest() == i:
                    break
            if epoch != self.epoch[i]:
                continue
            self.kv.grant(i, 1)
            self._push_block_event(i)

    def _push_block_event(self, i: int) -> None:
        need_at = self.kv.blocks[i] * self.bs - self.base[i]
        if need_at < self.finish_at[i]:
            heapq.heappush(self.block_heap, (need_at, self.epoch[i], i))

    def _run_step(self, batch: list[tuple[int, int]], decode: bool) -> None:
        n_decode = len(self.decoding) if decode else 0
        context = self.sum_base + n_decode * self.decode_counter if decode else 0
        prefill_tokens = attended = cached = 0
        for i, chunk in batch:
            attended += self.attended(chunk, self.computed[i])
            prefill_tokens += chunk
            cached += self.computed[i]
        passes = 1
        if self.split:
            duration, passes = self._passes_time(batch, n_decode)
        else:
            duration = self.step_time(prefill_tokens, attended, n_decode, context, cached)
        if not 0 < duration < math.inf:  # also catches NaN
            raise ValueError(
                f"step_time returned {duration!r} s for a step of {prefill_tokens} prefill tokens "
                f"and {n_decode} decoding sequences; every step must last a finite time > 0 s"
            )
        self.rec_time.append(self.t)
        self.rec_dur.append(duration)
        self.rec_blocks.append(self.kv.in_use())
        waiting = len(self.waiting)
        produced = n_decode
        self.t += duration
        t_end = self.t
        if decode:
            self.decode_counter += 1
            self.decode_end.append(t_end)
            heap, d = self.finish_heap, self.decode_counter
            while heap and heap[0][0] <= d:
                _, epoch, i = heapq.heappop(heap)
                if epoch != self.epoch[i]:
                    continue
                self.gen[i] = self.output[i]
                self.emits[i].append((self.decode_start[i], d))
                self.decoding.discard(i)
                self.sum_base -= self.base[i]
                del self.running[i]
                self.epoch[i] += 1
                self.kv.release(i)
                self._finish(i, t_end)
        for i, chunk in batch:
            self.computed[i] += chunk
            if self.computed[i] < self.target[i]:
                continue
            self.prefilling.remove(i)
            self._share_prefix(i)
            self.gen[i] += 1
            produced += 1
            self.emits[i].append(t_end)
            if math.isnan(self.first[i]):
                self.first[i] = t_end
            if self.gen[i] >= self.output[i]:
                del self.running[i]
                self.epoch[i] += 1
                self.kv.release(i)
                self._finish(i, t_end)
                continue
            self.decoding.add(i)
            self.decode_start[i] = self.decode_counter
            self.base[i] = self.target[i] - self.decode_counter
            self.sum_base += self.base[i]
            self.finish_at[i] = self.decode_counter + self.output[i] - self.gen[i]
            heapq.heappush(self.finish_heap, (self.finish_at[i], self.epoch[i], i))
            self._push_block_event(i)
        self.record_run(
            1, len(batch) + n_decode, prefill_tokens, n_decode, waiting, produced, passes
        )

    def _share_prefix(self, i: int) -> None:
        """After a miss computed its prompt, its full prefix blocks become the group's cache."""
        if self.cfg.prefix_caching:
            self.kv.share_prefix(i, self.group[i], self.prefix_blocks[i])
