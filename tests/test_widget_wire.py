"""What the explorers send to a browser: no float on the wire (a float slider's first draw
sends its value back with float noise and undoes a later cell's change, issue 15), and a new
picture that costs little (cache, reused layout)."""

from pathlib import Path

import ipywidgets as W
import pytest
from matplotlib.layout_engine import ConstrainedLayoutEngine

import llminfer.widgets as explorers
from llminfer import read_requests
from llminfer.widgets._explorer import FLOAT_CONTROLS, Explorer, choice_slider, grid, whole

DATA = Path(__file__).resolve().parent.parent / "data"
NAMES = [n for n in explorers.__all__ if n != "Explorer"]


def _build(name: str) -> Explorer:
    cls = getattr(explorers, name)
    if name == "SLOExplorer":
        return cls(read_requests(DATA / "requests.csv"))
    if name == "LoadExplorer":
        import pandas as pd

        # The columns LoadExplorer reads from a sweep, with made-up but monotone numbers.
        table = pd.DataFrame(
            {
                "rate": [1.0, 2.0, 4.0],
                "output_tps": [100.0, 190.0, 200.0],
                **{f"ttft_s_p{p}": [0.1, 0.2, 3.0] for p in (50, 90, 99)},
                **{f"tpot_s_p{p}": [0.01, 0.02, 0.06] for p in (50, 90, 99)},
            }
        )
        return cls(table)
    return cls()


@pytest.mark.parametrize("name", NAMES)
def test_no_control_sends_a_float(name):
    # Integer sliders round in the browser; selection sliders, dropdowns and checkboxes send an
    # index or a bool: what comes back equals what was sent, so a first draw changes nothing.
    explorer = _build(name)
    for control_name, control in explorer.controls.items():
        assert not isinstance(control, FLOAT_CONTROLS), f"{name}.{control_name}"
        assert isinstance(control, (W.IntSlider, W.SelectionSlider, W.Dropdown, W.Checkbox)), (
            f"{name}.{control_name} is a {type(control).__name__}"
        )
        # The browser sends a slider's value only on release, never for its first draw.
        assert getattr(control, "continuous_update", False) is False, f"{name}.{control_name}"


def test_a_float_slider_is_refused_with_the_reason():
    class Bad(Explorer):
        def compute(self, x):
            return x

    with pytest.raises(TypeError, match="float noise"):
        Bad({"x": W.FloatSlider(value=0.5)})


def test_later_cell_values_stay_exact():
    # The values notebooks 03 and 06 set after displaying an explorer are on the controls'
    # grids, so the browser can show them and the kernel computes with them exactly.
    slo = explorers.SLOExplorer(read_requests(DATA / "requests.csv"), ttft_ms=500.0)
    assert slo.controls["ttft_ms"].value == 500 and isinstance(slo.controls["ttft_ms"].value, int)
    slo.controls["tpot_ms"].value = 100
    slo.controls["ttft_ms"].value = 2000
    assert slo.result.slo == {"ttft_s": 2.0, "tpot_s": 0.1, "e2e_s": 30}
    spec = explorers.SpeculativeExplorer(alpha=0.8, cost_ratio=0.05)
    spec.controls["alpha"].value = 0.1  # the literal a cell types is an option exactly
    assert spec.values()["alpha"] == 0.1


def test_choice_slider_keeps_an_off_grid_start_and_refuses_nonsense():
    slider = choice_slider(0.33, grid(0, 1, 4), "p")
    assert slider.value == 0.33
    assert [v for _, v in slider.options] == [0.0, 0.25, 0.33, 0.5, 0.75, 1.0]
    with pytest.raises(ValueError, match="value=nan"):
        choice_slider(float("nan"), [1.0], "p")


def test_whole_refuses_a_fraction_instead_of_truncating():
    assert whole(500.0, "ttft_ms") == 500 and whole(1e3 * 0.02, "tpot_ms") == 20
    with pytest.raises(ValueError, match=r"tpot_ms=37\.5"):
        whole(37.5, "tpot_ms")


def test_a_revisited_value_reuses_its_picture_and_layout():
    journey = explorers.RequestJourney()
    first = journey._image.value
    positions = [ax.get_position().bounds for ax in journey.figure.axes]
    journey.controls["network_ms"].value = 100
    second = journey._image.value
    assert second != first
    # The second figure took the first one's layout instead of running constrained layout.
    assert not isinstance(journey.figure.get_layout_engine(), ConstrainedLayoutEngine)
    assert [ax.get_position().bounds for ax in journey.figure.axes] == positions
    journey.controls["network_ms"].value = 50  # back: the same picture, from the cache
    assert journey._image.value == first


def test_the_browser_can_read_what_was_computed():
    memory = explorers.MemoryExplorer()
    memory.controls["n_gpus"].value = 2
    assert "&quot;n_gpus&quot;: 2" in memory._computed.value
    assert "llminfer-explorer" in memory.ui._dom_classes
    assert memory._repr_mimebundle_()["text/plain"].startswith("MemoryExplorer: Memory budget")


def test_the_message_area_shows_a_feasibility_warning_above_the_result():
    memory = explorers.MemoryExplorer(model="llama-3.1-70b")  # 141 GB of bf16 weights, 80 GB
    assert memory.result is not None and not memory.result.fits
    assert memory.warning and "Not feasible" in memory._summary.value
    memory.controls["n_gpus"].value = 4
    assert memory.warning == "" and "Not feasible" not in memory._summary.value
