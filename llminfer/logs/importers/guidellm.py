"""GuideLLM (vllm-project/guidellm) ``benchmarks.json``: ``{"benchmarks": [...]}``, one entry per
strategy run (synchronous, throughput, constant rate …).

Each benchmark lists its requests by status, ``requests: {"successful": [...], "errored": [...],
"incomplete": [...]}``, and its aggregates under ``metrics`` (``time_to_first_token_ms``,
``inter_token_latency_ms``, ``time_per_output_token_ms``, ``request_latency`` (s),
``requests_per_second``, ``output_tokens_per_second`` … each ``{"successful": {"mean",
"median", "min", "max", "percentiles": {"p50", "p90", "p95", "p99", …}}, …}``).

A request's times (epoch seconds):

- v0.2–v0.3 (``src/guidellm/benchmark/benchmark.py``, ``GenerativeTextResponseStats``):
  ``start_time``, ``first_token_time``, ``last_token_time``, ``end_time``, ``prompt_tokens``,
  ``output_tokens``;
- v0.4 on (``src/guidellm/schemas/…``, ``GenerativeRequestStats``): ``info.timings`` with
  ``request_start``, ``first_token_iteration``, ``last_token_iteration``, ``request_end``,
  ``token_iterations``, and computed ``prompt_tokens``/``output_tokens``.

Up to v0.4 the file held only the requests GuideLLM kept for the measurement. From v0.5 on
(checked on 0.8.1) it keeps every request, warm-up and cool-down ones too, and its ``metrics``
count only those overlapping the measured window ``scheduler_metrics.measure_start_time`` →
``measure_end_time`` (``GenerativeMetrics.compile``, ``get_within_range``): the importer
keeps every request with that window (``measure_start_ts``, ``measure_end_ts``), the stream's
close (``response_end_ts``) and ``token_iterations``, and ``llminfer.logs.rules.GUIDELLM``
applies GuideLLM's rules when comparing (``compare_definitions``).
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import replace
from pathlib import Path

import pandas as pd

from llminfer.logs.importers._files import Document, number, problem, run_index, text_of
from llminfer.logs.importers.records import Imported, ToolSummary, stat_key
from llminfer.logs.rules import GUIDELLM

FORMAT = "guidellm"
_METRICS = {
    "time_to_first_token_ms": ("ttft_s", 1e-3, ""),
    "request_latency": ("e2e_s", 1.0, ""),
    "inter_token_latency_ms": ("itl_s", 1e-3, "guidellm_itl"),
    "time_per_output_token_ms": ("tpot_s", 1e-3, "guidellm_tpot"),
}
_STATUSES = ("successful", "errored", "incomplete")
#: GuideLLM's percentile names that are not ``stat_key``'s (``p001`` is the 0.1th).
_PERCENTILE_WORDS = {"p001": "p0.1", "p01": "p1", "p05": "p5", "p999": "p99.9"}


def detect(doc: Document) -> str | None:
    """``"requests"`` for a benchmarks.json whose benchmarks list requests, else ``"summary"``.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    data = doc.json
    if doc.kind != "json" or not isinstance(data, dict):
        return None
    benchmarks = data.get("benchmarks")
    if not isinstance(benchmarks, list) or not benchmarks or not isinstance(benchmarks[0], dict):
        return None
    if not any(k in benchmarks[0] for k in ("requests", "metrics")):
        return None
    has = any(
        isinstance(b.get("requests"), dict) and any(b["requests"].get(s) for s in _STATUSES)
        for b in benchmarks
        if isinstance(b, dict)
    )
    return "requests" if has else "summary"


def _times(request: dict, path, where: str) -> tuple[float, float, float, float]:
    timings = (
        (request.get("info") or {}).get("timings")
        if isinstance(request.get("info"), dict)
        else None
    )
    if isinstance(timings, dict):  # v0.4 on
        names = ("request_start", "first_token_iteration", "last_token_iteration", "request_end")
        values = [timings.get(n) for n in names]
        prefix = "info.timings."
    else:
        names = ("start_time", "first_token_time", "last_token_time", "end_time")
        values = [request.get(n) for n in names]
        prefix = ""
    return tuple(
        number(v, path, f"{where}, field {prefix}{n}", allow_none=True)
        for v, n in zip(values, names, strict=True)
    )


