"""Write tests/fixtures/: one small export per tool and schema version, with the summary beside
it computed by the tool's own formulas (cited below), so tests can check that llminfer
reproduces each tool's numbers. Seeded: re-running rewrites the same files.

Sources of each layout and formula:
- vLLM: vllm-project/vllm benchmarks/benchmark_serving.py (2024) and vllm/benchmarks/serve.py
  (calculate_metrics: mean/median/percentile via numpy over successful requests, ttfts of
  successful requests even when 0 tokens came back; rates over ``duration``).
- SGLang: sgl-project/sglang python/sglang/bench_serving.py (result dict, --output-details).
- AIPerf: ai-dynamo/aiperf docs/tutorials/working-with-profile-exports.md (record and
  aggregate layouts; v0.1 record layout from its examples/README.md).
- GenAI-Perf: triton-inference-server/perf_analyzer, genai-perf/genai_perf/ —
  profile_data_parser/llm_profile_data_parser.py (_parse_requests: responses without content
  removed first; request_latency = last response − timestamp; TTFT = first response −
  timestamp; ITL = round((latency − TTFT)/(N − 1)) ns for N > 1; benchmark_duration = last
  response − first request, over requests with content; request_throughput = len(requests) /
  duration, every request sent counted; output_token_throughput = Σ N / duration),
  metrics/statistics.py (avg = np.mean; p1 … p99 = np.percentile; min, max, std = np.std; ns
  → ms by scale_data(1/1e6)), metrics/llm_metrics.py (metric names and units),
  export_data/json_exporter.py (``<stem>_genai_perf.json`` = stats + ``input_config``) and
  export_data/csv_exporter.py (``<stem>_genai_perf.csv``: request metrics ``avg, min, max, p99,
  p95, p90, p75, p50, p25`` formatted ``{:,.2f}``, then ``Metric,Value`` system metrics).
- llmperf: ray-project/llmperf token_benchmark_ray.py (metrics_summary: pandas quantiles over
  requests whose error_code is null; Σ output tokens / (end_time − start_time)) and
  src/llmperf/utils.py (flatten_dict with "_").
- GuideLLM: vllm-project/guidellm GenerativeTextResponseStats (v0.2–0.3) and
  GenerativeRequestStats (v0.4 on, info.timings).
"""

from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

SEED = 10
OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures"


def stream(n: int = 8, seed: int = SEED) -> list[dict]:
    """n requests: start (s), ttft (s), chunk gaps (s), input/output tokens."""
    rng = np.random.default_rng(seed)
    out = []
    t = 0.0
    for i in range(n):
        t += float(rng.exponential(0.3))
        n_out = int(rng.integers(4, 12))
        gaps = [round(float(g), 6) for g in rng.gamma(4.0, 0.006, n_out - 1)]
        if i == 3:
            gaps[1] += 0.4  # one stall
        out.append(
            {
                "start": round(t, 6),
                "ttft": round(float(rng.uniform(0.05, 0.4)), 6),
                "gaps": gaps,
                "in": int(rng.integers(100, 900)),
                "out": n_out,
            }
        )
    return out


def _stats_ms(values, name: str, percentiles=(99,)) -> dict:
    v = np.asarray(values or [0.0])
    d = {
        f"mean_{name}_ms": float(np.mean(v) * 1000),
        f"median_{name}_ms": float(np.median(v) * 1000),
        f"std_{name}_ms": float(np.std(v) * 1000),
    }
    for p in percentiles:
        d[f"p{p}_{name}_ms"] = float(np.percentile(v, p) * 1000)
    return d


