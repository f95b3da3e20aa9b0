"""Chapter 7: read a request log (and a server's ``/metrics``) and name the bottleneck, in order.

Step 0, ``measurement.measurement_step(log)``, asks whether the measurement itself is sound
(clocks, warm-up, drain, the load generator) before ``diagnose`` reads the log, and
``measurement.load_sweep(logs, slo)`` turns one log per offered load into the sweep that names
the capacity. ``diagnose(log, ...)`` (``run``) walks the procedure — workload, failures,
memory, queueing, prefill, decode, saturation — over what one log shows (``observations``,
from the per-request and per-window ``signals``), with every threshold in ``procedure``; the
steps are
``load_steps`` and ``latency_steps``, their results ``findings``, the cures ``suggestions``
(fitted to the ``deployment``). ``scrape`` reads a vLLM ``/metrics`` text; ``cases`` holds the
simulated case studies of notebook 07. Builds on ``llminfer.sim``, ``llminfer.cost`` and
``llminfer.logs``. Used by notebook 07 (and 08).

``diagnose``, ``remeasure``, ``Diagnosis`` and ``Finding`` are importable from here; each is
imported from its module on first use, so importing ``llminfer.diagnose.scrape`` alone stays
cheap.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "diagnose": "run",
    "remeasure": "run",
    "Diagnosis": "findings",
    "Finding": "findings",
    "measurement_step": "measurement",
    "load_sweep": "measurement",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
