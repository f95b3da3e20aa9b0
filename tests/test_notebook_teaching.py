"""Teaching conventions (issue 9 §2–3): a glossary bridging the article's Chinese terms, a
"Try it" section whose questions can be checked, and a Sources section with links.

Parametrised over the notebooks that follow them so far; add a notebook to
``TEACHING_NOTEBOOKS`` when it does.
"""

import json
import re
from pathlib import Path

import pytest

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"
TEACHING_NOTEBOOKS = tuple(
    p.stem
    for p in sorted(Path(__file__).resolve().parent.parent.glob("notebooks/[0-9][0-9]_*.ipynb"))
)
CJK = re.compile(r"[\u4e00-\u9fff]")
LINK = re.compile(r"https?://\S+")
#: The folder beside the repository that learners do not have (spelled so as not to cite it).
OUTSIDE_REPO = "../" + "shared"


def _cells(stem: str) -> list[dict]:
    return json.loads((NOTEBOOK_DIR / f"{stem}.ipynb").read_text(encoding="utf-8"))["cells"]


def _source(cell: dict) -> str:
    return "".join(cell["source"])


def _table_rows(markdown: str) -> list[list[str]]:
    """The rows of the first Markdown table in ``markdown`` (the glossary)."""
    rows: list[list[str]] = []
    for line in markdown.splitlines():
        line = line.strip()
        if line.startswith("|") and line.endswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if not all(set(c) <= set("-: ") for c in cells):  # skip the |---| separator
                rows.append(cells)
        elif rows:
            break
    return rows


@pytest.mark.parametrize("stem", TEACHING_NOTEBOOKS)
def test_first_cell_has_a_glossary(stem):
    first = _cells(stem)[0]
    assert first["cell_type"] == "markdown"
    rows = _table_rows(_source(first))
    assert rows, f"{stem}: the first cell has no glossary table"
    header, body = rows[0], rows[1:]
    assert len(header) == 3, f"{stem}: glossary header {header} must have 3 columns"
    assert any(w in header[2].lower() for w in ("unit", "symbol")), f"{stem}: 3rd column: units"
    assert len(body) >= 5, f"{stem}: a glossary needs the chapter's terms, found {len(body)}"
    with_chinese = [row for row in body if CJK.search(row[0])]
    assert len(with_chinese) >= len(body) // 2, f"{stem}: too few of the article's Chinese terms"
    assert all(len(row) == 3 and row[1] and row[2] for row in body)


@pytest.mark.parametrize("stem", TEACHING_NOTEBOOKS)
def test_ends_with_sources_with_links(stem):
    last = _cells(stem)[-1]
    text = _source(last)
    assert last["cell_type"] == "markdown" and text.lstrip().startswith("## Sources"), (
        f"{stem}: the last cell must be a '## Sources' section"
    )
    assert LINK.search(text), f"{stem}: the Sources section has no link"
    assert OUTSIDE_REPO not in text


@pytest.mark.parametrize("stem", TEACHING_NOTEBOOKS)
def test_try_it_questions_can_be_checked(stem):
    cells = _cells(stem)
    starts = [i for i, c in enumerate(cells) if "## Try it" in _source(c)]
    assert starts, f"{stem}: no 'Try it' section"
    after = "\n".join(_source(c) for c in cells[starts[0] :])
    number = stem[:2]
    checks = set(re.findall(rf"""check\(\s*["']({number}\.\d+)["']""", after))
    assert checks or "<details>" in after, f"{stem}: Try it has neither checks nor <details>"
    asked = _source(cells[starts[0]]).split("<details>")[0]
    questions = re.findall(r"^\d+\. ", asked, flags=re.MULTILINE)
    # Convention: each question has a check() call, or the section has worked solutions.
    assert len(checks) >= len(questions) or "<details>" in after, (
        f"{stem}: {len(questions)} questions, {len(checks)} check() keys and no <details>"
    )
