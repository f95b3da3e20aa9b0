"""What one log shows, measured once and shared by chapter 7's troubleshooting steps.

``Observations`` holds the request log's metrics and signals (``llminfer.diagnose.signals``:
requests
decoding together, prefill work overlapping each decode, work ahead at arrival, time windows,
stalls in the token streams), the latency targets, the deployment when known, and which p90
misses its target. The steps in ``llminfer.diagnose.load_steps`` and
``llminfer.diagnose.latency_steps`` read it
and return one ``Finding`` each; ``llminfer.diagnose`` builds it.
"""

from __future__ import annotations

import os
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pandas as pd

from llminfer.diagnose.findings import Finding
from llminfer.diagnose.procedure import (
    ALONE_MIN,
    CLOSED_LOOP_GAP_S,
    CLOSED_LOOP_SHARE,
    LOCKSTEP_SINGLE_PERCENTILE,
)
from llminfer.diagnose.scrape import ServerMetrics
from llminfer.diagnose.signals import (
    closed_loop_share,
    completion_rate,
    decode_stalls,
    decoding_together,
    in_flight_peak,
    overlapping_prefill_tokens,
    time_windows,
    work_ahead,
)
from llminfer.diagnose.sorted_times import SortedTimes
from llminfer.diagnose.suggestions import Setup, suggest
from llminfer.language import N_, _
from llminfer.logs.metrics import STALL_FACTOR
from llminfer.logs.quantiles import select_percentiles
from llminfer.logs.schema import RequestLog
from llminfer.runtime import can_use_threads
from llminfer.sim.engines import EngineConfig
from llminfer.specs.hardware import GPU
from llminfer.specs.models import Model

#: Threads the signals run on: the cores numpy's GIL-free loops can use (two here).
_THREADS = max(1, min(4, os.cpu_count() or 1))


class _SerialPool:
    """``ThreadPoolExecutor``'s ``map``/``submit`` done in the calling thread, at once."""

    def __enter__(self) -> _SerialPool:
        return self

    def __exit__(self, *exc) -> None:
        return None

    def map(self, fn, *iterables):
        return [fn(*args) for args in zip(*iterables, strict=True)]

    def submit(self, fn, *args, **kwargs) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # re-raised by .result(), as a thread pool's future does
            future.set_exception(exc)
        return future


def _pool(threads: bool | None = None) -> ThreadPoolExecutor | _SerialPool:
    """Threads for the signals where threads can start (``llminfer.runtime``), else none."""
    if threads is None:
        threads = can_use_threads()
    return ThreadPoolExecutor(max_workers=_THREADS) if threads else _SerialPool()