def _window(bench: dict) -> tuple[float, float]:
    """A benchmark's measured window (epoch s): ``scheduler_metrics.measure_start_time`` →
    ``measure_end_time`` (0.5 on), else the benchmark's ``start_time`` → ``end_time``."""
    metrics = bench.get("scheduler_metrics") or bench.get("run_stats") or {}
    lo = metrics.get("measure_start_time", bench.get("start_time"))
    hi = metrics.get("measure_end_time", bench.get("end_time"))
    lo = float(lo) if isinstance(lo, (int, float)) and not isinstance(lo, bool) else math.nan
    hi = float(hi) if isinstance(hi, (int, float)) and not isinstance(hi, bool) else math.nan
    return lo, hi


def _index(doc: Document, benchmark) -> int | None:
    """``benchmark`` (an index, negative from the end) checked against the file."""
    if benchmark is None:
        return None
    count = len(doc.json["benchmarks"])
    return run_index(count, benchmark)


def _made(bench: dict) -> int | None:
    """How many requests a benchmark made: ``request_totals.total`` (up to v0.4; in a file that
    lists only measured requests), ``run_stats.requests_made.total`` (v0.2–0.3) or, from v0.5,
    ``scheduler_state.processed_requests`` (warm-up and cool-down ones too, as listed)."""
    for totals in (
        bench.get("request_totals"),
        (bench.get("run_stats") or {}).get("requests_made"),
        {"total": (bench.get("scheduler_state") or {}).get("processed_requests")},
    ):
        if isinstance(totals, dict):
            total = totals.get("total")
            if isinstance(total, (int, float)) and not isinstance(total, bool):
                return int(total)
    return None


def _sample_size(bench: dict) -> int | None:
    """``--metrics sample_size=N`` (v0.8: requests kept per status), None when all are kept."""
    size = (bench.get("config") or {}).get("sample_size")
    return int(size) if isinstance(size, int) and not isinstance(size, bool) else None


def _listed(bench: dict) -> int:
    requests = bench.get("requests") or {}
    return sum(len(requests.get(s) or []) for s in _STATUSES if isinstance(requests, dict))


#: GuideLLM's goodput objectives (``GoodputSLO``: ms, at most) in llminfer's names: its
#: ``tpot_ms`` is compared with each request's inter-token latency, (last − first)/(N − 1).
_SLO_NAMES = {"ttft_ms": "ttft_s", "tpot_ms": "tpot_s", "e2el_ms": "e2e_s"}


def _slo(bench: dict) -> dict[str, float]:
    """A benchmark's goodput objectives (``config.slo``, v0.8) in seconds, or {} when none."""
    slo = (bench.get("config") or {}).get("slo")
    if not isinstance(slo, dict):
        return {}
    return {
        _SLO_NAMES[k]: float(v) * 1e-3
        for k, v in slo.items()
        if k in _SLO_NAMES and isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0
    }


