"""A streaming load generator for OpenAI-compatible servers: asyncio + aiohttp.

aiohttp, as vLLM's own ``benchmark_serving`` uses: one event loop drives hundreds of streams,
the response body is read line by line as it arrives (``StreamReader``), and the same library
serves the toy server. ``benchmarks/bench_client.py`` measures how close its timestamps are to
a known chunk schedule and what it costs per chunk, against httpx in the same run: aiohttp
used less CPU per chunk and kept its timestamps far closer to the schedule (the numbers are in
``llminfer.bench``'s docstring). The clock (``time.perf_counter``) is read right after each
network read returns, before any parsing; chunk times are kept as raw clock values and turned
into run-relative seconds once, when the request ends.

Load comes from ``llminfer.sim.workload.Workload``, the same description ``simulate`` takes: an open
loop (requests sent at the drawn arrival times, Poisson or bursty) or a closed loop (C users,
each sending its next request ``think_time_s`` after its previous answer ended). Prompts are
words from a fixed list, one token each on ``llminfer serve`` (and roughly so on a BPE model);
requests in a prefix group start with the same words.

Every request sent ends in the log: ``status`` ok or failed with the reason in ``error``
(connection refused, HTTP status and the server's message, time-out, a stream cut before
``[DONE]``, an answer without a single token, a reply that is not an event stream, a redirect:
a benchmark measures the URL it was given, so redirects are not followed). Times are seconds
from the start of the run.

A request whose kept-alive connection the server had already closed fails before any answer
came — llama.cpp's ``llama-server`` (0.3.36's llama.cpp, ``tests/test_llama_server.py``) closes
the connection after every *streamed* answer while its headers say ``Keep-Alive: timeout=5,
max=100`` (a plain JSON answer keeps it open); aiohttp reused a quarter to a half of those
closed connections before it saw them close (16–32 of 64 requests per load in
``benchmarks/bench_llama_server.py``), and such a request fails with ``ClientOSError: Can not
write request body``. It is sent again once, on a fresh connection — counted once, as what the
second try got, with a ``note`` saying so. ``keepalive=False`` (``--no-keepalive``)
opens a connection per request instead. What a server says about itself that cannot be true (a
``usage`` count of the wrong type, negative, fewer tokens than text chunks, more than asked
for) is a per-request ``note`` and the count falls back to the chunks (``token_counts``).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from llminfer.bench.prompts import WARMUP_SALT, plan_requests
from llminfer.bench.sse import StreamParser
from llminfer.logs.schema import MAX_TOKENS
from llminfer.sim.workload import Workload

ENDPOINTS = {False: "/completions", True: "/chat/completions"}


@dataclass
class RequestRecord:
    """One request as the client saw it; times in seconds from the run's start.

    ``chunk_ts``: arrival time of every chunk that carried text; ``usage``: the server's
    counts if it sent them (as sent: ``token_counts`` checks them); ``http_status``: 0 when no
    response came; ``unfinished``: the run was interrupted (Ctrl-C, SIGTERM) while this
    request was in flight or before it was sent (``not_sent``) — neither ok nor failed;
    ``note``: what was odd about an answer that did not make it fail; ``prompt``: the text
    sent; ``timings``: llama.cpp's ``timings`` object of the answer, if it sent one.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """

    request_id: str
    prompt_tokens: int
    max_tokens: int
    start_ts: float = float("nan")
    end_ts: float = float("nan")
    chunk_ts: list[float] = field(default_factory=list)
    text_chars: int = 0
    usage: dict | None = None
    http_status: int = 0
    error: str = ""
    warmup: bool = False
    unfinished: bool = False
    not_sent: bool = False
    note: str = ""
    prompt: str = field(default="", repr=False)
    timings: dict | None = field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        """The request finished and succeeded."""
        return not self.error

    def token_counts(self) -> tuple[int, str, int, str, str]:
        """(input tokens, where from, output tokens, where from, note). From ``usage`` when
        the server's counts can be true — integers (not booleans) below 2^53, a prompt of at
        least one token, output at least one token per text chunk and at most ``max_tokens``
        (or the chunks, if more came) — else ``requested`` (the prompt length asked for) and
        ``counted`` (text chunks), with a note naming the value refused.

        Introduced in: notebooks/08_measure_a_server.ipynb
        """
        usage = self.usage if isinstance(self.usage, dict) else {}
        counted, notes = len(self.chunk_ts), []

        def count(key: str, low: int, high: int):
            value = usage.get(key)
            if value is None:
                return None
            if isinstance(value, int) and not isinstance(value, bool) and low <= value <= high:
                return value
            notes.append(f"usage.{key}={json.dumps(value)[:40]} cannot be true")
            return None

        prompt = count("prompt_tokens", 1, MAX_TOKENS - 1)  # a request has a prompt
        output = count("completion_tokens", counted, max(self.max_tokens, counted))
        if notes:
            notes[-1] += f"; counted {counted} chunks, {self.prompt_tokens} prompt tokens asked"
        return (
            self.prompt_tokens if prompt is None else prompt,
            "requested" if prompt is None else "usage",
            counted if output is None else output,
            "counted" if output is None else "usage",
            "; ".join(notes),
        )

    def cached_tokens(self) -> int | None:
        """Prompt tokens the server says it took from its prompt cache instead of computing
        them: ``usage.prompt_tokens_details.cached_tokens`` (OpenAI's field; llama.cpp and
        vLLM send it), else llama.cpp's ``timings.cache_n``; None when the server said neither
        (or said something that cannot be a count).

        Introduced in: notebooks/08_measure_a_server.ipynb
        """
        usage = self.usage if isinstance(self.usage, dict) else {}
        details = usage.get("prompt_tokens_details")
        timings = self.timings if isinstance(self.timings, dict) else {}
        for value in (
            details.get("cached_tokens") if isinstance(details, dict) else None,
            timings.get("cache_n"),
        ):
            if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < MAX_TOKENS:
                return value
        return None


