"""A real third-party server: llama.cpp's ``llama-server`` (pinned, built by ``make
llama-server``) serving a tiny random-weight Llama written here with the ``gguf`` package,
on 127.0.0.1 with ``--parallel 8 --metrics``, measured by ``bench``, the notebook-08 sweep
(``sweep_server``) and read by ``diagnose --metrics``.

What is checked: nothing lost at 1–16 users (the server's keep-alive closes are retried), no
measured request answered from the prompt cache by its warm-up or an earlier load, every
request's tokens accounted for (the server's count beside the one asked for: its BOS token,
the chat template's words), and llama.cpp's /metrics names read. Skipped — with the command that
builds it — where the binary is missing. Each test takes a few seconds on 2 shared cores.
"""

import json
import os
import re
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from llminfer.bench import accounting, bench, records_frame, sweep_server
from llminfer.bench.llamacpp import LlamaServer, find_llama_server, llama_server_path
from llminfer.bench.results import prompt_tokens_line
from llminfer.cli import main
from llminfer.diagnose.scrape import NAMES, combine, parse_scrape
from llminfer.sim.workload import Workload
from llminfer.specs.describe import resolve_model

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "scrapes"
IGNORE_EOS = {"ignore_eos": True}

pytestmark = pytest.mark.skipif(
    find_llama_server() is None,
    reason=f"llama-server is not built ({os.environ.get('LLAMA_SERVER') or llama_server_path()} "
    "is missing): run `make "
    "llama-server` (scripts/build_llama_server.sh: cmake and a C++ compiler, ~9 min on 2 cores)",
)


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    pytest.importorskip("gguf", reason="the tiny model is written with gguf (requirements.txt)")
    from llminfer.bench.llamacpp import write_tiny_gguf

    return write_tiny_gguf(tmp_path_factory.mktemp("gguf") / "tiny-random-llama.gguf")


@pytest.fixture(scope="module")
def server(model_path):
    with LlamaServer(model_path, parallel=8, context=8192, shutdown_after=300) as running:
        yield running


