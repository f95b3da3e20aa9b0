"""The OpenAI-compatible HTTP side of ``python -m llminfer serve``, on aiohttp.web.

aiohttp.web because the load generator already uses aiohttp's client (one asyncio library for
both ends, no extra dependency), it streams a response chunk by chunk with explicit flushes
(``StreamResponse.write``), and it caps request bodies (``client_max_size``) before parsing.

Request bodies are checked by ``llminfer.serve.schema`` (one set of rules for both endpoints).
A refused request is one line in the server's log; only a bug in the server logs a traceback
(and answers 500). A client that leaves mid-answer, streamed or not, stops its generation.

Routes as vLLM's OpenAI server has them: ``POST /v1/completions``, ``POST /v1/chat/completions``
(both streaming with server-sent events, or not; ``stream_options`` ``include_usage`` and
``continuous_usage_stats``), ``POST /tokenize`` and ``POST /detokenize`` (the toy tokenizer's
ids, as vLLM's routes of those names answer), ``GET /v1/models``, ``GET /health`` and
``GET /metrics`` (Prometheus text, vLLM's metric names). Bad requests get a 4xx with an
OpenAI-style body ``{"error": {"message", "type", "param", "code"}}`` and the server goes on.
Chat prompts are the words of every message's content (no chat template), so a client's word
count is the prompt's token count.

Without ``max_tokens`` a request gets vLLM's defaults: 16 tokens on ``/v1/completions``, the
remaining context (``max_model_len`` minus the prompt) on ``/v1/chat/completions``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from llminfer.serve.engine import ToyEngine
from llminfer.serve.limits import BODY_TIMEOUT_S, SHUTDOWN_DEADLINE_S
from llminfer.serve.schema import (
    GenerationRequest,
    OpenAIError,
    decode_json,
    parse_detokenize,
    parse_request,
    parse_tokenize,
)
from llminfer.serve.tokenizer import ToyTokenizer

log = logging.getLogger("llminfer.serve")

#: Largest request body accepted, bytes (vLLM has no such cap; a toy server should). A
#: compressed body (``Content-Encoding: gzip``) is counted after decompression.
MAX_BODY_BYTES = 1 << 20
#: ``max_tokens`` when a ``/v1/completions`` request gives none: 16, as OpenAI's legacy
#: completions API documents and vLLM's ``CompletionRequest`` declares
#: (``vllm/entrypoints/openai/protocol.py``: ``max_tokens: Optional[int] = 16``). A chat request
#: without ``max_tokens`` (or ``max_completion_tokens``) gets the rest of the context instead,
#: ``max_model_len - prompt tokens``, as vLLM's ``serving_chat.py`` computes
#: ``default_max_tokens``; the toy model never stops early, so such an answer is that long.
DEFAULT_MAX_TOKENS = 16
#: vLLM's TTFT buckets (vllm/v1/metrics/loggers.py), seconds.
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0)
#: vLLM's inter-token buckets with three finer ones first: toy steps take milliseconds.
ITL_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0)
E2E_BUCKETS = (0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 20.0, 60.0)


class _EngineCollector:
    """Gauges and counters read from the engine at scrape time."""

    def __init__(self, engine: ToyEngine, model_name: str) -> None:
        self.engine, self.labels = engine, [model_name]

    def collect(self):
        e = self.engine
        for name, help_text, value in (
            ("vllm:num_requests_running", "Requests in the running batch.", e.num_running),
            ("vllm:num_requests_waiting", "Requests waiting to be scheduled.", e.num_waiting),
            ("vllm:kv_cache_usage_perc", "KV-cache usage (1 = 100%).", e.kv_usage),
            ("vllm:gpu_cache_usage_perc", "Old (V0) name of kv_cache_usage_perc.", e.kv_usage),
        ):
            family = GaugeMetricFamily(name, help_text, labels=["model_name"])
            family.add_metric(self.labels, float(value))
            yield family
        family = CounterMetricFamily(
            "vllm:num_preemptions", "Cumulative preemptions.", labels=["model_name"]
        )
        family.add_metric(self.labels, float(e.preemptions_total))
        yield family


class ServerMetrics:
    """The server's Prometheus registry: engine gauges plus per-request histograms.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """

    def __init__(self, engine: ToyEngine, model_name: str) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(_EngineCollector(engine, model_name))
        r, labels, self.model_name = self.registry, ["model_name"], model_name

        def hist(name: str, text: str, buckets) -> Histogram:
            return Histogram(name, text, labels, buckets=buckets, registry=r)

        self.ttft = hist("vllm:time_to_first_token_seconds", "Time to first token.", TTFT_BUCKETS)
        self.itl = hist("vllm:inter_token_latency_seconds", "Gap between tokens.", ITL_BUCKETS)
        self.tpot = hist("vllm:time_per_output_token_seconds", "Old name of ITL.", ITL_BUCKETS)
        self.e2e = hist("vllm:e2e_request_latency_seconds", "End-to-end latency.", E2E_BUCKETS)
        self.queue = hist("vllm:request_queue_time_seconds", "Time waiting.", E2E_BUCKETS)
        self.prompt_tokens = Counter("vllm:prompt_tokens", "Prompt tokens.", labels, registry=r)
        self.generation_tokens = Counter(
            "vllm:generation_tokens", "Generated tokens.", labels, registry=r
        )
        self.success = Counter(
            "vllm:request_success",
            "Finished requests.",
            [*labels, "finished_reason"],
            registry=r,
        )

    def text(self) -> bytes:
        return generate_latest(self.registry)


