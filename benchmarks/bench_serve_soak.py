"""Soak test of ``llminfer serve``: mixed good and bad traffic for a bounded time, the server's
memory over time, and its ``/metrics`` counters against what was sent.

Traffic (seeded, from ``--streams`` concurrent clients on 127.0.0.1): streamed completions
and chat, plain answers, answers with stop strings, clients that leave mid-stream, and
malformed requests (bad JSON, lone surrogates, deep nesting, wrong types, unknown roles, too
long, wrong content type). Every second the server's resident memory (VmRSS of its PID) is
printed. At the end:

- each malformed request must have had its 4xx (never a 500), each good one a whole answer;
- ``vllm:request_success`` must equal the good answers that finished, ``vllm:prompt_tokens``
  the prompt tokens of every request the server accepted, ``vllm:generation_tokens`` lie
  between the tokens received and that plus what the clients that left could have had;
- nothing may still run or wait, and the server's log may hold no traceback;
- RSS after the warm-up (the first quarter of the run, at least 5 s) must stay within ±10 % of
  its median (the KV pool is allocated once; anything growing is a leak).

Exit 0 when all hold, 1 otherwise. The server is started by this script and stopped by its PID.

Usage: python benchmarks/bench_serve_soak.py [--seconds 60] [--streams 16] [--preset small]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

import numpy as np

#: Malformed bodies and the status each must get.
BAD = [
    (b"{not json", "/completions", 400),
    (b'{"prompt": "a \\ud800", "max_tokens": 2}', "/completions", 400),
    (b"[" * 50_000 + b"]" * 50_000, "/completions", 400),
    (b'{"prompt": "a", "temperature": "hot"}', "/completions", 400),
    (b'{"prompt": "a", "max_tokens": 0}', "/completions", 400),
    (b'{"prompt": "a", "n": 3}', "/completions", 400),
    (b'{"prompt": "' + b"a " * 3000 + b'", "max_tokens": 2}', "/completions", 400),
    (b'{"messages": [{"role": "wizard", "content": "a"}]}', "/chat/completions", 400),
    (b'{"messages": [{"content": "a"}]}', "/chat/completions", 400),
    (
        b'{"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]}',
        "/chat/completions",
        400,
    ),
    (b'{"prompt": "a", "model": "nope"}', "/completions", 404),
]


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def metrics(text: str) -> dict[str, float]:
    from prometheus_client.parser import text_string_to_metric_families

    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            totals[sample.name] = totals.get(sample.name, 0.0) + sample.value
    return totals


async def client(session, url: str, seed: int, deadline: float, sent: dict) -> None:
    import aiohttp

    rng = np.random.default_rng(seed)
    while time.monotonic() < deadline:
        kind = rng.choice(["stream", "chat", "plain", "stop", "leave", "bad"])
        n_prompt, n_out = int(rng.integers(4, 200)), int(rng.integers(1, 48))
        if kind == "leave":
            n_out = 1000  # long enough never to be over before its client leaves
        prompt = " ".join(f"w{int(i)}" for i in rng.integers(0, 50, n_prompt))
        if kind == "bad":
            raw, path, status = BAD[int(rng.integers(len(BAD)))]
            async with session.post(
                url + path, data=raw, headers={"Content-Type": "application/json"}
            ) as reply:
                await reply.read()
                sent["bad"] += 1
                if reply.status != status:
                    sent["wrong_status"].append((raw[:60], reply.status))
            continue
        chat = kind == "chat"
        body = {"max_tokens": n_out, "stream": kind in ("stream", "chat", "leave")}
        body.update({"messages": [{"role": "user", "content": prompt}]} if chat else {})
        body.update({} if chat else {"prompt": prompt})
        if kind == "stop":
            body["stop"] = ["t7 t7"]  # rarely met: most answers run to max_tokens
        if body["stream"]:
            body["stream_options"] = {"include_usage": True}
        path = "/chat/completions" if chat else "/completions"
        try:
            async with session.post(url + path, json=body) as reply:
                if reply.status != 200:
                    sent["wrong_status"].append((kind, reply.status))
                    continue
                sent["accepted_prompt_tokens"] += n_prompt
                if kind == "leave":
                    await reply.content.readline()  # one line, then away
                    reply.close()
                    sent["left"] += 1
                    sent["left_max_tokens"] += n_out
                    continue
                if not body["stream"]:
                    answer = await reply.json()
                    usage = answer["usage"]
                else:
                    usage, done = None, False
                    async for line in reply.content:
                        if line.startswith(b"data: [DONE]"):
                            done = True
                        elif line.startswith(b"data: "):
                            event = json.loads(line[6:])
                            usage = event.get("usage") or usage
                    if not done or usage is None:
                        sent["broken"] += 1
                        continue
                sent["good"] += 1
                sent["tokens"] += usage["completion_tokens"]
                if kind != "stop" and usage["completion_tokens"] != n_out:
                    sent["wrong_length"] += 1
        except aiohttp.ClientError as exc:
            sent["client_errors"].append(repr(exc))


async def load(url: str, streams: int, seconds: float, seed: int, sent: dict) -> None:
    import aiohttp

    deadline = time.monotonic() + seconds
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        await asyncio.gather(
            *(client(session, url, seed * 1000 + i, deadline, sent) for i in range(streams))
        )


def main(argv: list[str] | None = None) -> int:
    import threading
    import urllib.request

    from llminfer.serve import ServerProcess

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="length of the load, s")
    parser.add_argument("--streams", type=int, default=16, help="concurrent clients")
    parser.add_argument("--preset", default="small")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    sent = {
        "good": 0,
        "tokens": 0,
        "bad": 0,
        "left": 0,
        "left_max_tokens": 0,
        "broken": 0,
        "wrong_length": 0,
        "accepted_prompt_tokens": 0,
        "wrong_status": [],
        "client_errors": [],
    }
    problems: list[str] = []
    with ServerProcess(["--preset", args.preset], shutdown_after=args.seconds + 300) as server:
        pid, samples, stop = server.process.pid, [], threading.Event()
        start = time.monotonic()

        def sample() -> None:
            while not stop.wait(1.0):
                samples.append((time.monotonic() - start, rss_bytes(pid)))
                print(
                    f"  {samples[-1][0]:6.1f} s  RSS {samples[-1][1] / 2**30:.3f} GiB", flush=True
                )

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        asyncio.run(load(server.url, args.streams, args.seconds, args.seed, sent))
        time.sleep(1.0)  # the requests of the clients that left are dropped at the next step
        stop.set()
        sampler.join()
        with urllib.request.urlopen(server.base + "/metrics", timeout=30) as reply:
            counters = metrics(reply.read().decode())
        output = server.output()
    print(
        f"sent: {sent['good']} good answers ({sent['tokens']} tokens), {sent['bad']} malformed, "
        f"{sent['left']} clients left mid-stream"
    )
    success = counters.get("vllm:request_success_total", 0)
    generated = counters.get("vllm:generation_tokens_total", 0)
    prompt = counters.get("vllm:prompt_tokens_total", 0)
    print(
        f"/metrics: request_success {success:.0f}, generation_tokens {generated:.0f}, "
        f"prompt_tokens {prompt:.0f}, running {counters.get('vllm:num_requests_running', -1):.0f}"
        f", waiting {counters.get('vllm:num_requests_waiting', -1):.0f}"
    )
    if success != sent["good"]:
        problems.append(f"request_success {success:.0f} != {sent['good']} good answers")
    if prompt != sent["accepted_prompt_tokens"]:
        problems.append(f"prompt_tokens {prompt:.0f} != {sent['accepted_prompt_tokens']} sent")
    if not sent["tokens"] <= generated <= sent["tokens"] + sent["left_max_tokens"]:
        problems.append(
            f"generation_tokens {generated:.0f} outside [{sent['tokens']}, "
            f"{sent['tokens'] + sent['left_max_tokens']}]"
        )
    if counters.get("vllm:num_requests_running") or counters.get("vllm:num_requests_waiting"):
        problems.append("requests still running or waiting after the load")
    for key in ("wrong_status", "client_errors"):
        if sent[key]:
            problems.append(f"{len(sent[key])} {key}: {sent[key][:3]}")
    for key in ("broken", "wrong_length"):
        if sent[key]:
            problems.append(f"{sent[key]} {key} answers")
    if "Traceback" in output:
        problems.append(
            "a traceback in the server's log: " + output[output.index("Traceback") :][:800]
        )
    warm = max(5.0, args.seconds / 4)
    after = np.array([rss for t, rss in samples if t >= warm], dtype=float)
    if len(after) >= 2:
        median = float(np.median(after))
        low, high = after.min() / median - 1, after.max() / median - 1
        print(
            f"RSS after {warm:.0f} s warm-up: median {median / 2**30:.3f} GiB, "
            f"{low * 100:+.1f} % to {high * 100:+.1f} %"
        )
        if low < -0.10 or high > 0.10:
            problems.append(f"RSS not flat within ±10 %: {low * 100:+.1f} % to {high * 100:+.1f} %")
    else:
        problems.append("run too short to judge RSS after the warm-up")
    for problem in problems:
        print("FAIL:", problem)
    print("OK" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
