"""``llminfer serve`` against malformed requests: a table of bodies (each → its HTTP status),
wire-level oddities (HTTP/1.0, chunked and gzip uploads, slow headers, a body that never
comes), a client that leaves, and a shutdown with streams open.

Every refused request is one line in the server's log, never a traceback, and the server goes
on serving. One tiny server (``--preset tiny``) on 127.0.0.1 for the table; the shutdown test
starts its own and stops it by its PID.
"""

import gzip
import http.client
import json
import signal
import socket
import threading
import time
import urllib.parse

import pytest

from llminfer.serve import ServerProcess

CHAT, COMP = "/v1/chat/completions", "/v1/completions"
OK_CHAT = [{"role": "user", "content": "one two"}]


def msg(**fields):
    return {"messages": [{"role": "user", "content": "a b", **fields}], "max_tokens": 2}


# (id, path, body (a dict → JSON, bytes → as is), extra headers, expected status)
CASES = [
    # --- the issue's cases ---
    ("surrogate-prompt", COMP, b'{"prompt": "a \\ud800 b", "max_tokens": 2}', {}, 400),
    (
        "surrogate-chat",
        CHAT,
        b'{"messages": [{"role": "user", "content": "\\ud800"}], "max_tokens": 2}',
        {},
        400,
    ),
    ("surrogate-key", COMP, b'{"prompt": "a", "\\udc00": 1}', {}, 400),
    ("deep-arrays", COMP, b"[" * 200_000 + b"]" * 200_000, {}, 400),
    ("deep-objects", COMP, b'{"a":' * 10_000 + b"1" + b"}" * 10_000, {}, 400),
    ("deep-in-field", COMP, b'{"prompt": "a", "x": ' + b"[" * 100 + b"]" * 100 + b"}", {}, 400),
    ("part-text-number", CHAT, msg(content=[{"type": "text", "text": 5}]), {}, 400),
    ("part-text-list", CHAT, msg(content=[{"type": "text", "text": ["a"]}]), {}, 400),
    ("part-text-null", CHAT, msg(content=[{"type": "text", "text": None}]), {}, 400),
    ("part-image", CHAT, msg(content=[{"type": "image_url", "image_url": {"url": "x"}}]), {}, 400),
    ("part-not-object", CHAT, msg(content=["a"]), {}, 400),
    ("no-role", CHAT, {"messages": [{"content": "hi"}], "max_tokens": 2}, {}, 400),
    ("role-wizard", CHAT, msg(role="wizard"), {}, 400),
    ("role-number", CHAT, msg(role=1), {}, 400),
    ("content-number", CHAT, msg(content=5), {}, 400),
    ("user-content-null", CHAT, msg(content=None), {}, 400),
    ("name-number", CHAT, msg(name=5), {}, 400),
    ("message-not-object", CHAT, {"messages": ["hi"]}, {}, 400),
    ("messages-empty", CHAT, {"messages": []}, {}, 400),
    ("messages-missing", CHAT, {"prompt": "a"}, {}, 400),
    ("messages-string", CHAT, {"messages": "hi"}, {}, 400),
    # --- JSON itself ---
    ("not-json", COMP, b"{not json", {}, 400),
    ("empty-body", COMP, b"", {}, 400),
    ("json-array", COMP, b"[1, 2]", {}, 400),
    ("json-string", COMP, b'"prompt"', {}, 400),
    ("json-null", COMP, b"null", {}, 400),
    ("nan", COMP, b'{"prompt": "a", "temperature": NaN}', {}, 400),
    ("infinity", COMP, b'{"prompt": "a", "temperature": Infinity}', {}, 400),
    ("huge-float", COMP, b'{"prompt": "a", "temperature": 1e999}', {}, 400),
    ("not-utf8", COMP, b'{"prompt": "\xff\xfe a"}', {}, 400),
    ("latin1", COMP, '{"prompt": "caf\xe9"}'.encode("latin-1"), {}, 400),
    ("trailing-garbage", COMP, b'{"prompt": "a"} x', {}, 400),
    ("too-large", COMP, b'{"prompt": "' + b"a " * 600_000 + b'"}', {}, 413),
    ("text-plain", COMP, b'{"prompt": "a"}', {"Content-Type": "text/plain"}, 400),
    ("form", COMP, b'{"prompt": "a"}', {"Content-Type": "application/x-www-form-urlencoded"}, 400),
    # --- completions fields ---
    ("prompt-missing", COMP, {"max_tokens": 2}, {}, 400),
    ("prompt-number", COMP, {"prompt": 5}, {}, 400),
    ("prompt-null", COMP, {"prompt": None}, {}, 400),
    ("prompt-empty", COMP, {"prompt": ""}, {}, 400),
    ("prompt-spaces", COMP, {"prompt": "   "}, {}, 400),
    ("prompt-empty-list", COMP, {"prompt": []}, {}, 400),
    ("prompt-two-strings", COMP, {"prompt": ["a", "b"]}, {}, 400),
    ("prompt-mixed-list", COMP, {"prompt": [1, "a"]}, {}, 400),
    ("prompt-bool-ids", COMP, {"prompt": [True, False]}, {}, 400),
    ("prompt-float-ids", COMP, {"prompt": [1.5]}, {}, 400),
    ("prompt-id-out-of-vocab", COMP, {"prompt": [5, 99_999]}, {}, 400),
    ("prompt-negative-id", COMP, {"prompt": [-1]}, {}, 400),
    ("prompt-dict", COMP, {"prompt": {"text": "a"}}, {}, 400),
    ("too-long", COMP, {"prompt": "a " * 2100, "max_tokens": 4}, {}, 400),
    ("unknown-model", COMP, {"prompt": "a", "model": "gpt-9"}, {}, 404),
    ("model-number", COMP, {"prompt": "a", "model": 5}, {}, 400),
    ("max-tokens-0", COMP, {"prompt": "a", "max_tokens": 0}, {}, 400),
    ("max-tokens-negative", COMP, {"prompt": "a", "max_tokens": -3}, {}, 400),
    ("max-tokens-huge", COMP, {"prompt": "a", "max_tokens": 10**30}, {}, 400),
    ("max-tokens-float", COMP, {"prompt": "a", "max_tokens": 2.5}, {}, 400),
    ("max-tokens-float-whole", COMP, {"prompt": "a", "max_tokens": 2.0}, {}, 400),
    ("max-tokens-bool", COMP, {"prompt": "a", "max_tokens": True}, {}, 400),
    ("max-tokens-string", COMP, {"prompt": "a", "max_tokens": "5"}, {}, 400),
    ("max-completion-tokens-0", COMP, {"prompt": "a", "max_completion_tokens": 0}, {}, 400),
    ("n-2", COMP, {"prompt": "a", "n": 2}, {}, 400),
    ("n-0", COMP, {"prompt": "a", "n": 0}, {}, 400),
    ("n-string", COMP, {"prompt": "a", "n": "1"}, {}, 400),
    ("best-of-3", COMP, {"prompt": "a", "best_of": 3}, {}, 400),
    ("stream-string", COMP, {"prompt": "a", "stream": "true"}, {}, 400),
    ("stream-number", COMP, {"prompt": "a", "stream": 1}, {}, 400),
    ("stream-options-no-stream", COMP, {"prompt": "a", "stream_options": {}}, {}, 400),
    (
        "stream-options-string",
        COMP,
        {"prompt": "a", "stream": True, "stream_options": "usage"},
        {},
        400,
    ),
    (
        "include-usage-string",
        COMP,
        {"prompt": "a", "stream": True, "stream_options": {"include_usage": "yes"}},
        {},
        400,
    ),
    ("temperature-string", COMP, {"prompt": "a", "temperature": "0.7"}, {}, 400),
    ("temperature-negative", COMP, {"prompt": "a", "temperature": -1}, {}, 400),
    ("temperature-bool", COMP, {"prompt": "a", "temperature": True}, {}, 400),
    ("top-p-0", COMP, {"prompt": "a", "top_p": 0}, {}, 400),
    ("top-p-2", COMP, {"prompt": "a", "top_p": 2}, {}, 400),
    ("top-k-float", COMP, {"prompt": "a", "top_k": 1.5}, {}, 400),
    ("top-k--2", COMP, {"prompt": "a", "top_k": -2}, {}, 400),
    ("presence-penalty-3", COMP, {"prompt": "a", "presence_penalty": 3}, {}, 400),
    ("frequency-penalty-string", COMP, {"prompt": "a", "frequency_penalty": "0"}, {}, 400),
    ("repetition-penalty-0", COMP, {"prompt": "a", "repetition_penalty": 0}, {}, 400),
    ("seed-string", COMP, {"prompt": "a", "seed": "1"}, {}, 400),
    ("seed-huge", COMP, {"prompt": "a", "seed": 2**70}, {}, 400),
    ("stop-number", COMP, {"prompt": "a", "stop": 5}, {}, 400),
    ("stop-list-of-numbers", COMP, {"prompt": "a", "stop": [1, 2]}, {}, 400),
    ("stop-token-ids-strings", COMP, {"prompt": "a", "stop_token_ids": ["a"]}, {}, 400),
    ("min-tokens-over-max", COMP, {"prompt": "a", "max_tokens": 2, "min_tokens": 5}, {}, 400),
    ("ignore-eos-string", COMP, {"prompt": "a", "ignore_eos": "yes"}, {}, 400),
    ("logprobs-2", COMP, {"prompt": "a", "logprobs": 2}, {}, 400),
    ("logprobs-string", COMP, {"prompt": "a", "logprobs": "2"}, {}, 400),
    ("logprobs-99", COMP, {"prompt": "a", "logprobs": 99}, {}, 400),
    ("echo-true", COMP, {"prompt": "a", "echo": True}, {}, 400),
    ("echo-string", COMP, {"prompt": "a", "echo": "no"}, {}, 400),
    ("suffix", COMP, {"prompt": "a", "suffix": "end"}, {}, 400),
    ("user-number", COMP, {"prompt": "a", "user": 5}, {}, 400),
    ("logit-bias-list", COMP, {"prompt": "a", "logit_bias": [1]}, {}, 400),
    ("logit-bias-range", COMP, {"prompt": "a", "logit_bias": {"5": 500}}, {}, 400),
    # --- chat fields ---
    ("chat-logprobs-int", CHAT, {"messages": OK_CHAT, "logprobs": 1}, {}, 400),
    ("chat-logprobs-true", CHAT, {"messages": OK_CHAT, "logprobs": True}, {}, 400),
    ("chat-top-logprobs", CHAT, {"messages": OK_CHAT, "top_logprobs": 3}, {}, 400),
    ("chat-max-tokens-string", CHAT, {"messages": OK_CHAT, "max_tokens": "2"}, {}, 400),
    ("chat-n-3", CHAT, {"messages": OK_CHAT, "n": 3}, {}, 400),
    ("chat-stream-string", CHAT, {"messages": OK_CHAT, "stream": "false"}, {}, 400),
    ("chat-empty-content", CHAT, {"messages": [{"role": "user", "content": ""}]}, {}, 400),
    # --- accepted: what vLLM accepts ---
    ("ok-plain", COMP, {"prompt": "a b", "max_tokens": 2}, {}, 200),
    ("ok-no-content-type", COMP, {"prompt": "a b", "max_tokens": 2}, {"Content-Type": None}, 200),
    (
        "ok-json-charset",
        COMP,
        {"prompt": "a", "max_tokens": 2},
        {"Content-Type": "application/json; charset=utf-8"},
        200,
    ),
    ("ok-token-ids", COMP, {"prompt": [1, 2, 3], "max_tokens": 2}, {}, 200),
    ("ok-one-string-list", COMP, {"prompt": ["a b"], "max_tokens": 2}, {}, 200),
    ("ok-one-id-list", COMP, {"prompt": [[1, 2]], "max_tokens": 2}, {}, 200),
    ("ok-unknown-field", COMP, {"prompt": "a", "max_tokens": 2, "frobnicate": [1]}, {}, 200),
    ("ok-nulls", COMP, {"prompt": "a", "max_tokens": 2, "temperature": None, "n": None}, {}, 200),
    (
        "ok-sampling",
        COMP,
        {"prompt": "a", "max_tokens": 2, "temperature": 0.7, "top_p": 0.9},
        {},
        200,
    ),
    ("ok-stop", COMP, {"prompt": "a", "max_tokens": 2, "stop": ["zzz"]}, {}, 200),
    ("ok-logprobs-null", COMP, {"prompt": "a", "max_tokens": 2, "logprobs": None}, {}, 200),
    ("ok-echo-false", COMP, {"prompt": "a", "max_tokens": 2, "echo": False}, {}, 200),
    ("ok-utf16", COMP, json.dumps({"prompt": "a", "max_tokens": 2}).encode("utf-16"), {}, 200),
    ("ok-unicode", COMP, {"prompt": "caf\xe9 \U0001f600", "max_tokens": 2}, {}, 200),
    ("ok-chat", CHAT, {"messages": OK_CHAT, "max_tokens": 2}, {}, 200),
    ("ok-chat-parts", CHAT, msg(content=[{"type": "text", "text": "a b"}]), {}, 200),
    (
        "ok-chat-roles",
        CHAT,
        {
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "developer", "content": "x"},
                {"role": "user", "content": "hi", "name": "ann"},
                {"role": "assistant", "content": None},
                {"role": "user", "content": "again"},
            ],
            "max_tokens": 2,
        },
        {},
        200,
    ),
    (
        "ok-chat-logprobs-false",
        CHAT,
        {"messages": OK_CHAT, "max_tokens": 2, "logprobs": False},
        {},
        200,
    ),
]


