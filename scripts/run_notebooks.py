"""Re-execute notebooks in place so committed outputs always match the code.

Usage: python scripts/run_notebooks.py notebooks/*.ipynb

Cells run top to bottom in a fresh kernel (execution counts 1, 2, 3 ...). Volatile metadata —
timings, widget state, the Python patch version — is stripped so that re-running an unchanged
notebook gives an unchanged file.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

VOLATILE_CELL_KEYS = ("execution", "collapsed", "scrolled")
KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def strip_volatile(nb: nbformat.NotebookNode) -> None:
    # Widget state is not saved (a widget needs a live kernel), so the random model ids that
    # point at it carry nothing; a fixed id keeps re-runs byte-identical.
    nb.metadata.pop("widgets", None)
    nb.metadata["kernelspec"] = KERNELSPEC
    nb.metadata["language_info"] = {"name": "python"}
    for cell in nb.cells:
        for key in VOLATILE_CELL_KEYS:
            cell.metadata.pop(key, None)
        for output in cell.get("outputs", []):
            view = output.get("data", {}).get(WIDGET_VIEW)
            if view is not None:
                view["model_id"] = "0" * 32


def run(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=600,
        kernel_name="python3",
        record_timing=False,
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