def _error_middleware():
    # One line per refused request, a traceback only for a bug: a bad request is the client's
    # business, and a log of tracebacks for them hides the one that matters.
    @web.middleware
    async def middleware(request: web.Request, handler):
        try:
            return await handler(request)
        except OpenAIError as exc:
            error = exc
        except web.HTTPRequestEntityTooLarge:
            error = OpenAIError(413, f"request body larger than {MAX_BODY_BYTES} bytes")
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            error = OpenAIError(exc.status, exc.reason)
        except ConnectionResetError:  # the client left before its answer: not a bug
            log.info("%s %s: client left", request.method, request.path)
            return web.Response(status=499)  # nobody reads it; aiohttp drops it quietly
        except Exception:  # a bug in the server: its traceback, and the server goes on
            log.exception("%s %s: internal error", request.method, request.path)
            return OpenAIError(500, "internal server error (see the server's log)").response()
        log.info("%d %s %s: %s", error.status, request.method, request.path, error.message)
        response = error.response()
        if error.close_connection:
            response.force_close()
        return response

    return middleware


class _BadHttpOneLine(logging.Filter):
    """aiohttp logs a client's malformed HTTP (a header line too long, a broken request line,
    bad chunking) with a traceback; it is the client's mistake, not a bug: one line instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        from aiohttp.http_exceptions import HttpProcessingError

        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError) and 400 <= (exc.code or 0) < 500:
            record.msg, record.args = (
                "%d bad HTTP from a client: %s",
                (
                    exc.code,
                    " ".join(str(exc.message).split())[:200],
                ),
            )
            record.exc_info = record.exc_text = None
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


async def _json_body(request: web.Request, timeout_s: float = BODY_TIMEOUT_S) -> dict:
    try:
        # A client that sends its headers and then dribbles the body must not hold a handler
        # (and its buffers) forever.
        async with asyncio.timeout(timeout_s):
            raw = await request.read()  # raises HTTPRequestEntityTooLarge past client_max_size
    except TimeoutError:
        error = OpenAIError(408, f"request body not received within {timeout_s:g} s")
    except (web.HTTPException, asyncio.CancelledError):
        raise
    except Exception as exc:  # a body the HTTP layer cannot decode (bad gzip, cut chunking)
        error = OpenAIError(400, f"request body could not be read: {' '.join(str(exc).split())}")
    else:
        return decode_json(raw, request.headers.get("Content-Type"))
    # The rest of this body is unreadable: end it here (else aiohttp reads on after the answer
    # and logs the same failure as a traceback) and close the connection after the answer.
    request.content.feed_eof()
    error.close_connection = True
    raise error


class _Answer:
    """The text sent so far and the stop rules: which part of each token's text may go out.

    A stop string may span tokens, so text that could be the start of one is held back until
    it is known not to be (as vLLM does); the stop string itself is never sent.
    """

    def __init__(self, spec: GenerationRequest) -> None:
        self.spec, self.text, self.sent, self.tokens = spec, "", 0, 0
        self.hold = max((len(s) for s in spec.stop), default=1) - 1

    def push(self, token: int, text: str, reason: str | None) -> tuple[str, str | None]:
        """(text to send now, finish_reason or None) after one generated token."""
        self.tokens += 1
        may_stop = self.tokens > self.spec.min_tokens
        if may_stop and token in self.spec.stop_token_ids:
            return self._cut(len(self.text), "stop")
        self.text += text
        if may_stop and self.spec.stop:
            start = max(self.sent - self.hold, 0)
            hits = [i for i in (self.text.find(s, start) for s in self.spec.stop) if i >= 0]
            if hits:
                return self._cut(min(hits), "stop")
        if reason is not None:
            return self._cut(len(self.text), reason)
        safe = len(self.text) - self.hold if self.spec.stop else len(self.text)
        return self._cut(max(safe, self.sent), None)

    def _cut(self, end: int, reason: str | None) -> tuple[str, str | None]:
        piece = self.text[self.sent : end]
        self.sent = end
        if reason is not None:
            self.text = self.text[:end]
        return piece, reason


class ToyServer:
    """The request handlers: parse, check, submit to the engine, stream the answer.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """

    def __init__(
        self, engine: ToyEngine, model_name: str, body_timeout_s: float = BODY_TIMEOUT_S
    ) -> None:
        self.engine, self.model_name, self.body_timeout_s = engine, model_name, body_timeout_s
        self.tokenizer = ToyTokenizer(engine.vocab_size)
        self.metrics = ServerMetrics(engine, model_name)
        self.wake = asyncio.Event()  # set when a request arrives for an idle engine
        self.closing = False
        self.in_flight = 0  # generate handlers running
        self._idle = asyncio.Event()
        self._idle.set()

    async def shutdown(self, deadline_s: float = SHUTDOWN_DEADLINE_S) -> None:
        """Refuse new requests (503), fail every one in flight with an error (a streamed answer
        gets an error event and ``[DONE]``), and wait up to ``deadline_s`` seconds for their
        handlers to send that."""
        self.closing = True
        self.engine.stop()
        try:
            async with asyncio.timeout(deadline_s):
                await self._idle.wait()
        except TimeoutError:
            log.warning("%d requests still open after %g s of shutdown", self.in_flight,
                        deadline_s)  # fmt: skip

    # --- handlers ----------------------------------------------------------------------------

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=False)

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=True)

    async def _generate(self, request: web.Request, chat: bool) -> web.StreamResponse:
        if self.closing:
            raise OpenAIError(503, "server shutting down")
        self.in_flight += 1
        self._idle.clear()
        try:
            return await self._answer(request, chat)
        finally:
            self.in_flight -= 1
            if not self.in_flight:
                self._idle.set()

    async def _answer(self, request: web.Request, chat: bool) -> web.StreamResponse:
        body = await _json_body(request, self.body_timeout_s)
        spec = parse_request(body, chat, self.tokenizer)
        self._check_model(body)
        ids, max_tokens = spec.prompt_ids, spec.max_tokens
        if max_tokens is None:  # vLLM's defaults: 16 for completions, the rest of the context
            limit = self.engine.max_context
            max_tokens = max(limit - len(ids), 1) if chat else DEFAULT_MAX_TOKENS
        try:
            self.engine.check_request(len(ids), max_tokens)
        except ValueError as exc:
            raise OpenAIError(400, str(exc), "max_tokens") from None
        if self.closing:  # shutdown began while the body was read
            raise OpenAIError(503, "server shutting down")
        queue: asyncio.Queue = asyncio.Queue()
        job = self.engine.submit(ids, max_tokens, queue.put_nowait)
        self.wake.set()
        try:
            return await self._respond(request, chat, spec, job, queue)
        finally:
            # Whatever ended the handler (answer sent, client gone, cancelled, a bug), the
            # engine stops working for it; a no-op for a request that has finished.
            self.engine.abort(job)

    def _check_model(self, body: dict) -> None:
        model = body.get("model")
        if model is not None and model != self.model_name:
            raise OpenAIError(404, f"The model `{model}` does not exist.", "model")

    async def _respond(self, request, chat, spec, job, queue) -> web.StreamResponse:
        ids = spec.prompt_ids
        kind = "chat.completion" if chat else "text_completion"
        reply = {
            "id": f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}",
            "object": kind + (".chunk" if chat and spec.stream else ""),
            "created": int(time.time()),
            "model": self.model_name,
        }
        usage = {"prompt_tokens": len(ids), "completion_tokens": 0, "total_tokens": len(ids)}
        self.metrics.prompt_tokens.labels(self.model_name).inc(len(ids))
        answer = _Answer(spec)
        if not spec.stream:
            texts, reasons = [], [None]
            async for piece, reason in self._tokens(job, queue, answer):
                texts.append(piece)
                reasons.append(reason)
            reason = reasons[-1]
            usage["completion_tokens"] = answer.tokens
            usage["total_tokens"] += answer.tokens
            text = "".join(texts)
            choice = {"index": 0, "finish_reason": reason, "logprobs": None}
            choice.update({"message": {"role": "assistant", "content": text}} if chat else {})
            choice.update({} if chat else {"text": text})
            return web.json_response({**reply, "choices": [choice], "usage": usage})
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )

        async def send(payload) -> None:
            text = payload if isinstance(payload, str) else json.dumps(payload)
            await response.write(f"data: {text}\n\n".encode())

        def so_far() -> dict:  # continuous_usage_stats: the usage up to this chunk, as vLLM's
            n = answer.tokens
            if not spec.continuous_usage:
                return {}
            return {"usage": {**usage, "completion_tokens": n, "total_tokens": len(ids) + n}}

        try:
            await response.prepare(request)
            if chat:  # vLLM and OpenAI open a chat stream with a role-only delta
                delta = {"role": "assistant", "content": ""}
                choice = {"index": 0, "delta": delta, "finish_reason": None}
                await send({**reply, "choices": [choice], **so_far()})
            try:
                async for piece, reason in self._tokens(job, queue, answer):
                    if not piece and reason is None:
                        continue  # text held back: it may be the start of a stop string
                    content = {"delta": {"content": piece}} if chat else {"text": piece}
                    choice = {"index": 0, **content, "logprobs": None, "finish_reason": reason}
                    await send({**reply, "choices": [choice], **so_far()})
            except OpenAIError as exc:  # shutdown: the stream ends with an error, then [DONE]
                await send(exc.body())
                log.info("%s %s: stream ended by %s", request.method, request.path, exc.message)
            else:
                usage["completion_tokens"] = answer.tokens
                usage["total_tokens"] += answer.tokens
                if spec.include_usage:
                    await send({**reply, "choices": [], "usage": usage})
            await send("[DONE]")
            await response.write_eof()
        except ConnectionResetError:  # the client went away (the caller aborts the job)
            log.info("%s %s: client left after %d tokens", request.method, request.path,
                     answer.tokens)  # fmt: skip
        return response

    async def _tokens(self, job, queue: asyncio.Queue, answer: _Answer):
        """Yield (text to send, finish_reason or None) per generated token; record the
        metrics; stop the engine's work at a stop string; OpenAIError 503 when the engine
        fails the request (shutdown)."""
        labels, last = self.model_name, None
        try:
            while True:
                kind, value, t = await queue.get()
                if kind == "error":
                    raise OpenAIError(503, str(value))
                token, reason = value
                if last is None:
                    self.metrics.ttft.labels(labels).observe(t - job.arrival_s)
                    self.metrics.queue.labels(labels).observe(job.scheduled_s - job.arrival_s)
                else:
                    self.metrics.itl.labels(labels).observe(t - last)
                    self.metrics.tpot.labels(labels).observe(t - last)
                last = t
                self.metrics.generation_tokens.labels(labels).inc()
                piece, reason = answer.push(token, self.tokenizer.decode(token), reason)
                yield piece, reason
                if reason is not None:
                    self.metrics.e2e.labels(labels).observe(t - job.arrival_s)
                    self.metrics.success.labels(labels, reason).inc()
                    return
        except asyncio.CancelledError:  # the client left: one line, the caller aborts the job
            log.info("client left after %d tokens", answer.tokens)
            raise

    async def models(self, request: web.Request) -> web.Response:
        # vLLM's model card (ModelCard in vllm/entrypoints/openai/protocol.py): ``root`` and
        # ``parent`` too, which `vllm bench serve` without --model reads (``["root"]``).
        card = {
            "id": self.model_name,
            "object": "model",
            "created": 0,
            "owned_by": "llminfer",
            "root": self.model_name,
            "parent": None,
            "max_model_len": self.engine.max_context,
            "permission": [],
        }
        return web.json_response({"object": "list", "data": [card]})

    async def tokenize(self, request: web.Request) -> web.Response:
        # vLLM's TokenizeResponse: count, max_model_len, tokens, and token_strs when asked
        body = await _json_body(request, self.body_timeout_s)
        ids, with_strs = parse_tokenize(body, self.tokenizer)
        self._check_model(body)
        reply = {"count": len(ids), "max_model_len": self.engine.max_context, "tokens": ids}
        if with_strs:
            reply["token_strs"] = [self.tokenizer.decode(t) for t in ids]
        return web.json_response(reply)

    async def detokenize(self, request: web.Request) -> web.Response:
        # vLLM's DetokenizeResponse: the text of the ids, which /tokenize turns back into them
        body = await _json_body(request, self.body_timeout_s)
        ids = parse_detokenize(body, self.tokenizer.vocab_size)
        self._check_model(body)
        return web.json_response({"prompt": "".join(self.tokenizer.decode(t) for t in ids)})

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def metrics_text(self, request: web.Request) -> web.Response:
        return web.Response(body=self.metrics.text(), content_type="text/plain", charset="utf-8")


#: Where an application keeps its ``ToyServer`` (``app[SERVER]``).
SERVER = web.AppKey("server", ToyServer)


def make_app(
    engine: ToyEngine, model_name: str = "toy", body_timeout_s: float = BODY_TIMEOUT_S
) -> web.Application:
    """The aiohttp application serving ``engine`` under ``model_name``; the engine steps in the
    application's event loop from start-up to clean-up. A request body must arrive within
    ``body_timeout_s`` seconds of its headers (else 408).

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    server = ToyServer(engine, model_name, body_timeout_s)
    aiohttp_log = logging.getLogger("aiohttp.server")
    if not any(isinstance(f, _BadHttpOneLine) for f in aiohttp_log.filters):
        aiohttp_log.addFilter(_BadHttpOneLine())
    app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=[_error_middleware()])
    app.router.add_post("/v1/completions", server.completions)
    app.router.add_post("/v1/chat/completions", server.chat_completions)
    app.router.add_post("/tokenize", server.tokenize)
    app.router.add_post("/detokenize", server.detokenize)
    app.router.add_get("/v1/models", server.models)
    app.router.add_get("/health", server.health)
    app.router.add_get("/metrics", server.metrics_text)

    async def run_engine(app: web.Application):
        # The engine steps in the event loop's own thread, between network writes (as vLLM
        # V0's AsyncLLMEngine did): each step's tokens are sent as soon as it ends, and no
        # second thread fights the loop for the interpreter lock (which bunched tokens into
        # 5 ms bursts, Python's thread switch interval, when the engine had its own thread).
        task = asyncio.create_task(_engine_loop(engine, server.wake))
        yield
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        engine.stop()

    app.cleanup_ctx.append(run_engine)
    app[SERVER] = server
    return app


async def _engine_loop(engine: ToyEngine, wake: asyncio.Event) -> None:
    from threadpoolctl import threadpool_limits

    # One BLAS thread: on a shared 2-core machine extra threads mostly wait for each other,
    # and step times become erratic (measured: a 2 ms step sometimes took 90 ms).
    with threadpool_limits(limits=1):
        while True:
            if not engine.has_work():
                wake.clear()
                await wake.wait()
            if engine.begin_step() and engine.due_s is not None:
                # Paced: the step's predicted end. The loop serves the handlers (writing the
                # last step's tokens, reading new requests) while the "GPU" is busy.
                delay = engine.due_s - engine.clock()
                if delay > 0:
                    await asyncio.sleep(delay)
            engine.end_step()
            await asyncio.sleep(0)  # let the handlers write this step's tokens
