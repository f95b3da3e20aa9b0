"""llminfer: why LLM inference is fast or slow — formulas, simulations, log analytics.

Importing llminfer runs nothing and loads nothing but this index: each name below is imported
from its module the first time it is used (PEP 562), so ``python -m llminfer metrics`` loads
the log modules only (~0.2 s less start-up) and ``import llminfer`` stays cheap. matplotlib and
ipywidgets load only with ``llminfer.plots`` and ``llminfer.widgets``.
"""

from __future__ import annotations

import importlib

# Like simulate(), diagnose() stays in its module (llminfer.diagnose) so the name keeps
# meaning the module; its report types are re-exported. Re-exporting simulate() here would
# shadow the submodule, so `from llminfer import simulate` always gives the module.
_EXPORTS: dict[str, tuple[str, ...]] = {
    "calibration": (
        "calibrate",
        "compare_measurements",
        "read_measurements",
    ),
    "definitions": ("compare_definitions",),
    "findings": (
        "Diagnosis",
        "Finding",
    ),
    "flash": ("attention_hbm_bytes",),
    "hardware": (
        "GPU",
        "measure_machine",
    ),
    "importers": (
        "ToolSummary",
        "read_summary",
    ),
    "latency": (
        "Estimate",
        "estimate_latency",
        "feasibility",
    ),
    "loadsweep": (
        "max_goodput",
        "sweep",
    ),
    "logs": (
        "ARTICLE_COLUMNS",
        "RequestLog",
        "read_requests",
    ),
    "logsets": ("GroupedSummary",),
    "logstream": ("summarize_stream",),
    "memory": (
        "MemoryPlan",
        "kv_bytes_per_token",
        "kv_cache_bytes",
        "kv_cache_gib",
        "kv_capacity_tokens",
        "max_concurrency",
        "plan_memory",
        "weight_bytes",
    ),
    "metrics": (
        "Summary",
        "percentile",
        "request_metrics",
        "summarize",
    ),
    "models": (
        "Model",
        "check_tensor_parallel",
        "tensor_parallel_sizes",
    ),
    "presets": (
        "get_gpu",
        "get_model",
        "list_gpus",
        "list_models",
    ),
    "quantiles": ("select_percentiles",),
    "roofline": (
        "Cost",
        "StepTimer",
        "arithmetic_intensity",
        "attended_pairs",
        "bound",
        "ridge_point",
        "step_cost",
        "step_timer",
    ),
    "simulate": (
        "EngineConfig",
        "SimResult",
        "Workload",
    ),
    "sql": (
        "METRICS_SQL",
        "run_metrics_sql",
    ),
    "steptime": (
        "DEFAULT_STEP_MODEL",
        "StepModel",
    ),
    "units": (
        "bytes_per_element",
        "format_bytes",
    ),
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
