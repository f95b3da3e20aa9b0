"""The toy server: its engine (batched decode equals one-by-one, exact lengths, chunked prefill,
preemption), and the real HTTP server measured with the load generator over loopback.

The one timing check is a ratio with a wide margin (the test machine is shared): TTFT grows
with prompt length. That batching makes 8 streams at least 3x as fast in total as 1 is a
performance target, measured by benchmarks/bench_serve_batching.py.
"""

import json
import urllib.error
import urllib.request

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from llminfer.bench import accounting, bench, records_frame
from llminfer.cli import main
from llminfer.serve import ServeConfig, ServerProcess, ToyEngine, ToyTokenizer, build_model
from llminfer.serve.engine import KVPool, decode_batch
from llminfer.sim.workload import Workload

# --- engine, no HTTP --------------------------------------------------------------------------


def test_batched_decode_equals_one_sequence_at_a_time():
    model = build_model("tiny")
    pool = KVPool(model, 3, 64)
    prompts = [[1, 2, 3, 4], [5, 6], [7, 8, 9]]
    refs = []
    for slot, prompt in enumerate(prompts):
        cache = model.new_cache(64)
        model.forward(prompt, 0, cache)
        refs.append(model.forward([11], len(prompt), cache)[-1])
        model.forward(prompt, 0, pool.cache(slot))
    out = decode_batch(model, [11, 11, 11], [4, 2, 3], pool, [0, 1, 2])
    np.testing.assert_allclose(out, np.stack(refs), rtol=1e-4, atol=1e-5)


def _drain(engine):
    steps = 0
    while engine.has_work():
        engine.step()
        steps += 1
    return steps


def test_engine_generates_exactly_max_tokens_and_frees_everything():
    engine = ToyEngine(build_model("tiny"), ServeConfig(max_num_batched_tokens=16))
    events = {n: [] for n in (1, 5, 9)}
    for n, got in events.items():
        engine.submit(list(range(40)), n, got.append)
    _drain(engine)
    for n, got in events.items():
        assert [e[0] for e in got] == ["token"] * n
        assert [e[1][1] for e in got] == [None] * (n - 1) + ["length"]
    assert engine.free_blocks == engine.config.num_kv_blocks and not engine.running


def test_chunked_prefill_keeps_each_step_within_the_token_budget():
    engine = ToyEngine(build_model("tiny"), ServeConfig(max_num_batched_tokens=32))
    got = []
    engine.submit(list(range(100)), 2, got.append)
    computed = []
    while engine.has_work():
        computed.append(engine.step())
    assert computed == [32, 32, 32, 4, 1]  # 100 prompt tokens in 4 chunks, then one decode


def test_full_kv_cache_preempts_and_recomputes_without_losing_tokens():
    config = ServeConfig(num_kv_blocks=12, block_size=16, max_num_batched_tokens=64)
    engine = ToyEngine(build_model("tiny"), config)
    got = [[] for _ in range(3)]
    for events in got:
        engine.submit(list(range(40)), 50, events.append)  # 3 × 90 tokens > 192 in the cache
    _drain(engine)
    assert engine.preemptions_total >= 1
    assert all(len(events) == 50 for events in got)
    # greedy decoding: the same prompt gives the same tokens, preempted or not
    assert [e[1][0] for e in got[0]] == [e[1][0] for e in got[2]]


def test_bad_requests_to_the_engine_name_the_limit():
    engine = ToyEngine(build_model("tiny"), ServeConfig())
    assert engine.max_context == 2048  # the toy's context: vLLM's max_model_len by default
    with pytest.raises(ValueError, match="max_tokens=0"):
        engine.check_request(5, 0)
    with pytest.raises(ValueError, match="maximum context length of 2048"):
        engine.check_request(2000, 100)
    with pytest.raises(ValueError, match="preset="):
        build_model("huge")


