"""Interactive explorers for the notebooks, each built on llminfer's pure functions.

Every explorer exposes ``.controls`` (name → ipywidget), ``.result`` (the latest computed
value), ``.figure`` and ``.error``; display it in a notebook to get the sliders.
"""

from llminfer.widgets._explorer import Explorer
from llminfer.widgets.logs import SLOExplorer
from llminfer.widgets.memory import MemoryExplorer
from llminfer.widgets.roofline import RequestJourney, RooflineExplorer

__all__ = ["Explorer", "MemoryExplorer", "RequestJourney", "RooflineExplorer", "SLOExplorer"]
