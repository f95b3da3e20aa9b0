"""Does the toy server batch decode? Decode tokens/s at 8 concurrent streams against 1.

``llminfer serve --preset small`` decodes all running sequences in one batched forward pass, so 8
streams should decode several times the tokens/s of one. Target: the median ratio of
interleaved rounds (1, 8, 1, 8, …) is at least 3. Each round compares two runs made moments
apart, so a disturbance on a shared machine hits one round, not the verdict; at least 3 rounds,
up to ``--max-rounds`` while the median is below the target.

This was a unit test until issue 20: a ratio of two timings is a performance target, and on a
2-core machine running the suite in parallel it failed for reasons that were the machine's
(rounds from 2.1 to 3.4 while pytest ran beside it; 3.0–6.2 alone).

    python benchmarks/bench_serve_batching.py [--max-rounds 11] [--target 3]

Exit status 0 when the median ratio meets the target.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from llminfer.bench import bench, records_frame
from llminfer.serve import ServerProcess
from llminfer.sim.workload import Workload


def decode_tps(url: str, concurrency: int) -> float:
    """Decode tokens/s of 8 requests at ``concurrency`` streams: tokens after each first token,
    over the span from the first first token to the last end."""
    workload = Workload(8, concurrency=concurrency, prompt_tokens=8, output_tokens=64)
    frame = records_frame(bench(url, workload, "toy-small").records)
    tokens = (frame["output_tokens"] - 1).sum()
    return float(tokens / (frame["end_ts"].max() - frame["first_token_ts"].min()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max-rounds", type=int, default=11)
    parser.add_argument("--target", type=float, default=3.0)
    args = parser.parse_args(argv)
    ratios: list[float] = []
    with ServerProcess(["--preset", "small"], shutdown_after=300) as server:
        for round_ in range(args.max_rounds):
            one, eight = decode_tps(server.url, 1), decode_tps(server.url, 8)
            ratios.append(eight / one)
            print(
                f"round {round_ + 1}: 1 stream {one:7.0f} tok/s, 8 streams {eight:7.0f} tok/s, "
                f"ratio {ratios[-1]:.2f}"
            )
            if round_ >= 2 and float(np.median(ratios)) >= args.target:
                break
    median = float(np.median(ratios))
    met = median >= args.target
    print(
        f"median ratio over {len(ratios)} rounds: {median:.2f} "
        f"({'meets' if met else 'misses'} the target of {args.target:g})"
    )
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
