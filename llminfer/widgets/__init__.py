"""Interactive explorers for the notebooks, each built on llminfer's pure functions.

Every explorer exposes ``.controls`` (name → ipywidget), ``.result`` (the latest computed
value), ``.figure`` and ``.error``; display it in a notebook to get the sliders.
"""

from llminfer.widgets._explorer import Explorer
from llminfer.widgets.diagnose import DiagnosisExplorer
from llminfer.widgets.logs import SLOExplorer
from llminfer.widgets.memory import MemoryExplorer
from llminfer.widgets.moe import ExpertsExplorer, MoEServingExplorer
from llminfer.widgets.roofline import RequestJourney, RooflineExplorer
from llminfer.widgets.simulate import BatchingExplorer, LoadExplorer
from llminfer.widgets.techniques import (
    DisaggregationExplorer,
    PagingExplorer,
    PrefixCacheExplorer,
    QuantizationExplorer,
    SpeculativeExplorer,
    TensorParallelExplorer,
)

__all__ = [
    "BatchingExplorer",
    "DiagnosisExplorer",
    "DisaggregationExplorer",
    "ExpertsExplorer",
    "Explorer",
    "LoadExplorer",
    "MemoryExplorer",
    "MoEServingExplorer",
    "PagingExplorer",
    "PrefixCacheExplorer",
    "QuantizationExplorer",
    "RequestJourney",
    "RooflineExplorer",
    "SLOExplorer",
    "SpeculativeExplorer",
    "TensorParallelExplorer",
]
