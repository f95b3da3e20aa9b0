"""The load generator against tiny faulty servers on 127.0.0.1: each fault → the accounting it
must give (ok or failed, the reason, the token counts), and a log that reads back.

A raw asyncio server writes each answer byte for byte (line endings, keep-alive lies, stalls,
invalid UTF-8), so every case is exactly the wire a real server could send. The interruption
cases run the real command in a child process and signal it by its PID.
"""

import asyncio
import json
import re
import signal
import threading
import time

import pytest

from llminfer.bench import accounting, bench, records_frame
from llminfer.bench.sse import SSEDecoder, StreamParser, read_chunk
from llminfer.bench.stub import Reply, StubServer, completion_chunk, sse
from llminfer.cli import main
from llminfer.logs.reading import read_requests
from llminfer.logs.writing import write_log
from llminfer.sim.workload import Workload

USAGE = {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}


def token(text=" a", finish=None, end=b"\n\n"):
    choice = {"index": 0, "text": text, "finish_reason": finish}
    return b"data: " + json.dumps({"choices": [choice]}).encode() + end


GOOD = token() + token() + token(finish="length") + sse({"choices": [], "usage": USAGE})
GOOD += sse("[DONE]")


class RawServer:
    """An HTTP/1.1 server on a loopback port whose ``answer(writer, body, n)`` coroutine
    writes each response's bytes itself; it returns True to read the next request on the same
    connection. ``n`` counts requests from 1."""

    def __init__(self, answer) -> None:
        self.answer, self.count, self.connections = answer, 0, 0
        self._loop = asyncio.new_event_loop()
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._serve, "127.0.0.1", 0)
        )
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/v1"
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()

    async def _serve(self, reader, writer) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = re.search(rb"content-length: *(\d+)", head, re.I)
                body = await reader.readexactly(int(length.group(1))) if length else b""
                self.count += 1
                if not await self.answer(writer, json.loads(body or b"{}"), self.count):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def stop(self) -> None:
        async def close() -> None:
            self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def http(body: bytes, status="200 OK", kind="text/event-stream", extra="") -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\n"
    return (head + extra + "\r\n").encode() + body


def answering(data: bytes, keep=True, after=None):
    async def answer(writer, body, n):
        writer.write(data)
        await writer.drain()
        if after is not None:
            await asyncio.sleep(after)
        return keep

    return answer


def run_against(server, n=4, concurrency=2, **kwargs):
    workload = Workload(n, concurrency=concurrency, prompt_tokens=7, output_tokens=3, seed=1)
    run = bench(server.url, workload, "m", **kwargs)
    frame = records_frame(run.records)
    return run, frame


def reads_back(frame, tmp_path):
    log = read_requests(write_log(frame, tmp_path / "log.csv"))
    assert len(log) == len(frame)
    return log


# --- SSE by the standard -----------------------------------------------------------------


def events_of(stream: bytes, piece: int) -> list[str]:
    decoder = SSEDecoder()
    events = []
    for i in range(0, len(stream), piece):
        events += [d for _, d in decoder.feed_text(stream[i : i + piece].decode())]
    return events


@pytest.mark.parametrize("piece", [1, 2, 3, 7, 1000])
def test_sse_line_endings_blank_data_comments_and_fields_in_any_split(piece):
    stream = (
        b": comment\r"
        b"data: one\r\rdata:two\n\ndata:  three\r\n\r\n"  # CR, LF, CRLF; one space stripped
        b"data\n\n"  # a field without colon: empty data
        b"data:\n\n"  # empty data
        b"\n\n\r\r"  # blank lines with no data: nothing
        b"id: 7\nretry: 100\nevent: message\nunknown: x\ndata: a\ndata: b\n\n"
        b"data: open"  # no blank line: not dispatched
    )
    assert events_of(stream, piece) == ["one", "two", " three", "", "", "a\nb"]


def test_sse_bom_invalid_utf8_and_event_types():
    parser = StreamParser()
    for i, piece in enumerate(
        [b"\xef\xbb\xbf", token(" \xff".encode("latin-1").decode("latin-1"))]
    ):
        parser.feed(piece, float(i))
    parser.feed(b'data: {"choices":[{"text":" \xff\xfe"}]}\n\n', 2.0)
    assert parser.token_ts == [1.0, 2.0] and parser.invalid_utf8 and not parser.error
    parser.feed(b"event: error\ndata: overloaded\n\n", 3.0)
    assert "overloaded" in parser.error


