"""The checker speaks the learner's language: in Chinese every verdict, tolerance, hint and
question comes from the exercises catalog; in English every message is what it always was."""

from __future__ import annotations

import re

import pytest

from llminfer.exercises import Exercise, check, exercise, exercises
from llminfer.language import set_language

HAN = re.compile(r"[\u4e00-\u9fff]")
#: English words that are never part of code, a name or a unit in these messages.
ENGLISH_WORDS = re.compile(
    r"\b(the|what|how|does|is|are|with|which|of|right|not quite|expected|hint|within|answer)\b",
    re.IGNORECASE,
)


@pytest.fixture
def zh(language_back):
    set_language("zh")


@pytest.fixture
def en(language_back):
    set_language("en")


def _prose(text: str) -> str:
    """``text`` without what stays English in any language: quoted answers, code, names."""
    text = re.sub(r"'[^']*'|\"[^\"]*\"", " ", text)  # quoted words: answers, arguments
    text = re.sub(r"[!-~]*[_(.=/\[][!-~]*", " ", text)  # identifiers, calls: read_requests(...)
    return text


def _han_share(text: str) -> float:
    prose = _prose(text)
    han = len(HAN.findall(prose))
    latin = len(re.findall(r"[A-Za-z]", prose))
    return han / max(1, han + latin)


@pytest.mark.parametrize("item", exercises(), ids=lambda e: e.key)
def test_every_question_and_hint_reads_in_chinese(zh, item):
    question = item.question_text
    assert question != item.question
    assert len(HAN.findall(question)) >= 8, question
    assert not ENGLISH_WORDS.search(_prose(question)), question
    if item.hint:
        hint = item.hint_text
        assert not ENGLISH_WORDS.search(_prose(hint)), hint
        if HAN.search(hint) is None:  # only a call to make, e.g. decode_crossover_batch(...)
            assert not re.search(r"[A-Za-z]{3,} [a-z]{3,} [a-z]{3,}", _prose(hint)), hint


@pytest.mark.parametrize("item", exercises(), ids=lambda e: e.key)
def test_every_verdict_is_chinese(zh, item):
    answer = item.answer()
    right = check(item.key, answer)
    assert right and right.message.startswith(f"✓ {item.key}：正确——"), right.message
    wrong = check(item.key, "no such answer" if not isinstance(answer, str) else 12345)
    assert not wrong and wrong.message.startswith(f"✗ {item.key}：不太对——"), wrong.message
    without_hint = wrong.message.split("提示：")[0]
    assert _han_share(without_hint) > 0.6, without_hint
    assert not ENGLISH_WORDS.search(_prose(wrong.message)), wrong.message
    if item.hint:
        assert "提示：" + item.hint_text in wrong.message


def _fractional_count(monkeypatch, unit="sequences"):
    """A "how many" question whose answer (35.6) is not whole: 35 is right as a whole count."""
    import llminfer.exercises as module

    item = Exercise("99.1", "How many fit?", lambda: 35.6, unit=unit, rel_tol=0.001)
    monkeypatch.setitem(module._registry(), "99.1", item)
    return item


def test_the_other_readings_and_the_tolerance_in_chinese(zh, monkeypatch):
    assert check("04.3", 1).message == "✓ 04.3：正确——1 个请求。"
    fraction = check("04.5", 0.127).message
    assert "按小数理解" in fraction and "题目要的是百分数" in fraction, fraction
    percent = check("05.2", 14.2).message
    assert "按百分数理解" in percent and "0–1 之间的小数" in percent, percent
    assert exercise("02.4").tolerance_text() == "误差不超过 ±1 条序列"
    assert exercise("04.1").tolerance_text() == "与答案相差不超过 2 %"
    assert exercise("04.1").amount("31") == "31 个请求"
    assert exercise("05.2").amount("0.14") == "0.14（占比）"
    assert exercise("01.2").amount("4.5") == "4.5 ms"
    wrong = check("09.2", 1000).message
    assert "或放得下的完整序列数" in wrong, wrong
    _fractional_count(monkeypatch)
    assert check("99.1", 35).message == (
        "✓ 99.1：正确——35（按放得下的完整序列数计；llminfer 未取整的值是 35.6）。"
    )
    _fractional_count(monkeypatch, unit="gpus")  # a spelling without its own wording
    assert "按放得下的完整数量计（单位：gpus）" in check("99.1", 35).message


def test_chinese_reads_the_english_question_for_the_count_rule(zh):
    # is_count reads the English question ("how many"), whatever language is shown
    assert exercise("04.3").is_count and check("04.3", 1)
    assert exercise("09.2").is_count


def test_english_is_what_it_always_was(en, monkeypatch):
    assert check("04.3", 1).message == "✓ 04.3: right — 1 requests."
    assert check("04.5", 0.127).message == (
        "✓ 04.5: right — 0.127 (read as a fraction: 12.7 %; the question asks for a "
        f"percentage (0–100), about {exercise('04.5').answer():.3g} %)."
    )
    assert check("02.1", "memory").message == (
        "✗ 02.1: not quite — 'memory' is not it (expected a word such as 'compute', "
        "'compute-bound'). Hint: Intensity ≈ batch for decode with short caches; compare it "
        "with the ridge (295)."
    )
    assert check("02.4", 1000).message.startswith(
        "✗ 02.4: not quite — 1000 sequences is not it (expected a number within ±1 sequences)."
    )
    item = exercise("09.2")
    assert check("09.2", 1000).message.startswith(
        "✗ 09.2: not quite — 1000 sequences is not it (expected a number within 2 % of the "
        "answer, or the whole number of sequences that fit). Hint: Solve"
    )
    _fractional_count(monkeypatch)
    assert check("99.1", 35).message == (
        "✓ 99.1: right — 35 (whole sequences that fit; llminfer's unrounded value is 35.6)."
    )
    assert check("99.1", 30).message == (
        "✗ 99.1: not quite — 30 sequences is not it (expected a number within 0.1 % of the "
        "answer, or the whole number of sequences that fit)."
    )
    _fractional_count(monkeypatch, unit="gpus")
    assert "(whole gpus that fit;" in check("99.1", 35).message
    assert item.question_text == item.question and item.hint_text == item.hint
    assert exercise("04.1").amount("31") == "31 requests"
    assert exercise("01.2").amount("4.5") == "4.5 ms"
