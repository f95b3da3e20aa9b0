"""Measure the repo's toy server (a real engine: real HTTP, real scheduling, on the CPU) at two
loads and save the request logs and /metrics scrapes that notebook 07 diagnoses.

    PYTHONPATH=. python scripts/make_real_engine_logs.py [--out data] [--n 80]

What it runs, in order (each a separate process, so server and client share no interpreter):

1. ``python -m llminfer serve --port 0 --preset small --seed 0 --shutdown-after 900`` (loopback);
2. per load, a scrape of ``/metrics``, then ``python -m llminfer bench URL --n N --rate R
   --prompt-tokens 64-512 --output-tokens 16-96 --seed 7 --warmup 5 --no-progress --out
   real_toy_<label>.csv``, then a second scrape: ``real_toy_<label>_metrics_before.txt`` /
   ``_after.txt``.

The loads are a light one and one above the server's capacity on the machine it runs on, so
the logs' numbers depend on that machine (data/README.md says which one made the committed
files); the workload itself (lengths, arrival times) is seeded. Bounded: N requests per load
and --shutdown-after.

Introduced in: notebooks/07_troubleshooting.ipynb
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import urllib.request
from pathlib import Path

from llminfer.serve.run import ServerProcess

#: (label, requests/s): a light load and an overload of the small preset on two shared CPU cores
#: (it served about 1.8 requests/s of this workload there).
LOADS = (("light", 0.5), ("heavy", 4.0))
WORKLOAD = ["--prompt-tokens", "64-512", "--output-tokens", "16-96", "--seed", "7"]


def _scrape(base: str, path: Path) -> None:
    with urllib.request.urlopen(f"{base}/metrics", timeout=10) as response:
        path.write_bytes(response.read())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="data", help="directory for the logs")
    parser.add_argument("--n", type=int, default=80, help="measured requests per load")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    server_args = ["--preset", "small", "--seed", "0"]
    with ServerProcess(server_args, shutdown_after=900) as server:
        for label, rate in LOADS:
            stem = out / f"real_toy_{label}"
            _scrape(server.base, Path(f"{stem}_metrics_before.txt"))
            command = [
                sys.executable, "-m", "llminfer", "bench", server.url, "--n", str(args.n),
                "--rate", str(rate), *WORKLOAD, "--warmup", "5", "--no-progress",
                "--out", f"{stem}.csv",
            ]  # fmt: skip
            print(" ".join(command[1:]), flush=True)
            subprocess.run(command, check=False)
            _scrape(server.base, Path(f"{stem}_metrics_after.txt"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
