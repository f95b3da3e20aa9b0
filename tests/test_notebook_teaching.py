"""Teaching conventions (issue 9 §2–3), in both editions: a glossary bridging the article's
Chinese terms (generated from llminfer/language/glossary.csv, tests/test_language.py), a
"Try it" (动手试试) section whose questions can be checked, and a Sources (参考资料) section with
links.
"""

import json
import re
from pathlib import Path

import pytest

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"
#: Each notebook as its path under notebooks/ without ".ipynb": "03_metrics", "zh/03_metrics".
TEACHING_NOTEBOOKS = tuple(
    str(p.relative_to(NOTEBOOK_DIR).with_suffix(""))
    for p in sorted(NOTEBOOK_DIR.glob("[0-9][0-9]_*.ipynb"))
    + sorted(NOTEBOOK_DIR.glob("zh/[0-9][0-9]_*.ipynb"))
)
#: The headings of the exercises and the sources section in each edition.
TRY_IT = {"en": "## Try it", "zh": "## 动手试试"}
SOURCES = {"en": ("## Sources",), "zh": ("## 参考资料", "## 资料来源", "## 来源")}


def _edition(stem: str) -> str:
    return "zh" if stem.startswith("zh/") else "en"


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
def test_second_cell_is_the_glossary(stem):
    glossary = _cells(stem)[1]
    assert glossary["cell_type"] == "markdown"
    rows = _table_rows(_source(glossary))
    assert rows, f"{stem}: the cell after the title has no glossary table"
    header, body = rows[0], rows[1:]
    assert len(header) == 4, f"{stem}: glossary header {header} must have 4 columns"
    assert any(w in header[2].lower() for w in ("unit", "symbol", "单位")), f"{stem}: units"
    assert len(body) >= 5, f"{stem}: a glossary needs the chapter's terms, found {len(body)}"
    with_chinese = [row for row in body if CJK.search(row[0])]
    assert len(with_chinese) >= len(body) // 2, f"{stem}: too few of the article's Chinese terms"
    assert all(len(row) == 4 and row[1] and row[2] and row[3] for row in body)


@pytest.mark.parametrize("stem", TEACHING_NOTEBOOKS)
def test_ends_with_sources_with_links(stem):
    last = _cells(stem)[-1]
    text = _source(last)
    headings = SOURCES[_edition(stem)]
    assert last["cell_type"] == "markdown" and text.lstrip().startswith(headings), (
        f"{stem}: the last cell must be a {headings[0]!r} section"
    )
    assert LINK.search(text), f"{stem}: the Sources section has no link"
    assert OUTSIDE_REPO not in text


@pytest.mark.parametrize("stem", TEACHING_NOTEBOOKS)
def test_try_it_questions_can_be_checked(stem):
    cells = _cells(stem)
    heading = TRY_IT[_edition(stem)]
    starts = [i for i, c in enumerate(cells) if heading in _source(c)]
    assert starts, f"{stem}: no {heading!r} section"
    after = "\n".join(_source(c) for c in cells[starts[0] :])
    number = stem.split("/")[-1][:2]
    checks = set(re.findall(rf"""check\(\s*["']({number}\.\d+)["']""", after))
    assert checks or "<details>" in after, f"{stem}: Try it has neither checks nor <details>"
    asked = _source(cells[starts[0]]).split("<details>")[0]
    questions = re.findall(r"^\d+\. ", asked, flags=re.MULTILINE)
    # Convention: each question has a check() call, or the section has worked solutions.
    assert len(checks) >= len(questions) or "<details>" in after, (
        f"{stem}: {len(questions)} questions, {len(checks)} check() keys and no <details>"
    )
