"""Issue 11, property-based: corrupt valid logs and valid tool exports (the files in data/) at
random. Every read either succeeds — with the same numbers as the clean file for the rows the
corruption did not touch — or raises ValueError whose message says where (row, line, record or
the file); any other exception fails."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llminfer.logs.reading import read_requests

DATA = Path(__file__).parent.parent / "data"
CSV_LINES = (DATA / "requests_realistic.csv").read_text(encoding="utf-8").splitlines()[:41]
COMPARED = ["start_ts", "first_token_ts", "end_ts", "input_tokens", "output_tokens", "status"]
JUNK = st.sampled_from(
    ["", " ", "nan", "NaN", "inf", "-1", "0x10", "1_0", "abc", "1e400", "9" * 25, '"', "é", "0"]
)
LOCATION = re.compile(r"\brow\b|\bline\b|\brecord\b|source=")
SETTINGS = settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)


def _clean_csv() -> pd.DataFrame:
    return read_requests(DATA / "requests_realistic.csv").requests.set_index("request_id")


CLEAN_CSV = _clean_csv().loc[[line.split(",")[0] for line in CSV_LINES[1:]]]


@st.composite
def corrupted_csv(draw):
    """Lines of the clean log with a few rows corrupted; returns (text, untouched ids)."""
    rows = [line.split(",") for line in CSV_LINES[1:]]
    touched: set[int] = set()
    extra: list[tuple[int, str]] = []
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(rows) - 1))
        kind = draw(st.sampled_from(["cell", "drop", "add", "blank", "duplicate", "swap"]))
        touched.add(i)
        if kind == "cell":
            column = draw(st.integers(1, len(rows[i]) - 1))  # ids stay: a new id is a new row
            rows[i][column] = draw(JUNK)
        elif kind == "drop":
            rows[i] = rows[i][:-1]
        elif kind == "add":
            rows[i] = [*rows[i], "x"]
        elif kind == "swap":
            a, b = draw(st.integers(1, 6)), draw(st.integers(1, 6))
            rows[i][a], rows[i][b] = rows[i][b], rows[i][a]
        else:
            extra.append((i, "" if kind == "blank" else ",".join(rows[i])))
            touched.discard(i) if kind == "blank" else None
    lines = [CSV_LINES[0]]
    for i, row in enumerate(rows):
        lines.append(",".join(row))
        lines += [text for j, text in extra if j == i]
    untouched = [rows[i][0] for i in range(len(rows)) if i not in touched]
    return "\n".join(lines) + "\n", untouched


@SETTINGS
@given(corrupted_csv())
def test_a_corrupted_csv_loads_its_untouched_rows_or_says_where(case):
    text, untouched = case
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "log.csv"
        path.write_text(text, encoding="utf-8")
        try:
            log = read_requests(path, on_error="report")
        except ValueError as error:
            assert LOCATION.search(str(error)), str(error)
            return
    loaded = log.requests.set_index("request_id")
    missing = [i for i in untouched if i not in loaded.index]
    assert not missing, (missing, log.rejected)
    pd.testing.assert_frame_equal(
        loaded.loc[untouched, COMPARED], CLEAN_CSV.loc[untouched, COMPARED], check_dtype=False
    )


EXPORTS = {
    "vllm_bench_detailed.json": "vllm",
    "genai_perf_profile_export.json": "genai-perf",
    "llmperf_individual_responses.json": "llmperf",
    "aiperf_profile_export.jsonl": "aiperf",
}
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=False),
    st.text(max_size=5),
    st.just([]),
    st.just({}),
    st.just([1, "a"]),
)


def _load(name: str):
    text = (DATA / name).read_text(encoding="utf-8")
    if name.endswith(".jsonl"):
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return json.loads(text)


def _dump(name: str, data) -> str:
    if name.endswith(".jsonl"):
        return "\n".join(json.dumps(record) for record in data) + "\n"
    return json.dumps(data)


@st.composite
def corrupted_export(draw):
    """A tool export with one value replaced or one key deleted somewhere inside it."""
    name = draw(st.sampled_from(sorted(EXPORTS)))
    data = _load(name)
    node, path = data, []
    while isinstance(node, (dict, list)) and node and draw(st.integers(0, 3)) > 0:
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        key = draw(st.sampled_from(keys))
        if not isinstance(node[key], (dict, list)) or not node[key]:
            break
        path.append(key)
        node = node[key]
    if isinstance(node, (dict, list)) and node:
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        key = draw(st.sampled_from(keys))
        if isinstance(node, dict) and draw(st.booleans()):
            del node[key]
        else:
            node[key] = draw(VALUES)
    return name, _dump(name, data)


@SETTINGS
@given(corrupted_export())
def test_a_corrupted_tool_export_loads_or_raises_a_value_error_naming_the_file(case):
    name, text = case
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name
        path.write_text(text, encoding="utf-8")
        for fmt in ("auto", EXPORTS[name]):
            try:
                log = read_requests(path, format=fmt, on_error="report")
            except ValueError as error:
                assert LOCATION.search(str(error)) or path.name in str(error), str(error)
                continue
            assert len(log) + log.rejected["row"].nunique() >= 1


@pytest.mark.parametrize("name", sorted(EXPORTS))
def test_the_clean_exports_load_with_six_requests(name):
    assert len(read_requests(DATA / name)) == 6
