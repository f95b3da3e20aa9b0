"""Every "Try it" question can be checked, and the notebooks and the package agree on them."""

import json
import re
from pathlib import Path

import pytest

from llminfer.exercises import check, exercise, exercises

NOTEBOOKS = sorted(
    (Path(__file__).resolve().parent.parent / "notebooks").glob("[0-9][0-9]_*.ipynb")
)
CHECK_CALL = re.compile(r"""check\(\s*["'](\d\d\.\d+)["']""")


def _text(path: Path) -> str:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return "\n".join("".join(c["source"]) for c in cells)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_checks_and_package_exercises_match(path):
    number = path.name[:2]
    in_notebook = set(CHECK_CALL.findall(_text(path)))
    in_package = {e.key for e in exercises(number)}
    assert in_notebook == in_package, (
        f"{path.name}: check() calls {sorted(in_notebook)} but llminfer.exercises "
        f"has {sorted(in_package)}"
    )


@pytest.mark.parametrize("item", exercises(), ids=lambda e: e.key)
def test_every_answer_is_computed_and_accepted(item):
    value = item.answer()
    assert check(item.key, value)
    if not isinstance(value, str) and value != 0:
        assert not check(item.key, value * 1.5 + 1)


def test_unknown_key_names_the_known_ones():
    with pytest.raises(ValueError, match="exercise="):
        exercise("99.9")


def test_wrong_type_is_wrong_not_an_error():
    for item in exercises():
        assert not check(item.key, object())


def test_shipped_datasets_are_the_repositorys_data():
    """The exercises' datasets inside the package are byte-for-byte the files in data/."""
    from pathlib import Path

    from llminfer.exercises.datasets import SHIPPED, dataset_path

    data = Path(__file__).resolve().parents[1] / "data"
    for name in SHIPPED:
        shipped = dataset_path(name.split("/")[0]) / name.split("/")[1] if "/" in name else None
        shipped = shipped or dataset_path(name)
        assert shipped.read_bytes() == (data / name).read_bytes(), name
    with pytest.raises(ValueError, match="not a shipped dataset"):
        dataset_path("requests.csv")