def vllm(reqs: list[dict], modern: bool) -> dict:
    """vLLM result with per-request arrays; request 5 failed, request 6 'succeeded' empty."""
    ttfts, itls, lat, errors, out_lens, texts = [], [], [], [], [], []
    for i, r in enumerate(reqs):
        if i == 5:  # an HTTP error: vLLM writes ttft 0, no itls, output_len 0
            ttfts.append(0.0), itls.append([]), lat.append(0.0), out_lens.append(0)
            errors.append("Internal Server Error"), texts.append("")
        elif i == 6:  # a 200 stream that carried no text: success, 0 tokens, TTFT 0.0
            ttfts.append(0.0), itls.append([]), lat.append(0.05), out_lens.append(0)
            errors.append(""), texts.append("")
        else:
            ttfts.append(r["ttft"]), itls.append(r["gaps"])
            lat.append(r["ttft"] + sum(r["gaps"])), out_lens.append(r["out"])
            errors.append(""), texts.append("tok " * r["out"])
    ok = [i for i in range(len(reqs)) if i != 5]
    duration = max(r["start"] for r in reqs) + 1.5
    tpots = [(lat[i] - ttfts[i]) / (out_lens[i] - 1) for i in ok if out_lens[i] > 1]
    pooled = [g for i in ok for g in itls[i]]
    total_in = sum(reqs[i]["in"] for i in ok)
    total_out = sum(out_lens)
    result = {
        "date": "20240815-101010",
        "backend": "vllm",
        "model_id": "meta-llama/Llama-3.1-8B-Instruct",
        "num_prompts": len(reqs),
        "request_rate": "inf",
        "duration": duration,
        "completed": len(ok),
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "request_throughput": len(ok) / duration,
        "output_throughput": total_out / duration,
        "total_token_throughput": (total_in + total_out) / duration,
    }
    if modern:
        result["failed"] = len(reqs) - len(ok)
        result["request_goodput"] = None
    else:
        result["request_goodput:"] = None  # the key as those versions spelt it
    result.update(
        {
            "input_lens": [r["in"] for r in reqs],
            "output_lens": out_lens,
            "ttfts": ttfts,
            "itls": itls,
            "generated_texts": texts,
            "errors": errors,
        }
    )
    if modern:
        result["latencies"] = lat
        result["start_times"] = [1000.0 + r["start"] for r in reqs]
        result["queue_times"] = [0.0] * len(reqs)
    result.update(_stats_ms([ttfts[i] for i in ok], "ttft"))
    result.update(_stats_ms(tpots, "tpot"))
    result.update(_stats_ms(pooled, "itl"))
    result.update(_stats_ms([lat[i] for i in ok], "e2el"))
    return result


def sglang(reqs: list[dict], details: bool) -> dict:
    ok = list(range(len(reqs)))
    lat = [r["ttft"] + sum(r["gaps"]) for r in reqs]
    duration = max(r["start"] for r in reqs) + 1.2
    total_out = sum(r["out"] for r in reqs)
    total_in = sum(r["in"] for r in reqs)
    pooled = [g for r in reqs for g in r["gaps"]]
    tpots = [(lat[i] - reqs[i]["ttft"]) / (reqs[i]["out"] - 1) for i in ok]
    result = {
        "tag": None,
        "backend": "sglang",
        "dataset_name": "random",
        "request_rate": 4.0,
        "max_concurrency": None,
        "duration": duration,
        "completed": len(ok),
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "total_output_tokens_retokenized": total_out,
        "request_throughput": len(ok) / duration,
        "input_throughput": total_in / duration,
        "output_throughput": total_out / duration,
        "mean_e2e_latency_ms": float(np.mean(lat) * 1000),
        "median_e2e_latency_ms": float(np.median(lat) * 1000),
        "std_e2e_latency_ms": float(np.std(lat) * 1000),
        "p99_e2e_latency_ms": float(np.percentile(lat, 99) * 1000),
        "mean_ttft_ms": float(np.mean([r["ttft"] for r in reqs]) * 1000),
        "median_ttft_ms": float(np.median([r["ttft"] for r in reqs]) * 1000),
        "p99_ttft_ms": float(np.percentile([r["ttft"] for r in reqs], 99) * 1000),
        "mean_tpot_ms": float(np.mean(tpots) * 1000),
        "mean_itl_ms": float(np.mean(pooled) * 1000),
        "median_itl_ms": float(np.median(pooled) * 1000),
        "p95_itl_ms": float(np.percentile(pooled, 95) * 1000),
        "p99_itl_ms": float(np.percentile(pooled, 99) * 1000),
        "max_itl_ms": float(np.max(pooled) * 1000),
        "concurrency": float(np.sum(lat) / duration),
        "accept_length": None,
    }
    if details:
        result.update(
            {
                "input_lens": [r["in"] for r in reqs],
                "output_lens": [r["out"] for r in reqs],
                "ttfts": [r["ttft"] for r in reqs],
                "itls": [r["gaps"] for r in reqs],
                "generated_texts": ["x"] * len(reqs),
                "errors": [""] * len(reqs),
            }
        )
    return result