def read(doc: Document, benchmark: int | None = None) -> Imported:
    """Every benchmark's listed requests → one log (column ``benchmark`` says which), or only
    benchmark ``benchmark`` (an index).

    ``end_ts`` is the last token (as for the other tools), ``first_token_ts`` the first;
    ``response_end_ts`` the response's end (GuideLLM's ``request_end``), ``measure_start_ts``
    and ``measure_end_ts`` the benchmark's measured window, ``token_iterations`` the stream's
    token iterations.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    if detect(doc) != "requests":
        raise problem(
            doc.name,
            "",
            "is a GuideLLM benchmarks.json without per-request data "
            "(requests were not saved): read its aggregates with llminfer.read_summary()",
        )
    rows, assumptions, left_out, outside, streamless, sampled = [], [], 0, 0, 0, []
    only = _index(doc, benchmark)
    for b, bench in enumerate(doc.json["benchmarks"]):
        if only is not None and b != only:
            continue
        lo, hi = _window(bench)
        requests = bench.get("requests") or {}
        listed = 0
        for status in _STATUSES:
            items = requests.get(status) or []
            if not isinstance(items, list):
                raise problem(doc.name, f"benchmarks[{b}].requests.{status}", "must be a list")
            for i, request in enumerate(items):
                where = f"benchmarks[{b}].requests.{status}[{i}]"
                if not isinstance(request, dict):
                    raise problem(doc.name, where, "must be an object")
                listed += 1
                start, first, last, end = _times(request, doc.name, where)
                if math.isnan(start):
                    raise problem(doc.name, where, "has no request start time")
                out = number(
                    request.get("output_tokens"),
                    doc.name,
                    f"{where}, field 'output_tokens'",
                    allow_none=True,
                )
                prompt = number(
                    request.get("prompt_tokens"),
                    doc.name,
                    f"{where}, field 'prompt_tokens'",
                    allow_none=True,
                )
                ok = status == "successful"
                streamed = not math.isnan(first)
                empty = ok and (out == 0 or (math.isnan(first) and math.isnan(end)))
                good = ok and not empty
                if good and not streamed:  # non-streaming: the first token is the response
                    first, streamless = (last if not math.isnan(last) else end), streamless + 1
                stop = last if not math.isnan(last) else end
                response_end = request.get("request_end_time", end)
                response_end = (
                    number(response_end, doc.name, f"{where}, field request_end_time")
                    if response_end is not None
                    else math.nan
                )
                if math.isnan(response_end):
                    response_end = end
                timings = (request.get("info") or {}).get("timings") or {}
                iterations = timings.get("token_iterations")
                if not math.isnan(lo) and not (response_end >= lo and start <= hi):
                    outside += 1
                rows.append(
                    {
                        "request_id": str(
                            request.get("request_id") or f"guidellm-{b}-{status}-{i}"
                        ),
                        "start_ts": start,
                        "first_token_ts": first if good else math.nan,
                        "end_ts": stop if good else math.nan,
                        "input_tokens": prompt,
                        "output_tokens": out,
                        "status": "ok" if good else "failed",
                        "error": "" if good else ("empty response" if empty else status),
                        "benchmark": b,
                        "streamed": streamed,
                        "response_end_ts": response_end,
                        "measure_start_ts": lo,
                        "measure_end_ts": hi,
                        "token_iterations": (
                            float(iterations) if isinstance(iterations, (int, float)) else math.nan
                        ),
                    }
                )
        made = _made(bench)
        if made is not None and made > listed:
            left_out += made - listed
            if _sample_size(bench) is not None:
                sampled.append((b, listed, made))
    if not rows:
        raise problem(doc.name, "benchmarks[*].requests", "holds no requests")
    frame = pd.DataFrame(rows)
    if frame["request_id"].duplicated().any():
        frame["request_id"] = [f"{r}#{i}" for i, r in enumerate(frame["request_id"])]
    assumptions.append(
        "E2E ends at the last token (GuideLLM's request_latency runs to the stream's end: "
        "column response_end_ts)"
    )
    if streamless:
        assumptions.append(
            f"{streamless} request(s) without a first-token time (not streamed): the first "
            "token is taken to be the response (TTFT = E2E); GuideLLM leaves them out of its "
            "TTFT and counts their ITL as 0 (column streamed)"
        )
    if outside:
        assumptions.append(
            f"{outside} request(s) lie outside GuideLLM's measured window (its warm-up and "
            "cool-down): they are in the log, and out of GuideLLM's own metrics "
            "(compare_definitions applies its window)"
        )
    for b, listed, made in sampled:
        assumptions.append(
            f"benchmark {b} lists {listed} of the {made} requests GuideLLM made (--metrics "
            f"sample_size={_sample_size(doc.json['benchmarks'][b])}): its own figures cover "
            "them all, so this file cannot reproduce them (compare_definitions says so)"
        )
    if left_out and not sampled:
        assumptions.append(
            f"{left_out} request(s) counted in request_totals are not listed (warm-up/cool-down "
            "exclusion or --sample-requests)"
        )
    if len(doc.json["benchmarks"]) > 1 and only is None:
        assumptions.append(
            f"{len(doc.json['benchmarks'])} benchmarks in one log: filter column 'benchmark'"
        )
    return Imported(frame, assumptions)


def read_summary(doc: Document, benchmark: int | None = None) -> ToolSummary:
    """One benchmark's ``metrics`` (``benchmark``: an index; the last by default) →
    ``ToolSummary``, with GuideLLM's rules for that benchmark (``rules.benchmark``).

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    benches = doc.json["benchmarks"]
    index = _index(doc, -1 if benchmark is None else benchmark)
    return _summary_of(doc.name, benches[index], index, len(benches))


