"""Conventions every notebook keeps (see CONVENTIONS.md): name, title, order, checks."""

import re
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))
CHAPTERS = {
    "01_introduction",
    "02_prefill_and_decode",
    "03_metrics",
    "04_memory_budget",
    "05_optimizations",
    "06_log_analysis",
    "07_troubleshooting",
    "08_measure_a_server",  # a lab beyond the article (CONVENTIONS.md, Layout)
    "09_mixture_of_experts",  # beyond the article: MoE serving (issue 24)
}
CJK = re.compile(r"[\u4e00-\u9fff]")


def test_there_are_notebooks():
    assert NOTEBOOKS, "notebooks/ holds no notebook"


@pytest.fixture(params=NOTEBOOKS, ids=lambda p: p.name)
def notebook(request):
    return request.param, nbformat.read(request.param, as_version=4)


def _code(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def test_name_is_a_chapter(notebook):
    path, _ = notebook
    assert path.stem in CHAPTERS


def test_title_cell_has_number_english_and_chinese_title(notebook):
    path, nb = notebook
    first = nb.cells[0]
    assert first.cell_type == "markdown"
    lines = first.source.strip().splitlines()
    assert lines[0].startswith(f"# {path.stem[:2]} · ")
    assert any(CJK.search(line) for line in lines[1:3]), "Chinese chapter title under the heading"


def test_second_cell_imports_explicitly(notebook):
    _, nb = notebook
    second = nb.cells[1]
    assert second.cell_type == "code"
    assert "import" in second.source
    for cell in _code(nb):
        assert "import *" not in cell.source
        assert "sys.path" not in cell.source


def test_executed_in_order_without_errors(notebook):
    _, nb = notebook
    code = _code(nb)
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1))
    for cell in code:
        assert all(o.output_type != "error" for o in cell.outputs), cell.source[:80]


def test_has_check_cells_and_ignored_outputs_are_checked(notebook):
    _, nb = notebook
    code = _code(nb)
    asserts = [bool(re.search(r"^\s*assert\b", c.source, re.M)) for c in code]
    assert any(asserts)
    for i, cell in enumerate(code):
        if "NBVAL_IGNORE_OUTPUT" in cell.source:
            assert asserts[i] or (i + 1 < len(code) and asserts[i + 1]), (
                f"cell {i + 1} ignores its output but no check cell follows it"
            )


def test_kernelspec_and_try_it(notebook):
    _, nb = notebook
    assert nb.metadata["kernelspec"]["name"] == "python3"
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "Try it" in markdown
