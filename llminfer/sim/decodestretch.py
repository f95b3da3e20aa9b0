"""Decode stretches: many identical decode-only steps of the scheduler at once (internal).

With nothing waiting and nothing prefilling, every step of ``llminfer.sim.scheduler.Scheduler``
until the next arrival or finish decodes the same sequences, each context one token longer:
the main loop would spend its per-step Python (admission checks, batch building, heap events)
to learn nothing new. After such a step the scheduler calls two shortcuts, which read and
advance its state exactly as stepping one by one would:

- ``run_stretch``: a long stretch (at least ``MIN_STRETCH`` steps) timed in one vectorised
  ``StepTimer.decode_steps`` call (``llminfer.cost.stepkernel``), its KV blocks granted in the order
  the loop grants them; equal to stepping within 1e-12 (numpy's vectorised power and running
  sum may round the last bit differently);
- ``run_singles``: the few steps left before the event, in a tight loop of the same scalar
  ``step_time`` calls added one by one: the same bits as the main loop.

Both stop before any step that would need a preemption, an admission or a finish, which the
main loop then runs. ``tests/test_simulate.py::test_decode_stretches_change_nothing`` switches
them off and compares.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sized
from typing import Protocol

import numpy as np

from llminfer.sim.kvblocks import BlockPool


class DecodeState(Protocol):
    """The scheduler state the shortcuts read and advance: what ``Scheduler`` (which imports
    this module) must offer them. Lists of per-request entries are indexed by request.

    Introduced in: notebooks/05_optimizations.ipynb
    """

    t: float  # simulated time now, s
    step_time: Callable[..., float]  # seconds of one step (StepTimer or a custom function)
    stretch_timer: Callable[..., np.ndarray] | None  # StepTimer.decode_steps, None if custom
    kv: BlockPool
    bs: int  # tokens per KV block
    decode_counter: int  # decode steps run so far
    sum_base: int  # summed (kv tokens − decode counter) over decoding requests
    decoding: set[int]  # requests decoding now
    waiting: Sized  # requests queued for prefill (empty or not is all that is read)
    prefilling: Sized  # requests part-way through prefill
    arrivals: list[tuple[float, int]]  # (time, request) not yet arrived, a heap
    finish_heap: list[tuple[int, int, int]]  # (counter at finish, epoch, request), a heap
    block_heap: list[tuple[int, int, int]]  # (counter at next block, epoch, request), a heap
    epoch: list[int]
    base: list[int]  # per request: kv tokens = base + decode counter
    finish_at: list[int]  # per request: decode counter value at which it ends
    stretch_too_short: tuple | None
    # the passes of a decode-only step now: (sequences, summed base) each (llminfer.sim.ubatches)
    _decode_groups: Callable[[], list[tuple[int, int]]]
    rec_time: list[float]
    rec_dur: list[float]
    rec_blocks: list[int]
    decode_end: list[float]

    def record_run(self, steps, batch, prefill, decode, waiting, produced, passes=1) -> None: ...


#: Shortest stretch of identical decode steps worth one vectorised go (below it, the numpy
#: call costs more than stepping).
MIN_STRETCH = 16


def run_stretch(sched: DecodeState) -> None:
    """Run, vectorised, the decode-only steps of ``sched`` before the next finish or arrival.

    With nothing waiting and nothing prefilling, every step until a request finishes or a
    new one arrives decodes the same sequences, each context one token longer. Their times
    come from one ``decode_steps`` call; the KV blocks the sequences grow into are granted
    in the same order the step-by-step loop would grant them, and the stretch stops before
    any step that would need a preemption. Records and results are those of stepping one by
    one (a test compares them); only the per-step Python is saved.

    Introduced in: notebooks/05_optimizations.ipynb
    """
    decode_steps, kv = sched.stretch_timer, sched.kv
    if decode_steps is None:  # a custom step-time function: step one by one
        return
    c = sched.decode_counter
    # A stale heap entry (a request that left) can only make the stretch shorter: safe.
    steps = sched.finish_heap[0][0] - 1 - c  # the step that finishes a request runs alone
    if steps < MIN_STRETCH:
        return
    n = len(sched.decoding)
    groups = sched._decode_groups()  # one pass, or llama.cpp's passes of these slots
    arrivals = sched.arrivals
    if arrivals:  # steps only lengthen as contexts grow: bound by the first one's time
        arrival = arrivals[0][0]
        # Too close to this arrival for these sequences once: too close until it comes
        # (the steps left before it only get fewer), so skip the probe.
        key = (arrival, n, sched.sum_base)
        if key == sched.stretch_too_short:
            return
        first = sum(sched.step_time(0, 0, m, b + m * c) for m, b in groups)
        steps = min(steps, math.ceil((arrival - sched.t) / first))
        if steps < MIN_STRETCH:
            sched.stretch_too_short = key
            return
    durations = 0.0
    for m, b in groups:  # each pass's summed context over the steps, tokens
        start = b + m * c
        durations = durations + decode_steps(m, np.arange(start, start + m * steps, m, dtype=float))
    if not (durations > 0).all():  # also catches NaN
        bad = durations[~(durations > 0)][0]
        raise ValueError(
            f"step_time returned {bad!r} s for a decode step of {n} sequences; "
            "every step must last a finite time > 0 s"
        )
    starts = np.empty(steps)  # = t + [0, d0, d0 + d1, ...]
    starts[0] = 0.0
    np.cumsum(durations[:-1], out=starts[1:])
    starts += sched.t
    if arrivals:  # a step may only start before the next arrival joins the queue
        steps = int(starts.searchsorted(arrival, side="left"))
        if steps < MIN_STRETCH:
            sched.stretch_too_short = key
            return
    # Blocks: before the step with counter d, sequences whose need_at <= d get one.
    before = kv.in_use()
    change_at: list[int] = []  # step of the stretch (from 0) where blocks in use change
    in_use_after: list[int] = []  # blocks in use from that step on
    heap, end = sched.block_heap, c + steps
    epoch, base, finish_at, bs = sched.epoch, sched.base, sched.finish_at, sched.bs
    while heap and heap[0][0] < end:
        need_at, ep, i = heap[0]
        if ep != epoch[i]:
            heapq.heappop(heap)
            continue
        in_use = kv.in_use()
        if in_use >= kv.capacity and not kv.reserve(1):  # evicts cached prefixes
            steps = max(need_at - c, 0)  # the step-by-step loop preempts there
            break
        _grant_next_block(kv, heap, ep, i, base, finish_at, bs)
        change_at.append(max(need_at - c, 0))
        in_use_after.append(kv.in_use())
    if steps == 0:
        return
    # Blocks in use at each step: the value after the last change at or before it.
    rec_blocks, at_before, value = sched.rec_blocks, 0, before
    for at, after in zip(change_at, in_use_after, strict=True):
        if at >= steps:  # sorted: a change at the step the stretch stops before
            break
        rec_blocks.extend([value] * (at - at_before))
        at_before, value = at, after
    rec_blocks.extend([value] * (steps - at_before))
    ends = starts[:steps] + durations[:steps]
    sched.rec_time.extend(starts[:steps].tolist())
    sched.rec_dur.extend(durations[:steps].tolist())
    sched.record_run(steps, n, 0, n, 0, n, len(groups))
    sched.decode_end.extend(ends.tolist())
    sched.t = float(ends[-1])
    sched.decode_counter += steps


def run_singles(sched: DecodeState) -> None:
    """Run decode-only steps of ``sched`` one at a time, as the main loop would, until something
    happens: an arrival is due, the next step would finish a request, or a sequence needs
    a block that only a preemption could free.

    These are the steps too few for a vectorised stretch (``MIN_STRETCH``) before a finish
    or an arrival. Each is timed by the same scalar ``step_time`` call and added to the
    clock one by one, so the results are those of the main loop to the last bit; only its
    per-step bookkeeping (admission checks, batch building, a stretch attempt that could
    not succeed: it found fewer than ``MIN_STRETCH`` steps before this same event) is saved.

    Introduced in: notebooks/05_optimizations.ipynb
    """
    if not sched.decoding or sched.waiting or sched.prefilling:
        return
    arrivals, heap, kv = sched.arrivals, sched.block_heap, sched.kv
    next_arrival = arrivals[0][0] if arrivals else math.inf
    d, t = sched.decode_counter, sched.t
    last = sched.finish_heap[0][0] - 1  # the step from here finishes a request: not here
    if d >= last or next_arrival <= t:
        return
    n, step_time = len(sched.decoding), sched.step_time
    groups = sched._decode_groups()  # one pass, or llama.cpp's passes of these slots
    epoch, base, finish_at, bs = sched.epoch, sched.base, sched.finish_at, sched.bs
    used = kv.in_use()
    rec_time, rec_dur, rec_blocks = sched.rec_time, sched.rec_dur, sched.rec_blocks
    decode_end, steps = sched.decode_end, 0
    while d < last and next_arrival > t:
        # Blocks sequences grow into at this step (Scheduler._grow_decode_blocks, no preempting).
        granted = True
        while heap and heap[0][0] <= d:
            _, ep, i = heap[0]
            if ep != epoch[i]:
                heapq.heappop(heap)
                continue
            if used >= kv.capacity:
                if not kv.reserve(1):  # the main loop preempts here
                    granted = False
                    break
                used = kv.in_use()
            _grant_next_block(kv, heap, ep, i, base, finish_at, bs)
            used += 1
        if not granted:
            break
        duration = 0.0
        for m, b in groups:
            duration += step_time(0, 0, m, b + m * d, 0)
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
        sched.t, sched.decode_counter = t, d
        sched.record_run(steps, n, 0, n, 0, n, len(groups))


def _grant_next_block(kv, heap, ep, i, base, finish_at, bs) -> None:
    """Give sequence i, whose event ``(need_at, ep, i)`` tops the block heap, its next block
    (``kv.grant(i, 1)``, inlined), and move its event to the decode counter at which it needs
    the one after, or drop it when it finishes first (``Scheduler._push_block_event``)."""
    kv.private += 1
    blocks = kv.blocks
    blocks[i] += 1
    following = blocks[i] * bs - base[i]
    if following < finish_at[i]:
        heapq.heapreplace(heap, (following, ep, i))
    else:
        heapq.heappop(heap)