def _summary_of(source: str, bench: dict, index: int, count: int) -> ToolSummary:
    """Benchmark ``index`` (of ``count`` in file ``source``) → ``ToolSummary``."""
    metrics = bench.get("metrics") or {}
    values, names, definitions = {}, {}, {}
    for name, (metric, scale, definition) in _METRICS.items():
        stats = (metrics.get(name) or {}).get("successful") or {}
        flat = dict(stats)
        flat.update(stats.get("percentiles") or {})
        if not flat.get("count", 1):
            continue  # no request measured: GuideLLM writes 0.0 for every statistic
        for word, value in flat.items():
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                continue
            word = _PERCENTILE_WORDS.get(word, word)
            stat = stat_key(word)
            if stat is None:
                continue
            key = f"{metric}_{stat}"
            values[key], names[key] = float(value) * scale, f"metrics.{name}.successful.{word}"
            if definition:
                definitions[key] = definition
    for name, key in (
        ("requests_per_second", "rps"),
        ("output_tokens_per_second", "output_tps"),
        ("prompt_tokens_per_second", "input_tps"),
        ("tokens_per_second", "total_tps"),
        ("request_concurrency", "concurrency_mean"),
    ):
        mean = ((metrics.get(name) or {}).get("successful") or {}).get("mean")
        if isinstance(mean, (int, float)):
            values[key], names[key] = float(mean), f"metrics.{name}.successful.mean"
    totals = metrics.get("request_totals")
    if isinstance(totals, dict) and all(
        isinstance(totals.get(k), (int, float)) for k in ("total", "errored", "incomplete")
    ):
        values["n_requests"], names["n_requests"] = float(totals["total"]), "request_totals.total"
        values["n_failed"] = float(totals["errored"] + totals["incomplete"])
        names["n_failed"] = "request_totals.errored + incomplete"
    goodput = ((metrics.get("request_goodput") or {}).get("successful") or {}).get("mean")
    if isinstance(goodput, (int, float)) and not isinstance(goodput, bool):
        values["goodput_rps"] = float(goodput)
        names["goodput_rps"] = "metrics.request_goodput.successful.mean"
    attainment = metrics.get("slo_attainment")
    if isinstance(attainment, (int, float)) and not isinstance(attainment, bool):
        values["good_fraction"], names["good_fraction"] = (
            float(attainment),
            "metrics.slo_attainment",
        )
    lo, hi = _window(bench)
    if math.isfinite(hi - lo) and "scheduler_metrics" in bench:
        values["window_s"] = hi - lo
        names["window_s"] = "scheduler_metrics.measure_end_time − measure_start_time"
    notes = (
        "GuideLLM's TPOT includes TTFT ((last token − start)/N) and its ITL is "
        "(last − first)/(N − 1); both are averaged over tokens, not requests",
        "GuideLLM counts only requests overlapping its measured window (warm-up and cool-down "
        "cut), reads percentiles by nearest rank and ends request_latency at the response's "
        "end; its rates are events inside the window / the window's length",
    )
    if count > 1:
        notes += (
            f"{count} benchmarks in the file: figures of benchmark {index} (pass "
            "benchmark= for another); compare_definitions uses that benchmark's requests",
        )
    rules = replace(GUIDELLM, benchmark=index, slo=_slo(bench))
    key_notes = {}
    made, listed = _made(bench), _listed(bench)
    if _sample_size(bench) is not None and made is not None and listed < made:
        sample = (
            f"the file lists a sample of {listed} of the {made} requests (--metrics "
            f"sample_size={_sample_size(bench)}): GuideLLM's figure covers them all, so it "
            "cannot be reproduced from the file"
        )
        key_notes = dict.fromkeys(values, sample)
    summary = ToolSummary(FORMAT, source, values, names, definitions, notes, rules=rules)
    summary.key_notes = key_notes
    return summary


