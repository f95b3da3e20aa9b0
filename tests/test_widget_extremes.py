"""A learner who moves every control to its ends gets a result or a clear message, never an
exception: each explorer, each control at its first and last setting."""

from pathlib import Path

import ipywidgets as W
import pytest

import llminfer.widgets as explorers
from llminfer import read_requests
from llminfer.sim.loadsweep import sweep
from llminfer.sim.workload import Workload

DATA = Path(__file__).resolve().parent.parent / "data"


def _build(name: str):
    cls = getattr(explorers, name)
    if name == "SLOExplorer":
        return cls(read_requests(DATA / "requests.csv"))
    if name == "LoadExplorer":
        from llminfer import get_gpu, get_model

        table = sweep(
            Workload(200, rate=1.0, seed=0), get_model("llama-3.1-8b"), get_gpu("h100-sxm"),
            rates=[1, 8, 32],
        )  # fmt: skip
        return cls(table)
    return cls()


def _ends(control) -> list:
    if isinstance(control, (W.Dropdown, W.SelectionSlider, W.ToggleButtons, W.RadioButtons)):
        options = [o[1] if isinstance(o, tuple) else o for o in control.options]
        return [options[0], options[-1]]
    if isinstance(control, W.Checkbox):
        return [True, False]
    if hasattr(control, "min") and hasattr(control, "max"):
        return [control.min, control.max]
    return []


@pytest.mark.parametrize("name", [n for n in explorers.__all__ if n != "Explorer"])
def test_every_control_at_its_ends_gives_a_result_or_a_message(name):
    explorer = _build(name)
    assert explorer.error is None, explorer.error  # the defaults always work
    for control_name, control in explorer.controls.items():
        for value in _ends(control):
            control.value = value  # must not raise
            if explorer.error is None:
                assert explorer.result is not None, f"{control_name}={value!r}"
            else:  # a sentence naming what is wrong, shown in place of the result
                assert len(explorer.error) > 20 and explorer.result is None
