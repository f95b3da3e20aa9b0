"""``llminfer serve`` as clients of vLLM expect it: ``ignore_eos`` (accepted, checked, no effect
on the toy model, which has no end-of-sequence token), ``stream_options.continuous_usage_stats``
(the usage so far in every chunk, only with ``include_usage`` as in vLLM), and ``/tokenize`` and
``/detokenize`` (round trip, bad bodies → 400 or 404 with an OpenAI-style error).

One tiny server on 127.0.0.1 for the module.
"""

import json
import urllib.error
import urllib.request

import pytest

from llminfer.serve import ServerProcess

CHAT, COMP = "/v1/chat/completions", "/v1/completions"
MSGS = [{"role": "user", "content": "one two three"}]


@pytest.fixture(scope="module")
def server():
    with ServerProcess(["--preset", "tiny"], shutdown_after=120) as process:
        yield process


def _post(server, path, body, stream=False):
    data = json.dumps(body).encode()
    request = urllib.request.Request(
        server.base + path, data=data, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            if not stream:
                return reply.status, json.load(reply)
            events = [line[6:] for line in reply.read().decode().splitlines() if line]
            assert events[-1] == "[DONE]"
            return reply.status, [json.loads(e) for e in events[:-1]]
    except urllib.error.HTTPError as err:
        return err.code, json.load(err)


def _body(path, **fields):
    return {("messages" if path == CHAT else "prompt"): MSGS if path == CHAT else "a b c",
            "max_tokens": 5, **fields}  # fmt: skip


# --- ignore_eos -------------------------------------------------------------------------------

IGNORE_EOS = [  # (value, status): a bool or null, nothing else
    (True, 200),
    (False, 200),
    (None, 200),
    ("true", 400),
    (1, 400),
    (0, 400),
    ([], 400),
]


@pytest.mark.parametrize("path", [COMP, CHAT])
@pytest.mark.parametrize(("value", "status"), IGNORE_EOS)
def test_ignore_eos_is_a_bool_and_the_answer_runs_to_max_tokens(server, path, value, status):
    code, reply = _post(server, path, _body(path, ignore_eos=value))
    assert code == status, reply
    if status == 200:
        assert reply["usage"]["completion_tokens"] == 5
        assert reply["choices"][0]["finish_reason"] == "length"
    else:
        assert reply["error"]["param"] == "ignore_eos" and reply["error"]["code"] == 400


def test_ignore_eos_keeps_stop_token_ids(server):  # as in vLLM: only EOS is ignored
    _, first = _post(server, COMP, _body(COMP, max_tokens=3))
    token = int(first["choices"][0]["text"].split()[1][1:])  # " tA tB tC": B's id
    body = _body(COMP, max_tokens=3, ignore_eos=True, stop_token_ids=[token])
    code, reply = _post(server, COMP, body)
    assert code == 200 and reply["choices"][0]["finish_reason"] == "stop"
    assert reply["usage"]["completion_tokens"] == 2


# --- continuous usage -------------------------------------------------------------------------

USAGE = [  # (stream_options, usage in every chunk, usage chunk at the end)
    ({"include_usage": True, "continuous_usage_stats": True}, True, True),
    ({"include_usage": True}, False, True),
    ({"continuous_usage_stats": True}, False, False),  # vLLM: continuous needs include_usage
    ({"include_usage": False, "continuous_usage_stats": True}, False, False),
    ({}, False, False),
]


@pytest.mark.parametrize("path", [COMP, CHAT])
@pytest.mark.parametrize(("options", "continuous", "final"), USAGE)
def test_continuous_usage_counts_each_chunk(server, path, options, continuous, final):
    body = _body(path, max_tokens=6, stream=True, stream_options=options)
    code, chunks = _post(server, path, body, stream=True)
    assert code == 200
    content = [c for c in chunks if c["choices"]]
    tail = [c for c in chunks if not c["choices"]]
    assert len(tail) == (1 if final else 0)
    if not continuous:
        assert all("usage" not in c for c in content)
    else:
        prompt = content[0]["usage"]["prompt_tokens"]
        assert prompt == 3
        done = 0
        for chunk in content:
            piece = chunk["choices"][0].get("text") or chunk["choices"][0]["delta"]["content"]
            done += len(piece.split())  # one token per word
            assert chunk["usage"] == {
                "prompt_tokens": prompt,
                "completion_tokens": done,
                "total_tokens": prompt + done,
            }
        assert done == 6 and tail[0]["usage"] == content[-1]["usage"]


def test_continuous_usage_counts_tokens_held_back_by_a_stop_string(server):
    _, first = _post(server, COMP, _body(COMP, max_tokens=4))
    words = first["choices"][0]["text"].split()
    options = {"include_usage": True, "continuous_usage_stats": True}
    body = _body(COMP, max_tokens=4, stream=True, stream_options=options, stop=[words[2]])
    code, chunks = _post(server, COMP, body, stream=True)
    assert code == 200
    content = [c for c in chunks if c["choices"]]
    counts = [c["usage"]["completion_tokens"] for c in content]
    assert counts == sorted(counts) and counts[-1] == chunks[-1]["usage"]["completion_tokens"]
    assert content[-1]["choices"][0]["finish_reason"] == "stop"


@pytest.mark.parametrize(
    ("path", "options"),
    [
        (COMP, {"continuous_usage_stats": "yes"}),
        (CHAT, {"continuous_usage_stats": 1}),
        (CHAT, {"include_usage": True, "continuous_usage_stats": []}),
    ],
)
def test_continuous_usage_stats_must_be_a_bool(server, path, options):
    code, reply = _post(server, path, _body(path, stream=True, stream_options=options))
    assert code == 400 and reply["error"]["param"] == "stream_options.continuous_usage_stats"


def test_stream_options_without_stream_is_refused(server):
    body = _body(COMP, stream_options={"continuous_usage_stats": True})
    code, reply = _post(server, COMP, body)
    assert code == 400 and reply["error"]["param"] == "stream_options"


# --- /tokenize and /detokenize ----------------------------------------------------------------


TOKENIZE = [  # (body, expected count)
    ({"prompt": "hello world t7"}, 3),
    ({"prompt": "hello world", "add_special_tokens": False}, 2),
    ({"prompt": ""}, 0),
    ({"model": "toy-tiny", "prompt": "a b"}, 2),
    ({"messages": [{"role": "user", "content": "a b"}, {"role": "assistant", "content": "c"}]}, 3),
    ({"messages": MSGS, "add_generation_prompt": True}, 3),
]


@pytest.mark.parametrize(("body", "count"), TOKENIZE)
def test_tokenize_round_trips_through_detokenize(server, body, count):
    code, reply = _post(server, "/tokenize", body)
    assert code == 200, reply
    assert set(reply) == {"count", "max_model_len", "tokens"}
    assert reply["count"] == len(reply["tokens"]) == count and reply["max_model_len"] > 0
    code, text = _post(server, "/detokenize", {"tokens": reply["tokens"]})
    assert code == 200 and set(text) == {"prompt"}
    code, again = _post(server, "/tokenize", {"prompt": text["prompt"]})
    assert again["tokens"] == reply["tokens"]


def test_tokenize_counts_as_generation_does(server):
    (_, reply), (_, done) = (
        _post(server, "/tokenize", {"prompt": "a b c"}),
        _post(server, COMP, _body(COMP)),
    )
    assert reply["count"] == done["usage"]["prompt_tokens"]
    assert _post(server, "/detokenize", {"tokens": [3, 17]}) == (200, {"prompt": " t3 t17"})


def test_tokenize_returns_token_strs_when_asked(server):
    code, reply = _post(server, "/tokenize", {"prompt": "t3 t17", "return_token_strs": True})
    assert code == 200 and reply["tokens"] == [3, 17]
    assert reply["token_strs"] == [" t3", " t17"]


BAD = [  # (path, body, status, param)
    ("/tokenize", {}, 400, "prompt"),
    ("/tokenize", {"prompt": 5}, 400, "prompt"),
    ("/tokenize", {"prompt": [1, 2]}, 400, "prompt"),
    ("/tokenize", {"prompt": "a", "messages": MSGS}, 400, "prompt"),
    ("/tokenize", {"messages": []}, 400, "messages"),
    ("/tokenize", {"messages": [{"role": "wizard", "content": "a"}]}, 400, "messages[0].role"),
    ("/tokenize", {"prompt": "a", "add_special_tokens": "yes"}, 400, "add_special_tokens"),
    ("/tokenize", {"prompt": "a", "return_token_strs": 1}, 400, "return_token_strs"),
    ("/tokenize", {"prompt": "a", "model": 5}, 400, "model"),
    ("/tokenize", {"prompt": "a", "model": "gpt-4"}, 404, "model"),
    ("/detokenize", {}, 400, "tokens"),
    ("/detokenize", {"tokens": "1 2"}, 400, "tokens"),
    ("/detokenize", {"tokens": [1, "2"]}, 400, "tokens"),
    ("/detokenize", {"tokens": [1, True]}, 400, "tokens"),
    ("/detokenize", {"tokens": [1.0]}, 400, "tokens"),
    ("/detokenize", {"tokens": [-1]}, 400, "tokens"),
    ("/detokenize", {"tokens": [10**9]}, 400, "tokens"),
    ("/detokenize", {"tokens": [1], "model": "gpt-4"}, 404, "model"),
]


@pytest.mark.parametrize(("path", "body", "status", "param"), BAD)
def test_bad_tokenize_bodies_get_openai_errors(server, path, body, status, param):
    code, reply = _post(server, path, body)
    assert code == status, reply
    assert reply["error"]["param"] == param and reply["error"]["code"] == status
    assert {"message", "type"} <= set(reply["error"])


def test_tokenize_rejects_what_is_not_a_json_object(server):
    request = urllib.request.Request(
        server.base + "/tokenize", data=b"[1]", headers={"Content-Type": "application/json"}
    )
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(request, timeout=30)
    assert err.value.code == 400 and "error" in json.load(err.value)
    assert _post(server, "/tokenize", {"prompt": "a"})[0] == 200  # and the server goes on