def test_max_model_len_caps_a_request_as_vllms_flag_does(capsys):
    engine = ToyEngine(build_model("tiny"), ServeConfig(max_model_len=64))
    engine.check_request(60, 4)  # exactly 64 tokens fit
    with pytest.raises(ValueError, match="maximum context length of 64"):
        engine.check_request(60, 5)
    with pytest.raises(ValueError, match=r"max_model_len=4096 is more than .* 2048 tokens"):
        ToyEngine(build_model("tiny"), ServeConfig(max_model_len=4096))
    with pytest.raises(ValueError, match=r"more than the KV cache holds \(2 blocks x 16"):
        ToyEngine(build_model("tiny"), ServeConfig(max_model_len=64, num_kv_blocks=2))
    with pytest.raises(ValueError, match="max_model_len=1 must be an integer >= 2"):
        ServeConfig(max_model_len=1)
    numpy_int = ToyEngine(build_model("tiny"), ServeConfig(max_model_len=np.int64(64)))
    assert type(numpy_int.max_context) is int  # it goes into /v1/models' JSON
    for flag in ("4096", "1"):  # the command: one line, no traceback, exit 2
        assert main(["serve", "--preset", "tiny", "--max-model-len", flag]) == 2
        err = capsys.readouterr().err
        assert "max_model_len" in err and "Traceback" not in err and len(err.splitlines()) == 1
    paced = ServeConfig(paced="llama-3.1-8b:h100-sxm", max_model_len=8192)
    assert ToyEngine(build_model("tiny"), paced).max_context == 8192
    assert paced.command_line()[-2:] == ["--max-model-len", "8192"]


def test_tokenizer_round_trips_generated_text():
    tok = ToyTokenizer(1024)
    text = "".join(tok.decode(i) for i in (5, 17, 1023))
    assert tok.encode(text) == [5, 17, 1023] and tok.count("the cat  sat") == 3
    assert tok.encode("hello world") == tok.encode("hello   world")


# --- the real server over loopback --------------------------------------------------------------


@pytest.fixture(scope="module")
def server():
    with ServerProcess(["--preset", "small"], shutdown_after=300) as process:
        yield process


def _post(url, body, raw=None):
    data = raw if raw is not None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status, json.load(reply)
    except urllib.error.HTTPError as err:
        return err.code, json.load(err)


def test_every_request_is_accounted_for_and_lengths_are_exact(server):
    workload = Workload(12, rate=40.0, prompt_tokens=(20, 120), output_tokens=(1, 12), seed=1)
    run = bench(server.url, workload, "toy-small", chat=True, warmup=1)
    frame = records_frame(run.records)
    assert accounting(run) == {"sent": 12, "ok": 12, "failed": 0, "unfinished": 0, "warmup": 1}
    planned = workload.requests()
    assert frame["output_tokens"].tolist() == planned["output_tokens"].tolist()
    assert frame["input_tokens"].tolist() == planned["prompt_tokens"].tolist()
    assert [len(ts) for ts in frame["token_ts"]] == planned["output_tokens"].tolist()


def test_ttft_grows_with_prompt_length(server):
    # 512 tokens, not more: the toy's prefill of 512 tokens takes ~50x one of 16 here, and one of
    # 1,024 five times that again (its float64 attention leaves the cache), for the same check
    ttft = {}
    for tokens in (16, 512):
        workload = Workload(4, concurrency=1, prompt_tokens=tokens, output_tokens=2, seed=2)
        frame = records_frame(bench(server.url, workload, "toy-small").records)
        ttft[tokens] = float(np.median(frame["first_token_ts"] - frame["start_ts"]))
    assert ttft[512] > 3 * ttft[16], ttft


# Decode batching (8 streams ≥ 3× one stream's tokens/s) is a timing ratio: measured by
# benchmarks/bench_serve_batching.py, not here.


