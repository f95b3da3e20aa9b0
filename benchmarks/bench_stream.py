"""Benchmark: the streaming summariser's two batch engines on one big Parquet log, in one run.

Each engine runs ``llminfer.logs.logstream.summarize_stream`` in its own process (so each peak
resident memory is its own); prints wall time, peak memory and the ratio, and checks both give
the same summary. Make the log first: ``python benchmarks/make_big_log.py DIR --rows N``.

Usage: python benchmarks/bench_stream.py DIR
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

CHILD = """
import json, resource, sys
from llminfer.logs.logstream import summarize_stream
s = summarize_stream(sys.argv[1], engine=sys.argv[2], progress=False).to_dict()
s["peak_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
print(json.dumps(s))
"""


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(__doc__)
        return 2
    results = {}
    for engine in ("arrow", "duckdb"):
        tick = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-c", CHILD, args[0], engine], capture_output=True, text=True
        )
        if out.returncode:
            print(out.stderr)
            return 1
        seconds = time.perf_counter() - tick
        results[engine] = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{engine:>6}: {seconds:.1f} s, peak {results[engine]['peak_gib']:.2f} GiB")
        results[engine]["seconds"] = seconds
    a, d = results["arrow"], results["duckdb"]
    print(f"duckdb / arrow time: {d['seconds'] / a['seconds']:.2f}x")
    same = all(a[k] == d[k] for k in a if k.endswith(("_p50", "_p99", "n_requests")))
    print(f"same percentiles and counts: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
