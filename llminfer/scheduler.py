"""The scheduler and paged KV block manager behind ``llminfer.simulate`` (internal).

``Scheduler`` runs the event loop one engine step at a time; its per-request state lives in
plain Python lists because the loop touches single elements, where lists beat numpy arrays.
Decoding sequences grow by one KV token per decode step, so instead of touching every sequence
each step the scheduler keeps a global decode counter and two heaps of future events (the step
at which a sequence finishes, the step at which it needs its next block): a step costs
O(events), not O(batch).

Stretches of identical steps skip the loop's per-step Python: with nothing waiting and nothing
prefilling, every step until the next arrival or finish decodes the same sequences. A long
stretch is timed in one vectorised ``StepTimer.decode_steps`` call (``_run_decode_stretch``);
the few steps left before the event run in a tight loop of scalar step times
(``_run_decode_singles``), bit-identical to the main loop. Step records keep one entry per step
only for what changes from step to step; the rest is stored once per run of identical steps.

Per-token times cost no per-token Python either: every decode step gives one token to every
decoding sequence, so the scheduler records the end time of each decode step once
(``decode_end[k]`` ends the step that moved the counter to k + 1) and, per request, the counter
range it decoded over; ``tables()`` slices those ranges into each request's ``token_ts``.
"""

from __future__ import annotations

import heapq
import math
from collections import OrderedDict, deque

import numpy as np
import pandas as pd

#: Shortest stretch of identical decode steps worth one vectorised go (below it, the numpy
#: call costs more than stepping).
MIN_STRETCH = 16