def request_body(model: str, prompt: str, max_tokens: int, chat: bool, usage: bool, extra=None):
    """The JSON body of one streamed request (OpenAI's field names).

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    body = {"model": model, "max_tokens": int(max_tokens), "stream": True, "temperature": 0}
    if chat:
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    if usage:
        body["stream_options"] = {"include_usage": True}
    body.update(extra or {})
    return body


#: Errors that mean the server had closed the connection before this request got any answer:
#: a kept-alive connection it closed after its previous answer. Sent again once, fresh.
def _stale_connection_errors():
    import aiohttp

    return (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError)


async def send_request(session, url: str, body: dict, record: RequestRecord, t0: float) -> None:
    """Stream one request to ``url`` and fill ``record`` (times in seconds since ``t0``, a
    ``time.perf_counter`` value); a failed request gets its reason in ``record.error`` and
    never raises, except that cancelling it (Ctrl-C) marks it ``unfinished`` and re-raises.
    A request that fails because the server had closed its connection before any byte of the
    answer came is sent again once on a fresh connection (``record.note`` says so).

    Timing: the clock is read first thing after each network read returns, before the bytes
    are split or parsed, and every token in that read gets that time (``StreamParser``).

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    clock = time.perf_counter
    record.start_ts = clock() - t0
    parser = StreamParser()
    try:
        if not await _attempt(session, url, body, record, t0, parser, fresh=False):
            record.note = f"sent again on a fresh connection after: {record.error}"
            record.error, record.http_status = "", 0
            parser = StreamParser()
            await _attempt(session, url, body, record, t0, parser, fresh=True)
    finally:  # also when cancelled: an unfinished request keeps what it got
        record.end_ts = clock() - t0
        record.chunk_ts = [t - t0 for t in parser.token_ts]
        record.text_chars, record.usage = parser.chars, parser.usage
        record.timings = parser.timings
    if parser.invalid_utf8:
        record.note = "; ".join(filter(None, [record.note, "invalid UTF-8 read as U+FFFD"]))
    if record.error:
        return
    if parser.error:
        record.error = parser.error
    elif not parser.done and parser.finish_reason is None:
        where = " in the middle of an event" if parser.cut_mid_event else ""
        record.error = (
            f"stream cut: ended{where} without [DONE] after {len(record.chunk_ts)} chunks"
        )
    elif not record.chunk_ts:
        record.error = "empty response: the stream carried no token"