def test_metrics_parse_with_vllm_names(server):
    bench(server.url, Workload(3, concurrency=3, prompt_tokens=10, output_tokens=4), "toy-small")
    with urllib.request.urlopen(server.base + "/metrics", timeout=10) as reply:
        text = reply.read().decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    for name in (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:num_preemptions",
        "vllm:time_to_first_token_seconds",
        "vllm:inter_token_latency_seconds",
    ):
        assert name in families, name
    ttft_count = [
        s.value
        for s in families["vllm:time_to_first_token_seconds"].samples
        if s.name.endswith("_count")
    ]
    assert ttft_count and ttft_count[0] >= 3


@pytest.mark.parametrize(
    "body, raw, status, word",
    [
        (None, b"{not json", 400, "JSON"),
        ({"prompt": "a b", "max_tokens": 0}, None, 400, "max_tokens"),
        ({"prompt": "a " * 2100, "max_tokens": 4}, None, 400, "context length"),
        ({"prompt": 5, "max_tokens": 4}, None, 400, "prompt"),
        ({"prompt": "a", "model": "gpt-9"}, None, 404, "does not exist"),
        (None, b'{"prompt": "' + b"a " * 600_000 + b'"}', 413, "larger"),
    ],
    ids=["malformed", "max_tokens<1", "too-long", "bad-prompt", "unknown-model", "too-large"],
)
def test_bad_requests_get_openai_errors_and_the_server_keeps_serving(
    server, body, raw, status, word
):
    code, reply = _post(server.url + "/completions", body, raw)
    assert code == status
    assert word in reply["error"]["message"] and reply["error"]["code"] == status
    code, reply = _post(server.url + "/completions", {"prompt": "still there", "max_tokens": 3})
    assert code == 200 and reply["usage"]["completion_tokens"] == 3


def test_models_and_health(server):
    with urllib.request.urlopen(server.base + "/health", timeout=10) as reply:
        assert reply.status == 200
    with urllib.request.urlopen(server.url + "/models", timeout=10) as reply:
        assert json.load(reply)["data"][0]["id"] == "toy-small"


def test_the_openai_client_works_against_serve(server):
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=server.url, api_key="none")
    chat = client.chat.completions.create(
        model="toy-small", messages=[{"role": "user", "content": "one two three"}], max_tokens=5
    )
    assert chat.usage.prompt_tokens == 3 and chat.usage.completion_tokens == 5
    assert len(chat.choices[0].message.content.split()) == 5
    stream = client.completions.create(
        model="toy-small",
        prompt="a b c d",
        max_tokens=4,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert "".join(c.choices[0].text for c in chunks if c.choices).count("t") == 4
    assert chunks[-1].usage.completion_tokens == 4


def test_missing_max_tokens_follows_vllm_defaults():
    """vLLM: ``/v1/completions`` defaults to 16 tokens (``CompletionRequest.max_tokens = 16``,
    vllm/entrypoints/openai/protocol.py); chat defaults to the rest of the context,
    ``max_model_len - prompt tokens`` (vllm/entrypoints/openai/serving_chat.py). With
    ``--max-model-len 64`` the model card says 64 and a chat fills exactly that (the toy's own
    2,048-token context took 9 s of prefill on two cores)."""
    with ServerProcess(["--preset", "tiny", "--max-model-len", "64"], shutdown_after=60) as server:
        code, reply = _post(server.url + "/completions", {"prompt": "one two three"})
        assert code == 200 and reply["usage"]["completion_tokens"] == 16
        with urllib.request.urlopen(server.url + "/models", timeout=10) as answer:
            context = json.load(answer)["data"][0]["max_model_len"]
        assert context == 64
        messages = [{"role": "user", "content": "a " * (context - 5)}]
        code, reply = _post(server.url + "/chat/completions", {"messages": messages})
        assert code == 200, reply
        assert reply["usage"] == {
            "prompt_tokens": context - 5,
            "completion_tokens": 5,
            "total_tokens": context,
        }
        code, reply = _post(server.url + "/chat/completions", {"messages": [messages[0]] * 2})
        assert code == 400 and "context length" in reply["error"]["message"]