def test_the_tiny_model_tokenizes_one_word_per_token(server):
    props = server.get("/props")
    assert props["total_slots"] == 8
    assert props["default_generation_settings"]["n_ctx"] in (1024, 8192)  # per slot, or unified
    request = urllib.request.Request(
        server.base + "/tokenize",
        data=json.dumps({"content": "the of people", "add_special": True}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as reply:
        tokens = json.load(reply)["tokens"]
    assert len(tokens) == 4 and tokens[0] == 1  # BOS, then one token per word


def test_closed_loop_loses_nothing_at_1_to_16_users(server):
    workload = Workload(16, concurrency=1, prompt_tokens=32, output_tokens=8, seed=11)
    before = parse_scrape(server.get("/metrics"))
    table, logs = sweep_server(
        server.url, workload, "tiny", concurrencies=[1, 4, 8, 16], extra_body=IGNORE_EOS
    )
    after = parse_scrape(server.get("/metrics"))
    assert list(table["failed"]) == [0, 0, 0, 0], {c: set(f["error"]) for c, f in logs.items()}
    for users, frame in logs.items():
        assert (frame["status"] == "ok").all() and len(frame) == 16, users
        # every token accounted for: the server's own counts, and what was asked for
        assert (frame["output_tokens_from"] == "usage").all()
        assert (frame["output_tokens"] == 8).all()
        assert (frame["input_tokens"] == frame["requested_input_tokens"] + 1).all()  # BOS
    assert list(table["server_input_tokens"]) == [16 * 33] * 4
    # the server's own counters: each request computed once — none lost, none sent twice
    # (a retry went out only when the first try had not reached it)
    run = combine([before, after])
    assert run.prompt_tokens + run.cached_prompt_tokens == 4 * 16 * 33
    assert run.generation_tokens == 4 * 16 * 8
    # each load sent prompts of its own: the prompt cache answered none of them
    for frame in logs.values():
        assert (frame["cached_input_tokens"] <= 2).all(), frame["cached_input_tokens"].tolist()


def test_warmup_is_not_a_cache_hit_and_a_repeat_would_be(server):
    workload = Workload(6, concurrency=1, prompt_tokens=128, output_tokens=4, seed=5)
    run = bench(server.url, workload, "tiny", warmup=6, extra_body=IGNORE_EOS)
    assert accounting(run) == {"sent": 6, "ok": 6, "failed": 0, "unfinished": 0, "warmup": 6}
    assert {r.prompt for r in run.warmup}.isdisjoint(r.prompt for r in run.records)
    measured = [r.cached_tokens() for r in run.records]
    assert all(c is not None and c <= 2 for c in measured), measured  # BOS, a chance word
    # computed, not cached: llama.cpp's own timings say it evaluated the whole prompt
    assert all(r.timings["prompt_n"] >= 127 for r in run.records), [r.timings for r in run.records]
    # what the old warm-up did: the same prompt again is answered from the cache
    again = bench(server.url, workload, "tiny", extra_body=IGNORE_EOS)
    hits = [r.cached_tokens() for r in again.records]
    assert all(c >= 120 for c in hits), hits
    line = prompt_tokens_line(records_frame(again.records))
    assert "(+1 per request: a BOS token?)" in line and "6 of 6 requests had more than" in line


def test_chat_counts_the_template_words_and_says_so(server):
    workload = Workload(4, concurrency=2, prompt_tokens=20, output_tokens=4, seed=2)
    run = bench(server.url, workload, "tiny", chat=True, extra_body=IGNORE_EOS)
    frame = records_frame(run.records)
    assert accounting(run)["ok"] == 4
    assert (frame["input_tokens"] - frame["requested_input_tokens"] == 3).all()
    assert "(+3 per request: a chat template" in prompt_tokens_line(frame)


def test_bench_cli_and_diagnose_metrics_describe_the_server(server, tmp_path, capsys):
    before = tmp_path / "before.txt"
    before.write_text(server.get("/metrics"))
    log = tmp_path / "log.csv"
    code = main(
        [
            "bench", server.url, "--concurrency", "4", "--n", "12", "--prompt-tokens", "64",
            "--output-tokens", "8", "--ignore-eos", "--warmup", "2", "--no-progress",
            "--out", str(log),
        ]
    )  # fmt: skip
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "ok 12, failed 0" in out.out
    assert "server counted 780 prompt tokens for 768 requested (+1 per request: a BOS token?)" in (
        out.out
    )
    after = tmp_path / "after.txt"
    after.write_text(server.get("/metrics"))
    scraped = parse_scrape(after.read_text())
    assert scraped.engine == "llama.cpp" and scraped.running is not None
    assert scraped.prompt_tokens - parse_scrape(before.read_text()).prompt_tokens >= 12 * 60
    code = main(
        [
            "diagnose", str(log), "--metrics", str(before), "--metrics", server.base + "/metrics",
            "--model", server.base, "--gpu", "measure", "--json",
        ]
    )  # fmt: skip
    out = capsys.readouterr()
    assert code in (0, 1, 3), out.err  # a verdict, not "bad input" (2)
    report = json.loads(out.out)
    assert report["verdict"]
    # no --engine: the slots come from the server's /props (--parallel 8)
    assert report["engine_from"] == f"engine: 8 slots (--parallel), read from {server.base}/props"
    # nor --weight-dtype: the GGUF /props names is F32, so not the bf16 a preset would assume
    path = server.get("/props")["model_path"]
    assert report["weights_from"] == f"weights: F32 in {path}, counted as fp32"
    assert "bf16 →" not in out.out
    model = resolve_model(server.base)  # what --model read: the GGUF /props names
    assert (model.name, model.n_layers, model.hidden_size) == ("llminfer-tiny-random", 2, 64)


def test_saved_fixture_scrapes_have_this_servers_names(server):
    live = {m.group(1) for m in re.finditer(r"^(llamacpp:\w+)", server.get("/metrics"), re.M)}
    for name in ("llamacpp_metrics_before.txt", "llamacpp_metrics_after.txt"):
        saved = set(re.findall(r"^(llamacpp:\w+)", (FIXTURES / name).read_text(), re.M))
        assert saved == live, saved ^ live
    read = {n for names in NAMES.values() for n in names if n.startswith("llamacpp:")}
    assert read - live == {"llamacpp:kv_cache_usage_ratio"}  # older builds only
    assert np.isfinite(parse_scrape(server.get("/metrics")).generation_tokens)


def test_stderr_names_the_servers_own_message(server, tmp_path, capsys):
    n_ctx = server.get("/props")["default_generation_settings"]["n_ctx"]
    code = main(
        [
            "bench", server.url, "--n", "3", "--concurrency", "2", "--prompt-tokens",
            str(n_ctx + 10), "--output-tokens", "4", "--no-progress",
            "--out", str(tmp_path / "log.csv"),
        ]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1
    assert f"failed 3: HTTP 400: request ({n_ctx + 11} tokens) exceeds the available context" in err