#: GuideLLM's ``benchmarks.csv`` (written beside ``benchmarks.json`` by default from 0.5 on): a
#: three-row header (group, "<status> <unit>", statistic), one row per benchmark. The groups
#: read, with the ``metrics`` name each stands for in the JSON and the unit that name has there.
_CSV_METRICS = {
    ("Time to First Token", "Successful ms"): "time_to_first_token_ms",
    ("Request Latency", "Successful Sec"): "request_latency",
    ("Inter Token Latency", "Successful ms"): "inter_token_latency_ms",
    ("Time per Output Token", "Successful ms"): "time_per_output_token_ms",
}
_CSV_RATES = {
    ("Server Throughput", "Successful Requests/Sec"): "requests_per_second",
    ("Token Throughput", "Successful Output Tokens/Sec"): "output_tokens_per_second",
    ("Token Throughput", "Successful Input Tokens/Sec"): "prompt_tokens_per_second",
    ("Token Throughput", "Successful Total Tokens/Sec"): "tokens_per_second",
    ("Server Throughput", "Successful Concurrency"): "request_concurrency",
}
#: The ``Percentiles`` cell's list, in GuideLLM 0.8.1's order
#: (``benchmark/outputs/csv.py``, ``_add_stats_for_metric``): no p50 (``Median`` is) nor p99.9.
_CSV_PERCENTILES = ("min", "p001", "p01", "p05", "p10", "p25", "p75", "p90", "p95", "p99", "max")


def is_summary_csv(text: str) -> bool:
    """Whether a CSV's first line is GuideLLM's ``benchmarks.csv`` header (``Run Info,…``
    groups with ``Request Latency`` among them; a run not streamed has no ``Time to First
    Token``).

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    first = text.lstrip().split("\n", 1)[0]
    return first.startswith("Run Info,") and "Request Latency" in first


def _csv_benchmarks(path: Path) -> list[dict]:
    """``benchmarks.csv`` → one ``{(group, status unit, statistic): cell}`` per benchmark."""
    rows = list(csv.reader(io.StringIO(text_of(path))))
    if len(rows) < 4:
        raise problem(path, "", "is GuideLLM's benchmarks.csv without a benchmark row")
    groups, units, stats = rows[0], rows[1], rows[2]
    if not len(groups) == len(units) == len(stats):
        raise problem(path, "header", "has header rows of different lengths")
    columns = list(zip(groups, units, stats, strict=True))
    out = []
    for line, row in enumerate(rows[3:], start=4):
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(columns):
            raise problem(path, f"line {line}", f"has {len(row)} cells, the header {len(columns)}")
        out.append(dict(zip(columns, row, strict=True)))
    return out


def _csv_config(arguments: str | None) -> dict:
    """The goodput objectives of a CSV row's ``Runtime Info / Arguments`` (the run's arguments
    as JSON: ``spec.metrics.slo``), as a benchmark's ``config`` gives them; {} without."""
    try:
        spec = json.loads(arguments or "{}").get("spec") or {}
        slo = (spec.get("metrics") or {}).get("slo")
    except (ValueError, AttributeError):
        return {}
    return {"slo": slo} if isinstance(slo, dict) else {}


def _csv_number(cell: str, path: Path, where: str) -> float:
    try:
        return float(cell)
    except ValueError:
        raise problem(path, where, f"{cell!r} is not a number") from None