class Scheduler:
    """The event loop over a workload's drawn requests (``Workload.requests()``), for one
    ``EngineConfig``, ``capacity`` KV blocks and a step-time function (seconds). ``run()`` then
    ``tables()`` gives the request and step DataFrames.

    Introduced in: notebooks/05_optimizations.ipynb
    """

    def __init__(self, table, workload, engine, capacity, step_time, attended_pairs):
        self.cfg = engine
        self.workload = workload
        self.capacity = capacity
        self.step_time = step_time
        # Vectorised decode-only steps (a StepTimer has them; a plain function does not).
        self._decode_steps = getattr(step_time, "decode_steps", None)
        self._too_short: tuple | None = None  # (arrival, sequences, sum_base): no stretch fits
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
        # Per-token emission: a token time (float, from a finished prefill) or a decode counter
        # range (start, end) per stretch of decoding; decode_start = counter when decoding began.
        self.emits: list[list] = [[] for _ in range(n)]
        self.decode_start = [0] * n
        self.decode_end: list[float] = []
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
            if self.decode_counter > self.decode_start[i]:
                self.emits[i].append((self.decode_start[i], self.decode_counter))
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
            if scheduled and self.decoding and not self.waiting and not self.prefilling:
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

    def _run_decode_stretch(self) -> None:
        """Run, vectorised, the decode-only steps before the next finish or arrival.

        With nothing waiting and nothing prefilling, every step until a request finishes or a
        new one arrives decodes the same sequences, each context one token longer. Their times
        come from one ``decode_steps`` call; the KV blocks the sequences grow into are granted
        in the same order the step-by-step loop would grant them, and the stretch stops before
        any step that would need a preemption. Records and results are those of stepping one by
        one (a test compares them); only the per-step Python is saved.
        """
        decode_steps = self._decode_steps
        if decode_steps is None:  # a custom step-time function: step one by one
            return
        c = self.decode_counter
        # A stale heap entry (a request that left) can only make the stretch shorter: safe.
        steps = self.finish_heap[0][0] - 1 - c  # the step that finishes a request runs alone
        if steps < MIN_STRETCH:
            return
        n = len(self.decoding)
        arrivals = self.arrivals
        if arrivals:  # steps only lengthen as contexts grow: bound by the first one's time
            arrival = arrivals[0][0]
            # Too close to this arrival for these sequences once: too close until it comes
            # (the steps left before it only get fewer), so skip the probe.
            key = (arrival, n, self.sum_base)
            if key == self._too_short:
                return
            first = self.step_time(0, 0, n, self.sum_base + n * c)
            steps = min(steps, math.ceil((arrival - self.t) / first))
            if steps < MIN_STRETCH:
                self._too_short = key
                return
        start = self.sum_base + n * c  # summed context of the first step, tokens
        durations = decode_steps(n, np.arange(start, start + n * steps, n, dtype=float))
        if not (durations > 0).all():  # also catches NaN
            bad = durations[~(durations > 0)][0]
            raise ValueError(
                f"step_time returned {bad!r} s for a decode step of {n} sequences; "
                "every step must last a finite time > 0 s"
            )
        starts = np.empty(steps)  # = t + [0, d0, d0 + d1, ...]
        starts[0] = 0.0
        np.cumsum(durations[:-1], out=starts[1:])
        starts += self.t
        if arrivals:  # a step may only start before the next arrival joins the queue
            steps = int(starts.searchsorted(arrival, side="left"))
            if steps < MIN_STRETCH:
                self._too_short = key
                return
        # Blocks: before the step with counter d, sequences whose need_at <= d get one.
        before = self.private_blocks + self.pinned_blocks + self.idle_blocks
        change_at: list[int] = []  # step of the stretch (from 0) where blocks in use change
        in_use_after: list[int] = []  # blocks in use from that step on
        heap, end = self.block_heap, c + steps
        epoch, blocks, base, finish_at, bs = (
            self.epoch,
            self.blocks,
            self.base,
            self._finish_at,
            self.bs,
        )
        while heap and heap[0][0] < end:
            need_at, ep, i = heap[0]
            if ep != epoch[i]:
                heapq.heappop(heap)
                continue
            in_use = self.private_blocks + self.pinned_blocks + self.idle_blocks
            if in_use >= self.capacity and not self._reserve(1):  # evicts cached prefixes
                steps = max(need_at - c, 0)  # the step-by-step loop preempts there
                break
            self.private_blocks += 1
            blocks[i] += 1
            following = blocks[i] * bs - base[i]  # as _push_block_event
            if following < finish_at[i]:
                heapq.heapreplace(heap, (following, ep, i))
            else:
                heapq.heappop(heap)
            change_at.append(max(need_at - c, 0))
            in_use_after.append(self.private_blocks + self.pinned_blocks + self.idle_blocks)
        if steps == 0:
            return
        # Blocks in use at each step: the value after the last change at or before it.
        rec_blocks, at_before, value = self.rec_blocks, 0, before
        for at, after in zip(change_at, in_use_after, strict=True):
            if at >= steps:  # sorted: a change at the step the stretch stops before
                break
            rec_blocks.extend([value] * (at - at_before))
            at_before, value = at, after
        rec_blocks.extend([value] * (steps - at_before))
        ends = starts[:steps] + durations[:steps]
        self.rec_time.extend(starts[:steps].tolist())
        self.rec_dur.extend(durations[:steps].tolist())
        self._record_run(steps, n, 0, n, 0, n)
        self.decode_end.extend(ends.tolist())
        self.t = float(ends[-1])
        self.decode_counter += steps

    def _run_decode_singles(self) -> None:
        """Run decode-only steps one at a time, as the main loop would, until something
        happens: an arrival is due, the next step would finish a request, or a sequence needs
        a block that only a preemption could free.

        These are the steps too few for a vectorised stretch (``MIN_STRETCH``) before a finish
        or an arrival. Each is timed by the same scalar ``step_time`` call and added to the
        clock one by one, so the results are those of the main loop to the last bit; only its
        per-step bookkeeping (admission checks, batch building, a stretch attempt that could
        not succeed: it found fewer than ``MIN_STRETCH`` steps before this same event) is saved.
        """
        if not self.decoding or self.waiting or self.prefilling:
            return
        arrivals, heap = self.arrivals, self.block_heap
        next_arrival = arrivals[0][0] if arrivals else math.inf
        d, t = self.decode_counter, self.t
        last = self.finish_heap[0][0] - 1  # the step from here finishes a request: not here
        if d >= last or next_arrival <= t:
            return
        n, sum_base, step_time = len(self.decoding), self.sum_base, self.step_time
        epoch, blocks, base, finish_at, bs = (
            self.epoch,
            self.blocks,
            self.base,
            self._finish_at,
            self.bs,
        )
        used = self.private_blocks + self.pinned_blocks + self.idle_blocks
        rec_time, rec_dur, rec_blocks = self.rec_time, self.rec_dur, self.rec_blocks
        decode_end, steps = self.decode_end, 0
        while d < last and next_arrival > t:
            # Blocks sequences grow into at this step (_grow_decode_blocks without preempting).
            granted = True
            while heap and heap[0][0] <= d:
                _, ep, i = heap[0]
                if ep != epoch[i]:
                    heapq.heappop(heap)
                    continue
                if used >= self.capacity:
                    if not self._reserve(1):  # the main loop preempts here
                        granted = False
                        break
                    used = self.private_blocks + self.pinned_blocks + self.idle_blocks
                self.private_blocks += 1
                used += 1
                blocks[i] += 1
                following = blocks[i] * bs - base[i]  # as _push_block_event
                if following < finish_at[i]:
                    heapq.heapreplace(heap, (following, ep, i))
                else:
                    heapq.heappop(heap)
            if not granted:
                break
            duration = step_time(0, 0, n, sum_base + n * d, 0)
            if not 0 < duration < math.inf:  # also catches NaN
                raise ValueError(
                    f"step_time returned {duration!r} s for a step of 0 prefill tokens and "
                    f"{n} decoding sequences; every step must last a finite time > 0 s"
                )
            rec_time.append(t)
            rec_dur.append(duration)
            rec_blocks.append(used)
            t += duration
            d += 1
            decode_end.append(t)
            steps += 1
        if steps:
            self.t, self.decode_counter = t, d
            self._record_run(steps, n, 0, n, 0, n)

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
        # vLLM V1 admits no waiting request in a step that had to preempt a running one.
        admit = self.preemptions == preempted_before
        while admit and budget > 0 and self.waiting and len(self.running) < self.cfg.max_num_seqs:
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
        if not 0 < duration < math.inf:  # also catches NaN
            raise ValueError(
                f"step_time returned {duration!r} s for a step of {prefill_tokens} prefill tokens "
                f"and {n_decode} decoding sequences; every step must last a finite time > 0 s"
            )
        self.rec_time.append(self.t)
        self.rec_dur.append(duration)
        self.rec_blocks.append(self.private_blocks + self.pinned_blocks + self.idle_blocks)
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
            self.emits[i].append(t_end)
            if math.isnan(self.first[i]):
                self.first[i] = t_end
            if self.gen[i] >= self.output[i]:
                del self.running[i]
                self.epoch[i] += 1
                self._release(i)
                self._finish(i, t_end)
                continue
            self.decoding.add(i)
            self.decode_start[i] = self.decode_counter
            self.base[i] = self.target[i] - self.decode_counter
            self.sum_base += self.base[i]
            self._finish_at[i] = self.decode_counter + self.output[i] - self.gen[i]
            heapq.heappush(self.finish_heap, (self._finish_at[i], self.epoch[i], i))
            self._push_block_event(i)
        self._record_run(1, len(batch) + n_decode, prefill_tokens, n_decode, waiting, produced)

    def _record_run(self, steps, batch, prefill, decode, waiting, produced) -> None:
        """Record ``steps`` consecutive steps with the same batch size, prefill tokens,
        decoding sequences, queue length and tokens produced."""
        self.rec_repeat.append(steps)
        self.rec_batch.append(batch)
        self.rec_prefill.append(prefill)
        self.rec_decode.append(decode)
        self.rec_waiting.append(waiting)
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

    def token_times(self) -> list[np.ndarray]:
        """Per request, the absolute time (s) of each output token, first token first."""
        ends = np.asarray(self.decode_end, dtype=float)
        out = []
        for parts in self.emits:
            if len(parts) == 2 and isinstance(parts[1], tuple):  # the common case: no preemption
                a, b = parts[1]
                times = np.empty(b - a + 1)
                times[0] = parts[0]
                times[1:] = ends[a:b]
            else:
                times = np.concatenate(
                    [ends[p[0] : p[1]] if isinstance(p, tuple) else [p] for p in parts]
                    or [np.empty(0)]
                )
            out.append(times)
        return out

    def tables(self) -> tuple[pd.DataFrame, pd.DataFrame]:
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
                "token_ts": self.token_times(),
            }
        )
        # np.asarray with a dtype first: pandas infers the type of a million-item list slowly.
        repeat = np.asarray(self.rec_repeat, dtype=np.int64)

        def per_step(runs: list[int]) -> np.ndarray:  # one value per run -> one per step
            return np.repeat(np.asarray(runs, dtype=np.int64), repeat)

        steps = pd.DataFrame(
            {
                "time": np.asarray(self.rec_time, dtype=float),
                "duration_s": np.asarray(self.rec_dur, dtype=float),
                "batch_size": per_step(self.rec_batch),
                "prefill_tokens": per_step(self.rec_prefill),
                "decode_seqs": per_step(self.rec_decode),
                "kv_blocks": np.asarray(self.rec_blocks, dtype=np.int64),
                "waiting": per_step(self.rec_waiting),
                "output_tokens": per_step(self.rec_tokens),
            }
        )
        return requests, steps
