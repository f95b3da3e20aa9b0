"""Write a big request log as Parquet files (default 100,000,000 requests, 10 files).

Each file is one "replica": seeded Poisson arrivals, gamma TTFT, log-normal lengths, 20–50 ms
TPOT (the same generator as ``bench_logs.py``), written a million rows at a time so that writing
never holds more than a million rows. Summarise it with
``python -m llminfer metrics DIR --stream`` or ``llminfer.logs.logstream.summarize_stream(DIR)``.

Usage: python benchmarks/make_big_log.py DIR [--rows N] [--files F] [--seed S]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

CHUNK = 1_000_000


def chunk_table(offset: int, n: int, clock: float, rng: np.random.Generator):
    """One chunk of ``n`` requests starting after ``clock`` (s): (Arrow table, new clock)."""
    start = clock + np.cumsum(rng.exponential(0.01, n))
    ttft = rng.gamma(2.0, 0.15, n)
    output = np.clip(rng.lognormal(5.0, 0.7, n).astype(np.int64), 1, 4096)
    inputs = np.clip(rng.lognormal(6.5, 1.0, n).astype(np.int64), 1, 32768)
    first = start + ttft
    end = first + (output - 1) * rng.uniform(0.02, 0.05, n)
    ids = pa.array(np.char.add("r", np.arange(offset, offset + n).astype(str)))
    table = pa.table(
        {
            "request_id": ids,
            "start_ts": start,
            "first_token_ts": first,
            "end_ts": end,
            "input_tokens": inputs,
            "output_tokens": output,
            "status": pa.array(np.where(rng.random(n) < 0.001, "failed", "ok")),
        }
    )
    return table, float(start[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--rows", type=int, default=100_000_000)
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.rows < 1 or args.files < 1:
        parser.error("--rows and --files must be >= 1")
    args.directory.mkdir(parents=True, exist_ok=True)
    per_file = -(-args.rows // args.files)
    written = 0
    for index in range(args.files):
        rng = np.random.default_rng([args.seed, index])
        rows = min(per_file, args.rows - written)
        if rows <= 0:
            break
        path = args.directory / f"replica-{index:02d}.parquet"
        clock, writer = 0.0, None
        for offset in range(0, rows, CHUNK):
            table, clock = chunk_table(written + offset, min(CHUNK, rows - offset), clock, rng)
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema)
            writer.write_table(table)
        writer.close()
        written += rows
        print(f"{path}: {rows:,} requests", flush=True)
    print(f"{written:,} requests in {args.directory}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
