"""Chapter 7's diagnosis report in Chinese (set_language("zh")), and unchanged in English.

The steps, verdicts, causes, evidence names, findings, suggestions, notes, the procedure and
causes tables, step 0's actions, the case-study texts and the scrape errors all come out in
Chinese; the keys a program tests (steps, verdicts, causes, evidence, suggestion keys, JSON
fields) stay as they are; and English, the default, says exactly what it said before.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from llminfer import get_gpu, get_model, read_requests
from llminfer.cli import parse_engine
from llminfer.diagnose.cases import CASE_SLO, CASE_STUDIES
from llminfer.diagnose.findings import CAUSES, STEPS
from llminfer.diagnose.measurement import measurement_step
from llminfer.diagnose.procedure import causes_table, procedure_table
from llminfer.diagnose.run import diagnose
from llminfer.diagnose.scrape import parse_scrape, read_scrape
from llminfer.diagnose.suggestions import Setup, suggest
from llminfer.language import glossary, set_language
from llminfer.sim.engines import EngineConfig

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data"
PO = ROOT / "llminfer" / "language" / "locale" / "zh" / "LC_MESSAGES" / "diagnose.po"
HAN = re.compile(r"[\u4e00-\u9fff]")
#: Three or more English words in a row: a sentence left untranslated.
ENGLISH = re.compile(r"[A-Za-z][a-z']+(?: [A-Za-z][a-z']+){2,}")


@pytest.fixture
def zh(language_back):
    set_language("zh")


def han_share(text: str) -> float:
    """Chinese characters among the letters of ``text`` (numbers and punctuation aside)."""
    han = len(HAN.findall(text))
    return han / max(han + len(re.findall(r"[A-Za-z]", text)), 1)


def english_left(text: str) -> list[str]:
    """Runs of English words, once the names a reader types (flags, fields, quoted errors)
    are taken out."""
    names = re.sub(r"--?[a-z][a-z0-9-]*|\b\w*_\w*\b|'[^']*'", " ", text)
    return ENGLISH.findall(names)


def case_report(name: str, **extra):
    case = CASE_STUDIES[name]
    log = read_requests(DATA / case.data_file)
    return diagnose(log, slo=CASE_SLO, **{**case.deployment.diagnose_kwargs(), **extra})


def lockstep_log(users: int = 8, rounds: int = 10) -> pd.DataFrame:
    """``users`` in a closed loop in step: sent together, prefilled one after another."""
    rng = np.random.default_rng(0)
    rows, t = [], 0.0
    for _ in range(rounds):
        starts = np.sort(t + rng.uniform(0, 0.005, users))
        first = np.maximum.accumulate(starts) + np.cumsum(0.15 * rng.uniform(0.9, 1.1, users))
        end = first[-1] + 64 * 0.02
        rows += [(s, f, end) for s, f in zip(starts, first, strict=True)]
        t = end
    start, first, end = (np.array(c) for c in zip(*rows, strict=True))
    return pd.DataFrame(
        {
            "request_id": np.arange(len(start)),
            "start_ts": start,
            "first_token_ts": first,
            "end_ts": end,
            "input_tokens": 512,
            "output_tokens": 64,
        }
    )


# --- the report -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(CASE_STUDIES))
def test_every_case_study_report_is_chinese(zh, name):
    for kind in ("vllm", "llamacpp", "sglang"):
        report = case_report(name, engine_kind=kind)
        text = str(report)
        assert han_share(text) > 0.4, text
        assert not english_left(text), english_left(text)
        assert not english_left(report._repr_html_())
        assert text.splitlines()[1].startswith("延迟目标：")
        for f in report.findings:
            assert HAN.search(f.detail), f.detail
            for s in f.suggestions:
                assert "代价：" in str(s) and HAN.search(s.action) and HAN.search(s.trades)


def test_a_log_of_its_own_without_deployment_or_enough_data_is_chinese(zh):
    bare = pd.read_csv(DATA / "case_kv_exhausted.csv").drop(
        columns=["scheduled_ts", "preemptions", "cached_prefix_tokens", "prefix_group"]
    )
    few = pd.read_csv(DATA / "case_overloaded.csv").sort_values("start_ts").tail(20)
    failed = pd.read_csv(DATA / "case_healthy.csv")
    failed.loc[failed.index[:30], "status"] = "error"
    failed.loc[failed.index[:30], "error"] = "timeout"
    reports = {
        "bare": diagnose(read_requests(bare), slo=CASE_SLO),
        "scrape": diagnose(
            read_requests(bare), slo=CASE_SLO, server=read_scrape(DATA / "vllm_metrics_v1.txt")
        ),
        "few": diagnose(read_requests(few), slo=CASE_SLO),
        "export": diagnose(read_requests(DATA / "vllm_bench_detailed.json")),
        "failures": diagnose(read_requests(failed), slo=CASE_SLO),
        "lockstep": diagnose(lockstep_log(), engine=parse_engine("parallel=8")),
        "slots unknown": diagnose(lockstep_log()),
        "slot queue": diagnose(lockstep_log(users=16), engine=parse_engine("parallel=4")),
        "no KV room": case_report("healthy", model=get_model("llama-3.1-405b"), gpu=get_gpu("l4")),
    }
    assert reports["scrape"].cause == "kv_pressure" and reports["failures"].cause == "failures"
    assert reports["lockstep"].cause == "lockstep_prefill"
    assert reports["slot queue"].cause == "slot_queue"
    assert reports["few"].verdict == "not_enough_data"
    for name, report in reports.items():
        text = str(report)
        assert han_share(text) > 0.4, (name, text)
        assert not english_left(text), (name, english_left(text))
        assert all(HAN.search(note) for note in report.notes)
    assert reports["few"].headline.startswith("数据不足：")
    assert reports["bare"].headline.startswith("问题：过载（overload），出自“排队”步骤——")
    assert "无法判断" in str(reports["bare"])  # memory can't tell without the deployment
    assert "最常见的错误：'timeout'" in reports["failures"].headline
    assert any("parallel=N" in note for note in reports["slots unknown"].notes)


def test_the_text_report_names_steps_verdicts_and_causes_in_chinese(zh):
    report = case_report("prefill_interference")
    lines = str(report).splitlines()
    assert lines[0].startswith("问题：Prefill 干扰（interference），出自“Decode”步骤——")
    assert lines[2] == "1. 工作负载   【正常】800 个成功请求：足以读出 p90"
    assert lines[3].startswith("   证据：请求数 = 800；成功请求 = 800；")
    decode = next(line for line in lines if line.startswith("6. Decode"))
    assert decode.startswith("6. Decode     【问题：Prefill 干扰（interference）】TPOT p90 ")
    tries = [line for line in lines if line.startswith("   建议：")]
    assert any(
        line.startswith("   建议：【配置】开启分块 Prefill（--enable-chunked") for line in tries
    )
    html = report._repr_html_()
    assert "<th>步骤</th><th>结论</th><th>证据</th><th>发现</th><th>建议</th>" in html
    assert "<b>问题</b><br>Prefill 干扰（interference）" in html


def test_the_keys_a_program_reads_stay_as_they_are(zh):
    report = case_report("overloaded")
    data = report.to_dict()
    assert (data["verdict"], data["cause"]) == ("problem", "overload")
    assert [s["step"] for s in data["steps"]] == list(STEPS)
    assert {"ttft_p90_s", "window"} <= set(data["steps"][3]["evidence"])
    assert [s["key"] for s in data["suggestions"]] == [s.key for s in report.suggestions]
    assert {s["cost"] for s in data["suggestions"]} <= {"setting", "software", "hardware"}
    assert HAN.search(data["headline"]) and HAN.search(data["steps"][3]["detail"])
    frame = report.to_frame()
    assert list(frame.index) == list(STEPS)
    assert set(frame["verdict"]) <= {"ok", "problem", "cant_tell"}
    assert frame.loc["queueing", "cause"] == "overload"


def test_english_is_unchanged_and_comes_back_after_chinese(language_back):
    set_language("en")
    report = case_report("prefill_interference")
    english = (str(report), report._repr_html_(), report.headline)
    assert english[0].startswith("problem: interference (step decode) — TPOT p90 ")
    assert "\n1. workload   ok: 800 successful requests: enough to read p90\n" in english[0]
    assert "   evidence: requests = 800; succeeded = 800; offered_rps = " in english[0]
    assert "   try: [setting] turn on chunked prefill (--enable-chunked-prefill" in english[0]
    assert "<th>step</th><th>verdict</th><th>evidence</th><th>finding</th>" in english[1]
    assert not HAN.search("".join(english))
    set_language("zh")
    assert str(report) != english[0]  # the frame follows the language; the details were made
    chinese = case_report("prefill_interference")
    assert HAN.search(str(chinese))
    set_language("en")
    again = case_report("prefill_interference")
    assert (str(again), again._repr_html_(), again.headline) == english


# --- tables, step 0, cases, suggestions, scrapes ------------------------------------------------


def test_the_procedure_and_causes_tables_are_chinese_with_english_keys(zh):
    table = procedure_table()
    assert list(table.index) == list(STEPS)
    assert list(table.columns) == [
        "question",
        "measurement",
        "rule",
        "min_requests",
        "chapter",
    ]
    for column in ("question", "measurement", "rule"):
        assert all(HAN.search(text) for text in table[column]), column
    assert table.loc["failures", "rule"] == "失败超过 1%"
    causes = causes_table()
    assert list(causes.index) == list(CAUSES)
    assert all(han_share(text) > 0.4 and not english_left(text) for text in causes["meaning"])


def test_the_tables_stay_english_in_english(language_back):
    set_language("en")
    assert procedure_table().loc["failures", "rule"] == "failures above 1%"
    assert causes_table().loc["overload", "meaning"] == CAUSES["overload"]
    assert not HAN.search(procedure_table().to_string() + causes_table().to_string())


def test_step_0_says_what_to_do_in_chinese(zh):
    rows = pd.concat(
        [
            measurement_step(read_requests(DATA / "real_toy_heavy.csv"), intended_rps=100.0),
            measurement_step(read_requests(DATA / "case_overloaded.csv")),
        ]
    )
    actions = [a for a in rows["action"] if a]
    assert len(actions) >= 3 and all(han_share(a) > 0.5 for a in actions), actions
    assert set(rows["verdict"]) <= {"ok", "warn", "cant_tell"}
    assert set(rows.index) == {"clocks", "warm_up", "drain", "load_generator"}


def test_case_study_texts_follow_the_language_set_after_import(language_back):
    case = CASE_STUDIES["head_of_line"]
    set_language("en")
    assert case.story.startswith("A chat service on a V1-like engine")
    english = case.fix_description
    assert "--long-prefill-token-threshold 128" in english
    set_language("zh")
    assert han_share(case.story) > 0.5 and han_share(case.fix_description) > 0.4
    assert "--long-prefill-token-threshold 128" in case.fix_description
    labels = [label for label, _, _ in CASE_STUDIES["slow_gpu"].tries()]
    assert labels == [
        "FP8 KV Cache（kv_dtype='fp8'）",
        "FP8 权重（weight_dtype='fp8'）",
        "FP8 权重 + TP = 2（n_gpus=2）",
    ]
    set_language("en")
    assert case.fix_description == english


def test_suggestions_keep_every_flag_in_chinese(zh):
    engine = EngineConfig(
        chunked_prefill=True,
        max_num_batched_tokens=8192,
        max_num_seqs=128,
        gpu_memory_utilization=0.5,
    )
    vllm = suggest("kv_pressure", Setup(engine=engine, decoding_p50=100.0))
    text = " ".join(str(s) for s in vllm)
    for flag in ("--gpu-memory-utilization", "--kv-cache-dtype fp8", "--max-num-seqs"):
        assert flag in text
    sglang = suggest("kv_pressure", Setup(engine=engine, decoding_p50=100.0, engine_kind="sglang"))
    text = " ".join(str(s) for s in sglang)
    assert "--mem-fraction-static" in text and "--kv-cache-dtype fp8_e5m2" in text
    assert "--max-running-requests" in text and "--max-num-seqs" not in text
    llamacpp = suggest("too_slow", Setup(engine_kind="llamacpp"), "tpot")
    assert any("-ngl 99" in s.action for s in llamacpp)
    for s in (*vllm, *sglang, *llamacpp):
        assert str(s).startswith(("【配置】", "【软件】", "【硬件】")), s


def test_a_bad_scrape_is_reported_in_chinese(zh):
    with pytest.raises(ValueError, match="抓取结果 <text> 中没有 vLLM 的指标"):
        parse_scrape("# HELP x y\nx 1\n")
    with pytest.raises(ValueError, match="不是 Prometheus 文本暴露格式"):
        read_scrape(DATA / "requests.csv")


def test_the_translations_use_the_glossary_and_no_variant():
    from babel.messages.pofile import read_po

    with PO.open("rb") as handle:
        catalog = read_po(handle, locale="zh")
    strings = [m.string for m in catalog if m.id]
    assert len(strings) > 300 and all(strings)
    found = [(v, s) for s in strings for v, _ in glossary.variants_in(s, "zh")]
    assert not found, found[:5]
    for term in ("KV Cache", "抢占", "槽位", "张量并行", "副本", "队头阻塞", "分块 Prefill"):
        assert any(term in s for s in strings), term