async def _attempt(session, url, body, record, t0, parser, fresh: bool) -> bool:
    """One try (``fresh``: on a connection of its own); False when the server had closed the
    connection before answering anything (worth one more try), True otherwise (the record
    says how it went)."""
    import aiohttp

    if fresh:
        # A retry must not take another pooled connection the server may also have closed:
        # it gets a connection of its own, for the time the request has left.
        left = (session.timeout.total or 300.0) - (time.perf_counter() - t0 - record.start_ts)
        async with aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(force_close=True),
            timeout=aiohttp.ClientTimeout(total=max(left, 0.001)),
        ) as own:
            return await _attempt(own, url, body, record, t0, parser, fresh=False)
    clock, answered = time.perf_counter, False
    try:
        async with session.post(url, json=body, allow_redirects=False) as response:
            answered = True
            record.http_status = response.status
            if response.status >= 300:
                text = await response.text(errors="replace")
                record.error = f"HTTP {response.status}: {_error_message(response, text)}"
                return True
            kind = response.headers.get("Content-Type", "").split(";")[0].strip().lower()
            if kind in ("application/json", "text/html"):
                text = await response.text(errors="replace")
                record.error = f"not an event stream ({kind}): {_error_message(response, text)}"
                return True
            feed, content = parser.feed, response.content
            while True:
                piece = await content.readany()
                now = clock()
                if not piece:  # the connection ended
                    parser.close(now)
                    break
                if feed(piece, now):
                    break
    except asyncio.CancelledError:
        record.unfinished = True
        record.error = "not finished: the run was interrupted before the answer ended"
        raise
    except aiohttp.ClientConnectorError as exc:
        record.error = f"connection failed: {exc.os_error or exc}"
    except asyncio.TimeoutError:
        record.error = f"timed out after {clock() - t0 - record.start_ts:.1f} s"
    except aiohttp.ClientPayloadError as exc:
        record.error = f"stream cut after {len(parser.token_ts)} chunks: {_one_line(exc)}"
    except _stale_connection_errors() as exc:
        record.error = f"{type(exc).__name__}: {_one_line(exc)}"
        return answered
    except aiohttp.ClientError as exc:
        record.error = f"{type(exc).__name__}: {_one_line(exc)}"
    return True


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.I | re.S)
_TAGS = re.compile(r"<[^>]+>")


def _error_message(response, text: str) -> str:
    """The server's own message: an OpenAI or vLLM error object's ``message``, an HTML page's
    title (or its text without tags), a redirect's target, else the body's start."""
    if 300 <= response.status < 400:
        target = response.headers.get("Location", "?")
        return f"redirected to {target} (not followed: give bench the final URL)"
    try:
        payload = json.loads(text)
    except ValueError:
        payload = None
    if isinstance(payload, dict):
        error = payload.get("error", payload)
        message = error.get("message") if isinstance(error, dict) else error
        if message:
            return " ".join(str(message).split())[:300]
    if "<html" in text[:1000].lower() or "<!doctype" in text[:1000].lower():
        title = _TITLE.search(text)
        words = (title.group(1) if title else _TAGS.sub(" ", text)).split()
        return (" ".join(words)[:300] or "(empty page)") + " (an HTML page)"
    return " ".join(text.split())[:300] or "(no body)"


@dataclass
class BenchRun:
    """The state of one run: its records (measured and warm-up), filled as requests finish,
    so an interrupted run still has everything that finished; ``not_sent``: the planned
    requests an interruption came before.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """

    workload: Workload
    records: list[RequestRecord] = field(default_factory=list)
    warmup: list[RequestRecord] = field(default_factory=list)
    on_done: Callable[[RequestRecord], None] | None = None
    interrupted: bool = False
    not_sent: list[RequestRecord] = field(default_factory=list)
    duration_s: float = float("nan")
    t0: float = float("nan")  # time.perf_counter() at the run's time zero


