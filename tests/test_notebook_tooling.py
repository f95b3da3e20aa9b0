"""The notebook tooling that keeps explorers visible and checked: widget state saved with
stable ids (scripts/run_notebooks.py) and the browser check's reading of notebooks
(scripts/browser_check.py). The browser pass itself is `make test-browser`."""

import copy
import importlib.util
import json
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


run_notebooks = _script("run_notebooks")
browser_check = _script("browser_check")
VIEW, STATE = run_notebooks.WIDGET_VIEW, run_notebooks.WIDGET_STATE


def _executed(box_id: str, slider_id: str, layout_id: str, stray_id: str):
    """A notebook as nbclient leaves it: random ids, one displayed VBox holding a slider,
    and a widget that was created but never displayed."""
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("w = Explorer()\nw", id="explorer-cell")
    cell.outputs = [
        nbformat.v4.new_output(
            "display_data",
            data={"text/plain": "Explorer", VIEW: {"model_id": box_id, "version_major": 2}},
        )
    ]
    nb.cells = [cell]
    state = {
        stray_id: {"model_name": "IntSliderModel", "state": {"value": 1}},
        slider_id: {"model_name": "IntSliderModel", "state": {"layout": f"IPY_MODEL_{layout_id}"}},
        box_id: {"model_name": "VBoxModel", "state": {"children": [f"IPY_MODEL_{slider_id}"]}},
        layout_id: {"model_name": "LayoutModel", "state": {}},
    }
    nb.metadata["widgets"] = {STATE: {"state": state, "version_major": 2, "version_minor": 0}}
    return nb


def test_widget_state_is_kept_for_displayed_widgets_with_ids_in_display_order():
    nb = _executed("a" * 32, "b" * 32, "c" * 32, "d" * 32)
    run_notebooks.strip_volatile(nb)
    state = nb.metadata["widgets"][STATE]["state"]
    one, two, three = (f"{i:032x}" for i in (1, 2, 3))
    assert list(state) == [one, two, three]  # the never-displayed widget is gone
    assert nb.cells[0].outputs[0]["data"][VIEW]["model_id"] == one
    assert state[one]["state"]["children"] == [f"IPY_MODEL_{two}"]
    assert state[two]["state"]["layout"] == f"IPY_MODEL_{three}"


def test_two_runs_with_different_random_ids_save_the_same_bytes():
    first = _executed("1f" * 16, "2e" * 16, "3d" * 16, "4c" * 16)
    second = _executed("9a" * 16, "8b" * 16, "7c" * 16, "6d" * 16)
    for nb in (first, second):
        run_notebooks.strip_volatile(nb)
    assert nbformat.writes(first) == nbformat.writes(second)


def test_a_notebook_without_widgets_gets_no_widget_metadata():
    nb = _executed("a" * 32, "b" * 32, "c" * 32, "d" * 32)
    nb.metadata.pop("widgets")
    before = copy.deepcopy(nb.cells)
    run_notebooks.strip_volatile(nb)
    assert "widgets" not in nb.metadata
    assert nb.cells[0].outputs[0]["data"][VIEW]["model_id"] == "0" * 32
    assert json.dumps(nb.cells[0].source) == json.dumps(before[0].source)


def test_browser_check_finds_the_values_later_cells_set():
    # Notebook 03 displays the SLO explorer and a later cell sets the TPOT target to 100 ms;
    # that is the value the browser must show and the kernel must compute with.
    found = dict(browser_check.later_cell_values(ROOT / "notebooks" / "03_metrics.ipynb"))
    assert found["explorer"] == {"tpot_ms": 100}


def test_browser_check_compares_readouts_with_computed_values():
    agrees = browser_check.agrees
    assert agrees({"kind": "slider", "text": "100"}, 100)
    assert not agrees({"kind": "slider", "text": "50"}, 100)  # the echo bug's symptom
    assert agrees({"kind": "slider", "text": "1,024"}, 1024)
    assert agrees({"kind": "slider", "text": "0.71"}, 2**-0.5)  # a 3-digit label
    assert agrees({"kind": "select", "text": "h100-sxm"}, "h100-sxm")
    assert agrees({"kind": "checkbox", "checked": False}, False)
    assert browser_check.percentile([10.0, 20.0, 30.0, 40.0], 50) == 25.0


def test_browser_check_names_each_disagreement():
    # The page's readouts against the kernel's echo (.llminfer-computed) and a later cell's value.
    state = {
        "shown": {
            "tpot_ms": {"kind": "slider", "text": "50"},
            "gpu": {"kind": "select", "text": "h200"},
        },
        "computed": json.dumps({"tpot_ms": 100, "gpu": "h200"}),
    }
    found = browser_check.disagreements(state, {"tpot_ms": 100}, "after moving: ")
    assert found == [
        "after moving: tpot_ms shows {'kind': 'slider', 'text': '50'} but computed 100",
        "after moving: tpot_ms: a later cell set 100; "
        "the page shows {'kind': 'slider', 'text': '50'}",
    ]
    state["shown"]["tpot_ms"]["text"] = "100"
    assert browser_check.disagreements(state, {"tpot_ms": 100}) == []
    assert browser_check.disagreements({"shown": {}, "computed": None}, {}) == []
