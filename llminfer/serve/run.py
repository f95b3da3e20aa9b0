"""Start and stop the toy server: ``python -m llminfer serve`` and ``ServerProcess``.

``serve`` binds 127.0.0.1 by default (nothing outside this computer can reach it), prints one
line ``llminfer serve: ready at http://HOST:PORT/v1`` when it accepts requests, and shuts down
within seconds on Ctrl-C or SIGTERM, or after ``--shutdown-after`` seconds: it stops accepting
connections, every request in flight gets an error (a streamed one an error event and
``[DONE]``, a plain one a 503) within ``SHUTDOWN_DEADLINE_S``, then the process exits. The log
(stderr) has one line per refused request and a traceback only for a bug. ``ServerProcess``
runs it in a child process — its own Python, so the server's engine and the measuring client
never share one interpreter lock — reads that line to learn the port, and keeps reading the
output (``output()``) so a chatty server never blocks on a full pipe.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time

from llminfer.serve.config import PRESETS, ServeConfig, build_model
from llminfer.serve.engine import ToyEngine
from llminfer.serve.limits import BODY_TIMEOUT_S, HEADER_TIMEOUT_S, SHUTDOWN_DEADLINE_S

READY = re.compile(r"ready at (http://\S+)")
#: Lines of the server's output a ``ServerProcess`` keeps.
OUTPUT_LINES = 20_000


def _config(args: argparse.Namespace) -> ServeConfig:
    return ServeConfig(
        max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens,
        chunked_prefill=not args.no_chunked_prefill,
        block_size=args.block_size,
        num_kv_blocks=args.num_kv_blocks,
        paced=args.paced,
        gpu_memory_utilization=args.gpu_memory_utilization,
        max_model_len=args.max_model_len,
    )


async def _serve(args: argparse.Namespace, engine: ToyEngine) -> None:
    from aiohttp import web

    from llminfer.serve.app import SERVER, make_app

    logging.basicConfig(
        level=logging.INFO, format="llminfer serve: %(levelname)s %(message)s", stream=sys.stderr
    )

    config = engine.config
    if config.paced is None:
        name, mode = f"toy-{args.preset}", f"real compute ({args.preset} ToyModel on this CPU)"
    else:
        model, gpu, profile = config.paced_parts()
        name = f"paced-{model.name.lower()}"
        mode = f"paced as {model.name} on {gpu.name}, profile {profile!r}"
    print(
        f"llminfer serve: {mode}; max_num_seqs={config.max_num_seqs}, "
        f"max_num_batched_tokens={config.max_num_batched_tokens}, "
        f"num_kv_blocks={config.num_kv_blocks} x {config.block_size} tokens, "
        f"max_model_len={engine.max_context}",
        flush=True,
    )
    app = make_app(engine, args.model_name or name, args.body_timeout)
    runner = web.AppRunner(
        app,
        handle_signals=False,
        access_log=None,
        # a client that leaves cancels its handler, so a non-streamed answer stops too
        handler_cancellation=True,
        # an idle connection, or one whose request line and headers are slow, is closed
        keepalive_timeout=args.timeout_keep_alive,
        # by the time the runner cleans up, every handler has had its error: do not wait
        shutdown_timeout=1.0,
    )
    await runner.setup()
    site = web.TCPSite(runner, args.host, args.port)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # the real port when --port 0
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    print(f"llminfer serve: ready at http://{args.host}:{port}/v1", flush=True)
    try:
        await asyncio.wait_for(stop.wait(), timeout=args.shutdown_after)
    except asyncio.TimeoutError:
        print(f"llminfer serve: --shutdown-after {args.shutdown_after:g} s reached", flush=True)
    print("llminfer serve: stopping", flush=True)
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.remove_signal_handler(sig)
        # a second Ctrl-C while stopping is not a KeyboardInterrupt traceback: stopping is
        # already bounded by SHUTDOWN_DEADLINE_S
        loop.add_signal_handler(sig, lambda: None)
    await site.stop()  # no new connections
    await app[SERVER].shutdown(SHUTDOWN_DEADLINE_S)  # every request in flight gets its error
    await runner.cleanup()
    if config.paced is not None:
        print(
            f"llminfer serve: paced steps {engine.steps_total}, late {engine.late_steps} "
            f"(most {1e3 * engine.max_late_s:.2f} ms)",
            flush=True,
        )
    print("llminfer serve: stopped", flush=True)


def _serve_command(args: argparse.Namespace) -> int:
    try:
        engine = ToyEngine(build_model(args.preset, seed=args.seed), _config(args))
    except ValueError as exc:  # a bad knob: one line, no traceback
        print(f"llminfer serve: error: {exc}", file=sys.stderr, flush=True)
        return 2
    asyncio.run(_serve(args, engine))
    return 0


def register_serve(subparsers) -> None:
    """Add ``serve``: an OpenAI-compatible server running ``ToyModel`` on the CPU (chapter 8).

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    defaults = ServeConfig()
    parser = subparsers.add_parser(
        "serve",
        help="run an OpenAI-compatible toy inference server on this CPU",
        description="Serve ToyModel with continuous batching, chunked prefill and a paged KV "
        "cache on /v1/completions, /v1/chat/completions, /v1/models, /health and /metrics.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback)")
    parser.add_argument("--port", type=int, default=8000, help="port (0 = any free one)")
    parser.add_argument("--preset", default="small", choices=list(PRESETS))
    parser.add_argument("--model-name", help="name clients use (default toy-PRESET)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random weights")
    parser.add_argument("--max-num-seqs", type=int, default=defaults.max_num_seqs)
    parser.add_argument(
        "--max-num-batched-tokens", type=int, default=defaults.max_num_batched_tokens
    )
    parser.add_argument("--no-chunked-prefill", action="store_true")
    parser.add_argument("--block-size", type=int, default=defaults.block_size)
    parser.add_argument(
        "--num-kv-blocks",
        type=int,
        default=None,
        help="KV cache capacity in blocks (like vLLM's --num-gpu-blocks-override; default "
        f"{defaults.num_kv_blocks}, or with --paced what plan_memory leaves on that GPU)",
    )
    parser.add_argument(
        "--max-model-len",
        type=int,
        default=None,
        help="most tokens (prompt + output) one request may hold, as vLLM's flag (default the "
        "model's context, which it cannot exceed)",
    )
    parser.add_argument(
        "--paced",
        metavar="MODEL:GPU[:PROFILE]",
        help="time each step as the step model predicts for MODEL on GPU (presets, e.g. "
        "llama-3.1-8b:h100-sxm:vllm; profile vllm or pytorch, default vllm) instead of "
        "computing the toy model: reproducible timings on any machine",
    )
    parser.add_argument(
        "--gpu-memory-utilization",
        type=float,
        default=defaults.gpu_memory_utilization,
        help="with --paced: share of the GPU's memory for weights and KV cache (vLLM's flag)",
    )
    parser.add_argument(
        "--timeout-keep-alive",
        type=float,
        default=HEADER_TIMEOUT_S,
        help="s an idle connection, or a request's line and headers, may take (uvicorn's name)",
    )
    parser.add_argument(
        "--body-timeout",
        type=float,
        default=BODY_TIMEOUT_S,
        help="s a request body may take to arrive once its headers are in (else 408)",
    )
    parser.add_argument(
        "--shutdown-after", type=float, default=None, help="stop by itself after this many s"
    )
    parser.set_defaults(func=_serve_command)