async def run_bench(
    url: str,
    workload: Workload,
    model: str,
    chat: bool = False,
    warmup: int = 0,
    timeout_s: float = 300.0,
    include_usage: bool = True,
    extra_body: dict | None = None,
    run: BenchRun | None = None,
    on_done: Callable[[RequestRecord], None] | None = None,
    keepalive: bool = True,
    prompt_salt: int = 0,
) -> BenchRun:
    """Send ``workload`` to the server at ``url`` (its base, e.g. ``http://127.0.0.1:8000/v1``)
    and return the ``BenchRun``; ``warmup`` requests go first, one at a time, and are kept
    apart in ``run.warmup``. ``timeout_s`` bounds each request (seconds); ``keepalive=False``
    opens a new connection for every request.

    Warm-up requests have the lengths of the first measured ones but prompts of their own
    (``plan_requests`` with another salt, none equal to a measured prompt): a server with a
    prompt cache must not answer a measured request from its warm-up. Only a shared prefix
    (``workload.shared_prefix_tokens``) is the same, as asked. ``prompt_salt``: the measured
    prompts' stream (``sweep_server`` gives each load its own).

    Cancelled (Ctrl-C, SIGTERM): the requests in flight are marked unfinished, the planned
    ones not yet sent go to ``run.not_sent``, then the CancelledError goes on.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    import aiohttp

    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ValueError(f"url={url!r} must be an http(s) base URL like http://127.0.0.1:8000/v1")
    if not isinstance(workload, Workload):
        raise ValueError(f"workload={workload!r} must be a llminfer.sim.workload.Workload")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup={warmup!r} must be an integer >= 0")
    if not timeout_s > 0:
        raise ValueError(f"timeout_s={timeout_s!r} must be > 0 seconds")
    run = run or BenchRun(workload)
    run.on_done = on_done
    endpoint = url.rstrip("/") + ENDPOINTS[bool(chat)]
    table = plan_requests(workload, salt=prompt_salt)
    warm_table = (
        plan_requests(workload, WARMUP_SALT - prompt_salt, avoid=table["prompt"])
        if warmup
        else None
    )

    def body(item: RequestRecord) -> dict:
        return request_body(model, item.prompt, item.max_tokens, chat, include_usage, extra_body)

    def record(i: int, warm: bool = False) -> RequestRecord:
        row = (warm_table if warm else table).iloc[i % len(table)]
        name = f"warmup-{i}" if warm else row["request_id"]
        return RequestRecord(
            name,
            int(row["prompt_tokens"]),
            int(row["output_tokens"]),
            warmup=warm,
            prompt=row["prompt"],
        )

    # No connection limit (the workload decides concurrency); the timeout covers the whole
    # request, stream included.
    connector = aiohttp.TCPConnector(limit=0, force_close=not keepalive)
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    t0 = time.perf_counter()
    pending: set[asyncio.Task] = set()
    # One handler for a cancellation wherever it lands (before the first request, in the
    # warm-up, mid-run): what was in flight is unfinished, what was planned and not yet sent
    # is listed, and the CancelledError goes on.
    try:
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
            for i in range(warmup):
                item = record(i, warm=True)
                run.warmup.append(item)
                await send_request(session, endpoint, body(item), item, t0)
            t0 = run.t0 = time.perf_counter()

            async def one(i: int) -> None:
                item = record(i)
                run.records.append(item)
                await send_request(session, endpoint, body(item), item, t0)
                if run.on_done:
                    run.on_done(item)

            if workload.closed_loop:
                queue = iter(range(len(table)))

                async def user() -> None:
                    for i in queue:
                        await one(i)
                        if workload.think_time_s:
                            await asyncio.sleep(workload.think_time_s)

                pending = {asyncio.create_task(user()) for _ in range(workload.concurrency)}
            else:
                for i, arrival in enumerate(table["arrival_s"]):
                    delay = t0 + float(arrival) - time.perf_counter()
                    if delay > 0:
                        await asyncio.sleep(delay)
                    pending.add(asyncio.create_task(one(i)))
            await asyncio.gather(*pending)
    except asyncio.CancelledError:
        run.interrupted = True
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        sent = {r.request_id for r in run.records}
        now = 0.0 if run.t0 != run.t0 else time.perf_counter() - run.t0  # NaN: not begun
        run.not_sent = [
            _not_sent(record(i), now)
            for i in range(len(table))
            if table["request_id"].iat[i] not in sent
        ]
        raise
    finally:
        run.duration_s = time.perf_counter() - t0
    return run


def _not_sent(record: RequestRecord, now: float) -> RequestRecord:
    """A planned request the interruption came before: its times are the interruption's."""
    record.start_ts = record.end_ts = now
    record.unfinished = record.not_sent = True
    record.error = "not sent: the run was interrupted before this request was sent"
    return record


def bench(url: str, workload: Workload, model: str, **kwargs) -> BenchRun:
    """``run_bench`` from synchronous code, also inside Jupyter (whose loop is already
    running: the run then gets its own loop in a worker thread).

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    coroutine = run_bench(url, workload, model, **kwargs)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()
