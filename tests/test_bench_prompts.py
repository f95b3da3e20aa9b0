"""Nothing flattered: warm-up and every sweep load send prompts no measured request sent
before (a prompt cache cannot answer them), only a shared prefix is reused, and the prompt
tokens the server counted are set beside those asked for (a BOS token, a chat template).

Against the scripted stub (``llminfer.bench.stub``): it records every body it was sent.
"""

import json

import numpy as np
import pytest

from llminfer.bench import accounting, bench, records_frame, sweep_server
from llminfer.bench.client import RequestRecord
from llminfer.bench.prompts import plan_requests
from llminfer.bench.results import prompt_tokens_line
from llminfer.bench.stub import Reply, StubServer, completion_chunk, sse
from llminfer.sim.workload import Workload


def counting_reply(extra_tokens: int = 1, cached: int | None = None):
    """A stub reply whose usage counts each prompt word as a token, plus ``extra_tokens``."""
    sent: list[dict] = []

    def reply(body: dict) -> Reply:
        sent.append(body)
        n = len(body["prompt"].split()) + extra_tokens
        usage = {"prompt_tokens": n, "completion_tokens": 2, "total_tokens": n + 2}
        if cached is not None:
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
        pieces = [
            (0.0, completion_chunk(" a")),
            (0.0, completion_chunk(" b", finish="length")),
            (0.0, sse({"choices": [], "usage": usage, "timings": {"cache_n": 0, "prompt_n": n}})),
            (0.0, sse("[DONE]")),
        ]
        return Reply(pieces=pieces)

    return reply, sent


def test_warmup_prompts_are_never_measured_prompts_and_keep_the_lengths():
    workload = Workload(6, concurrency=2, prompt_tokens=(3, 12), output_tokens=2, seed=3)
    reply, sent = counting_reply()
    with StubServer(reply) as stub:
        run = bench(stub.url, workload, "stub", warmup=4)
    warm = [body["prompt"] for body in sent[:4]]
    measured = [body["prompt"] for body in sent[4:]]
    assert set(warm).isdisjoint(measured)
    assert [r.prompt for r in run.warmup] == warm and {r.prompt for r in run.records} == set(
        measured
    )
    # the warm-up has the measured requests' lengths (their first four), other words
    first = plan_requests(workload)
    assert [len(p.split()) for p in warm] == list(first["prompt_tokens"][:4])
    # the measured prompts are the plain plan's: a run without warm-up measures the same
    assert set(measured) == set(first["prompt"])


def test_shared_prefix_stays_shared_with_the_warmup_the_rest_differs():
    workload = Workload(
        4, concurrency=1, prompt_tokens=20, output_tokens=2, shared_prefix_tokens=8, seed=1
    )
    measured = plan_requests(workload)["prompt"]
    warm = plan_requests(workload, salt=123)["prompt"]
    assert {p.split()[:8] == measured[0].split()[:8] for p in [*measured, *warm]} == {True}
    assert set(warm).isdisjoint(measured)


def test_one_word_prompts_are_redrawn_until_they_differ():
    workload = Workload(20, concurrency=1, prompt_tokens=1, output_tokens=2)
    measured = plan_requests(workload)["prompt"]
    warm = plan_requests(workload, salt=5, avoid=measured)["prompt"]
    assert set(warm).isdisjoint(measured)
    with pytest.raises(ValueError, match="salt="):
        plan_requests(workload, salt=-1)


def test_every_sweep_load_sends_prompts_of_its_own():
    workload = Workload(4, concurrency=1, prompt_tokens=10, output_tokens=2)
    reply, sent = counting_reply()
    with StubServer(reply) as stub:
        table, _ = sweep_server(stub.url, workload, "stub", concurrencies=[1, 2, 3], warmup=2)
    # per load: 2 warm-up then 4 measured
    loads = [sent[i * 6 : (i + 1) * 6] for i in range(3)]
    prompts = [{b["prompt"] for b in load} for load in loads]
    assert sum(len(p) for p in prompts) == 18 == len(set().union(*prompts))
    assert list(table["requested_input_tokens"]) == [40, 40, 40]
    assert list(table["server_input_tokens"]) == [44, 44, 44]  # +1 per request


