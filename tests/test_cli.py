"""The command line: exit codes, the summary, --json keys, --slo parsing."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from llminfer.cli import main, parse_slo

DATA = Path(__file__).parent.parent / "data"


def test_metrics_prints_the_summary(capsys):
    assert main(["metrics", str(DATA / "requests.csv")]) == 0
    out = capsys.readouterr().out
    assert "output TPS: 55.05 tokens/s" in out and "ttft_s" in out


def test_json_uses_the_summary_keys(capsys):
    code = main(["metrics", str(DATA / "requests.csv"), "--json", "--slo", "ttft=500ms"])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ttft_s_p95"] == pytest.approx(0.552)
    assert data["output_tps"] == pytest.approx(240 / 4.36)
    assert data["good_fraction"] == pytest.approx(2 / 3)


def test_json_writes_null_for_goodput_without_an_slo(capsys):
    main(["metrics", str(DATA / "requests.csv"), "--json"])
    assert json.loads(capsys.readouterr().out)["goodput_rps"] is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["metrics", str(DATA / "requests_bad.csv")], "8 bad row(s)"),
        (["metrics", str(DATA / "nothere.csv")], "no such file"),
        (["metrics", str(DATA / "requests.csv"), "--slo", "ttft=fast"], "NAME=DURATION"),
        (["metrics", str(DATA / "requests.csv"), "--format", "vllm"], "is not vllm output"),
    ],
)
def test_bad_input_exits_2_with_the_message_and_no_traceback(args, message, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_report_mode_loads_valid_rows_and_lists_rejected_ones(capsys):
    code = main(["metrics", str(DATA / "requests_bad.csv"), "--on-error", "report", "--json"])
    captured = capsys.readouterr()
    assert code == 0
    assert json.loads(captured.out)["n_requests"] == 4
    assert "8 row(s) rejected" in captured.err


def test_python_dash_m_runs_and_exits_2_on_bad_input():
    ok = subprocess.run(
        [sys.executable, "-m", "llminfer", "metrics", str(DATA / "requests.csv"), "--json"],
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0 and json.loads(ok.stdout)["n_requests"] == 3
    bad = subprocess.run(
        [sys.executable, "-m", "llminfer", "metrics", str(DATA / "requests_bad.csv")],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    usage = subprocess.run([sys.executable, "-m", "llminfer"], capture_output=True, text=True)
    assert usage.returncode == 2


def test_parse_slo_units():
    assert parse_slo("ttft=500ms,tpot=50ms,e2e=10s") == {
        "ttft_s": 0.5,
        "tpot_s": 0.05,
        "e2e_s": 10.0,
    }
    assert parse_slo("ttft=2") == {"ttft_s": 2.0}
    with pytest.raises(ValueError, match="names no target"):
        parse_slo(",")


def test_n_gpus_that_does_not_split_the_heads_is_refused(capsys):
    # Llama-3.1-8B has 32 attention heads and 8 KV heads: TP 3 is refused by vLLM too.
    args = ["diagnose", str(DATA / "requests.csv"), "--model", "llama-3.1-8b", "--gpu", "h100"]
    assert main([*args, "--n-gpus", "3"]) == 2
    err = capsys.readouterr().err
    assert "--n-gpus=3" in err and "allowed: 1, 2, 4, 8, 16, 32" in err


def test_engine_settings_take_vllms_long_prefill_threshold():
    from llminfer.cli import parse_engine

    engine = parse_engine("chunked_prefill=on,long-prefill-token-threshold=128")
    assert engine.long_prefill_token_threshold == 128 and engine.chunked_prefill
    with pytest.raises(ValueError, match="long_prefill_token_threshold"):
        parse_engine("long_prefill_token_threshold=128")  # needs chunked prefill, as in vLLM


def test_benchmark_picks_one_run_of_a_file_holding_several(capsys):
    fixtures = Path(__file__).parent / "fixtures"
    sweep = str(fixtures / "guidellm_0_8_1_sweep_benchmarks.json.gz")
    assert main(["metrics", sweep, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["n_requests"] == 80  # four benchmarks of 20
    assert main(["metrics", sweep, "--benchmark", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["n_requests"] == 20
    appended = str(fixtures / "vllm_0_33_bench_serve_append_result.json")
    assert main(["diagnose", appended, "--benchmark", "-1", "--json"]) in (0, 1, 3)
    assert "'benchmark'" not in capsys.readouterr().out  # one run: no "filter column" note
    assert main(["metrics", sweep, "--benchmark", "4"]) == 2
    assert "the file holds 4 benchmark(s)" in capsys.readouterr().err
    assert main(["metrics", str(DATA / "requests.csv"), "--benchmark", "0"]) == 2
    assert "not a CSV log" in capsys.readouterr().err
    assert main(["metrics", sweep, "--benchmark", "0", "--stream"]) == 2
    assert "--benchmark does not go with --stream" in capsys.readouterr().err
