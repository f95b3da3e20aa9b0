"""How exact are the load generator's timestamps, and what does it cost per chunk?

A stub server (``python -m llminfer.bench.stub``, its own process) streams N chunks per request,
one every D ms, and records when it wrote each one (``time.perf_counter``, the same monotonic
clock in every process on Linux). ``llminfer.bench`` runs S concurrent streams against it; we
compare every chunk's client time with the stub's write time. Target: p99 error ≤ 2 ms at 64
concurrent streams. The client's own cost per chunk is its process CPU time over the run
divided by the chunks received.

    python benchmarks/bench_client.py [--streams 64] [--chunks 50] [--interval-ms 20]
"""

import argparse
import json
import re
import subprocess
import sys
import time
import urllib.request

import numpy as np

from llminfer.bench import bench, plan_requests
from llminfer.workload import Workload


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--chunks", type=int, default=50)
    parser.add_argument("--interval-ms", type=float, default=20.0)
    args = parser.parse_args()
    stub = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "llminfer.bench.stub",
            "--chunks",
            str(args.chunks),
            "--interval-ms",
            str(args.interval_ms),
            "--shutdown-after",
            "120",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        url = re.search(r"(http://\S+)", stub.stdout.readline()).group(1)
        workload = Workload(args.streams, rate=float("inf"), prompt_tokens=16, output_tokens=1)
        cpu0 = time.process_time()
        run = bench(url, workload, "stub")
        cpu_s = time.process_time() - cpu0
        with urllib.request.urlopen(url.removesuffix("/v1") + "/sent") as reply:
            sent = json.load(reply)
    finally:
        stub.terminate()
        stub.wait()
    prompts = plan_requests(workload).set_index("request_id")["prompt"]
    errors, chunks = [], 0
    for record in run.records:
        assert record.ok, record.error
        written = np.asarray(sent[prompts[record.request_id]][: args.chunks]) - run.t0
        got = np.asarray(record.chunk_ts)
        errors.append(got - written)
        chunks += len(got)
    lag = np.concatenate(errors) * 1e3
    p50, p99, worst = [*np.percentile(lag, [50, 99]).tolist(), float(lag.max())]
    print(f"{args.streams} streams x {args.chunks} chunks every {args.interval_ms:g} ms")
    print(f"client time - stub write time: p50 {p50:.3f} ms, p99 {p99:.3f} ms, max {worst:.3f} ms")
    print(f"client cost: {cpu_s / chunks * 1e6:.1f} us CPU per chunk ({chunks} chunks)")
    ok = p99 <= 2.0
    print("target p99 <= 2 ms:", "met" if ok else "NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
