"""llminfer: why LLM inference is fast or slow — formulas, simulations, log analytics.

Importing llminfer runs nothing and loads nothing but this index: each name below is imported
from its module the first time it is used (PEP 562), so ``python -m llminfer metrics`` loads
the log modules only (~0.2 s less start-up) and ``import llminfer`` stays cheap. matplotlib and
ipywidgets load only with ``llminfer.plots`` and ``llminfer.widgets``.

The package is laid out like the book, one subpackage per part, imports pointing one way (an
import-linter contract in ``make test`` keeps it so; see ``.importlinter``):

- ``specs``: what the hardware, the model and an engine's kernels are (``GPU``, ``Model``,
  ``StepModel``, presets);
- ``cost`` (chapters 2, 4): memory budget, FLOPs and bytes of a step, the realistic step time,
  latency estimates, calibration, the numpy toy transformer;
- ``logs`` (chapters 3, 6): reading request logs and tool exports, metrics, summaries, SQL;
  depends on no model part;
- ``sim`` (chapters 3, 5): workloads, the scheduler, the simulated engine, sweeps, techniques;
- ``diagnose`` (chapter 7): the troubleshooting procedure, its signals and case studies;
- ``bench``, ``serve`` (chapter 8): a load generator and a toy server;
- ``plots``, ``widgets``, ``exercises``, ``cli``: what a learner sees and types.
"""

from __future__ import annotations

import importlib

# Each name, from the module that defines it. simulate() and diagnose() are not listed: import
# them from their parts of the book (``from llminfer.sim.simulate import simulate``,
# ``from llminfer.diagnose import diagnose``), so ``llminfer.diagnose`` keeps meaning the part.
_EXPORTS: dict[str, tuple[str, ...]] = {
    "cost.calibration": ("calibrate", "compare_measurements", "read_measurements"),
    "cost.flash": ("attention_hbm_bytes",),
    "cost.latency": ("Estimate", "estimate_latency", "feasibility"),
    "cost.memory": (
        "MemoryPlan",
        "kv_bytes_per_token",
        "kv_cache_bytes",
        "kv_cache_gib",
        "kv_capacity_tokens",
        "max_concurrency",
        "plan_memory",
        "weight_bytes",
    ),
    "cost.roofline": (
        "Cost",
        "arithmetic_intensity",
        "attended_pairs",
        "bound",
        "ridge_point",
        "step_cost",
    ),
    "cost.steptime": ("StepTimer", "step_timer"),
    "diagnose.findings": ("Diagnosis", "Finding"),
    "language": ("get_language", "set_language"),
    "logs.definitions": ("compare_definitions",),
    "logs.grouped": ("GroupedSummary",),
    "logs.importers": ("ToolSummary", "read_summary"),
    "logs.logstream": ("summarize_stream",),
    "logs.metrics": ("percentile", "request_metrics"),
    "logs.quantiles": ("select_percentiles",),
    "logs.reading": ("read_requests",),
    "logs.schema": ("ARTICLE_COLUMNS", "RequestLog"),
    "logs.sql": ("METRICS_SQL", "run_metrics_sql"),
    "logs.summary": ("Summary", "summarize"),
    "sim.engines": ("EngineConfig",),
    "sim.loadsweep": ("max_goodput", "sweep"),
    "sim.simulate": ("SimResult",),
    "sim.workload": ("Workload",),
    "specs.hardware": ("GPU", "measure_machine"),
    "specs.models": ("Model", "check_tensor_parallel", "tensor_parallel_sizes"),
    "specs.presets": ("get_gpu", "get_model", "list_gpus", "list_models"),
    "specs.stepmodel": ("DEFAULT_STEP_MODEL", "StepModel"),
    "units": ("bytes_per_element", "format_bytes"),
}
_HOME = {name: module for module, names in _EXPORTS.items() for name in names}

__version__ = "0.1.0"

__all__ = sorted(_HOME)


def __getattr__(name: str):
    """An exported name, imported from its module on first use; else a submodule by name."""
    if name in _HOME:
        value = getattr(importlib.import_module(f"llminfer.{_HOME[name]}"), name)
        globals()[name] = value  # later lookups are plain attribute reads
        return value
    try:
        return importlib.import_module(f"llminfer.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"llminfer.{name}":
            raise
        raise AttributeError(f"module 'llminfer' has no attribute {name!r}") from None


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