def test_prompt_tokens_line_names_the_bos_token_and_cache():
    reply, _ = counting_reply(extra_tokens=1, cached=0)
    with StubServer(reply) as stub:
        run = bench(stub.url, Workload(5, concurrency=2, prompt_tokens=128, output_tokens=2), "s")
    frame = records_frame(run.records)
    assert accounting(run)["ok"] == 5
    assert list(frame["requested_input_tokens"]) == [128] * 5
    assert list(frame["input_tokens"]) == [129] * 5
    assert list(frame["cached_input_tokens"]) == [0] * 5
    line = prompt_tokens_line(frame)
    assert line.startswith("server counted 645 prompt tokens for 640 requested")
    assert "(+1 per request: a BOS token?)" in line
    assert "0 of them from the server's prompt cache (0 of 5 requests" in line


def test_prompt_tokens_line_other_cases():
    def frame(counted, requested, cached=None, source="usage"):
        records = []
        for i, (c, r) in enumerate(zip(counted, requested, strict=True)):
            usage = {"prompt_tokens": c, "completion_tokens": 1}
            if cached is not None:
                usage["prompt_tokens_details"] = {"cached_tokens": cached[i]}
            rec = RequestRecord(str(i), r, 1, 0.0, 1.0, [0.5], usage=usage if source else None)
            records.append(rec)
        return records_frame(records)

    assert "(the same, all 2 requests)" in prompt_tokens_line(frame([5, 5], [5, 5]))
    assert "+3 per request: a chat template" in prompt_tokens_line(frame([8, 9], [5, 6]))
    assert "+0 to +2 per request" in prompt_tokens_line(frame([5, 8], [5, 6]))
    hit = prompt_tokens_line(frame([9, 9], [8, 8], cached=[8, 0]))
    assert "8 of them from the server's prompt cache (1 of 2 requests" in hit
    assert prompt_tokens_line(frame([5], [5], source=None)) is None


def test_cached_tokens_from_usage_or_llama_cpp_timings():
    rec = RequestRecord("a", 4, 1, usage={"prompt_tokens_details": {"cached_tokens": 3}})
    assert rec.cached_tokens() == 3
    rec = RequestRecord("b", 4, 1, timings={"cache_n": 2, "prompt_n": 3})
    assert rec.cached_tokens() == 2
    for bad in (-1, True, "3", 2.5, None):
        rec = RequestRecord("c", 4, 1, usage={"prompt_tokens_details": {"cached_tokens": bad}})
        assert rec.cached_tokens() is None
    frame = records_frame([RequestRecord("d", 4, 1, 0.0, 1.0, [0.5])])
    assert np.isnan(frame["cached_input_tokens"].iloc[0])
    assert json.dumps(int(frame["requested_input_tokens"].iloc[0])) == "4"


def test_bench_cli_warns_when_measured_prompts_came_from_the_cache(tmp_path, capsys):
    from llminfer.cli import main

    reply, sent = counting_reply(extra_tokens=1, cached=100)
    with StubServer(reply) as stub:
        args = ["bench", stub.url, "--model", "s", "--n", "3", "--concurrency", "1"]
        args += ["--prompt-tokens", "128", "--output-tokens", "2", "--no-progress"]
        code = main([*args, "--out", str(tmp_path / "a.csv")])
        out = capsys.readouterr()
        assert code == 0 and "warning: 3 measured requests had more than half" in out.err
        assert "--prompt-salt" in out.err
        main([*args, "--prompt-salt", "7", "--out", str(tmp_path / "b.csv")])
    first, second = {b["prompt"] for b in sent[:3]}, {b["prompt"] for b in sent[3:]}
    assert len(first) == len(second) == 3 and first.isdisjoint(second)
