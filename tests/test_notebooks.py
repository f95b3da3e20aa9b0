"""Conventions every notebook of both editions keeps (see CONVENTIONS.md): name, title, order,
checks. The Chinese edition (notebooks/zh/) is held to the same rules in its own words."""

import re
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb")) + sorted(
    (Path(__file__).parent.parent / "notebooks" / "zh").glob("*.ipynb")
)
#: The heading of the exercises section in each edition.
TRY_IT = {"notebooks": "Try it", "zh": "动手试试"}
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


@pytest.fixture(params=NOTEBOOKS, ids=lambda p: "/".join(p.parts[-2:]))
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
    if path.parent.name == "zh":  # a Chinese heading, the English title under it
        assert CJK.search(lines[0]), "Chinese chapter title in the heading"
        assert any(re.search(r"[A-Za-z]{4,}", line) for line in lines[1:3]), "English title"
    else:
        assert any(CJK.search(line) for line in lines[1:3]), "Chinese title under the heading"


def test_title_then_glossary_then_the_imports(notebook):
    _, nb = notebook
    assert nb.cells[1].cell_type == "markdown" and "glossary" in nb.cells[1].metadata["llminfer"]
    second = nb.cells[2]
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
    path, nb = notebook
    assert nb.metadata["kernelspec"]["name"] == "python3"
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert TRY_IT[path.parent.name] in markdown
