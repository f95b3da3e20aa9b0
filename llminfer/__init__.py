"""llminfer: why LLM inference is fast or slow — formulas, simulations, log analytics.

Importing llminfer runs nothing and pulls in neither matplotlib nor ipywidgets; those load
only with ``llminfer.plots`` and ``llminfer.widgets``.
"""

from llminfer.hardware import GPU
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
from llminfer.models import Model
from llminfer.presets import get_gpu, get_model, list_gpus, list_models

# The simulate() function stays in llminfer.simulate: re-exporting it here would shadow the
# submodule, so `from llminfer import simulate` always gives the module.
from llminfer.simulate import EngineConfig, SimResult, Workload, max_goodput, sweep
from llminfer.units import bytes_per_element, format_bytes

__version__ = "0.1.0"

__all__ = [
    "GPU",
    "EngineConfig",
    "MemoryPlan",
    "Model",
    "SimResult",
    "Workload",
    "bytes_per_element",
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
    "plan_memory",
    "sweep",
    "weight_bytes",
]
