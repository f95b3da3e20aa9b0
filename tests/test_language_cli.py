"""The command line's report lines in Chinese (LLMINFER_LANG=zh), and unchanged in English.

``llminfer diagnose LOG`` prints the log's source and the whole diagnosis in the learner's
language; ``metrics`` its header and the rejected-rows report; the options, the exit codes,
the ``error:``/``warning:`` prefixes and the JSON fields stay as they are.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from llminfer import read_requests
from llminfer.cli import DIAGNOSE_EXIT, _source_line, main
from llminfer.diagnose.cases import CASE_SLO, CASE_STUDIES
from llminfer.diagnose.run import diagnose
from llminfer.language import LANGUAGE_ENV, set_language

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data"
HAN = re.compile(r"[\u4e00-\u9fff]")
ENGLISH = re.compile(r"[A-Za-z][a-z']+(?: [A-Za-z][a-z']+){2,}")


def english_left(text: str) -> list[str]:
    names = re.sub(r"--?[a-z][a-z0-9-]*|\b\w*_\w*\b|'[^']*'", " ", text)
    return ENGLISH.findall(names)


def han_share(text: str) -> float:
    han = len(HAN.findall(text))
    return han / max(han + len(re.findall(r"[A-Za-z]", text)), 1)


def test_python_m_llminfer_diagnose_speaks_chinese_with_llminfer_lang_zh():
    path = DATA / CASE_STUDIES["busy"].data_file
    env = {**os.environ, LANGUAGE_ENV: "zh", "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "llminfer", "diagnose", str(path), "--slo", "ttft=1s,tpot=20ms"]
    argv += ["--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--engine", "chunked_prefill=on"]
    out = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert out.returncode == DIAGNOSE_EXIT["problem"], out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"# csv 日志，来自 {path}"
    assert lines[1].startswith("问题：过载（overload），出自“Decode”步骤——")
    assert lines[2] == "延迟目标：TTFT p90 ≤ 1000 ms、TPOT p90 ≤ 20 ms"
    body = "\n".join(lines[1:])
    assert han_share(body) > 0.4
    assert not english_left(body), english_left(body)


def test_diagnose_prints_the_chinese_report_it_makes(language_back, capsys):
    set_language("zh")
    path = str(DATA / CASE_STUDIES["kv_exhausted"].data_file)
    assert main(["diagnose", path, "--slo", "ttft=1s,tpot=20ms"]) == DIAGNOSE_EXIT["problem"]
    shown = capsys.readouterr().out
    report = diagnose(read_requests(path), slo=CASE_SLO)
    assert shown == f"# csv 日志，来自 {path}\n{report}\n"
    assert "1. 工作负载   【正常】" in shown and "（引擎配置未知：" in shown
    assert main(["diagnose", path, "--json"]) == DIAGNOSE_EXIT["problem"]
    data = json.loads(capsys.readouterr().out)
    assert data["verdict"] == "problem" and data["steps"][0]["step"] == "workload"
    assert HAN.search(data["headline"]) and data["source"] == f"csv log from {path}"


def test_the_rejected_rows_report_and_errors_in_chinese(language_back, capsys):
    set_language("zh")
    bad = str(DATA / "requests_bad.csv")
    assert main(["metrics", bad, "--on-error", "report"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith(f"# csv 日志，来自 {bad}\n  假定：")
    assert err.startswith("8 行被拒绝（共 8 个问题），按原因统计：\n")
    assert "\n全部：\n" in err
    assert main(["diagnose", str(DATA / "requests_bad.csv"), "--metrics", bad]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "不是 Prometheus 文本暴露格式" in err


def test_english_lines_are_the_ones_before(language_back, capsys):
    set_language("en")
    bad = str(DATA / "requests_bad.csv")
    log = read_requests(bad, on_error="report")
    assert log.source.assumptions  # the header's "assumed:" line is checked too
    assert _source_line(log.source) == f"# {log.source}"
    assert main(["metrics", bad, "--on-error", "report"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith(f"# {log.source}\n")
    assert err.startswith("8 row(s) rejected (8 problem(s)) by reason:\n")
    assert "\nall of them:\n" in err
    path = str(DATA / CASE_STUDIES["healthy"].data_file)
    assert main(["diagnose", path, "--slo", "ttft=1s,tpot=20ms"]) == DIAGNOSE_EXIT["ok"]
    out = capsys.readouterr().out
    assert out.startswith(f"# csv log from {path}\nok: the targets are met")
    assert not HAN.search(out + err)