@pytest.fixture(scope="module")
def server():
    args = ["--preset", "tiny", "--timeout-keep-alive", "1", "--body-timeout", "1"]
    with ServerProcess(args, shutdown_after=120) as process:
        yield process


def request(server, method, path, body=None, headers=None, timeout=30):
    """(status, parsed JSON or text, headers) over a fresh connection."""
    url = urllib.parse.urlsplit(server.base)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=timeout)
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    sent = {"Content-Type": "application/json", **(headers or {})}
    connection.putrequest(method, path)
    for key, value in sent.items():
        if value is not None:
            connection.putheader(key, value)
    connection.putheader("Content-Length", str(len(data or b"")))
    connection.endheaders(data)
    reply = connection.getresponse()
    raw = reply.read()
    connection.close()
    try:
        return reply.status, json.loads(raw), reply
    except ValueError:
        return reply.status, raw.decode(errors="replace"), reply


def still_serving(server):
    status, reply, _ = request(server, "POST", COMP, {"prompt": "still there", "max_tokens": 3})
    assert status == 200 and reply["usage"]["completion_tokens"] == 3, reply


@pytest.mark.parametrize(
    "path, body, headers, status", [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_each_request_gets_its_status_and_an_openai_error(server, path, body, headers, status):
    code, reply, _ = request(server, "POST", path, body, headers)
    assert code == status, reply
    if status >= 400:
        error = reply["error"]
        assert error["code"] == status and error["message"] and error["type"]
    else:
        assert reply["usage"]["completion_tokens"] >= 1


def test_max_completion_tokens_null_beside_max_tokens_gives_max_tokens(server):
    body = {"prompt": "a b", "max_tokens": 5, "max_completion_tokens": None}
    code, reply, _ = request(server, "POST", COMP, body)
    assert code == 200 and reply["usage"]["completion_tokens"] == 5
    body = {"messages": OK_CHAT, "max_tokens": 5, "max_completion_tokens": 3}
    code, reply, _ = request(server, "POST", CHAT, body)
    assert code == 200 and reply["usage"]["completion_tokens"] == 3  # vLLM: the newer name wins


def test_stop_strings_end_the_answer_without_the_stop_text(server):
    code, full, _ = request(server, "POST", COMP, {"prompt": "a b", "max_tokens": 6})
    words = full["choices"][0]["text"].split()
    stop = words[2]
    code, reply, _ = request(server, "POST", COMP, {"prompt": "a b", "max_tokens": 6, "stop": stop})
    choice = reply["choices"][0]
    assert code == 200 and choice["finish_reason"] == "stop"
    assert stop not in choice["text"] and choice["text"].split() == words[: words.index(stop)]
    streamed = {"prompt": "a b", "max_tokens": 6, "stop": [stop], "stream": True}
    code, text, _ = request(server, "POST", COMP, streamed)
    events = [json.loads(line[6:]) for line in text.split("\n") if line.startswith("data: {")]
    assert "".join(e["choices"][0]["text"] for e in events) == choice["text"]
    assert events[-1]["choices"][0]["finish_reason"] == "stop" and text.endswith("[DONE]\n\n")


def test_gzip_and_chunked_uploads_are_read_and_a_bad_gzip_is_400(server):
    body = json.dumps({"prompt": "a b", "max_tokens": 2}).encode()
    code, reply, _ = request(
        server, "POST", COMP, gzip.compress(body), {"Content-Encoding": "gzip"}
    )
    assert code == 200 and reply["usage"]["completion_tokens"] == 2
    code, reply, _ = request(server, "POST", COMP, body, {"Content-Encoding": "gzip"})
    assert code == 400, reply
    bomb = gzip.compress(b'{"prompt": "' + b"a " * 2_000_000 + b'"}')  # 4 MB unpacked
    code, reply, _ = request(server, "POST", COMP, bomb, {"Content-Encoding": "gzip"})
    assert code == 413, reply
    url = urllib.parse.urlsplit(server.base)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    pieces = [body[:10], body[10:]]
    connection.request(
        "POST", COMP, iter(pieces), {"Content-Type": "application/json"}, encode_chunked=True
    )
    reply = connection.getresponse()
    assert reply.status == 200 and json.loads(reply.read())["usage"]["completion_tokens"] == 2
    connection.close()
    still_serving(server)


def raw_exchange(server, data: bytes, wait_s: float = 10.0) -> bytes:
    url = urllib.parse.urlsplit(server.base)
    with socket.create_connection((url.hostname, url.port), timeout=wait_s) as sock:
        sock.sendall(data)
        chunks = []
        while True:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks)


def test_http_1_0_gets_a_whole_answer_streamed_or_not(server):
    for stream in (False, True):
        body = json.dumps({"prompt": "a b", "max_tokens": 3, "stream": stream}).encode()
        head = (
            f"POST {COMP} HTTP/1.0\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        answer = raw_exchange(server, head + body)
        assert answer.startswith(b"HTTP/1.0 200") or answer.startswith(b"HTTP/1.1 200"), answer
        if stream:
            assert answer.endswith(b"data: [DONE]\n\n"), answer[-200:]
        else:
            assert b'"completion_tokens": 3' in answer


def test_slow_headers_and_a_missing_body_are_cut(server):
    start = time.monotonic()
    answer = raw_exchange(server, f"POST {COMP} HTTP/1.1\r\nHost: x\r\n".encode())
    assert answer == b"" and time.monotonic() - start < 5  # closed after --timeout-keep-alive 1
    head = f"POST {COMP} HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{{".encode()
    start = time.monotonic()
    answer = raw_exchange(server, head)
    assert answer.startswith(b"HTTP/1.1 408"), answer  # --body-timeout 1
    assert time.monotonic() - start < 5
    still_serving(server)


def test_wrong_method_path_and_broken_http_are_refused_without_a_traceback(server):
    code, reply, _ = request(server, "GET", COMP)
    assert code == 405 and reply["error"]["code"] == 405
    code, reply, _ = request(server, "POST", "/v1/nothing", {"prompt": "a"})
    assert code == 404 and reply["error"]["code"] == 404
    assert raw_exchange(server, b"NOT HTTP AT ALL\r\n\r\n", 3).startswith(b"HTTP/1.")
    long_header = b"POST /v1/completions HTTP/1.1\r\nX: " + b"a" * 20_000 + b"\r\n\r\n"
    assert b" 400 " in raw_exchange(server, long_header, 3)[:20]
    assert "Traceback" not in server.output()
    still_serving(server)


def running(server) -> float:
    _, text, _ = request(server, "GET", "/metrics")
    line = next(s for s in text.splitlines() if s.startswith("vllm:num_requests_running{"))
    return float(line.split()[-1])


def test_a_client_that_leaves_stops_its_generation(server):
    url = urllib.parse.urlsplit(server.base)
    for stream in (False, True):
        body = json.dumps({"prompt": "a", "max_tokens": 2000, "stream": stream}).encode()
        sock = socket.create_connection((url.hostname, url.port), timeout=10)
        sock.sendall(
            f"POST {COMP} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        deadline = time.monotonic() + 10
        while running(server) < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert running(server) == 1
        sock.close()  # 2,000 tokens would take seconds; leaving ends them at once
        deadline = time.monotonic() + 2
        while running(server) > 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert running(server) == 0, f"stream={stream}: still generating after its client left"
    with socket.create_connection((url.hostname, url.port), timeout=10) as sock:  # mid-body
        sock.sendall(f"POST {COMP} HTTP/1.1\r\nHost: x\r\nContent-Length: 99\r\n\r\n{{".encode())
        time.sleep(0.1)
    with socket.create_connection((url.hostname, url.port), timeout=10) as sock:  # mid-header
        sock.sendall(f"POST {COMP} HTTP/1.1\r\nHost: x\r\nContent-Le".encode())
    still_serving(server)


def test_no_traceback_in_the_log_and_one_line_per_refused_request(server):
    for case in CASES[:5]:  # the log holds every request of this module: no traceback anywhere
        request(server, "POST", case[1], case[2], case[3])
    still_serving(server)
    time.sleep(0.2)
    output = server.output()
    assert "Traceback" not in output and "ERROR" not in output, output[-3000:]
    assert output.count("400 POST /v1/completions: prompt: holds \\ud800") >= 1


def test_shutdown_ends_every_open_stream_with_an_error_and_done_within_seconds():
    with ServerProcess(["--preset", "tiny"], shutdown_after=120) as process:
        url = urllib.parse.urlsplit(process.base)
        body = json.dumps({"prompt": "a", "max_tokens": 2000, "stream": True}).encode()
        tails, first = [None] * 20, threading.Barrier(21, timeout=30)

        def stream(i: int) -> None:
            with socket.create_connection((url.hostname, url.port), timeout=30) as sock:
                sock.sendall(
                    f"POST {COMP} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(body)}\r\n\r\n".encode()
                    + body
                )
                got = sock.recv(65536)
                first.wait()
                while chunk := sock.recv(65536):
                    got += chunk
                tails[i] = got

        threads = [threading.Thread(target=stream, args=(i,)) for i in range(20)]
        for thread in threads:
            thread.start()
        first.wait()  # every stream has its first bytes
        start = time.monotonic()
        process.process.send_signal(signal.SIGTERM)
        code = process.process.wait(15)
        elapsed = time.monotonic() - start
        for thread in threads:
            thread.join(15)
        output = process.output()
    assert code == 0 and elapsed < 8, (code, elapsed, output[-2000:])
    for got in tails:
        assert got is not None
        text = got.decode(errors="replace")
        assert '"error"' in text and "server shutting down" in text, text[-300:]
        assert text.rstrip("\r\n0").endswith("data: [DONE]"), text[-300:]
    assert "Traceback" not in output, output[-3000:]
