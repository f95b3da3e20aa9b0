"""Re-execute notebooks in place so committed outputs always match the code.

Usage: python scripts/run_notebooks.py notebooks/*.ipynb

Cells run top to bottom in a fresh kernel (execution counts 1, 2, 3 ...). The state of every
widget a cell displays is saved in the notebook's metadata (the standard
``application/vnd.jupyter.widget-state+json``), so GitHub, nbviewer and an unrun notebook show
the explorers' controls and pictures without a kernel. Volatile metadata (timings, the Python
patch version) is stripped and the widgets' random model ids are renumbered in a fixed order, so
re-running an unchanged notebook gives a byte-identical file.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

VOLATILE_CELL_KEYS = ("execution", "collapsed", "scrolled")
KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
MODEL_REF = re.compile(r"IPY_MODEL_([0-9a-zA-Z_-]+)")


def _displayed_views(nb: nbformat.NotebookNode) -> list[dict]:
    """Every widget-view output's data, in cell order."""
    return [
        output["data"][WIDGET_VIEW]
        for cell in nb.cells
        for output in cell.get("outputs", [])
        if WIDGET_VIEW in output.get("data", {})
    ]


def stable_widget_state(nb: nbformat.NotebookNode) -> None:
    """Keep the state of displayed widgets only, with model ids renumbered in display order.

    The kernel gives widgets random ids; here the first displayed widget becomes id 1, the
    models it refers to (children, layouts, styles) follow depth first, then the next displayed
    widget. Widgets a notebook creates but never displays are dropped (nothing shows them).
    """
    views = _displayed_views(nb)
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    if not views or not state:
        nb.metadata.pop("widgets", None)
        for view in views:  # no state to point at: a fixed id keeps re-runs identical
            view["model_id"] = "0" * 32
        return
    order: dict[str, str] = {}

    def visit(model_id: str) -> None:
        if model_id in order or model_id not in state:
            return
        order[model_id] = f"{len(order) + 1:032x}"
        for ref in MODEL_REF.findall(json.dumps(state[model_id], sort_keys=True)):
            visit(ref)

    for view in views:
        visit(view["model_id"])
    text = json.dumps({order[k]: state[k] for k in order}, sort_keys=True)
    text = MODEL_REF.sub(lambda m: f"IPY_MODEL_{order.get(m.group(1), m.group(1))}", text)
    nb.metadata["widgets"] = {
        WIDGET_STATE: {
            "state": json.loads(text),
            "version_major": 2,
            "version_minor": 0,
        }
    }
    for view in views:
        view["model_id"] = order.get(view["model_id"], "0" * 32)


def strip_volatile(nb: nbformat.NotebookNode) -> None:
    """Fixed kernelspec and language info, no per-cell timing or view metadata."""
    nb.metadata["kernelspec"] = KERNELSPEC
    nb.metadata["language_info"] = {"name": "python"}
    for cell in nb.cells:
        for key in VOLATILE_CELL_KEYS:
            cell.metadata.pop(key, None)
    stable_widget_state(nb)


def run(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=600,
        kernel_name="python3",
        record_timing=False,
        store_widget_state=True,
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()
    strip_volatile(nb)
    nbformat.write(nb, path)
    print(f"executed {path}")


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    for name in argv:
        run(Path(name))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
