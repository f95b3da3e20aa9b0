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


def test_an_answer_is_computed_once_and_kept(monkeypatch):
    import llminfer.exercises as module

    calls = []
    item = module.Exercise("99.2", "How many?", lambda: calls.append(1) or 3.5, unit="requests")
    monkeypatch.setitem(module._registry(), "99.2", item)
    assert check("99.2", 3.5) and not check("99.2", 5) and check("99.2", 3.5)
    assert item.answer() == 3.5 and len(calls) == 1  # wrong tries read it up to four times
    other = module.Exercise("99.2", "How many?", lambda: 7.0, unit="requests")
    assert other.answer() == 7.0  # another exercise's answer is its own, under the same key


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


# --- the checker's readings: percent or fraction, whole counts, the tolerance in words -------

from llminfer.exercises import Exercise  # noqa: E402


def _item(answer, unit="", question="What is it?", rel_tol=0.02, abs_tol=0.0):
    return Exercise("99.1", question, lambda: answer, unit=unit, rel_tol=rel_tol, abs_tol=abs_tol)


def test_a_fraction_is_right_where_a_percent_is_asked_and_the_reverse():
    percent = _item(12.7, unit="%")
    assert percent.reading(12.7) == "as asked" and percent.reading(0.127) == "as a fraction"
    assert percent.reading(1.27) is None and percent.reading(127) is None
    share = _item(0.142, unit="(share)")
    assert share.reading(0.142) == "as asked" and share.reading(14.2) == "as a percentage"
    assert share.reading(1.42) is None
    fraction = _item(0.787, unit="(fraction, 0–1)")
    assert fraction.reading(78.7) == "as a percentage"


def test_an_ambiguous_other_form_is_not_guessed():
    # 0.8 is a valid fraction: it is read as one (wrong), never as 0.8 % (= 0.008)
    small = _item(0.008, unit="(fraction, 0–1)")
    assert small.reading(0.8) is None
    # a value right as asked is read as asked, even when the other reading also fits
    tiny = _item(0.5, unit="%", rel_tol=1.0)
    assert tiny.reading(0.5) == "as asked"


def test_a_whole_count_is_right_for_a_how_many_question():
    fit = _item(1.027, unit="requests", question="How many requests fit?")
    assert fit.is_count and fit.reading(1) == "as a whole count"
    assert fit.reading(2) is None and fit.reading(0) is None
    not_a_count = _item(1.027, unit="×", question="By what factor?")
    assert not not_a_count.is_count and not_a_count.reading(1) is None


def test_the_tolerance_text_matches_the_tolerance():
    assert _item(1.0, rel_tol=0.02).tolerance_text() == "within 2 % of the answer"
    assert _item(1.0, rel_tol=0.002).tolerance_text() == "within 0.2 % of the answer"
    assert _item(354, "sequences", rel_tol=0, abs_tol=1).tolerance_text() == "within ±1 sequences"
    assert _item(4, "requests/s", rel_tol=0).tolerance_text() == "exactly the answer"
    assert "0%" not in check("02.4", 1000).message and "±1" in check("02.4", 1000).message


@pytest.mark.parametrize("item", exercises(), ids=lambda e: e.key)
def test_every_exercise_takes_the_other_unambiguous_form(item):
    """Over every registered question: the other form of a percent/fraction answer, and the
    whole count of a fractional "how many" answer, pass and say which form was meant."""
    value = item.answer()
    if isinstance(value, str):
        return
    if item.form == "percent" and 1 < value <= 100:
        result = check(item.key, value / 100)
        assert result and "percentage" in result.message
    if item.form == "fraction" and 0.01 < value <= 1:
        result = check(item.key, value * 100)
        assert result and "fraction" in result.message
    if item.is_count and int(value) != value:
        assert check(item.key, int(value))  # "as asked" when within tolerance already


def test_04_3_takes_the_natural_integer_answer():
    assert check("04.3", 1) and not check("04.3", 2)
    assert check("04.5", 0.127) and check("05.2", 14.2)