T0 = 1_760_000_000_000_000_000  # epoch ns


def aiperf_records(reqs: list[dict], old: bool) -> list[dict]:
    records = []
    for i, r in enumerate(reqs):
        start = T0 + int(r["start"] * 1e9)
        e2e = r["ttft"] + sum(r["gaps"])
        phase = "warmup" if i == 0 else "profiling"
        metrics = {
            "input_sequence_length": {"value": r["in"], "unit": "tokens"},
            ("ttft" if old else "time_to_first_token"): {"value": r["ttft"] * 1e3, "unit": "ms"},
            "request_latency": {"value": e2e * 1e3, "unit": "ms"},
            "output_sequence_length": {"value": r["out"], "unit": "tokens"},
            "inter_token_latency": {
                "value": (e2e - r["ttft"]) / (r["out"] - 1) * 1e3,
                "unit": "ms",
            },
        }
        if not old:
            metrics["inter_chunk_latency"] = {"value": [g * 1e3 for g in r["gaps"]], "unit": "ms"}
            metrics["output_token_throughput_per_user"] = {"value": 1.0, "unit": "tokens/sec/user"}
        error = None
        if i == 5:
            metrics, error = (
                {"error_isl": {"value": r["in"], "unit": "tokens"}},
                {"code": 500, "type": "InternalServerError", "message": "Server error"},
            )
        if old:
            meta = {
                "conversation_id": f"c{i}",
                "turn_index": 0,
                "timestamp_ns": start,
                "worker_id": "worker_1",
                "record_processor_id": "rp_1",
                "credit_phase": phase,
                "error": error,
            }
            records.append({"record_id": "", "metadata": meta, "metrics": metrics})
        else:
            meta = {
                "session_num": i,
                "x_request_id": f"req-{i:03d}",
                "x_correlation_id": f"s{i}",
                "conversation_id": f"c{i}",
                "turn_index": 0,
                "request_start_ns": start,
                "request_ack_ns": start + 1000,
                "request_end_ns": start + int(e2e * 1e9),
                "worker_id": "worker_1",
                "record_processor_id": "rp_1",
                "benchmark_phase": phase,
                "was_cancelled": False,
                "cancellation_time_ns": None,
            }
            records.append({"metadata": meta, "metrics": metrics, "error": error})
    return records


def aiperf_aggregate(records: list[dict]) -> dict:
    prof = [r for r in records if r["metadata"]["benchmark_phase"] == "profiling"]
    good = [r for r in prof if r["error"] is None]

    def dist(name, unit):
        v = np.array([r["metrics"][name]["value"] for r in good], dtype=float)
        d = {"unit": unit, "avg": float(v.mean()), "min": float(v.min()), "max": float(v.max())}
        for p in (1, 5, 10, 25, 50, 75, 90, 95, 99):
            d[f"p{p}"] = float(np.percentile(v, p))
        d["std"] = float(v.std())
        return d

    start = min(r["metadata"]["request_start_ns"] for r in prof)
    end = max(r["metadata"]["request_end_ns"] for r in good)
    duration = (end - start) / 1e9
    osl = sum(r["metrics"]["output_sequence_length"]["value"] for r in good)
    return {
        "request_throughput": {"unit": "requests/sec", "avg": len(good) / duration},
        "request_latency": dist("request_latency", "ms"),
        "time_to_first_token": dist("time_to_first_token", "ms"),
        "inter_token_latency": dist("inter_token_latency", "ms"),
        "output_sequence_length": dist("output_sequence_length", "tokens"),
        "output_token_throughput": {"unit": "tokens/sec", "avg": osl / duration},
        "benchmark_duration": {"unit": "sec", "avg": duration},
        "request_count": {"unit": "requests", "avg": float(len(good))},
        "error_request_count": {"unit": "requests", "avg": float(len(prof) - len(good))},
        "error_summary": [],
        "was_cancelled": False,
    }