def read_summary_csv(path: str | Path, benchmark: int | None = None) -> ToolSummary:
    """GuideLLM's ``benchmarks.csv`` → the same ``ToolSummary`` its ``benchmarks.json`` gives
    (``read_summary``; ``benchmark``: a row's index, the last by default): TTFT, ITL, TPOT and
    request latency (mean, median as p50, min, max, p0.1 … p99; the CSV has no p99.9), the
    three rates, the request counts and the measured window (``Timings / Duration``).

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    path = Path(path)
    benches = _csv_benchmarks(path)
    index = run_index(len(benches), -1 if benchmark is None else benchmark)
    row, metrics, names = benches[index], {}, {}

    def cell(group: str, unit: str, stat: str) -> str | None:
        value = row.get((group, unit, stat))
        return value if value not in (None, "") else None

    for (group, unit), name in _CSV_METRICS.items():
        mean, median, listed = (cell(group, unit, s) for s in ("Mean", "Median", "Percentiles"))
        if mean is None or median is None or listed is None:
            continue
        where = f"{group} / {unit}"
        try:
            values = [float(v) for v in listed.strip("[] ").split(",")]
        except ValueError:
            raise problem(path, where, f"Percentiles {listed!r} is not a list of numbers") from None
        if len(values) != len(_CSV_PERCENTILES):
            raise problem(
                path,
                where,
                f"Percentiles holds {len(values)} values, not GuideLLM 0.8.1's "
                f"{len(_CSV_PERCENTILES)} ({', '.join(_CSV_PERCENTILES)})",
            )
        stats = dict(zip(_CSV_PERCENTILES, values, strict=True))
        stats["p50"] = _csv_number(median, path, f"{where} / Median")
        mean = _csv_number(mean, path, f"{where} / Mean")
        count = 0 if mean == 0 and not any(stats.values()) else 1  # all 0.0: nothing measured
        picks = {k: stats.pop(k) for k in ("min", "max")}
        metrics[name] = {
            "successful": {"mean": mean, "count": count, **picks, "percentiles": stats}
        }
        for word in ("mean", "min", "max"):
            names[f"metrics.{name}.successful.{word}"] = f"{where} / {word.title()}"
        for word in stats:
            ours = _PERCENTILE_WORDS.get(word, word)
            names[f"metrics.{name}.successful.{ours}"] = f"{where} / Percentiles [{word}]"
        names[f"metrics.{name}.successful.p50"] = f"{where} / Median"
    for (group, unit), name in _CSV_RATES.items():
        mean = cell(group, unit, "Mean")
        if mean is not None:
            metrics[name] = {"successful": {"mean": _csv_number(mean, path, f"{group} / {unit}")}}
            names[f"metrics.{name}.successful.mean"] = f"{group} / {unit} / Mean"
    counts = {k: cell("Request Counts", k.title(), "") for k in ("total", "errored", "incomplete")}
    if all(v is not None for v in counts.values()):
        metrics["request_totals"] = {
            k: _csv_number(v, path, f"Request Counts / {k.title()}") for k, v in counts.items()
        }
        names["request_totals.total"] = "Request Counts / Total"
        names["request_totals.errored + incomplete"] = "Request Counts / Errored + Incomplete"
    goodput = cell("Server Throughput", "Successful Goodput/Sec", "mean")
    if goodput is not None:
        where = "Server Throughput / Successful Goodput/Sec / mean"
        metrics["request_goodput"] = {"successful": {"mean": _csv_number(goodput, path, where)}}
        names["metrics.request_goodput.successful.mean"] = where
    attainment = cell("Server Throughput", "SLO Attainment", "")
    if attainment is not None:
        where = "Server Throughput / SLO Attainment"
        metrics["slo_attainment"] = _csv_number(attainment, path, where)
        names["metrics.slo_attainment"] = where
    bench: dict = {"metrics": metrics, "config": _csv_config(cell("Runtime Info", "Arguments", ""))}
    duration = cell("Timings", "Duration", "Sec")
    if duration is not None:
        window = _csv_number(duration, path, "Timings / Duration")
        bench["scheduler_metrics"] = {"measure_start_time": 0.0, "measure_end_time": window}
        names["scheduler_metrics.measure_end_time − measure_start_time"] = "Timings / Duration"
    summary = _summary_of(str(path), bench, index, len(benches))
    summary.names = {key: names.get(name, name) for key, name in summary.names.items()}
    summary.notes += ("read from GuideLLM's benchmarks.csv; its requests are in benchmarks.json",)
    return summary