class ServerProcess:
    """``python -m llminfer serve`` in a child process; ``.url`` once ready, ``.stop()``.

    ``args``: extra command-line arguments (e.g. ``["--preset", "tiny"]``); ``config``: a
    ``ServeConfig`` whose knobs (paced mode included) go on the command line before ``args``.
    The server binds a free loopback port and stops by itself after ``shutdown_after`` seconds,
    so a forgotten notebook cell cannot leave it running. Use it as a context manager.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """

    def __init__(
        self,
        args: list[str] | None = None,
        shutdown_after: float = 600.0,
        ready_s: float = 60.0,
        config: ServeConfig | None = None,
    ) -> None:
        if config is not None and not isinstance(config, ServeConfig):
            raise ValueError(f"config={config!r} must be a ServeConfig or None")
        self.config = config
        command = [sys.executable, "-m", "llminfer", "serve", "--port", "0"]
        command += ["--shutdown-after", str(shutdown_after)]
        command += [*(config.command_line() if config else []), *(args or [])]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
        )
        self._lines: collections.deque[str] = collections.deque(maxlen=OUTPUT_LINES)
        self.url = self._wait_ready(ready_s)
        # The pipe holds 64 KiB: a reader must drain it for as long as the server runs.
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _wait_ready(self, ready_s: float) -> str:
        deadline = time.monotonic() + ready_s
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                break  # the process ended
            self._lines.append(line)
            match = READY.search(line)
            if match:
                return match.group(1)
        self.stop()
        raise RuntimeError("llminfer serve did not start:\n" + "".join(list(self._lines)[-20:]))

    def _drain(self) -> None:
        for line in self.process.stdout:
            self._lines.append(line)

    def output(self) -> str:
        """What the server printed so far (stdout and stderr, its last ``OUTPUT_LINES``)."""
        return "".join(list(self._lines))

    @property
    def base(self) -> str:
        """The server's root (``http://127.0.0.1:PORT``), without ``/v1``."""
        return self.url.removesuffix("/v1")

    def stop(self, timeout_s: float = 10.0) -> int:
        """Ask the server to stop (SIGINT), wait, kill it if it will not; its exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if getattr(self, "_reader", None) is not None:
            self._reader.join(5)  # the rest of the output, up to the end of the pipe
        if self.process.stdout:
            self.process.stdout.close()
        return self.process.returncode

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
