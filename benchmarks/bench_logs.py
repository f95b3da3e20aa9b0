"""Benchmark: the article's standard-library log script vs ``read_requests`` + ``summarize``.

Writes a seeded N-request CSV (default 1,000,000) to a temporary directory, then in one run
times (1) the article's approach — ``csv.DictReader``, per-row validation, per-request TTFT /
TPOT / E2E, sorted-list percentiles, total TPS — and (2) ``llminfer.read_requests`` +
``llminfer.summarize``. Prints both times, the ratio and the peak resident memory.
Also times pyarrow's bare parse of the same file. Targets (issue 16), as ratios from one run:
≥ 10× faster than the article's script and within 3× of pyarrow's parse at 1,000,000 rows.
The baseline is the article's chapter-6 script (``csv.DictReader``, a dict per row, sorted-list
percentiles), completed where the article breaks off; it is the same code in every run.

With ``--diagnose`` it also runs the command line on the same file, each command in a fresh
process as a user would (interpreter start and imports included): ``python -m llminfer metrics``
and ``python -m llminfer diagnose``, with wall time and peak resident memory. Targets (issue 16)
at 10,000,000 rows: ``metrics`` ≤ 5 s and ``diagnose`` ≤ 15 s, each within 4 GiB.
``--log PATH`` uses an existing CSV in the article's columns instead of writing one (e.g. the
10 M-row file of ``write_log`` with seed 0, which takes a minute to write).

Usage: python benchmarks/bench_logs.py [--rows N] [--seed S] [--repeat R] [--skip-stdlib]
       python benchmarks/bench_logs.py --rows 10000000 --skip-stdlib --diagnose [--log PATH]
"""

from __future__ import annotations

import argparse
import csv
import math
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from llminfer import read_requests, summarize


def write_log(path: Path, rows: int, seed: int, chunk: int = 1_000_000) -> None:
    """A plausible log: Poisson arrivals, gamma TTFT, log-normal lengths, 20–50 ms TPOT.

    Written a million rows at a time so that generating it does not inflate peak memory.
    """
    rng = np.random.default_rng(seed)
    clock = 0.0
    for offset in range(0, rows, chunk):
        n = min(chunk, rows - offset)
        start = clock + np.cumsum(rng.exponential(0.01, n))
        clock = float(start[-1])
        ttft = rng.gamma(2.0, 0.15, n)
        output = np.clip(rng.lognormal(5.0, 0.7, n).astype(np.int64), 1, 4096)
        inputs = np.clip(rng.lognormal(6.5, 1.0, n).astype(np.int64), 1, 32768)
        first = start + ttft
        end = first + (output - 1) * rng.uniform(0.02, 0.05, n)
        frame = pd.DataFrame(
            {
                "request_id": np.char.add("r", np.arange(offset, offset + n).astype(str)),
                "start_ts": start,
                "first_token_ts": first,
                "end_ts": end,
                "input_tokens": inputs,
                "output_tokens": output,
            }
        )
        frame.to_csv(path, index=False, float_format="%.6f", mode="a", header=offset == 0)


def article_percentile(values: list[float], q: float) -> float:
    """The article's percentile, verbatim in logic."""
    if not values:
        raise ValueError("values must not be empty")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    lower = math.floor(position)
    upper = math.ceil(position)
    if lower == upper:
        return ordered[lower]
    weight = position - lower
    return ordered[lower] * (1 - weight) + ordered[upper] * weight


def stdlib_summary(path: Path) -> dict[str, float]:
    """The article's standard-library approach, completed: metrics, p50/p95, total TPS."""
    rows: list[dict[str, float | int | str]] = []
    with path.open(encoding="utf-8", newline="") as file:
        for raw in csv.DictReader(file):
            output_tokens = int(raw["output_tokens"])
            start = float(raw["start_ts"])
            first = float(raw["first_token_ts"])
            end = float(raw["end_ts"])
            if not start <= first <= end:
                raise ValueError(f"timestamps out of order for {raw['request_id']}")
            rows.append(
                {
                    "request_id": raw["request_id"],
                    "ttft": first - start,
                    "tpot": (end - first) / (output_tokens - 1) if output_tokens > 1 else math.nan,
                    "e2e": end - start,
                    "start": start,
                    "end": end,
                    "output_tokens": output_tokens,
                }
            )
    ttfts = [float(r["ttft"]) for r in rows]
    tpots = [float(r["tpot"]) for r in rows if not math.isnan(float(r["tpot"]))]
    e2es = [float(r["e2e"]) for r in rows]
    window = max(float(r["end"]) for r in rows) - min(float(r["start"]) for r in rows)
    out = {"tps": sum(int(r["output_tokens"]) for r in rows) / window}
    for name, values in (("ttft", ttfts), ("tpot", tpots), ("e2e", e2es)):
        out[f"{name}_p50"] = article_percentile(values, 0.50)
        out[f"{name}_p95"] = article_percentile(values, 0.95)
    return out


def peak_rss_gib() -> float:
    # ru_maxrss is KiB on Linux, bytes on macOS.
    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**30


