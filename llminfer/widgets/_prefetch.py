"""Pictures made ahead, in a second process, for the values a learner is likely to pick next.

matplotlib needs 27–104 ms on this project's 2-core machine (more when it is busy) just to
make an explorer's unchanged figure into its PNG again (``benchmarks/bench_widgets.py``,
"floor"), and a learner's move also pays for new artists and the trip to the browser: a new
picture took 100–600 ms, against a budget of 150 ms. Drawing cannot get cheap enough in the kernel,
but it can happen *before* the move. While the learner reads a picture, worker processes
(``WORKERS``) draw the pictures one step away from the current values — each control
one step up and down, the next and previous option, a checkbox flipped — and the kernel keeps
them in the explorer's picture cache. A move to one of them shows its picture at once; any
other move is drawn in the kernel as before.

A worker builds its own copy of the explorer from the arguments the explorer was made
with, so its pictures are made by the same code from the same values. The workers start once
per kernel, on the first explorer, and only inside a Jupyter kernel (not in scripts or tests);
``LLMINFER_PREFETCH=0`` turns them off (``make test`` and ``make notebooks`` do). They exit with
the kernel.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
import weakref
from collections import OrderedDict
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

import ipywidgets as W

from llminfer.runtime import can_use_processes

#: Worker processes, each with its own copy of the explorers it draws for: two where there are
#: two cores (while a learner looks at a picture the kernel is idle; measured on 2 cores, two
#: workers beat one: p95 182 vs 201–210 ms with the older harness timing), one on one core.
WORKERS = max(1, min(2, os.cpu_count() or 1))
#: Explorers a worker keeps built (one per explorer the kernel made, most recent kept).
WORKER_EXPLORERS = 16
#: Seconds between the worker's checks that the kernel that started it is still alive.
PARENT_POLL_S = 1.0
#: Longest wait for a picture the worker is drawing when the learner asks for it.
WAIT_S = 2.0

_executor: ProcessPoolExecutor | None = None
_executor_lock = threading.Lock()


def enabled() -> bool:
    """Whether pictures are made ahead: inside a Jupyter kernel, unless LLMINFER_PREFETCH=0."""
    if os.environ.get("LLMINFER_PREFETCH", "1").strip() == "0":
        return False
    if not can_use_processes():  # Pyodide (or its emulation): every picture drawn in the kernel
        return False
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def executor() -> ProcessPoolExecutor:
    """This kernel's worker processes, started on first use."""
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = ProcessPoolExecutor(
                max_workers=WORKERS,
                # spawn: the kernel runs threads (ZeroMQ), which a fork would copy mid-state.
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_start_worker,
                initargs=(os.getpid(),),
            )
        return _executor


def neighbours(controls: dict[str, W.ValueWidget]) -> list[dict[str, Any]]:
    """The control values one step away from the current ones: each control moved by one
    step each way (an integer slider by its step within its range, a list of options to the
    next and previous option, a checkbox flipped), the others unchanged."""
    current = {name: control.value for name, control in controls.items()}
    out = []
    for name, control in controls.items():
        for value in steps(control):
            out.append({**current, name: value})
    return out


def steps(control: W.ValueWidget) -> list[Any]:
    """The values one step from a control's own: up (or next) first, then down (previous)."""
    if isinstance(control, W.Checkbox):
        return [not control.value]
    options = getattr(control, "options", None)
    if options:
        values = [o[1] if isinstance(o, tuple) and len(o) == 2 else o for o in options]
        try:
            i = values.index(control.value)
        except ValueError:
            return []
        return [values[j] for j in (i + 1, i - 1) if 0 <= j < len(values)]
    if isinstance(control, W.IntSlider | W.BoundedIntText):
        step = control.step or 1
        return [
            v
            for v in (control.value + step, control.value - step)
            if control.min <= v <= control.max
        ]
    return []


# --- in the worker process ------------------------------------------------------------------

_explorers: OrderedDict[str, Any] = OrderedDict()


def _start_worker(parent_pid: int) -> None:
    os.environ["LLMINFER_PREFETCH"] = "0"  # the worker's own explorers make nothing ahead

    def watch() -> None:  # a killed kernel leaves no worker behind
        while True:
            time.sleep(PARENT_POLL_S)
            if os.getppid() != parent_pid:
                os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


def render(
    token: str, cls_module: str, cls_name: str, arguments: dict, values: dict, language: str = "en"
) -> bytes | None:
    """In the worker: the PNG the explorer shows for ``values`` (None when it shows an error),
    in the kernel's ``language`` (a spawned worker does not inherit ``set_language``)."""
    from llminfer.language import set_language

    set_language(language)
    explorer = _explorers.get(token)
    if explorer is None:
        import importlib

        cls = getattr(importlib.import_module(cls_module), cls_name)
        explorer = cls(**arguments)
        _explorers[token] = explorer
        while len(_explorers) > WORKER_EXPLORERS:
            _explorers.popitem(last=False)
    _explorers.move_to_end(token)
    explorer._set_quietly(values)
    explorer.update()
    # bytes(): a widget's value may be held as a memoryview, which does not pickle.
    return None if explorer.error is not None else bytes(explorer._image.value)


def submit(token: str, explorer: Any, arguments: dict, values: dict) -> Future | None:
    """Ask the worker for the picture of ``values``; None when it cannot be asked."""
    from llminfer.language import get_language

    cls = type(explorer)
    try:
        return executor().submit(
            render, token, cls.__module__, cls.__qualname__, arguments, values, get_language()
        )
    except Exception:  # no worker (a broken pool, arguments that cannot be pickled): draw here
        return None


# --- which picture next: newest wishes first ------------------------------------------------

#: Pictures waiting to be asked for, across the kernel's explorers (the oldest are dropped).
MAX_WAITING = 64
_waiting: list[tuple[weakref.ref, tuple, dict]] = []
_in_flight: set[Future] = set()
_queue_lock = threading.Lock()


def ask(explorer: Any, wanted: dict[tuple, dict], first: bool = True) -> None:
    """Queue the pictures ``wanted`` (key → control values) of ``explorer``: ``first`` after
    a learner's move (the values just reached are the likeliest next, ahead of every older
    wish), last for a new explorer (explorers are met in the order a notebook makes them).
    A worker gets one picture at a time, so a new wish never waits behind a backlog."""
    with _queue_lock:
        _waiting[:] = [w for w in _waiting if not (w[0]() is explorer and w[1] in wanted)]
        wishes = [(weakref.ref(explorer), key, values) for key, values in wanted.items()]
        if first:
            _waiting[:0] = wishes
        else:
            _waiting.extend(wishes)
        del _waiting[MAX_WAITING:]
    _next()


def _next(_finished: Future | None = None) -> None:
    """Send the first waiting pictures to the workers that are free."""
    sent = []
    with _queue_lock:
        _in_flight.discard(_finished)
        while _waiting and len(_in_flight) < WORKERS:
            ref, key, values = _waiting.pop(0)
            explorer = ref()
            if explorer is None or key in explorer._ahead or key in explorer._pictures:
                continue
            job = submit(explorer._token, explorer, explorer._arguments, values)
            if job is None:
                _waiting.clear()
                break
            explorer._ahead[key] = job
            _in_flight.add(job)
            sent.append(job)
    for job in sent:
        job.add_done_callback(_next)
