"""Write the synthetic logs in data/ (seeded, so re-running gives identical files).

Usage: python scripts/make_sample_logs.py [data_dir]

- requests_realistic.csv: ~3,600 requests over 10 minutes with a load that ramps up, queueing
  that grows once the engine saturates, scheduled_ts, and ~1 % failed requests.
- requests_bad.csv: the article's three rows plus one example of every kind of bad row.
- vllm_bench_detailed.json, genai_perf_profile_export.json, aiperf_profile_export.jsonl,
  llmperf_individual_responses.json: the same six synthetic streamed requests (one failed) in
  each tool's export format, field names as the tools write them.
None of these comes from a real server: they exist to exercise the readers and the notebooks.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

SEED = 20240606


def realistic_log(seed: int = SEED) -> pd.DataFrame:
    """A ten-minute ramp from 3 to 9 requests/s against an engine that saturates near 7/s."""
    rng = np.random.default_rng(seed)
    duration = 600.0
    # Inhomogeneous Poisson arrivals by thinning: rate(t) = 3 + 6 t / duration.
    candidates = np.cumsum(rng.exponential(1 / 9.0, int(duration * 9 * 1.2)))
    candidates = candidates[candidates < duration]
    rate = 3 + 6 * candidates / duration
    start = candidates[rng.uniform(size=candidates.size) < rate / 9.0]
    n = start.size
    load = 3 + 6 * start / duration
    inputs = np.clip(rng.lognormal(np.log(800), 0.8, n), 16, 16_000).astype(np.int64)
    outputs = np.clip(rng.lognormal(np.log(180), 0.7, n), 1, 2048).astype(np.int64)
    outputs[rng.uniform(size=n) < 0.02] = 1  # classification-style requests: one token
    # Queueing grows steeply once arrivals pass ~7 requests/s (the engine's capacity here).
    queue = rng.exponential(0.02 + 0.6 * np.maximum(load - 7, 0) ** 2)
    prefill = 0.012 + inputs / 14_000 * rng.uniform(0.9, 1.2, n)
    tpot = (0.016 + 0.0035 * load) * rng.gamma(25, 1 / 25, n)
    scheduled = start + queue
    first = scheduled + prefill
    end = first + (outputs - 1) * tpot
    frame = pd.DataFrame(
        {
            "request_id": [f"req-{i:05d}" for i in range(n)],
            "start_ts": 1_717_660_800 + start,  # an epoch in seconds: any clock works
            "scheduled_ts": 1_717_660_800 + scheduled,
            "first_token_ts": 1_717_660_800 + first,
            "end_ts": 1_717_660_800 + end,
            "input_tokens": inputs,
            "output_tokens": outputs,
            "status": "ok",
            "error": "",
        }
    )
    failed = rng.uniform(size=n) < 0.01
    frame.loc[failed, "status"] = "failed"
    frame.loc[failed, "error"] = rng.choice(["timeout after 60 s", "HTTP 503"], failed.sum())
    frame.loc[failed, ["first_token_ts", "end_ts", "output_tokens"]] = np.nan
    for column in ("start_ts", "scheduled_ts", "first_token_ts", "end_ts"):
        frame[column] = frame[column].round(4)
    frame["output_tokens"] = frame["output_tokens"].astype("Int64")
    return frame


BAD_ROWS = """request_id,start_ts,first_token_ts,end_ts,input_tokens,output_tokens,status
r1,0.00,0.42,3.10,1024,80,ok
r2,0.15,0.71,4.36,4096,96,ok
r3,0.40,0.88,2.92,512,64,ok
r4,0.50,0.95,,700,50,ok
r5,0.60,abc,3.20,800,40,ok
r6,0.70,1.10,2.50,900,-5,ok
r7,0.80,1.30,1.20,300,30,ok
r2,0.90,1.40,3.00,256,20,ok
r8,1.00,1.50,3.50,nan,70,ok
r9,1.10,0.90,3.60,128,60,ok
r10,1.20,1.60,3.70,512,12.5,ok
r11,1.30,,,2048,,failed
"""


def stream(seed: int = SEED + 1) -> list[dict]:
    """Six streamed requests: start, chunk times (s), tokens per chunk, input tokens, error."""
    rng = np.random.default_rng(seed)
    requests = []
    for i in range(6):
        start = 100.0 + 0.25 * i
        ttft = 0.12 + 0.05 * i + rng.uniform(0, 0.02)
        chunks = 6 + 2 * i
        gaps = rng.gamma(20, 0.0015, chunks - 1)
        if i == 3:
            gaps[4] += 0.35  # a stall: one long pause inside the stream
        times = start + ttft + np.concatenate([[0], np.cumsum(gaps)])
        requests.append(
            {
                "start": start,
                "times": np.round(times, 6),
                "tokens": np.ones(chunks, dtype=int),
                "input_tokens": int(200 + 150 * i),
                "error": "HTTP 500: engine overloaded" if i == 4 else "",
            }
        )
    return requests


def vllm_export(requests: list[dict]) -> dict:
    ok = [r for r in requests if not r["error"]]
    duration = max(r["times"][-1] for r in requests) - min(r["start"] for r in requests)
    out_tokens = sum(int(r["tokens"].sum()) for r in ok)
    in_tokens = sum(r["input_tokens"] for r in ok)
    return {
        "date": "20240606-000000",
        "backend": "openai-chat",
        "model_id": "synthetic/model",
        "duration": duration,
        "completed": len(ok),
        "failed": len(requests) - len(ok),
        "total_input_tokens": in_tokens,
        "total_output_tokens": out_tokens,
        "request_throughput": len(ok) / duration,
        "output_throughput": out_tokens / duration,
        "total_token_throughput": (in_tokens + out_tokens) / duration,
        "input_lens": [r["input_tokens"] for r in requests],
        "output_lens": [0 if r["error"] else int(r["tokens"].sum()) for r in requests],
        "ttfts": [0.0 if r["error"] else float(r["times"][0] - r["start"]) for r in requests],
        "itls": [[] if r["error"] else np.diff(r["times"]).tolist() for r in requests],
        "latencies": [0.0 if r["error"] else float(r["times"][-1] - r["start"]) for r in requests],
        "start_times": [r["start"] for r in requests],
        "generated_texts": [
            "" if r["error"] else "tok " * int(r["tokens"].sum()) for r in requests
        ],
        "errors": [r["error"] for r in requests],
    }


def _sse(payload: dict | str) -> dict:
    body = payload if isinstance(payload, str) else json.dumps(payload)
    return {"response": f"data: {body}\n\n"}


def genai_perf_export(requests: list[dict]) -> dict:
    items = []
    for i, r in enumerate(requests):
        base = {"id": f"chatcmpl-{i}", "object": "chat.completion.chunk", "model": "synthetic"}
        ns = lambda t: round(t * 1e9)  # noqa: E731 - a one-line unit conversion
        stamps, outputs = [], []
        if not r["error"]:
            # The role-only first event arrives a little before the first content.
            stamps.append(ns(r["times"][0] - 0.004))
            outputs.append(
                _sse({**base, "choices": [{"index": 0, "delta": {"role": "assistant"}}]})
            )
            for t in r["times"]:
                stamps.append(ns(t))
                delta = {"index": 0, "delta": {"content": "tok "}, "finish_reason": None}
                outputs.append(_sse({**base, "choices": [delta]}))
            usage = {
                "prompt_tokens": r["input_tokens"],
                "completion_tokens": int(r["tokens"].sum()),
            }
            stamps.append(ns(r["times"][-1] + 0.001))
            outputs.append(_sse({**base, "choices": [], "usage": usage}))
            stamps.append(ns(r["times"][-1] + 0.002))
            outputs.append(_sse("[DONE]"))
        payload = {
            "messages": [{"role": "user", "content": "word " * r["input_tokens"]}],
            "model": "synthetic",
            "stream": True,
        }
        items.append(
            {
                "timestamp": ns(r["start"]),
                "request_inputs": {"payload": json.dumps(payload)},
                "response_timestamps": stamps,
                "response_outputs": outputs,
            }
        )
    return {
        "experiments": [
            {"experiment": {"mode": "concurrency", "value": 4}, "requests": items},
        ],
        "version": "synthetic",
        "service_kind": "openai",
        "endpoint": "v1/chat/completions",
    }


def aiperf_records(requests: list[dict]) -> list[dict]:
    records = []
    for i, r in enumerate(requests):
        start_ns = round(r["start"] * 1e9)
        meta = {
            "x_request_id": f"aiperf-{i:03d}",
            "request_start_ns": start_ns,
            "request_ack_ns": start_ns + 2_000_000,
            "request_end_ns": round(r["times"][-1] * 1e9),
            "benchmark_phase": "profiling",
            "was_cancelled": False,
        }
        if r["error"]:
            records.append(
                {
                    "metadata": meta,
                    "metrics": {"input_sequence_length": {"value": r["input_tokens"]}},
                    "error": {"code": 500, "type": "HTTPError", "message": r["error"]},
                }
            )
            continue
        n = int(r["tokens"].sum())
        ttft_ms = (r["times"][0] - r["start"]) * 1e3
        latency_ms = (r["times"][-1] - r["start"]) * 1e3
        metrics = {
            "input_sequence_length": {"value": r["input_tokens"], "unit": "tokens"},
            "output_sequence_length": {"value": n, "unit": "tokens"},
            "time_to_first_token": {"value": ttft_ms, "unit": "ms"},
            "request_latency": {"value": latency_ms, "unit": "ms"},
            "inter_token_latency": {"value": (latency_ms - ttft_ms) / (n - 1), "unit": "ms"},
            "inter_chunk_latency": {"value": (np.diff(r["times"]) * 1e3).tolist(), "unit": "ms"},
        }
        records.append({"metadata": meta, "metrics": metrics, "error": None})
    return records


def llmperf_records(requests: list[dict]) -> list[dict]:
    out = []
    for r in requests:
        n = 0 if r["error"] else int(r["tokens"].sum())
        e2e = 0.0 if r["error"] else float(r["times"][-1] - r["start"])
        out.append(
            {
                "error_code": 500 if r["error"] else None,
                "error_msg": r["error"],
                "inter_token_latency_s": e2e / n if n else 0.0,
                "ttft_s": 0.0 if r["error"] else float(r["times"][0] - r["start"]),
                "end_to_end_latency_s": e2e,
                "request_output_throughput_token_per_s": n / e2e if n else 0.0,
                "number_total_tokens": r["input_tokens"] + n,
                "number_output_tokens": n,
                "number_input_tokens": r["input_tokens"],
            }
        )
    return out


def main(argv: list[str]) -> int:
    data = Path(argv[0]) if argv else Path(__file__).resolve().parent.parent / "data"
    data.mkdir(exist_ok=True)
    realistic_log().to_csv(data / "requests_realistic.csv", index=False)
    (data / "requests_bad.csv").write_text(BAD_ROWS, encoding="utf-8")
    requests = stream()
    dump = lambda obj: json.dumps(obj, indent=1) + "\n"  # noqa: E731
    (data / "vllm_bench_detailed.json").write_text(dump(vllm_export(requests)))
    (data / "genai_perf_profile_export.json").write_text(dump(genai_perf_export(requests)))
    lines = [json.dumps(record) for record in aiperf_records(requests)]
    (data / "aiperf_profile_export.jsonl").write_text("\n".join(lines) + "\n")
    (data / "llmperf_individual_responses.json").write_text(dump(llmperf_records(requests)))
    print(f"wrote synthetic logs to {data}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
