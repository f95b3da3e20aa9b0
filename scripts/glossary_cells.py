"""Write every notebook's glossary cell from llminfer/language/glossary.csv.

A glossary cell is a markdown cell whose metadata says which terms it lists
(``{"llminfer": {"glossary": ["ttft", "tpot", ...]}}``); its text is
``glossary_markdown(keys, language)`` in the notebook's edition (``notebooks/zh/`` is Chinese).
Run after editing the glossary; tests/test_glossary.py fails while a cell is out of date.

    python scripts/glossary_cells.py [--check] [NOTEBOOK ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

from llminfer.language.glossary import glossary_markdown

ROOT = Path(__file__).resolve().parent.parent


def edition(path: Path) -> str:
    """ "zh" for a notebook under notebooks/zh/, else "en"."""
    return "zh" if path.parent.name == "zh" else "en"


def glossary_keys(cell) -> list[str] | None:
    """The term keys of a glossary cell, or None for any other cell."""
    if cell.cell_type != "markdown":
        return None
    return cell.metadata.get("llminfer", {}).get("glossary")


def stale_cells(path: Path) -> list[int]:
    """Indices of the glossary cells of ``path`` whose text is not the generated one."""
    nb = nbformat.read(path, as_version=4)
    language = edition(path)
    return [
        index
        for index, cell in enumerate(nb.cells)
        if (keys := glossary_keys(cell)) is not None
        and cell.source != glossary_markdown(keys, language)
    ]


def write_cells(path: Path) -> int:
    """Regenerate the glossary cells of ``path``; the number of cells changed."""
    nb = nbformat.read(path, as_version=4)
    language = edition(path)
    changed = 0
    for cell in nb.cells:
        keys = glossary_keys(cell)
        if keys is None:
            continue
        text = glossary_markdown(keys, language)
        if cell.source != text:
            cell.source = text
            changed += 1
    if changed:
        nbformat.write(nb, path)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report stale cells")
    parser.add_argument("notebooks", nargs="*", type=Path)
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted(ROOT.glob("notebooks/**/[0-9][0-9]_*.ipynb"))
    stale = 0
    for path in paths:
        if args.check:
            cells = stale_cells(path)
            stale += len(cells)
            if cells:
                print(f"{path}: glossary cell(s) {cells} out of date", file=sys.stderr)
        else:
            changed = write_cells(path)
            if changed:
                print(f"{path}: {changed} glossary cell(s) written")
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