def test_read_chunk_refuses_nothing_it_cannot_read():
    assert read_chunk("").text is None and not read_chunk("").error
    assert "boom" in read_chunk('{"object": "error", "message": "boom", "code": 400}').error
    assert read_chunk('{"choices": {"0": 1}}').text is None
    assert read_chunk('{"choices": [{"text": 5, "finish_reason": 3}]}').finish_reason is None
    assert read_chunk('{"error": null, "choices": [{"text": " x"}]}').text == " x"
    assert "unparseable" in read_chunk('{"choices": [{"text": "a"').error


# --- each faulty server → its accounting --------------------------------------------------

CR_ONLY = GOOD.replace(b"\n", b"\r")
EMPTY_DATA = b"data:\n\ndata\n\n" + GOOD.replace(b"\n\n", b"\n\ndata:\n\n", 2)
BIG_TOKEN = token(" " + "x" * 1_000_000) + token() + token(finish="length") + sse("[DONE]")

OK_CASES = [
    ("cr-only", http(CR_ONLY), 3),
    ("crlf", http(GOOD.replace(b"\n", b"\r\n")), 3),
    ("empty-data", http(EMPTY_DATA), 3),
    ("bom", http(b"\xef\xbb\xbf" + GOOD), 3),
    ("comments-fields", http(b": hi\nretry: 5\nid: 1\nevent: message\n" + GOOD), 3),
    ("finish-without-done", http(token() + token() + token(finish="length")), 3),
    ("text-plain-stream", http(GOOD, kind="text/plain"), 3),
    ("no-content-type", http(GOOD, kind=""), 3),
    ("giant-token", http(BIG_TOKEN), 3),
    ("invalid-utf8", http(GOOD.replace(b'" a"', b'" \xff\xfe"')), 3),
]


@pytest.mark.parametrize("data, tokens", [c[1:] for c in OK_CASES], ids=[c[0] for c in OK_CASES])
def test_streams_real_servers_send_are_read_exactly(data, tokens, tmp_path):
    with RawServer(answering(data)) as server:
        run, frame = run_against(server)
    assert accounting(run) == {"sent": 4, "ok": 4, "failed": 0, "unfinished": 0, "warmup": 0}, [
        r.error for r in run.records
    ]
    assert [len(ts) for ts in frame["token_ts"]] == [tokens] * 4
    reads_back(frame, tmp_path)


def done_after(data: bytes) -> bytes:
    return data + sse("[DONE]")


HTML = b"<html><head><title>502 Bad Gateway</title></head><body><h1>nginx</h1></body></html>"
FAIL_CASES = [
    (
        "unwrapped-error-then-done",
        http(token() + done_after(sse({"object": "error", "message": "CUDA out of memory"}))),
        "server error in stream: CUDA out of memory",
    ),
    (
        "wrapped-error",
        http(token() + sse({"error": {"message": "engine died"}})),
        "server error in stream: engine died",
    ),
    ("event-error", http(b"event: error\ndata: overloaded\n\n"), "server error in stream"),
    ("truncated-json", http(b'data: {"choices": [{"te\n\n' + sse("[DONE]")), "unparseable"),
    ("no-done-no-finish", http(token() + token()), "stream cut: ended without [DONE]"),
    ("mid-event", http(token() + b"data: [DO"), "stream cut: ended in the middle of an event"),
    ("empty-200", http(b""), "stream cut"),
    ("only-usage", http(done_after(sse({"choices": [], "usage": USAGE}))), "empty response"),
    (
        "http-429-json",
        http(
            b'{"error": {"message": "rate limited"}}', "429 Too Many Requests", "application/json"
        ),
        "HTTP 429: rate limited",
    ),
    (
        "http-503-text",
        http(b"overloaded, retry later", "503 Service Unavailable", "text/plain"),
        "HTTP 503: overloaded, retry later",
    ),
    ("http-503-empty", http(b"", "503 Service Unavailable", "text/plain"), "HTTP 503: (no body)"),
    (
        "http-502-html",
        http(HTML, "502 Bad Gateway", "text/html"),
        "HTTP 502: 502 Bad Gateway (an HTML page)",
    ),
    (
        "vllm-400",
        http(
            b'{"object": "error", "message": "max_tokens too big", "code": 400}',
            "400 Bad Request",
            "application/json",
        ),
        "HTTP 400: max_tokens too big",
    ),
    (
        "redirect",
        http(b"", "307 Temporary Redirect", "text/plain", "Location: /v2/x\r\n"),
        "HTTP 307: redirected to /v2/x",
    ),
    (
        "json-not-stream",
        http(b'{"choices": [{"text": " a"}]}', kind="application/json"),
        "not an event stream (application/json)",
    ),
    ("html-200", http(HTML, kind="text/html"), "not an event stream (text/html): 502 Bad"),
]


