"""``python -m llminfer bench URL …``: measure a server, write chapter 6's request log.

Exit codes: 0 when every request succeeded, 1 when any failed (the log is written and the
reasons, with the servers' messages, counted on stderr), 130 after Ctrl-C or SIGTERM, 2 on
bad arguments.

Ctrl-C (SIGINT) and SIGTERM end a run the same way, in one place (``Interruption``), at any
moment — warm-up included: the requests in flight are cancelled and the log is written; it
holds every finished request (ok or failed) and, as rows with status ``cancelled``, the ones
cut short (error ``not finished: …``) and the planned ones not yet sent (``not sent: …``), so
it always reads back with ``read_requests``. The summary line states ``sent = ok + failed +
not finished``; requests not yet sent are not counted as sent. A second signal while the log
is written is ignored.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import re
import signal
import sys
from collections import Counter

import numpy as np

from llminfer.sim.workload import Workload

_RANGE = re.compile(r"^\s*(\d+)\s*(?:[-:,]\s*(\d+))?\s*$")


def parse_length(text: str, name: str):
    """``"512"`` → 512 tokens; ``"100-900"`` (or ``100:900``) → a uniform ``(100, 900)`` range.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    match = _RANGE.match(str(text))
    if match is None:
        raise ValueError(f"{name}={text!r} must be a token count like 512 or a range like 100-900")
    low, high = int(match.group(1)), match.group(2)
    return low if high is None else (low, int(high))


class Progress:
    """A tqdm bar over the measured requests with live TTFT p50, TPOT p50 and output tokens/s.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """

    def __init__(self, total: int, enabled: bool = True) -> None:
        from tqdm import tqdm

        self.bar = tqdm(total=total, unit="req", disable=not enabled, file=sys.stderr)
        self.ttft: list[float] = []
        self.tpot: list[float] = []
        self.tokens, self.failed, self.first_start = 0, 0, math.inf

    def __call__(self, record) -> None:
        self.bar.update(1)
        self.first_start = min(self.first_start, record.start_ts)
        if not record.ok:
            self.failed += 1
        elif record.chunk_ts:
            self.ttft.append(record.chunk_ts[0] - record.start_ts)
            n = record.token_counts()[2]
            self.tokens += n
            if n > 1:
                self.tpot.append((record.end_ts - record.chunk_ts[0]) / (n - 1))
        elapsed = max(record.end_ts - self.first_start, 1e-9)
        ttft = np.median(self.ttft) * 1e3 if self.ttft else math.nan
        tpot = np.median(self.tpot) * 1e3 if self.tpot else math.nan
        self.bar.set_postfix_str(
            f"TTFT p50 {ttft:.0f} ms, TPOT p50 {tpot:.1f} ms, "
            f"{self.tokens / elapsed:.0f} out tok/s, failed {self.failed}",
            refresh=False,
        )

    def close(self) -> None:
        self.bar.close()


def _workload(args: argparse.Namespace) -> Workload:
    return Workload(
        n_requests=args.n,
        rate=args.rate,
        concurrency=args.concurrency,
        burstiness=args.burstiness,
        prompt_tokens=parse_length(args.prompt_tokens, "--prompt-tokens"),
        output_tokens=parse_length(args.output_tokens, "--output-tokens"),
        think_time_s=args.think_time,
        shared_prefix_tokens=args.shared_prefix_tokens,
        prefix_groups=args.prefix_groups,
        seed=args.seed,
    )


def _first_model(url: str, timeout_s: float) -> str:
    import json
    import urllib.request

    try:
        with urllib.request.urlopen(url.rstrip("/") + "/models", timeout=timeout_s) as reply:
            return json.load(reply)["data"][0]["id"]
    except (OSError, ValueError, KeyError, IndexError) as exc:
        raise ValueError(f"--model not given and {url}/models did not name one: {exc}") from None


