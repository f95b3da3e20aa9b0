"""How a request reaches the scheduler of ``llminfer.sim.scheduler.Scheduler`` (internal).

Between a client's send and the step that first schedules a request, a real server spends
time in three places, each measured on a server we serve or run:

- the load generator sends one request at a time (``Workload.send_gap_s``);
- the server's front end handles each request (``Workload.request_latency_s``) on
  ``Workload.request_handlers`` at once: 1 for the toy server's single event loop, a pool of
  HTTP threads for llama.cpp's ``llama-server``;
- the engine sees it only at a step end (``EngineConfig.handoff_steps``: the toy server's event
  loop needs a few turns per request), and its own thread may spend time setting each new
  request up before the step (``EngineConfig.request_setup_s``: llama.cpp's task loop), during
  which later arrivals are set up too and join the same step.

``send`` and ``admit_arrivals`` read and advance the scheduler's state; ``Scheduler`` (which
imports this module) takes them as methods.
"""

from __future__ import annotations

import heapq
from collections import deque
from typing import Protocol


class ArrivalState(Protocol):
    """The scheduler state the arrival functions read and advance (see ``Scheduler``).

    Introduced in: notebooks/05_optimizations.ipynb
    """

    t: float  # simulated time now, s
    arrival: list[float]  # each request's send time (the log's start_ts), s
    arrivals: list[tuple[float, int]]  # heap: (when the engine can see it, s; request)
    waiting: deque[int]  # the scheduler's queue
    running: dict[int, None]
    handing: list[list[int]]  # [step ends still to wait, request]
    rec_dur: list[float]  # one entry per step so far, s
    steps_seen: int  # step ends counted by the hand-over so far
    send_gap: float  # Workload.send_gap_s, s
    last_send: float  # when the last request was sent, s
    latency: float  # Workload.request_latency_s, s
    handler_free: list[float] | None  # heap: when each handler is next free, s; None: unlimited
    handoff: int  # EngineConfig.handoff_steps
    setup: float  # EngineConfig.request_setup_s, s


def send(sched: ArrivalState, i: int, ready_s: float) -> None:
    """Request i is ready to go at ``ready_s``: it is sent then or ``send_gap`` after the
    previous send, whichever is later; the server handles it (``latency`` seconds) from then
    or once one of its ``request_handlers`` is free, and then it reaches the engine.

    Introduced in: notebooks/05_optimizations.ipynb
    """
    sent = max(ready_s, sched.last_send + sched.send_gap) if sched.send_gap else ready_s
    sched.last_send = sent
    sched.arrival[i] = sent
    if sched.latency and sched.handler_free is None:
        heapq.heappush(sched.arrivals, (sent + sched.latency, i))
    elif sched.latency:  # the handler free first takes it
        handled = max(sent, heapq.heappop(sched.handler_free)) + sched.latency
        heapq.heappush(sched.handler_free, handled)
        heapq.heappush(sched.arrivals, (handled, i))
    else:
        heapq.heappush(sched.arrivals, (sent, i))


def admit_arrivals(sched: ArrivalState) -> None:
    """Before a step: the requests handed over by now join the queue (after ``handoff_steps``
    step ends where the engine was busy), and with ``request_setup_s`` the engine's thread sets
    each new one up first, taking those that arrive meanwhile in the same pass. (With both
    ``handoff_steps`` > 1 and setup, an arrival during setup is held as one that came during
    a step: no server we model has both.)

    Introduced in: notebooks/05_optimizations.ipynb
    """
    queued = len(sched.waiting)
    if sched.handoff:
        _hand_over(sched)
    # busy before these arrivals: requests that reach an idle engine together all go in
    busy = bool(sched.running or sched.waiting)
    _take_arrivals(sched, busy)
    fresh = len(sched.waiting) - queued
    while sched.setup and fresh > 0:
        sched.t += fresh * sched.setup
        queued = len(sched.waiting)
        _take_arrivals(sched, busy)
        fresh = len(sched.waiting) - queued


def _take_arrivals(sched: ArrivalState, busy: bool) -> None:
    """Requests that have reached the engine by now join the queue, or with
    ``handoff_steps`` the hand-over when the engine was ``busy`` (mid-step)."""
    while sched.arrivals and sched.arrivals[0][0] <= sched.t:
        _, i = heapq.heappop(sched.arrivals)
        if sched.handoff > 1 and busy:
            # it arrived during the step that just ended: one step end already passed
            sched.handing.append([sched.handoff - 1, i])
        else:
            sched.waiting.append(i)


def _hand_over(sched: ArrivalState) -> None:
    """Count the step ends since the last call against the requests being handed over
    (``EngineConfig.handoff_steps``); those done, or all of them when the engine has nothing
    to run (its loop then turns freely), join the queue in arrival order."""
    ended, sched.steps_seen = len(sched.rec_dur) - sched.steps_seen, len(sched.rec_dur)
    if not sched.handing:
        return
    idle = not sched.running and not sched.waiting
    still = []
    for entry in sched.handing:
        entry[0] -= ended
        if entry[0] <= 0 or idle:
            sched.waiting.append(entry[1])
        else:
            still.append(entry)
    sched.handing = still