@pytest.mark.parametrize(
    "data, reason", [c[1:] for c in FAIL_CASES], ids=[c[0] for c in FAIL_CASES]
)
def test_every_fault_is_one_failed_request_with_the_servers_message(data, reason, tmp_path):
    with RawServer(answering(data)) as server:
        run, frame = run_against(server)
    assert accounting(run) == {"sent": 4, "ok": 0, "failed": 4, "unfinished": 0, "warmup": 0}
    assert all(e.startswith(reason) for e in frame["error"]), list(frame["error"])
    reads_back(frame, tmp_path)


def test_giant_line_fails_the_request_without_holding_it_all():
    line = b"data: " + b"x" * (17 << 20)
    with RawServer(answering(http(line))) as server:
        _run, frame = run_against(server, n=1, concurrency=1)
    assert frame["error"][0].startswith("not an event stream: a stream line longer than 16 MiB")


def stall(head_delay=0.0, after_bytes=b""):
    async def answer(writer, body, n):
        await asyncio.sleep(head_delay)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + after_bytes)
        await writer.drain()
        await asyncio.sleep(30)  # then nothing, ever (the test's server stops it)
        return False

    return answer


@pytest.mark.parametrize(
    "answer", [stall(after_bytes=token()), stall(head_delay=5)], ids=["mid-stream", "headers"]
)
def test_a_stalled_server_times_out(answer):
    with RawServer(answer) as server:
        start = time.monotonic()
        run, frame = run_against(server, n=2, timeout_s=0.5)
    assert accounting(run)["failed"] == 2 and time.monotonic() - start < 5
    assert all(e.startswith("timed out after 0.5 s") for e in frame["error"])


# --- keep-alive that is not --------------------------------------------------------------


@pytest.mark.parametrize(
    "after, n", [(None, 40), (0.0, 40), (0.2, 16)], ids=["at-once", "after-write", "200ms"]
)
def test_a_server_closing_every_connection_loses_no_request_and_counts_none_twice(after, n):
    """llama.cpp's server answers with ``Connection: keep-alive`` and then closes."""
    data = http(GOOD, extra="Connection: keep-alive\r\n")
    with RawServer(answering(data, keep=False, after=after)) as server:
        run, frame = run_against(server, n=n, concurrency=2)
        count = server.count
    assert accounting(run) == {"sent": n, "ok": n, "failed": 0, "unfinished": 0, "warmup": 0}, [
        r.error for r in run.records if r.error
    ]
    retried = frame["note"].str.startswith("sent again").sum()
    # a first try the server never read is not a request it served: each served at most twice
    assert n <= count <= n + retried
    assert (frame["output_tokens"] == 3).all()


def test_no_keepalive_opens_a_connection_per_request():
    with RawServer(answering(http(GOOD), keep=False)) as server:
        run, frame = run_against(server, n=10, concurrency=2, keepalive=False)
        assert server.connections == 10 and server.count == 10
    assert accounting(run)["ok"] == 10 and not frame["note"].any()


def test_a_server_that_never_answers_is_failed_once_per_request_after_one_retry():
    async def hang_up(writer, body, n):
        return False  # closes without a byte

    with RawServer(hang_up) as server:
        run, frame = run_against(server, n=3, concurrency=1)
        count = server.count
    assert accounting(run) == {"sent": 3, "ok": 0, "failed": 3, "unfinished": 0, "warmup": 0}
    assert count == 6 and all(e.startswith("ServerDisconnectedError") for e in frame["error"])


