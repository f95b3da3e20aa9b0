"""Issue 11 through the Python API: the rules a log reader, the calculators and the widgets
follow for bad input (one documented rule each, a ValueError naming parameter and value)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from llminfer.cost import memory
from llminfer.logs.logfile import record_lines
from llminfer.logs.reading import read_requests
from llminfer.logs.schema import BadRowsError, LogError
from llminfer.logs.timeunits import TIME_UNIT_RULE
from llminfer.specs.presets import get_gpu, get_model


def _frame(**changes) -> pd.DataFrame:
    frame = pd.DataFrame(
        {  # the article's three requests (chapter 6)
            "request_id": ["r1", "r2", "r3"],
            "start_ts": [0.00, 0.15, 0.40],
            "first_token_ts": [0.42, 0.71, 0.88],
            "end_ts": [3.10, 4.36, 2.92],
            "input_tokens": [1024, 4096, 512],
            "output_tokens": [80, 96, 64],
        }
    )
    return frame.assign(**changes)


def test_ids_7_and_text_7_are_one_id_and_reported():
    log = read_requests(_frame(request_id=[7, "7", "x"]), on_error="report")
    assert list(log.rejected["row"]) == [1] and "7 and '7'" in log.rejected.loc[0, "reason"]
    with pytest.raises(BadRowsError, match="row 1, column request_id, value '7'"):
        read_requests(_frame(request_id=[7, "7", "x"]))


def test_na_null_and_none_are_ids_but_blank_is_missing(tmp_path):
    path = tmp_path / "ids.csv"
    path.write_text(
        "request_id,start_ts,first_token_ts,end_ts,input_tokens,output_tokens\n"
        "NA,0,0.4,3.1,10,5\nnull,0,0.4,3.1,10,5\nNone,0,0.4,3.1,10,5\n  ,0,0.4,3.1,10,5\n"
    )
    log = read_requests(path, on_error="report")
    assert list(log.requests["request_id"]) == ["NA", "null", "None"]
    assert log.rejected.loc[0, "reason"] == "missing request_id"


def test_a_blank_id_is_blank_as_python_says_for_arrow_and_object_text():
    from llminfer.logs.validation import _blank

    cells = ["", " ", "\t\n", "\u3000", "\xa0", "\u2028", "a ", " a", "NA", "\x00"]
    expected = [not c.strip() for c in cells]
    for dtype in ("str", object):
        assert _blank(pd.Series(cells, dtype=dtype)).tolist() == expected


def test_a_blank_status_is_not_stated_whether_empty_or_spaces():
    log = read_requests(_frame(status=["", "  ", None], error=["", "", "timeout"]))
    assert list(log.requests["status"]) == ["ok", "ok", "failed"]


def test_hex_and_counts_beyond_2_to_the_53_are_rejected_not_converted():
    log = read_requests(_frame(input_tokens=["0x10", str(2**53 + 1), "512"]), on_error="report")
    assert list(log.rejected["reason"]) == [
        "input_tokens is not a number",
        "input_tokens is too large to be a token count",
    ]


def _csv(tmp_path, frame: pd.DataFrame):
    path = tmp_path / "log.csv"
    frame.to_csv(path, index=False)
    return path


def test_time_unit_rule_refuses_milliseconds_and_converts_when_told(tmp_path):
    ms = _frame(**{c: _frame()[c] * 1000 for c in ("start_ts", "first_token_ts", "end_ts")})
    with pytest.raises(LogError, match="time_unit='ms'") as caught:
        read_requests(_csv(tmp_path, ms))
    assert TIME_UNIT_RULE in str(caught.value)
    assert "--time-unit ms" in caught.value.cli_message()
    log = read_requests(ms, time_unit="ms")
    assert log.requests["end_ts"].tolist() == pytest.approx([3.10, 4.36, 2.92])
    with pytest.raises(ValueError, match="time_unit='hours' is not known"):
        read_requests(ms, time_unit="hours")


def test_a_median_tpot_of_2_s_is_the_limit(tmp_path):
    # r1: 79 gaps of 2 s → TPOT exactly 2 s: allowed; 2.1 s is not.
    ok = _frame(end_ts=[0.42 + 79 * 2.0, 0.71 + 95 * 2.0, 0.88 + 63 * 2.0])
    assert len(read_requests(_csv(tmp_path, ok))) == 3
    slow = _csv(tmp_path, _frame(end_ts=[0.42 + 79 * 2.1, 0.71 + 95 * 2.1, 0.88 + 63 * 2.1]))
    with pytest.raises(LogError, match=r"median TPOT would be 2\.1 s"):
        read_requests(slow)
    assert len(read_requests(slow, time_unit="s")) == 3  # told: seconds, really
    # A DataFrame is the program's own data: converted when told, never second-guessed.
    assert len(read_requests(pd.read_csv(slow))) == 3


def test_record_lines_count_blank_lines_and_quoted_breaks(tmp_path):
    path = tmp_path / "q.csv"
    path.write_text('a,b\n\n"x\ny",1\n\n   \nz,2\nw,3\n')
    assert record_lines(path, [0, 1, 2]) == {0: 3, 1: 7, 2: 8}


def test_an_empty_dataframe_is_an_empty_log():
    assert len(read_requests(_frame().iloc[0:0])) == 0


LLAMA = get_model("llama-3.1-8b")


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: memory.weight_bytes(math.nan), "model=nan"),
        (lambda: memory.weight_bytes(math.inf), "model=inf"),
        (lambda: memory.kv_cache_gib(32, 8, 128, 8192, math.nan), "bytes_per_element=nan"),
        (lambda: memory.kv_cache_gib(32, 8, 128, 8192, math.inf), "bytes_per_element=inf"),
        (lambda: memory.kv_capacity_tokens(LLAMA, math.nan), "kv_budget_bytes=nan"),
        (lambda: memory.max_concurrency(LLAMA, math.inf, 8192), "kv_budget_bytes=inf"),
        (lambda: memory.max_concurrency(LLAMA, 1e400, 8192), "kv_budget_bytes=inf"),
        (
            lambda: memory.plan_memory(LLAMA, get_gpu("h100-sxm"), reserve_bytes=math.inf),
            "reserve_bytes=inf",
        ),
    ],
)
def test_calculators_refuse_nan_and_inf_naming_the_parameter(call, name):
    with pytest.raises(ValueError, match=name.replace("(", r"\(")):
        call()


def test_a_context_beyond_the_model_does_not_fit():
    plan = memory.plan_memory(LLAMA, get_gpu("h200"), context_tokens=LLAMA.max_context + 1)
    assert not plan.fits and "maximum context of 131,072 tokens" in plan.reason
    assert memory.plan_memory(LLAMA, get_gpu("h200"), context_tokens=LLAMA.max_context).fits


def test_a_bad_widget_argument_names_the_parameter():
    from llminfer.widgets.memory import MemoryExplorer

    with pytest.raises(ValueError, match=r"MemoryExplorer\(model='gpt-9'\): model must be one"):
        MemoryExplorer(model="gpt-9")
    with pytest.raises(ValueError, match=r"n_gpus=100\): n_gpus must be an integer from 1 to 8"):
        MemoryExplorer(n_gpus=100)  # a slider would clamp it to 8 without a word
    with pytest.raises(ValueError, match="context_tokens must be one of 512, 1024"):
        MemoryExplorer(context_tokens=1000)
