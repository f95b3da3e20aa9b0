"""llminfer: why LLM inference is fast or slow — formulas, simulations, log analytics.

Importing llminfer runs nothing and pulls in neither matplotlib nor ipywidgets; those load
only with ``llminfer.plots`` and ``llminfer.widgets``.
"""

# Like simulate(), diagnose() stays in its module (llminfer.diagnose) so the name keeps
# meaning the module; its report types are re-exported.
from llminfer.findings import Diagnosis, Finding
from llminfer.flash import attention_hbm_bytes
from llminfer.hardware import GPU, measure_machine
from llminfer.importers import ToolSummary, read_summary
from llminfer.latency import Estimate, estimate_latency
from llminfer.logs import ARTICLE_COLUMNS, RequestLog, read_requests
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
from llminfer.metrics import (
    Summary,
    compare_definitions,
    percentile,
    request_metrics,
    summarize,
)
from llminfer.models import Model, check_tensor_parallel, tensor_parallel_sizes
from llminfer.presets import get_gpu, get_model, list_gpus, list_models
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
from llminfer.simulate import EngineConfig, SimResult, Workload, max_goodput, sweep
from llminfer.units import bytes_per_element, format_bytes

__version__ = "0.1.0"

__all__ = [
    "ARTICLE_COLUMNS",
    "GPU",
    "Cost",
    "Diagnosis",
    "EngineConfig",
    "Estimate",
    "Finding",
    "MemoryPlan",
    "Model",
    "RequestLog",
    "SimResult",
    "StepTimer",
    "Summary",
    "ToolSummary",
    "Workload",
    "arithmetic_intensity",
    "attended_pairs",
    "attention_hbm_bytes",
    "bound",
    "bytes_per_element",
    "check_tensor_parallel",
    "compare_definitions",
    "estimate_latency",
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
    "read_requests",
    "read_summary",
    "request_metrics",
    "ridge_point",
    "step_cost",
    "step_timer",
    "summarize",
    "sweep",
    "tensor_parallel_sizes",
    "weight_bytes",
]