def llmperf(reqs: list[dict]) -> tuple[list[dict], dict]:
    rows = []
    for i, r in enumerate(reqs):
        e2e = r["ttft"] + sum(r["gaps"]) + 0.002  # the stream closes after the last token
        row = {
            "error_code": None,
            "error_msg": "",
            "inter_token_latency_s": (r["ttft"] + sum(r["gaps"])) / r["out"],
            "ttft_s": r["ttft"],
            "end_to_end_latency_s": e2e,
            "request_output_throughput_token_per_s": r["out"] / e2e,
            "number_total_tokens": r["in"] + r["out"],
            "number_output_tokens": r["out"],
            "number_input_tokens": r["in"],
        }
        if i == 5:
            row.update(
                {
                    "error_code": 500,
                    "error_msg": "Internal Server Error",
                    "inter_token_latency_s": 0,
                    "ttft_s": 0,
                    "end_to_end_latency_s": 0,
                    "request_output_throughput_token_per_s": 0,
                    "number_output_tokens": 0,
                    "number_total_tokens": r["in"],
                }
            )
        rows.append(row)
    df = pd.DataFrame(rows)
    good = df[df["error_code"].isna()]
    test_s = max(r["start"] for r in reqs) + 2.0  # end_time − start_time of the whole test
    results = {}
    for key in (
        "inter_token_latency_s",
        "ttft_s",
        "end_to_end_latency_s",
        "request_output_throughput_token_per_s",
        "number_input_tokens",
        "number_output_tokens",
    ):
        s = good[key].astype(float)
        q = s.quantile([0.25, 0.5, 0.75, 0.9, 0.95, 0.99]).to_dict()
        results[key] = {
            "quantiles": {f"p{int(k * 100)}": v for k, v in q.items()},
            "mean": s.mean(),
            "min": s.min(),
            "max": s.max(),
            "stddev": s.std(),
        }
    results.update(
        {
            "num_requests_started": len(df),
            "error_rate": 1 / len(df),
            "number_errors": 1,
            "error_code_frequency": "{500: 1}",
            "mean_output_throughput_token_per_s": good["number_output_tokens"].sum() / test_s,
            "num_completed_requests": len(good),
            "num_completed_requests_per_min": len(good) / test_s * 60,
        }
    )
    meta = {
        "version": "2023-08-31",
        "name": "llama_550_150_summary",
        "model": "llama",
        "mean_input_tokens": 550,
        "stddev_input_tokens": 150,
        "mean_output_tokens": 150,
        "stddev_output_tokens": 10,
        "num_concurrent_requests": 2,
        "results": results,
        "timestamp": 1718208212,
    }

    def flatten(d, parent=""):
        out = {}
        for k, v in d.items():
            key = f"{parent}_{k}" if parent else k
            out.update(flatten(v, key) if isinstance(v, dict) else {key: v})
        return out

    return rows, {
        k: (float(v) if isinstance(v, np.floating) else v) for k, v in flatten(meta).items()
    }


def guidellm(reqs: list[dict], new: bool) -> dict:
    t0 = 1_760_000_000.0
    successful, errored = [], []
    for i, r in enumerate(reqs):
        start = t0 + r["start"]
        first = start + r["ttft"]
        last = first + sum(r["gaps"])
        end = last + 0.003
        if new:
            item = {
                "type_": "generative_request_stats",
                "request_id": f"g{i}",
                "request_type": "chat_completions",
                "info": {
                    "timings": {
                        "request_start": start,
                        "first_token_iteration": first,
                        "last_token_iteration": last,
                        "request_end": end,
                        "token_iterations": r["out"],
                    }
                },
                "input_metrics": {"text_tokens": r["in"], "total_tokens": r["in"]},
                "output_metrics": {"text_tokens": r["out"], "total_tokens": r["out"]},
                "prompt_tokens": r["in"],
                "output_tokens": r["out"],
                "request_latency": end - start,
                "time_to_first_token_ms": 1000 * (first - start),
                "inter_token_latency_ms": 1000 * (last - first) / (r["out"] - 1),
            }
        else:
            item = {
                "type_": "generative_text_response",
                "request_id": f"g{i}",
                "request_type": "text_completions",
                "prompt_tokens": r["in"],
                "output_tokens": r["out"],
                "start_time": start,
                "end_time": end,
                "first_token_time": first,
                "last_token_time": last,
                "request_latency": end - start,
                "time_to_first_token_ms": 1000 * (first - start),
            }
        (errored if i == 5 else successful).append(item)
    ttft = [1000 * r["ttft"] for i, r in enumerate(reqs) if i != 5]
    return {
        "benchmarks": [
            {
                "type_": "generative_benchmark",
                "id_": "b0",
                "request_totals": {
                    "successful": len(successful),
                    "errored": len(errored),
                    "incomplete": 0,
                    "total": len(reqs) + 2,
                },
                "requests": {"successful": successful, "errored": errored, "incomplete": []},
                "metrics": {
                    "time_to_first_token_ms": {
                        "successful": {
                            "mean": float(np.mean(ttft)),
                            "median": float(np.median(ttft)),
                            "percentiles": {
                                "p50": float(np.percentile(ttft, 50)),
                                "p99": float(np.percentile(ttft, 99)),
                            },
                        }
                    }
                },
            }
        ]
    }


