"""llama.cpp's llama-server (``make llama-server``) under a 1–16 user closed-loop sweep: lost/ok
counts, retries, prompt tokens counted vs requested, prompt-cache hits — kept-alive
connections (the default) and ``--no-keepalive``.

    python benchmarks/bench_llama_server.py [--n 64] [--users 1,2,4,8,16] [--prompt-tokens 128]

Prints one line per load and mode; exits 1 if any request was lost or failed, or a measured
request was more than half answered from the prompt cache. Skips (exit 0, saying so) when the
binary is missing. A few minutes on 2 shared cores.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from llminfer.bench import sweep_server
from llminfer.bench.llamacpp import LlamaServer, find_llama_server, write_tiny_gguf
from llminfer.sim.workload import Workload


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=64, help="requests per load")
    parser.add_argument("--users", default="1,2,4,8,16")
    parser.add_argument("--prompt-tokens", type=int, default=128)
    parser.add_argument("--output-tokens", type=int, default=16)
    parser.add_argument("--parallel", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=4)
    args = parser.parse_args()
    if find_llama_server() is None:
        print("bench_llama_server: skipped, llama-server is not built (make llama-server)")
        return 0
    users = [int(u) for u in args.users.split(",")]
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        model = write_tiny_gguf(Path(tmp) / "tiny.gguf")
        with LlamaServer(model, parallel=args.parallel, context=1024 * args.parallel) as server:
            for keepalive in (True, False):
                workload = Workload(
                    args.n,
                    concurrency=1,
                    prompt_tokens=args.prompt_tokens,
                    output_tokens=args.output_tokens,
                )
                start = time.perf_counter()
                table, logs = sweep_server(
                    server.url,
                    workload,
                    "tiny",
                    concurrencies=users,
                    extra_body={"ignore_eos": True},
                    warmup=args.warmup,
                    keepalive=keepalive,
                    # the second sweep must not resend the first one's prompts: all cache hits
                    prompt_salt=0 if keepalive else 1000,
                )
                mode = "keep-alive" if keepalive else "no keep-alive"
                for c, frame in logs.items():
                    ok = int((frame["status"] == "ok").sum())
                    lost = args.n - len(frame)
                    retried = int(frame["note"].str.contains("sent again").sum())
                    cached = frame["cached_input_tokens"]
                    hits = int((cached > 0.5 * frame["input_tokens"]).sum())
                    extra = (frame["input_tokens"] - frame["requested_input_tokens"]).unique()
                    row = table[table["concurrency"] == c].iloc[0]
                    print(
                        f"{mode:>13}, {c:>2} users: sent {len(frame)}, ok {ok}, failed "
                        f"{len(frame) - ok}, lost {lost}, retried {retried}, cache hits {hits}, "
                        f"prompt tokens +{','.join(str(int(e)) for e in extra)} per request, "
                        f"TTFT p50 {row['ttft_s_p50'] * 1e3:.1f} ms"
                    )
                    for error in sorted(set(frame.loc[frame["status"] != "ok", "error"]))[:3]:
                        print(f"      error: {error}")
                    bad += lost + (len(frame) - ok) + hits
                print(f"{mode}: {time.perf_counter() - start:.1f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