# --- usage a server cannot mean -----------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [None, "3", [3], True, -1, 2**60, 0, 2, 99, 3.0],
    ids=["null", "string", "list", "true", "negative", "2^60", "zero", "fewer", "more", "float"],
)
def test_usage_that_cannot_be_true_is_a_note_and_the_chunks_are_counted(value, tmp_path):
    usage = {"prompt_tokens": value, "completion_tokens": value}
    pieces = [(0.0, completion_chunk(" a")) for _ in range(3)]
    pieces += [(0.0, sse({"choices": [], "usage": usage})), (0.0, sse("[DONE]"))]
    with StubServer(lambda body: Reply(pieces=pieces)) as stub:
        run = bench(stub.url, Workload(2, concurrency=2, prompt_tokens=7, output_tokens=3), "m")
    frame = records_frame(run.records)
    assert accounting(run)["ok"] == 2
    assert (frame["output_tokens"] == 3).all() and (frame["output_tokens_from"] == "counted").all()
    assert (frame["input_tokens"] == 7).all() or value in (2, 99)
    assert frame["note"].str.contains("cannot be true").all() or value is None
    log = reads_back(frame, tmp_path)
    assert (log.requests["output_tokens"] == 3).all()


def test_command_names_each_error_message_on_stderr(tmp_path, capsys):
    body = http(b'{"error": {"message": "engine overloaded"}}', "503 Busy", "application/json")
    with RawServer(answering(body)) as server:
        args = ["bench", server.url, "--model", "m", "--n", "3", "--concurrency", "1"]
        args += ["--out", str(tmp_path / "log.csv"), "--no-progress", "--no-keepalive"]
        code = main(args)
    assert code == 1
    assert "failed 3: HTTP 503: engine overloaded" in capsys.readouterr().err


# --- interruptions: every one writes a log that reads back --------------------------------


def child_bench(url, out, *extra):
    import os
    import subprocess
    import sys

    command = [sys.executable, "-m", "llminfer", "bench", url, "--model", "m", "--no-progress"]
    command += ["--prompt-tokens", "7", "--output-tokens", "3", "--out", str(out), *extra]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


def slow_stream(seen: list):
    async def answer(writer, body, n):
        seen.append(n)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + token())
        await writer.drain()
        await asyncio.sleep(30)
        return False

    return answer


@pytest.mark.parametrize(
    "case, signals, extra",
    [
        ("warm-up", [signal.SIGINT], ["--warmup", "2", "--n", "5", "--concurrency", "2"]),
        ("all-in-flight", [signal.SIGTERM], ["--n", "4", "--rate", "inf"]),
        # a double Ctrl-C once exited -2; then SIGTERMs and more Ctrl-Cs while the log is written
        (
            "repeated",
            [signal.SIGINT] * 2 + [signal.SIGTERM, signal.SIGINT] * 3,
            ["--n", "3", "--concurrency", "3"],
        ),
    ],
)
def test_every_interruption_writes_a_log_that_reads_back(tmp_path, case, signals, extra):
    seen: list = []
    out = tmp_path / "log.csv"
    with RawServer(slow_stream(seen)) as server:
        child = child_bench(server.url, out, *extra)
        deadline = time.monotonic() + 60
        while not seen and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.3)  # the requests are in flight, their first chunk read
        for sig in signals:
            child.send_signal(sig)
            time.sleep(0.03)
        stdout, stderr = child.communicate(timeout=60)
    text = stdout.decode()
    assert child.returncode == 130, (child.returncode, text, stderr.decode()[-2000:])
    assert "Traceback" not in stderr.decode(), stderr.decode()[-2000:]
    counts = re.search(
        r"sent (\d+), ok (\d+), failed (\d+), not finished (\d+), not sent (\d+)", text
    )
    sent, ok, failed, unfinished, not_sent = map(int, counts.groups())
    assert sent == ok + failed + unfinished and ok == 0 == failed
    log = read_requests(out)
    planned = int(extra[extra.index("--n") + 1])
    assert len(log) == planned == sent + not_sent and log.n_failed == planned
    errors = log.requests["error"]
    assert errors.str.startswith("not finished").sum() == unfinished
    assert errors.str.startswith("not sent").sum() == not_sent
    if case.startswith("warm-up"):
        assert sent == 0 and "warm-up" in text
        warm = read_requests(out.with_name("log.warmup.csv"))
        assert warm.requests["error"].str.startswith("not finished").any()
    else:
        assert unfinished == planned