class Interruption:
    """The one place where a signal ends a run: SIGINT (Ctrl-C) and SIGTERM (what ``timeout``
    and CI runners send) alike. The first one cancels the run's task — requests in flight
    become unfinished, the rest not sent — and the command goes on to write its log; later
    ones, while it does, are ignored (no second KeyboardInterrupt cutting the log short).
    Use as a context manager around the whole command; ``run(coroutine)`` runs the run.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.signum: int | None = None
        self._cancel = None
        self._old: dict = {}

    def __enter__(self) -> Interruption:
        for sig in self.SIGNALS:
            self._old[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        if self.signum is not None:
            # Interrupted: the command returns 130 and the process is about to end. A further
            # signal in between must not end it by the signal (exit -2): SIG_IGN, which Python
            # keeps through its own shutdown (a Python-level handler it resets to SIG_DFL).
            for sig in self.SIGNALS:
                signal.signal(sig, signal.SIG_IGN)
            return
        for sig, old in self._old.items():
            signal.signal(sig, old)

    def _handle(self, signum: int, frame) -> None:
        if self.signum is None:
            self.signum = signum
            if self._cancel is not None:
                self._cancel()

    @property
    def name(self) -> str:
        """How the interruption came, in words."""
        return "Ctrl-C" if self.signum == signal.SIGINT else signal.Signals(self.signum).name

    def run(self, coroutine) -> bool:
        """Run ``coroutine`` in a new event loop to its end or to the first signal; True when
        a signal ended it."""

        async def main():
            loop, task = asyncio.get_running_loop(), asyncio.current_task()
            self._cancel = lambda: loop.call_soon_threadsafe(task.cancel)
            if self.signum is not None:  # it came before the loop ran: cancel at once
                task.cancel()
            try:
                return await coroutine
            finally:
                self._cancel = None

        try:
            asyncio.run(main())
        except asyncio.CancelledError:
            if self.signum is None:
                raise
        return self.signum is not None


def _bench_command(args: argparse.Namespace) -> int:
    with Interruption() as interruption:
        return _bench(args, interruption)


def _bench(args: argparse.Namespace, interruption: Interruption) -> int:
    from llminfer.bench.client import BenchRun, run_bench
    from llminfer.bench.results import accounting, prompt_tokens_line, records_frame, warmup_path
    from llminfer.logs.reading import read_requests
    from llminfer.logs.writing import write_log

    if (args.rate is None) == (args.concurrency is None):
        raise ValueError("give exactly one of --rate (requests/s) or --concurrency (users)")
    workload = _workload(args)
    model = args.model or _first_model(args.url, min(args.timeout, 10.0))
    extra = {"ignore_eos": True} if args.ignore_eos else None
    run = BenchRun(workload)
    progress = Progress(args.n, enabled=not args.no_progress)
    try:
        interrupted = interruption.run(
            run_bench(
                args.url,
                workload,
                model,
                chat=args.chat,
                warmup=args.warmup,
                timeout_s=args.timeout,
                include_usage=not args.no_usage,
                extra_body=extra,
                run=run,
                on_done=progress,
                keepalive=not args.no_keepalive,
                prompt_salt=args.prompt_salt,
            )
        )
    finally:
        progress.close()
    counts = accounting(run)
    # One log: every request of the plan that was sent or that the interruption came before;
    # the unfinished and not-sent ones are rows with status "cancelled" saying so, so that an
    # interrupted run's log always reads back (a header alone would not).
    frame = records_frame([*run.records, *run.not_sent])
    write_log(frame, args.out)
    if run.warmup:
        write_log(records_frame(run.warmup), warmup_path(args.out))
    log = read_requests(args.out)  # the file must read back as chapter 6's log
    print(
        f"{workload.describe()} to {args.url} ({model}): sent {counts['sent']}, "
        f"ok {counts['ok']}, failed {counts['failed']}, not finished {counts['unfinished']}, "
        f"not sent {len(run.not_sent)}, warm-up {counts['warmup']} (kept apart)"
        f"{f' — interrupted by {interruption.name}' if interrupted else ''}; "
        f"wrote {args.out} ({len(log)} rows)"
    )
    failed = frame[frame.status == "failed"]
    if len(failed):
        # the messages themselves (not only their kind): "HTTP 503: engine overloaded"
        reasons = Counter(" ".join(str(e).split())[:200] for e in failed["error"])
        for reason, n in reasons.most_common(5):
            print(f"  failed {n}: {reason}", file=sys.stderr)
        if len(reasons) > 5:
            print(f"  … and {len(reasons) - 5} other reasons (see the log)", file=sys.stderr)
    notes = Counter(n[:200] for n in frame["note"] if n)
    for note, n in notes.most_common(3):
        print(f"  note on {n}: {note}", file=sys.stderr)
    tokens_line = prompt_tokens_line(frame)
    if tokens_line:  # the prompts the server saw are not always the prompts asked for
        print(tokens_line)
    cached = frame["cached_input_tokens"] > 0.5 * frame["input_tokens"]
    if cached.any() and not args.shared_prefix_tokens:
        print(
            f"  warning: {int(cached.sum())} measured requests had more than half their prompt "
            "answered from the server's prompt cache: did an earlier run send the same prompts? "
            "Measure with another --prompt-salt (or --seed)",
            file=sys.stderr,
        )
    if counts["ok"]:
        from llminfer.logs.summary import summarize

        print(summarize(log))
    return 130 if interrupted else (1 if counts["failed"] else 0)


def register_bench(subparsers) -> None:
    """Add ``bench URL``: stream a workload to an OpenAI-compatible server, write its log.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    parser = subparsers.add_parser(
        "bench",
        help="measure an OpenAI-compatible server with a streaming load generator",
        description="Send a workload (open loop at --rate, or --concurrency users) to URL's "
        "/completions (or /chat/completions with --chat), stream every answer, and write a "
        "request log with per-chunk times. Exit 0 if all requests succeeded, 1 if any failed.",
    )
    parser.add_argument("url", help="the server's base URL, e.g. http://127.0.0.1:8000/v1")
    parser.add_argument("--model", help="model name (default: the first of URL/models)")
    parser.add_argument("--n", type=int, default=100, help="measured requests")
    load = parser.add_mutually_exclusive_group()
    load.add_argument("--rate", type=float, help="requests/s, open loop (inf = all at once)")
    load.add_argument("--concurrency", type=int, help="users in a closed loop")
    parser.add_argument("--burstiness", type=float, default=1.0, help="1 = Poisson arrivals")
    parser.add_argument("--think-time", type=float, default=0.0, help="closed loop pause, s")
    parser.add_argument("--prompt-tokens", default="256", help="e.g. 256 or 100-900")
    parser.add_argument("--output-tokens", default="64", help="e.g. 64 or 16-128")
    parser.add_argument("--shared-prefix-tokens", type=int, default=0)
    parser.add_argument("--prefix-groups", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--prompt-salt",
        type=int,
        default=0,
        help="other prompt words for the same workload (a rerun against a server whose prompt "
        "cache holds the last run's prompts)",
    )
    parser.add_argument(
        "--warmup",
        type=int,
        default=0,
        help="requests sent first, kept apart, with prompts of their own (no measured prompt)",
    )
    parser.add_argument("--timeout", type=float, default=300.0, help="per request, s")
    parser.add_argument("--chat", action="store_true", help="use /chat/completions")
    parser.add_argument("--no-usage", action="store_true", help="do not ask for usage counts")
    parser.add_argument(
        "--no-keepalive",
        action="store_true",
        help="a new connection per request (for servers that close them after each answer)",
    )
    parser.add_argument(
        "--ignore-eos", action="store_true", help="send vLLM's ignore_eos (exact output length)"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--out", required=True, help="request log to write (.csv)")
    parser.set_defaults(func=_bench_command)
