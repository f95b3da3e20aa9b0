"""Chapter 7: the procedure names the right bottleneck, says "can't tell" without data, and
the case-study logs are exactly what their seeds produce."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from llminfer import Diagnosis, Finding, get_gpu, get_model, read_requests
from llminfer.cases import CASE_SLO, CASE_STUDIES
from llminfer.cli import main
from llminfer.diagnose import STEPS, diagnose, procedure_table, remeasure
from llminfer.metrics import request_metrics
from llminfer.signals import in_flight_at_arrival, overlapping_prefill_tokens, rank_correlation

DATA = Path(__file__).resolve().parent.parent / "data"
SIMULATOR_COLUMNS = ["scheduled_ts", "preemptions", "cached_prefix_tokens", "prefix_group"]


def case_log(name: str):
    return read_requests(DATA / CASE_STUDIES[name].data_file)


@pytest.mark.parametrize("name", list(CASE_STUDIES))
def test_names_the_bottleneck_of_every_case_study(name):
    case = CASE_STUDIES[name]
    report = diagnose(case_log(name), slo=CASE_SLO, **case.deployment.diagnose_kwargs())
    assert [f.step for f in report.findings] == list(STEPS)
    primary = report.primary.step if report.primary else None
    assert primary == case.expected
    # Without the deployment the log alone still points at the same step.
    alone = diagnose(case_log(name), slo=CASE_SLO)
    assert (alone.primary.step if alone.primary else None) == case.expected


@pytest.mark.parametrize("name", [n for n, c in CASE_STUDIES.items() if c.fix])
def test_the_suggested_change_cures_the_case(name):
    case = CASE_STUDIES[name]
    after = case.run(fixed=True)
    report = diagnose(after.log, slo=CASE_SLO, **case.fixed_deployment.diagnose_kwargs())
    assert report.primary is None
    table = remeasure(case_log(name), after.log, CASE_SLO)
    assert table.loc["good_fraction", "after"] > table.loc["good_fraction", "before"]
    assert table.loc["good_fraction", "after"] >= 0.95


def test_case_study_files_are_what_the_seeds_produce():
    for case in CASE_STUDIES.values():
        stored = pd.read_csv(DATA / case.data_file)
        fresh = case.run().requests
        assert list(stored.columns) == list(fresh.columns)
        for column in ["start_ts", "scheduled_ts", "first_token_ts", "end_ts"]:
            np.testing.assert_allclose(stored[column], fresh[column], atol=1e-6)
        assert (stored["output_tokens"] == fresh["output_tokens"]).all()


def test_cant_tell_when_fields_are_missing():
    bare = pd.read_csv(DATA / CASE_STUDIES["kv_exhausted"].data_file).drop(
        columns=SIMULATOR_COLUMNS
    )
    report = diagnose(read_requests(bare), slo=CASE_SLO)
    memory = report.finding("memory")
    assert memory.verdict == "cant_tell"
    assert "preemptions column" in memory.missing and "model and gpu" in memory.missing
    # Queueing is still found, but only by correlation, and prefill cannot be split off.
    assert report.finding("queueing").verdict == "problem"
    assert "correlation" in report.finding("queueing").cause
    prefill = report.finding("prefill")
    assert prefill.verdict == "cant_tell" and prefill.missing == ("scheduled_ts",)


def test_too_few_requests_cannot_be_judged():
    few = pd.read_csv(DATA / CASE_STUDIES["healthy"].data_file).head(20)
    report = diagnose(read_requests(few), slo=CASE_SLO)
    assert report.finding("workload").verdict == "cant_tell"
    assert report.finding("saturation").verdict == "cant_tell"


def test_failures_come_first():
    frame = pd.read_csv(DATA / CASE_STUDIES["healthy"].data_file)
    frame["error"] = np.where(np.arange(len(frame)) % 20 == 0, "timeout", "")  # 5 %
    report = diagnose(read_requests(frame), slo=CASE_SLO)
    assert report.primary.step == "failures"
    assert report.primary.evidence["failed_fraction"] == pytest.approx(0.05)


def test_memory_compares_tokens_in_flight_with_capacity():
    case = CASE_STUDIES["kv_exhausted"]
    bare = pd.read_csv(DATA / case.data_file).drop(columns=["preemptions"])
    report = diagnose(read_requests(bare), slo=CASE_SLO, **case.deployment.diagnose_kwargs())
    memory = report.finding("memory")
    assert memory.verdict == "problem"
    assert memory.evidence["peak_share_of_capacity"] >= 0.95


def test_in_flight_at_arrival_by_hand():
    frame = pd.DataFrame(
        {
            "request_id": ["r0", "r1", "r2", "r3"],
            "start_ts": [0.0, 1.0, 2.0, 2.5],
            "first_token_ts": [0.5, 1.2, 2.2, 2.6],
            "end_ts": [3.0, 1.5, 4.0, 5.0],
            "input_tokens": [10] * 4,
            "output_tokens": [5] * 4,
        }
    )
    # r0 alone; r1 with r0; r2 with r0 (r1 ended at 1.5); r3 with r0 and r2
    assert in_flight_at_arrival(read_requests(frame)).tolist() == [1, 2, 2, 3]


def test_overlapping_prefill_tokens_by_hand():
    frame = pd.DataFrame(
        {
            "request_id": ["a", "b"],
            "start_ts": [0.0, 2.0],
            "first_token_ts": [1.0, 3.0],
            "end_ts": [5.0, 3.5],
            "input_tokens": [100, 400],
            "output_tokens": [10, 5],
        }
    )
    rates = overlapping_prefill_tokens(request_metrics(read_requests(frame)))
    # b's 400 prompt tokens run during a's 4-second decode; nothing overlaps b's decode.
    assert rates[0] == pytest.approx(400 / 4, rel=0.01)
    assert rates[1] == pytest.approx(0.0, abs=1e-9)


def test_report_renders_and_finding_validates():
    report = diagnose(case_log("prefill_interference"), slo=CASE_SLO)
    text = str(report)
    assert text.startswith("primary bottleneck: decode")
    assert "chunked prefill" in text
    assert "<table>" in report._repr_html_()
    assert list(report.to_frame().index) == list(STEPS)
    assert isinstance(report, Diagnosis)
    with pytest.raises(ValueError, match="verdict='bad'"):
        Finding("decode", "bad", {}, "")
    with pytest.raises(ValueError, match="step='gpu'"):
        report.finding("gpu")


def test_procedure_table_lists_every_step_with_its_chapter():
    table = procedure_table()
    assert list(table.index) == list(STEPS)
    assert table.loc["memory", "chapter"] == "04_memory_budget"
    assert "95%" in table.loc["memory", "rule"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"slo": {"ttft": 1}}, "slo key 'ttft'"),
        ({"slo": {"ttft_s": -1}}, r"slo\['ttft_s'\]=-1"),
        ({"model": "llama-3.1-8b"}, "model='llama-3.1-8b' must be a Model"),
        ({"gpu": "h100"}, "gpu='h100' must be a GPU"),
        ({"engine": {"block_size": 16}}, "engine=.*must be an llminfer.simulate.EngineConfig"),
    ],
)
def test_bad_input_raises_naming_the_parameter(kwargs, message):
    with pytest.raises(ValueError, match=message):
        diagnose(case_log("healthy"), **kwargs)


def test_cli_diagnose(capsys):
    path = str(DATA / CASE_STUDIES["prefill_interference"].data_file)
    code = main(["diagnose", path, "--model", "llama-3.1-8b", "--gpu", "h100-sxm",
                 "--slo", "ttft=1s,tpot=20ms"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0 and "primary bottleneck: decode" in out
    assert main(["diagnose", path, "--model", "llama-3.1-8b"]) == 2
    assert "--model and --gpu go together" in capsys.readouterr().err
    assert main(["diagnose", "no-such-file.csv"]) == 2


def test_widget_follows_its_controls():
    from llminfer.widgets import DiagnosisExplorer

    w = DiagnosisExplorer(case="kv_exhausted")
    assert w.result.primary.step == "memory" and w.figure is not None
    w.controls["fixed"].value = True
    assert w.result.primary is None
    w.controls["tpot_ms"].value = w.controls["tpot_ms"].min
    assert w.result.primary.step == "decode"
    w.controls["case"].value = "healthy"
    assert w.error is None


def test_model_and_gpu_enable_the_bandwidth_floor():
    report = diagnose(
        case_log("healthy"), slo=CASE_SLO, model=get_model("llama-3.1-8b"),
        gpu=get_gpu("h100-sxm"),
    )  # fmt: skip
    decode = report.finding("decode")
    assert (
        decode.evidence["tpot_floor_s"] == pytest.approx(decode.evidence["tpot_floor_s"])
        and 1 <= decode.evidence["low_load_tpot_over_floor"] < 3
    )


def test_rank_correlation_needs_enough_pairs():
    x = np.arange(30, dtype=float)
    assert rank_correlation(x, x**3) == pytest.approx(1.0)
    assert rank_correlation(x, -x) == pytest.approx(-1.0)
    assert np.isnan(rank_correlation(x[:5], x[:5]))  # five points prove nothing
    assert np.isnan(rank_correlation(x, np.ones_like(x)))  # no spread
