"""llminfer: why LLM inference is fast or slow — formulas, simulations, log analytics.

Importing llminfer runs nothing and pulls in neither matplotlib nor ipywidgets; those load
only with ``llminfer.plots`` and ``llminfer.widgets``.
"""

# Like simulate(), diagnose() stays in its module (llminfer.diagnose) so the name keeps
# meaning the module; its report types are re-exported.
from llminfer.calibration import calibrate, compare_measurements, read_measurements
from llminfer.definitions import compare_definitions
from llminfer.findings import Diagnosis, Finding
from llminfer.flash import attention_hbm_bytes
from llminfer.hardware import GPU, measure_machine
from llminfer.importers import ToolSummary, read_summary
from llminfer.latency import Estimate, estimate_latency, feasibility
from llminfer.loadsweep import max_goodput, sweep
from llminfer.logs import ARTICLE_COLUMNS, RequestLog, read_requests
from llminfer.logsets import GroupedSummary
from llminfer.logstream import summarize_stream
from llminfer.memory import (
    MemoryPlan,
    kv_bytes_per_token,
    kv_cache_bytes,
    kv_cache_gib,
    kv_capacity_tokens,
    max_concurrency,
    plan_memory,
    weight_bytes,
)
from llminfer.metrics import Summary, percentile, request_metrics, summarize
from llminfer.models import Model, check_tensor_parallel, tensor_parallel_sizes
from llminfer.presets import get_gpu, get_model, list_gpus, list_models
from llminfer.quantiles import select_percentiles
from llminfer.roofline import (
    Cost,
    StepTimer,
    arithmetic_intensity,
    attended_pairs,
    bound,
    ridge_point,
    step_cost,
    step_timer,
)

# The simulate() function stays in llminfer.simulate: re-exporting it here would shadow the
# submodule, so `from llminfer import simulate` always gives the module.
from llminfer.simulate import EngineConfig, SimResult, Workload
from llminfer.sql import METRICS_SQL, run_metrics_sql
from llminfer.steptime import DEFAULT_STEP_MODEL, StepModel
from llminfer.units import bytes_per_element, format_bytes

__version__ = "0.1.0"

__all__ = [
    "ARTICLE_COLUMNS",
    "DEFAULT_STEP_MODEL",
    "GPU",
    "METRICS_SQL",
    "Cost",
    "Diagnosis",
    "EngineConfig",
    "Estimate",
    "Finding",
    "GroupedSummary",
    "MemoryPlan",
    "Model",
    "RequestLog",
    "SimResult",
    "StepModel",
    "StepTimer",
    "Summary",
    "ToolSummary",
    "Workload",
    "arithmetic_intensity",
    "attended_pairs",
    "attention_hbm_bytes",
    "bound",
    "bytes_per_element",
    "calibrate",
    "check_tensor_parallel",
    "compare_definitions",
    "compare_measurements",
    "estimate_latency",
    "feasibility",
    "format_bytes",
    "get_gpu",
    "get_model",
    "kv_bytes_per_token",
    "kv_cache_bytes",
    "kv_cache_gib",
    "kv_capacity_tokens",
    "list_gpus",
    "list_models",
    "max_concurrency",
    "max_goodput",
    "measure_machine",
    "percentile",
    "plan_memory",
    "read_measurements",
    "read_requests",
    "read_summary",
    "request_metrics",
    "ridge_point",
    "run_metrics_sql",
    "select_percentiles",
    "step_cost",
    "step_timer",
    "summarize",
    "summarize_stream",
    "sweep",
    "tensor_parallel_sizes",
    "weight_bytes",
]
