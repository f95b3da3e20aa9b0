"""The OpenAI-compatible HTTP side of ``python -m llminfer serve``, on aiohttp.web.

aiohttp.web because the load generator already uses aiohttp's client (one asyncio library for
both ends, no extra dependency), it streams a response chunk by chunk with explicit flushes
(``StreamResponse.write``), and it caps request bodies (``client_max_size``) before parsing.

Routes as vLLM's OpenAI server has them: ``POST /v1/completions``, ``POST /v1/chat/completions``
(both streaming with server-sent events, or not), ``GET /v1/models``, ``GET /health`` and
``GET /metrics`` (Prometheus text, vLLM's metric names). Bad requests get a 4xx with an
OpenAI-style body ``{"error": {"message", "type", "param", "code"}}`` and the server goes on.
Chat prompts are the words of every message's content (no chat template), so a client's word
count is the prompt's token count.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from llminfer.serve.engine import ToyEngine
from llminfer.serve.tokenizer import ToyTokenizer

#: Largest request body accepted, bytes (vLLM has no such cap; a toy server should).
MAX_BODY_BYTES = 1 << 20
#: ``max_tokens`` when a request gives none (OpenAI's default for completions).
DEFAULT_MAX_TOKENS = 16
#: vLLM's TTFT buckets (vllm/v1/metrics/loggers.py), seconds.
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0)
#: vLLM's inter-token buckets with three finer ones first: toy steps take milliseconds.
ITL_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0)
E2E_BUCKETS = (0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 20.0, 60.0)


class OpenAIError(Exception):
    """A request the server refuses: HTTP ``status`` and an OpenAI-style error body.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """

    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param = status, message, param

    def response(self) -> web.Response:
        kind = {400: "BadRequestError", 404: "NotFoundError", 413: "RequestTooLargeError"}
        body = {
            "error": {
                "message": self.message,
                "type": kind.get(self.status, "invalid_request_error"),
                "param": self.param,
                "code": self.status,
            }
        }
        return web.json_response(body, status=self.status)


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
    @web.middleware
    async def middleware(request: web.Request, handler):
        try:
            return await handler(request)
        except OpenAIError as exc:
            return exc.response()
        except web.HTTPRequestEntityTooLarge:
            return OpenAIError(413, f"request body larger than {MAX_BODY_BYTES} bytes").response()
        except web.HTTPException as exc:
            if exc.status >= 400:
                return OpenAIError(exc.status, exc.reason).response()
            raise

    return middleware


async def _json_body(request: web.Request) -> dict:
    raw = await request.read()  # raises HTTPRequestEntityTooLarge past client_max_size
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise OpenAIError(400, f"request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise OpenAIError(400, "request body must be a JSON object")
    return body


class ToyServer:
    """The request handlers: parse, check, submit to the engine, stream the answer.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """

    def __init__(self, engine: ToyEngine, model_name: str) -> None:
        self.engine, self.model_name = engine, model_name
        self.tokenizer = ToyTokenizer(engine.model.config.vocab_size)
        self.metrics = ServerMetrics(engine, model_name)
        self.wake = asyncio.Event()  # set when a request arrives for an idle engine

    # --- request parsing ---------------------------------------------------------------------

    def _common(self, body: dict) -> tuple[int, bool, bool]:
        model = body.get("model")
        if model is not None and model != self.model_name:
            raise OpenAIError(404, f"The model `{model}` does not exist.", "model")
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
        max_tokens = DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise OpenAIError(
                400, f"max_tokens={max_tokens!r} must be an integer >= 1", "max_tokens"
            )
        if body.get("n", 1) != 1:
            raise OpenAIError(400, "only n=1 is supported", "n")
        stream = body.get("stream", False)
        if not isinstance(stream, bool):
            raise OpenAIError(400, f"stream={stream!r} must be true or false", "stream")
        options = body.get("stream_options") or {}
        usage = bool(options.get("include_usage")) if isinstance(options, dict) else False
        return max_tokens, stream, usage

    def _prompt_ids(self, body: dict, chat: bool) -> list[int]:
        if chat:
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages:
                raise OpenAIError(400, "messages must be a non-empty list", "messages")
            words = []
            for message in messages:
                content = message.get("content") if isinstance(message, dict) else None
                if isinstance(content, list):  # content parts: keep the text ones
                    content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
                if not isinstance(content, str):
                    raise OpenAIError(400, "each message needs a text content", "messages")
                words.append(content)
            ids = self.tokenizer.encode(" ".join(words))
        else:
            prompt = body.get("prompt")
            if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
                prompt = prompt[0]
            if isinstance(prompt, str):
                ids = self.tokenizer.encode(prompt)
            elif isinstance(prompt, list) and all(
                isinstance(t, int) and not isinstance(t, bool) for t in prompt
            ):
                vocab = self.tokenizer.vocab_size
                if any(not 0 <= t < vocab for t in prompt):
                    raise OpenAIError(400, f"token ids must be in [0, {vocab})", "prompt")
                ids = list(prompt)
            else:
                raise OpenAIError(400, "prompt must be a string or a list of token ids", "prompt")
        if not ids:
            raise OpenAIError(400, "the prompt is empty", "prompt" if not chat else "messages")
        return ids

    # --- handlers ----------------------------------------------------------------------------

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=False)

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=True)

    async def _generate(self, request: web.Request, chat: bool) -> web.StreamResponse:
        body = await _json_body(request)
        max_tokens, stream, include_usage = self._common(body)
        ids = self._prompt_ids(body, chat)
        try:
            self.engine.check_request(len(ids), max_tokens)
        except ValueError as exc:
            raise OpenAIError(400, str(exc), "max_tokens") from None
        queue: asyncio.Queue = asyncio.Queue()
        job = self.engine.submit(ids, max_tokens, queue.put_nowait)
        self.wake.set()
        kind = "chat.completion" if chat else "text_completion"
        reply = {
            "id": f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}",
            "object": kind + (".chunk" if chat and stream else ""),
            "created": int(time.time()),
            "model": self.model_name,
        }
        usage = {"prompt_tokens": len(ids), "completion_tokens": 0, "total_tokens": len(ids)}
        self.metrics.prompt_tokens.labels(self.model_name).inc(len(ids))
        if not stream:
            texts, reasons = [], [None]
            async for token, reason in self._tokens(job, queue):
                texts.append(token)
                reasons.append(reason)
            reason = reasons[-1]
            usage["completion_tokens"] = len(texts)
            usage["total_tokens"] += len(texts)
            text = "".join(texts)
            choice = {"index": 0, "finish_reason": reason, "logprobs": None}
            choice.update({"message": {"role": "assistant", "content": text}} if chat else {})
            choice.update({} if chat else {"text": text})
            return web.json_response({**reply, "choices": [choice], "usage": usage})
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)

        async def send(payload) -> None:
            text = payload if isinstance(payload, str) else json.dumps(payload)
            await response.write(f"data: {text}\n\n".encode())

        try:
            if chat:  # vLLM and OpenAI open a chat stream with a role-only delta
                delta = {"role": "assistant", "content": ""}
                await send(
                    {**reply, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
                )
            async for token, reason in self._tokens(job, queue):
                usage["completion_tokens"] += 1
                piece = {"delta": {"content": token}} if chat else {"text": token, "logprobs": None}
                choice = {"index": 0, **piece, "finish_reason": reason}
                await send({**reply, "choices": [choice]})
            usage["total_tokens"] += usage["completion_tokens"]
            if include_usage:
                await send({**reply, "choices": [], "usage": usage})
            await send("[DONE]")
            await response.write_eof()
        except (ConnectionResetError, asyncio.CancelledError):
            self.engine.abort(job)  # the client went away: stop generating for it
            raise
        return response

    async def _tokens(self, job, queue: asyncio.Queue):
        """Yield (text, finish_reason or None) per generated token; record the metrics."""
        labels, last = self.model_name, None
        try:
            while True:
                kind, value, t = await queue.get()
                if kind == "error":
                    raise web.HTTPServiceUnavailable(reason=str(value))
                token, reason = value
                if last is None:
                    self.metrics.ttft.labels(labels).observe(t - job.arrival_s)
                    self.metrics.queue.labels(labels).observe(job.scheduled_s - job.arrival_s)
                else:
                    self.metrics.itl.labels(labels).observe(t - last)
                    self.metrics.tpot.labels(labels).observe(t - last)
                last = t
                self.metrics.generation_tokens.labels(labels).inc()
                yield self.tokenizer.decode(token), reason
                if reason is not None:
                    self.metrics.e2e.labels(labels).observe(t - job.arrival_s)
                    self.metrics.success.labels(labels, reason).inc()
                    return
        except asyncio.CancelledError:
            self.engine.abort(job)
            raise

    async def models(self, request: web.Request) -> web.Response:
        card = {
            "id": self.model_name,
            "object": "model",
            "created": 0,
            "owned_by": "llminfer",
            "max_model_len": self.engine.model.config.max_context,
        }
        return web.json_response({"object": "list", "data": [card]})

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def metrics_text(self, request: web.Request) -> web.Response:
        return web.Response(body=self.metrics.text(), content_type="text/plain", charset="utf-8")


#: Where an application keeps its ``ToyServer`` (``app[SERVER]``).
SERVER = web.AppKey("server", ToyServer)


def make_app(engine: ToyEngine, model_name: str = "toy") -> web.Application:
    """The aiohttp application serving ``engine`` under ``model_name``; the engine steps in the
    application's event loop from start-up to clean-up.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    server = ToyServer(engine, model_name)
    app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=[_error_middleware()])
    app.router.add_post("/v1/completions", server.completions)
    app.router.add_post("/v1/chat/completions", server.chat_completions)
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
            engine.step()
            await asyncio.sleep(0)  # let the handlers write this step's tokens