def best_of(repeat: int, run):
    """The fastest of ``repeat`` runs of ``run()`` (seconds) and its result."""
    best, result = math.inf, None
    for _ in range(repeat):
        tick = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - tick)
    return best, result


#: Runs the command line in a child process and reports that process's own peak memory:
#: VmHWM where /proc has it (ru_maxrss keeps the parent's peak across fork and exec on Linux,
#: so a child started by a benchmark holding 2 GiB would report at least 2 GiB), else
#: ru_maxrss. Both in KiB on Linux.
_CHILD = (
    "import resource, sys\n"
    "from llminfer.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "try:\n"
    "    with open('/proc/self/status') as status:\n"
    "        kib = next(int(l.split()[1]) for l in status if l.startswith('VmHWM:'))\n"
    "except (OSError, StopIteration):\n"
    "    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
    "    kib = kib // 1024 if sys.platform == 'darwin' else kib\n"
    "print('maxrss', kib, file=sys.stderr)\n"
    "sys.exit(code)\n"
)


def run_cli(args: list[str]) -> tuple[float, float, int]:
    """``python -m llminfer ARGS`` in a fresh process: (wall seconds, peak resident GiB of that
    process, exit status). The report goes to /dev/null; an error line is printed."""
    tick = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - tick
    kib = [int(line.split()[1]) for line in done.stderr.splitlines() if line.startswith("maxrss")]
    if not kib:
        print(done.stderr, file=sys.stderr)
        raise RuntimeError(f"python -m llminfer {' '.join(args)} died (exit {done.returncode})")
    return wall, kib[0] / 2**20, done.returncode


def time_commands(path: Path, repeat: int) -> None:
    """``metrics`` and ``diagnose`` on ``path`` from the command line, best of ``repeat`` each,
    in one run so that both meet the same machine load."""
    for command in ("metrics", "diagnose"):
        runs = [run_cli([command, str(path)]) for _ in range(repeat)]
        wall = min(r[0] for r in runs)
        peak = max(r[1] for r in runs)
        print(
            f"python -m llminfer {command}: {wall:.2f} s (best of {repeat}), peak resident "
            f"{peak:.2f} GiB, exit {runs[0][2]}"
        )
    print("targets at 10,000,000 rows: metrics <= 5 s, diagnose <= 15 s, each <= 4 GiB")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-stdlib", action="store_true", help="time llminfer only")
    parser.add_argument(
        "--diagnose",
        action="store_true",
        help="also time `python -m llminfer metrics` and `diagnose` on it, each a fresh process",
    )
    parser.add_argument(
        "--log", type=Path, help="an existing CSV in the article's columns instead of a new one"
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="runs of each approach; the fastest counts (other programs only ever slow a run)",
    )
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error(f"--repeat={args.repeat} must be >= 1")
    if args.log is not None and not args.log.is_file():
        parser.error(f"--log {args.log}: no such file")
    with tempfile.TemporaryDirectory() as tmp:
        if args.log is None:
            path = Path(tmp) / "requests.csv"
            write_log(path, args.rows, args.seed)
            size = path.stat().st_size / 1e6
            print(f"log: {args.rows:,} requests, {size:.0f} MB CSV (seed {args.seed})")
        else:
            path = args.log
            print(f"log: {path} ({path.stat().st_size / 1e6:.0f} MB CSV)")
        # Warm up both approaches on a small file first, so neither timing pays one-off costs
        # (lazy imports, the CSV reader's thread pool).
        small = Path(tmp) / "warmup.csv"
        write_log(small, 1000, args.seed)
        summarize(read_requests(small))
        stdlib_summary(small)
        import pyarrow.csv as pa_csv

        pa_csv.read_csv(small)
        parse_s, _ = best_of(args.repeat, lambda: pa_csv.read_csv(path))
        print(f"pyarrow bare parse (pyarrow.csv.read_csv): {parse_s:.2f} s (best of {args.repeat})")
        before = peak_rss_gib()
        fast, summary = best_of(args.repeat, lambda: summarize(read_requests(path)))
        print(f"llminfer read_requests + summarize: {fast:.2f} s (best of {args.repeat})")
        print(f"peak resident memory: {peak_rss_gib():.2f} GiB (before reading {before:.2f} GiB)")
        print(f"llminfer / pyarrow parse: {fast / parse_s:.2f}x (target <= 3x)")
        if args.diagnose:
            time_commands(path, args.repeat)
        if args.skip_stdlib:
            return 0
        slow_s, slow = best_of(args.repeat, lambda: stdlib_summary(path))
        print(f"article's standard-library script:  {slow_s:.2f} s (best of {args.repeat})")
        print(f"article script / llminfer: {slow_s / fast:.1f}x faster (target >= 10x)")
        mine = summary.to_dict()
        for key in ("ttft_p50", "ttft_p95", "tpot_p50", "tpot_p95", "e2e_p50", "e2e_p95"):
            name, stat = key.split("_")
            assert math.isclose(mine[f"{name}_s_{stat}"], slow[key], rel_tol=1e-9), key
        assert math.isclose(mine["output_tps"], slow["tps"], rel_tol=1e-9)
        print("both approaches agree on p50, p95 (TTFT, TPOT, E2E) and TPS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