def finite_percentile(values: np.ndarray, q: float) -> float:
    """The ``q``-th percentile (``q`` in 0–100, numpy's linear interpolation) of the finite
    values, NaN when there are none: a step reads p50/p90 of whatever the log measured.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    values = np.asarray(values, float)
    finite = values[np.isfinite(values)]  # a fresh array: selected in place, not copied again
    if not finite.size:
        return float("nan")
    # Selection on the two ranks needed, bit for bit np.percentile (~5× faster on 10 M values).
    return float(select_percentiles(finite, [q], overwrite_input=True)[0])


@dataclass
class Observations:
    """Everything the steps share: the log's metrics and signals, targets and deployment.

    Built once per ``diagnose()`` call from ``request_metrics(log)`` (``m``) and the mask of
    successful requests (``ok``); arrays such as ``ttft``/``tpot`` (s), ``prompts`` (tokens),
    ``decoding`` and ``overlap`` hold the successful requests only. ``missed`` maps ``"ttft"``
    and/or ``"tpot"`` to the p90 (s) that misses its target in ``slo``.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """

    log: RequestLog
    m: pd.DataFrame
    ok: np.ndarray
    slo: dict[str, float]
    model: Model | None
    gpu: GPU | None
    engine: EngineConfig | None
    n_gpus: int
    replicas: int
    weight_dtype: str
    kv_dtype: str
    server: ServerMetrics | None
    engine_kind: str = "vllm"

    def __post_init__(self) -> None:
        m, ok = self.m, self.ok
        self.good = m if ok.all() else m[ok]  # read only: no copy of an all-ok table
        self.n_ok = int(ok.sum())
        self.ttft = self.good["ttft_s"].to_numpy(float)
        self.tpot = self.good["tpot_s"].to_numpy(float)
        self.prompts = self.good["input_tokens"].to_numpy(float)
        self.ttft_p90 = finite_percentile(self.ttft, 90)
        self.tpot_p90 = finite_percentile(self.tpot, 90)
        self.missed: dict[str, float] = {}
        if self.ttft_p90 > self.slo["ttft_s"]:
            self.missed["ttft"] = self.ttft_p90
        if self.tpot_p90 > self.slo["tpot_s"]:
            self.missed["tpot"] = self.tpot_p90
        if self.n_ok < 3:
            return
        # Every signal below counts events before an instant: sort each kind of event time
        # once and share the sorts (a log of 10 M requests spends its time in them).
        # numpy releases the GIL in its sorts, searches and array arithmetic, so the signals run
        # on two threads (10 M requests: ~11 s → ~7 s on two cores): the prefill overlap (the
        # one needing most memory) on one, the others one after another on the second, so at
        # most two signals' temporaries are alive at once. The sorts they share are made
        # first, so no two threads make the same one; results do not depend on threads.
        times = SortedTimes(m)
        names = ["start", "first", "end"] + (["scheduled"] if times.scheduled is not None else [])
        good_times = times.subset(ok)
        # Where there are no threads (Pyodide, LLMINFER_EMULATE_PYODIDE=1) the same calls run
        # one after another on a pool of none: same order of the shared sorts, same results.
        with _pool() as pool:
            list(pool.map(times.order, names))
            list(pool.map(good_times.order, names))
            overlap_job = pool.submit(overlapping_prefill_tokens, self.good, good_times)
            decoding = decoding_together(m, times)
            self.windows = time_windows(m, ok, self.slo, decoding=decoding, times=times)
            ahead_count, ahead_tokens = work_ahead(m, times)
            self.overlap = overlap_job.result()
        self.decoding = decoding[ok]
        del times, good_times, decoding
        self.ahead_count, self.ahead_tokens = ahead_count[ok], ahead_tokens[ok]
        self.queue = self.good["queue_s"].to_numpy(float) if "queue_s" in self.good else None
        self.own = self._own_prefill()
        stalls = decode_stalls(self.log.requests, m, STALL_FACTOR)
        self.stalls = None if stalls is None else stalls[ok]
        self.in_flight_peak = in_flight_peak(m)
        self.closed_loop_share = closed_loop_share(m, CLOSED_LOOP_GAP_S)
        self.slots = None if self.engine is None else int(self.engine.max_num_seqs)
        self.lockstep = self._lockstep()

    @property
    def closed_loop(self) -> bool:
        """Requests arrive as others end (``CLOSED_LOOP_SHARE``): the load is a closed loop of
        ``in_flight_peak`` users."""
        return self.closed_loop_share >= CLOSED_LOOP_SHARE

    @property
    def slot_limited(self) -> bool:
        """A closed loop of more users than the server has slots: some wait for a slot."""
        return self.slots is not None and self.closed_loop and self.in_flight_peak > self.slots

    def _lockstep(self) -> dict | None:
        """Evidence that TTFT misses because requests sent together wait for each other's
        prefill (a closed loop in step), not for a slot: the slots are known, no more requests
        are ever in flight than there are slots in a closed loop, most requests arrive with
        others' prefill ahead of them, and a request with nobody ahead (one prefill alone) meets
        the TTFT target. None otherwise."""
        target = self.slo["ttft_s"]
        if "ttft" not in self.missed or self.slots is None or not self.closed_loop:
            return None
        if self.in_flight_peak > self.slots or not finite_percentile(self.ahead_count, 50) >= 1:
            return None
        alone = self.ahead_count < 1
        single = (
            finite_percentile(self.ttft[alone], 50)
            if alone.sum() >= 3
            else finite_percentile(self.ttft, LOCKSTEP_SINGLE_PERCENTILE)
        )
        if not single < target or not single > 0:
            return None
        p50 = self.percentile(self.ttft, 50)
        return {
            "in_flight_peak": self.in_flight_peak,
            "slots": self.slots,
            "closed_loop_share": self.closed_loop_share,
            "single_prefill_s": single,
            "ttft_p50_s": p50,
            "ttft_p50_in_single_prefills": p50 / single,
            "ahead_at_arrival_p50": finite_percentile(self.ahead_count, 50),
        }

    def percentile(self, values: np.ndarray, q: float) -> float:
        """``finite_percentile(values, q)``, worked out once per array and ``q``: the steps
        ask for the same medians of 10 M-element arrays several times."""
        cache = self.__dict__.setdefault("_percentiles", {})
        key = (id(values), q)
        if key not in cache or cache[key][0] is not values:
            cache[key] = (values, finite_percentile(values, q))
        return cache[key][1]

    @property
    def deployment_known(self) -> bool:
        return self.model is not None and self.gpu is not None

    def setup(self) -> Setup:
        return Setup(
            engine=self.engine,
            n_gpus=self.n_gpus,
            replicas=self.replicas,
            weight_dtype=self.weight_dtype,
            kv_dtype=self.kv_dtype,
            tpot_misses="tpot" in self.missed,
            decoding_p50=self.percentile(self.decoding, 50),
            engine_kind=self.engine_kind,
            slot_limited=self.n_ok >= 3 and self.slot_limited,
        )

    def _own_prefill(self) -> np.ndarray | None:
        """Each request's own prefill time (s): measured with ``scheduled_ts``; else TTFT less
        the wait, modelled from the requests that arrived to an empty queue (TTFT against
        prompt length, a least-squares line); None when too few arrived alone."""
        if self.queue is not None:
            return self.good["prefill_s"].to_numpy(float)
        alone = self.ahead_count < 1
        if alone.sum() < ALONE_MIN:
            return None
        x, y = self.prompts[alone], self.ttft[alone]
        keep = np.isfinite(x) & np.isfinite(y)
        if np.ptp(x[keep]) > 0:
            slope, intercept = np.polyfit(x[keep], y[keep], 1)
            slope = max(slope, 0.0)
        else:
            slope, intercept = 0.0, float(np.median(y[keep]))
        return np.minimum(np.maximum(slope * self.prompts + intercept, 0.0), self.ttft)

    def overloaded_windows(self) -> pd.DataFrame:
        w = self.windows
        if w.empty:
            return w
        return w[w["overloaded"] & (w["ttft_p90_s"] > self.slo["ttft_s"])]

    def suggestions(self, cause: str, detail: str = ""):
        return suggest(cause, self.setup(), detail)

    def too_few(self, step: str, need: int, what: str = N_("successful requests")) -> Finding:
        """A "can't tell" finding for ``step``: fewer than ``need`` ``what`` (English, marked for
        the catalog; the finding says it in the learner's language)."""
        what = _(what)
        return Finding(
            step,
            "cant_tell",
            {},
            _(
                "only {n} {what}; this step needs at least {need} (p90 from fewer rests on a "
                "handful of values)"
            ).format(n=self.n_ok, what=what, need=need),
            missing=(_("at least {need} {what}").format(need=need, what=what),),
            samples=self.n_ok,
            min_requests=need,
        )

    def slow_share(self, stage: np.ndarray) -> float:
        """Of the slow requests (TTFT above the target), the share whose TTFT is mostly ``stage``
        (more than half of it)."""
        slow = (self.ttft > self.slo["ttft_s"]) & np.isfinite(stage)
        return float((stage[slow] > self.ttft[slow] / 2).mean()) if slow.any() else float("nan")

    def rates(self) -> tuple[float, float]:
        """Served rate over the middle 80 % of completions, and the offered rate (requests/s)."""
        start = self.m["start_ts"].to_numpy(float)
        span = float(np.nanmax(start) - np.nanmin(start))
        offered = (len(self.m) - 1) / span if span > 0 else float("inf")
        return completion_rate(self.good["end_ts"].to_numpy(float)), offered