def _sse(content: str | None, role: bool = False) -> str:
    """One OpenAI chat-completion chunk as the server-sent event perf_analyzer records."""
    delta = {"role": "assistant", "content": ""} if role else {"content": content}
    event = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1718000000,
        "model": "llama",
        "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
    }
    return "data: " + json.dumps(event) + "\n\n"


def genai_perf(reqs: list[dict]) -> tuple[dict, dict, str]:
    """profile_export.json for a streaming OpenAI chat endpoint (one word, one token, per
    chunk), its ``_genai_perf.json`` and ``_genai_perf.csv`` by GenAI-Perf's formulas.

    Request 2 streams only the role chunk and ``[DONE]`` (no content): GenAI-Perf drops it from
    every latency statistic but still counts it in request_throughput. Request 4 had two events
    arrive in one network read (one response entry holding both)."""
    requests, kept = [], []
    for i, r in enumerate(reqs):
        start = T0 + int(r["start"] * 1e9)
        first = start + int(r["ttft"] * 1e9)
        content_ts = [first + int(sum(r["gaps"][:k]) * 1e9) for k in range(r["out"])]
        words = [f"w{k}" for k in range(r["out"])]
        prompt = " ".join(f"p{k}" for k in range(r["in"] // 50))
        timestamps = [first - 2_000_000]  # the role-only first chunk, before any content
        outputs = [{"response": _sse(None, role=True)}]
        if i != 2:
            for k, (t, w) in enumerate(zip(content_ts, words, strict=True)):
                if i == 4 and k == 2:  # two events in one read: merged by GenAI-Perf
                    outputs[-1]["response"] += _sse(" " + w)
                    continue
                timestamps.append(t)
                outputs.append({"response": _sse(" " + w if k else w)})
        timestamps.append(timestamps[-1] + 1_000_000)
        outputs.append({"response": "data: [DONE]\n\n"})
        payload = {
            "messages": [{"role": "user", "content": prompt}],
            "model": "llama",
            "stream": True,
            "max_tokens": r["out"],
        }
        requests.append(
            {
                "timestamp": start,
                "request_inputs": {"payload": json.dumps(payload)},
                "response_timestamps": timestamps,
                "response_outputs": outputs,
            }
        )
        if i != 2:
            # What GenAI-Perf keeps after _preprocess_response: the responses with content
            # (request 4's merged entry counts once, at its own timestamp).
            with_content = [t for t, o in zip(timestamps, outputs, strict=True)][1:-1]
            kept.append(
                {
                    "start": start,
                    "ts": with_content,
                    "n": r["out"],
                    "isl": len(prompt.split()),
                }
            )
    export = {
        "experiments": [
            {
                "experiment": {"mode": "concurrency", "value": 2},
                "requests": requests,
                "window_boundaries": [T0, max(r["response_timestamps"][-1] for r in requests)],
            }
        ],
        "version": "",
        "service_kind": "openai",
        "endpoint": "v1/chat/completions",
    }
    latency = [k["ts"][-1] - k["start"] for k in kept]
    ttft = [k["ts"][0] - k["start"] for k in kept]
    itl = [
        round((lat - t) / (k["n"] - 1))
        for lat, t, k in zip(latency, ttft, kept, strict=True)
        if k["n"] > 1
    ]
    duration = (max(k["ts"][-1] for k in kept) - min(k["start"] for k in kept)) / 1e9
    osl = [k["n"] for k in kept]

    def stats(values, unit, scale=1.0):
        v = np.asarray(values, dtype=float) * scale
        d = {"unit": unit, "avg": float(np.mean(v))}
        for q in (1, 5, 10, 25, 50, 75, 90, 95, 99):
            d[f"p{q}"] = float(np.percentile(v, q))
        d.update(min=float(np.min(v)), max=float(np.max(v)), std=float(np.std(v)))
        return d

    summary = {
        "time_to_first_token": stats(ttft, "ms", 1e-6),
        "inter_token_latency": stats(itl, "ms", 1e-6),
        "request_latency": stats(latency, "ms", 1e-6),
        "output_token_throughput_per_request": stats(
            [n / (lat / 1e9) for n, lat in zip(osl, latency, strict=True)], "tokens/sec"
        ),
        "output_sequence_length": stats(osl, "tokens"),
        "input_sequence_length": stats([k["isl"] for k in kept], "tokens"),
        "output_token_throughput": {"unit": "tokens/sec", "avg": sum(osl) / duration},
        "request_throughput": {"unit": "requests/sec", "avg": len(requests) / duration},
        "input_config": {
            "model": ["llama"],
            "endpoint_type": "chat",
            "service_kind": "openai",
            "streaming": True,
            "concurrency": 2,
            "profile_export_file": "artifacts/llama-openai-chat-concurrency2/profile_export.json",
        },
    }
    rows = [["Metric", "avg", "min", "max", "p99", "p95", "p90", "p75", "p50", "p25"]]
    for name, title in (
        ("time_to_first_token", "Time To First Token (ms)"),
        ("inter_token_latency", "Inter Token Latency (ms)"),
        ("request_latency", "Request Latency (ms)"),
        ("output_sequence_length", "Output Sequence Length"),
        ("input_sequence_length", "Input Sequence Length"),
    ):
        rows.append([title] + [f"{summary[name][k]:,.2f}" for k in rows[0][1:]])
    rows.append([])
    rows.append(["Metric", "Value"])
    rows.append(
        ["Output Token Throughput (per sec)", f"{summary['output_token_throughput']['avg']:.2f}"]
    )
    rows.append(["Request Throughput (per sec)", f"{summary['request_throughput']['avg']:.2f}"])
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    return export, summary, buffer.getvalue()


def main(argv: list[str]) -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    reqs = stream()

    def dump(name, obj):
        (OUT / name).write_text(json.dumps(obj, indent=1) + "\n", encoding="utf-8")

    dump("vllm_2024_benchmark_serving.json", vllm(reqs, modern=False))
    dump("vllm_2026_bench_serve_detailed.json", vllm(reqs, modern=True))
    summary_only = {
        k: v
        for k, v in vllm(reqs, modern=True).items()
        if k not in ("input_lens", "output_lens", "ttfts", "itls", "generated_texts", "errors")
    }
    dump("vllm_bench_serve_no_detailed.json", summary_only)
    lines = [sglang(reqs[:4], details=True), sglang(reqs[4:], details=True)]
    (OUT / "sglang_bench_serving_details.jsonl").write_text(
        "".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8"
    )
    (OUT / "sglang_bench_serving_summary.jsonl").write_text(
        json.dumps(sglang(reqs, details=False)) + "\n", encoding="utf-8"
    )
    for old in (True, False):
        recs = aiperf_records(reqs, old)
        name = "aiperf_v0_1_profile_export.jsonl" if old else "aiperf_profile_export.jsonl"
        (OUT / name).write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
        if not old:
            dump("aiperf_profile_export_aiperf.json", aiperf_aggregate(recs))
    rows, summary = llmperf(reqs)
    dump("llama_550_150_individual_responses.json", rows)
    dump("llama_550_150_summary.json", summary)
    dump("lonely_individual_responses.json", rows)  # no summary beside it
    dump("guidellm_v0_3_benchmarks.json", guidellm(reqs, new=False))
    dump("guidellm_v0_4_benchmarks.json", guidellm(reqs, new=True))
    export, summary, table = genai_perf(reqs)
    dump("genai_perf_profile_export.json", export)
    dump("genai_perf_profile_export_genai_perf.json", summary)
    (OUT / "genai_perf_profile_export_genai_perf.csv").write_text(table, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
