"""A scripted stub of an OpenAI-compatible streaming server, to test and time the client.

``script(body) -> Reply`` decides what each request gets: an HTTP status and body, or a stream
of raw byte pieces each sent after a delay (so every streaming quirk of a real server can be
replayed byte for byte), optionally cut off mid-way. The schedule is absolute: piece k is due at
the response's start plus the sum of the first k delays, and the stub sleeps until that moment
(not "delay after the previous write"), so a late write never shifts the ones after it.
``StubServer`` runs it on a loopback port in a background
thread; ``python -m llminfer.bench.stub`` runs a fixed schedule (N chunks, one every D ms) in its
own process for ``benchmarks/bench_client.py`` and records when it wrote each chunk
(``GET /sent``, ``time.perf_counter`` seconds, keyed by the request's prompt).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Reply:
    """What the stub answers: ``status`` and ``body`` for a plain reply, or ``pieces`` —
    (delay_s, bytes) sent one after another on a streamed 200 — and ``cut`` to drop the
    connection after the last piece instead of ending the response. ``relative=True`` sleeps
    each delay after the previous write (gaps of at least the delay, however late a write was)
    instead of keeping the absolute schedule.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """

    status: int = 200
    body: str = ""
    pieces: list[tuple[float, bytes]] = field(default_factory=list)
    cut: bool = False
    relative: bool = False


def sse(payload: dict | str) -> bytes:
    """One SSE event: ``data: <json>`` and the blank line that ends it.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    text = payload if isinstance(payload, str) else json.dumps(payload)
    return f"data: {text}\n\n".encode()


def completion_chunk(text: str | None, finish: str | None = None) -> bytes:
    """A ``/v1/completions`` stream event carrying ``text``.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
    return sse({"id": "cmpl-stub", "object": "text_completion", "choices": [choice]})


def make_stub_app(script: Callable[[dict], Reply], sent: dict | None = None):
    """An aiohttp application answering POSTs to ``/v1/completions`` and
        ``/v1/chat/completions`` with ``script(body)``; the write time of every piece is appended
        to ``sent[prompt]`` when ``sent`` is a dict, and how late it was against its due time (s) to
    ``sent["_late"]`` — the stub's own lateness says how busy the machine is.

        Introduced in: notebooks/08_measure_a_server.ipynb
    """
    from aiohttp import web

    async def handle(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        reply = script(body)
        if not reply.pieces:
            return web.Response(status=reply.status, text=reply.body)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        times = [] if sent is None else sent.setdefault(str(body.get("prompt")), [])
        clock, due = time.perf_counter, time.perf_counter()
        try:
            for delay, piece in reply.pieces:
                due = (clock() if reply.relative else due) + delay
                wait = due - clock()
                if wait > 0:
                    await asyncio.sleep(wait)
                await response.write(piece)
                written = clock()
                times.append(written)
                if sent is not None:
                    sent.setdefault("_late", []).append(written - due)
            if reply.cut:
                request.transport.close()  # drop the connection mid-response
                return response
            await response.write_eof()
        except ConnectionResetError:
            pass  # the client left (a time-out, an interrupted run): not the stub's failure
        return response

    async def sent_times(request: web.Request) -> web.Response:
        return web.json_response(sent or {})

    app = web.Application()
    app.router.add_post("/v1/completions", handle)
    app.router.add_post("/v1/chat/completions", handle)
    app.router.add_get("/sent", sent_times)
    return app


class StubServer:
    """``make_stub_app(script)`` on a free loopback port in a background thread; ``.url`` is
    the ``/v1`` base; ``stop()`` (or leaving the ``with`` block) shuts it down.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """

    def __init__(self, script: Callable[[dict], Reply]) -> None:
        from aiohttp import web

        self.sent: dict = {}
        self._loop = asyncio.new_event_loop()
        self._runner = web.AppRunner(make_stub_app(script, self.sent))
        self._loop.run_until_complete(self._runner.setup())
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        self._loop.run_until_complete(site.start())
        port = site._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/v1"
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        async def cleanup() -> None:
            await self._runner.cleanup()

        asyncio.run_coroutine_threadsafe(cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def __enter__(self) -> StubServer:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def scheduled_script(n_chunks: int, interval_s: float, phases: int = 1) -> Callable[[dict], Reply]:
    """A script streaming ``n_chunks`` one-token chunks, one every ``interval_s`` seconds, then
    a usage chunk and ``[DONE]``. ``phases=1``: every stream's chunks are due at the same
    offsets from its start (concurrent streams started together burst together, as a batched
    server step does); ``phases=P``: the k-th request is shifted by ``(k mod P) / P`` of an
    interval, spreading the chunks of P streams evenly in time.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    if isinstance(phases, bool) or not isinstance(phases, int) or phases < 1:
        raise ValueError(f"phases={phases!r} must be an integer >= 1")
    counter = iter(range(1 << 62))

    def script(body: dict) -> Reply:
        shift = (next(counter) % phases) * interval_s / phases
        pieces = [(interval_s, completion_chunk(" tok")) for _ in range(n_chunks)]
        if pieces:
            pieces[0] = (interval_s + shift, pieces[0][1])
        usage = {"prompt_tokens": 1, "completion_tokens": n_chunks, "total_tokens": n_chunks + 1}
        pieces += [(0.0, sse({"choices": [], "usage": usage})), (0.0, sse("[DONE]"))]
        return Reply(pieces=pieces)

    return script


async def _main(args: argparse.Namespace) -> None:
    from aiohttp import web

    runner = web.AppRunner(
        make_stub_app(scheduled_script(args.chunks, args.interval_ms / 1e3, args.phases), {}),
        access_log=None,
    )
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", args.port)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    print(f"stub: ready at http://127.0.0.1:{port}/v1", flush=True)
    await asyncio.sleep(args.shutdown_after)
    await runner.cleanup()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="a stub streaming N chunks every D ms")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--chunks", type=int, default=50)
    parser.add_argument("--interval-ms", type=float, default=20.0)
    parser.add_argument("--phases", type=int, default=1, help="spread streams over P phases")
    parser.add_argument("--shutdown-after", type=float, default=300.0)
    asyncio.run(_main(parser.parse_args()))
