"""A load generator's records as chapter 6's request log, and the run's accounting.

``records_frame`` gives the article's columns plus ``status``/``error`` and the per-chunk times
(``token_ts``, ``chunk_tokens``) that ``llminfer.logs`` defines, and says where each token count
came from: ``output_tokens_from`` is ``usage`` (the server's own count) or ``counted`` (text
chunks counted by the client: a chunk may hold several tokens, so it is flagged; also when the
server's count cannot be true, with a ``note``); ``input_tokens_from`` is ``usage`` or
``requested`` (the prompt length the client asked for). ``requested_input_tokens`` keeps the
length asked for beside it, and ``cached_input_tokens`` the prompt tokens the server says it
took from its prompt cache (empty when it did not say): ``prompt_tokens_line`` sums them up —
a server that adds a BOS token or a chat template counts more prompt tokens than were asked
for, and the user should know the prompts measured are not quite the prompts planned.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from llminfer.bench.client import BenchRun, RequestRecord, bench
from llminfer.logs.summary import summarize
from llminfer.sim.loadsweep import load_column
from llminfer.sim.simulate import simulate
from llminfer.sim.workload import Workload


def _chunk_tokens(n_chunks: int, n_tokens: int) -> np.ndarray:
    """Spread ``n_tokens`` over ``n_chunks`` chunks as evenly as whole numbers allow (each
    chunk carried at least one token)."""
    if n_chunks == 0:
        return np.zeros(0, dtype=np.int64)
    if n_tokens < n_chunks:
        return np.ones(n_chunks, dtype=np.int64)
    base, extra = divmod(n_tokens, n_chunks)
    return np.array([base + (i >= n_chunks - extra) for i in range(n_chunks)], dtype=np.int64)


def records_frame(records: list[RequestRecord]) -> pd.DataFrame:
    """One row per request in the request-log schema of ``llminfer.logs`` (seconds from the
    run's start; ``token_ts``/``chunk_tokens`` as arrays). ``status`` is ``ok``, ``failed``,
    or ``cancelled`` for a request an interruption cut short or came before (``error`` says
    which: ``not finished: …`` or ``not sent: …``; the reader counts it as failed); ``note``
    says what was odd about an answer (a ``usage`` that cannot be true, a retry).

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    rows = []
    for r in records:
        counted = len(r.chunk_ts)
        n_in, in_from, output, out_from, note = r.token_counts()
        status = "cancelled" if r.unfinished else "ok" if r.ok else "failed"
        rows.append(
            {
                "request_id": r.request_id,
                "start_ts": r.start_ts,
                "first_token_ts": r.chunk_ts[0] if r.chunk_ts else np.nan,
                "end_ts": r.end_ts,
                "input_tokens": n_in,
                "output_tokens": output,
                "status": status,
                "error": r.error,
                "token_ts": np.asarray(r.chunk_ts, dtype=float) if r.chunk_ts else None,
                "chunk_tokens": _chunk_tokens(counted, output) if r.chunk_ts else None,
                "http_status": r.http_status,
                "input_tokens_from": in_from,
                "output_tokens_from": out_from,
                "requested_output_tokens": r.max_tokens,
                "requested_input_tokens": r.prompt_tokens,
                "cached_input_tokens": np.nan if r.cached_tokens() is None else r.cached_tokens(),
                "note": "; ".join(filter(None, [r.note, note])),
            }
        )
    columns = [
        "request_id",
        "start_ts",
        "first_token_ts",
        "end_ts",
        "input_tokens",
        "output_tokens",
        "status",
        "error",
        "token_ts",
        "chunk_tokens",
        "http_status",
        "input_tokens_from",
        "output_tokens_from",
        "requested_output_tokens",
        "requested_input_tokens",
        "cached_input_tokens",
        "note",
    ]
    return pd.DataFrame(rows, columns=columns)


def prompt_tokens_line(frame: pd.DataFrame) -> str | None:
    """One line comparing the prompt tokens the server counted (its ``usage``) with those
    asked for, over the ok requests that have the server's count, e.g. ``server counted 1,290
    prompt tokens for 1,280 requested (+1 per request: a BOS token?)``; with the prompt cache's
    share when the server reported it. None when no ok request carries the server's count.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    ok = frame[(frame["status"] == "ok") & (frame["input_tokens_from"] == "usage")]
    if ok.empty:
        return None
    counted, requested = int(ok["input_tokens"].sum()), int(ok["requested_input_tokens"].sum())
    extra = ok["input_tokens"] - ok["requested_input_tokens"]
    n = len(ok)
    line = f"server counted {counted:,} prompt tokens for {requested:,} requested"
    if (extra == 0).all():
        line += f" (the same, all {n} requests)"
    elif (extra == extra.iloc[0]).all():
        per = int(extra.iloc[0])
        guess = {1: ": a BOS token?", 2: ": BOS and EOS, or a template?"}.get(
            per, ": a chat template, or another tokenizer?" if per > 0 else ": another tokenizer?"
        )
        line += f" ({per:+d} per request{guess})"
    else:
        line += (
            f" ({int(extra.min()):+d} to {int(extra.max()):+d} per request, "
            f"{float(extra.mean()):+.1f} on average: another tokenizer?)"
        )
    if "cached_input_tokens" in ok and ok["cached_input_tokens"].notna().any():
        cached = ok["cached_input_tokens"].dropna()
        hits = int((cached > 0.5 * ok.loc[cached.index, "input_tokens"]).sum())
        line += (
            f"; {int(cached.sum()):,} of them from the server's prompt cache "
            f"({hits} of {len(cached)} requests had more than half their prompt cached)"
        )
    omitted = int(((frame["status"] == "ok") & (frame["input_tokens_from"] != "usage")).sum())
    if omitted:
        line += f"; {omitted} ok requests without the server's count (not in these sums)"
    return line


def accounting(run: BenchRun) -> dict[str, int]:
    """``sent``, ``ok``, ``failed``, ``unfinished`` (measured requests still in flight when the
    run was interrupted) and ``warmup``; raises RuntimeError unless ``sent = ok + failed +
    unfinished`` — a request lost by the client would be a bug, never a result.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    unfinished = sum(r.unfinished for r in run.records)
    ok = sum(r.ok for r in run.records)
    failed = sum(not r.ok and not r.unfinished for r in run.records)
    counts = {
        "sent": len(run.records),
        "ok": ok,
        "failed": failed,
        "unfinished": unfinished,
        "warmup": len(run.warmup),
    }
    if counts["sent"] != ok + failed + unfinished:
        raise RuntimeError(f"request accounting broken: {counts}")
    return counts


def warmup_path(path: str | Path, part: str = "warmup") -> Path:
    """Where the requests kept apart from a log at ``path`` go: ``NAME.warmup.csv`` (warm-up)
    or ``NAME.unfinished.csv`` (``part="unfinished"``; the command no longer writes it: an
    interrupted run's unfinished requests are rows of the log itself, status ``cancelled``).

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    if part not in ("warmup", "unfinished"):
        raise ValueError(f"part={part!r} must be 'warmup' or 'unfinished'")
    path = Path(path)
    return path.with_name(f"{path.stem}.{part}{path.suffix or '.csv'}")


def decode_tps(frame: pd.DataFrame) -> float:
    """Decode throughput of a run, tokens/s: every token after each request's first, over the
    span from the first first-token to the last end (ok requests only).

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    ok = frame[frame["status"] == "ok"]
    if ok.empty:
        raise ValueError("frame has no successful request: no decode throughput")
    span = ok["end_ts"].max() - ok["first_token_ts"].min()
    return float((ok["output_tokens"] - 1).sum() / span) if span > 0 else float("nan")


def arrival_window_tps(frame: pd.DataFrame) -> float:
    """Output tokens/s while the load was fully on: tokens emitted (by their ``token_ts``,
    counted with ``chunk_tokens`` when present) between the first request's start and the last
    request's start, over that span (ok requests' tokens; NaN for a span of 0). In a closed loop
    every user is busy in that window; after the last request is sent, users drop out one by
    one, so a run's whole window (first start → last end, ``output_tps``) mixes in its drain.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    starts = frame["start_ts"].to_numpy(dtype=float)
    t0, t1 = float(np.nanmin(starts)), float(np.nanmax(starts))
    if not t1 > t0:
        return float("nan")
    ok = frame[frame["status"] == "ok"]
    counts = ok["chunk_tokens"] if "chunk_tokens" in ok.columns else [None] * len(ok)
    tokens = 0.0
    for times, chunk in zip(ok["token_ts"], counts, strict=True):
        if times is None:
            continue
        times = np.asarray(times, dtype=float)
        inside = (times >= t0) & (times <= t1)
        tokens += float(np.asarray(chunk)[inside].sum()) if chunk is not None else inside.sum()
    return tokens / (t1 - t0)


def load_workloads(
    workload: Workload,
    concurrencies: Sequence[int] | None = None,
    rates: Sequence[float] | None = None,
    requests_per_user: int | None = None,
) -> tuple[str, list[tuple[float, Workload]]]:
    """The workload of each load point of a sweep: ``("concurrency" or "rate", [(load,
    workload), ...])``, the same lengths and seed at every point. ``requests_per_user`` (closed
    loop only): at least that many requests per user, ``max(workload.n_requests,
    requests_per_user × C)``, so a high load is not over before every user has queued behind
    the others once. ``sweep_server`` measures these points, ``simulate_sweep`` predicts them.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    if not isinstance(workload, Workload):
        raise ValueError(f"workload={workload!r} must be a llminfer.sim.workload.Workload")
    if (rates is None) == (concurrencies is None):
        raise ValueError("give exactly one of rates (open loop) or concurrencies (closed loop)")
    kind, values = ("rate", rates) if rates is not None else ("concurrency", concurrencies)
    values = list(values)
    if not values:
        raise ValueError(f"{kind} list is empty; give at least one load")
    if requests_per_user is not None:
        if kind != "concurrency":
            raise ValueError("requests_per_user applies to concurrencies (closed loop) only")
        if (
            isinstance(requests_per_user, bool)
            or not isinstance(requests_per_user, int)
            or requests_per_user < 1
        ):
            raise ValueError(f"requests_per_user={requests_per_user!r} must be an integer >= 1")
    points = []
    for value in values:
        other = "concurrency" if kind == "rate" else "rate"
        point = replace(workload, **{kind: value, other: None})
        if requests_per_user is not None:
            point = replace(point, n_requests=max(workload.n_requests, requests_per_user * value))
        points.append((value, point))
    return kind, points


def sweep_server(
    url: str,
    workload,
    model: str,
    concurrencies=None,
    rates=None,
    percentiles=(50, 90, 99),
    requests_per_user: int | None = None,
    **bench_kwargs,
) -> tuple[pd.DataFrame, dict]:
    """Measure a real server at each concurrency (closed loop) or rate (open loop) with the
    same workload otherwise — the measured twin of ``llminfer.sim.loadsweep.sweep``; the load
    points (and ``requests_per_user``) are ``load_workloads``'s.

    Every load sends prompts of its own (``prompt_salt`` = the load's index, after any
    ``prompt_salt`` given): the same lengths and shared prefix, other words, so a prompt cache
    cannot answer a load's requests from an earlier load's. Warm-up (``warmup=``) is drawn
    apart from them too (``run_bench``).

    Returns (table, logs): one table row per load with the load column, ``failed``,
    ``decode_tps``, ``arrival_tps`` (``arrival_window_tps``), the prompt tokens
    ``requested_input_tokens``, the server's count of them ``server_input_tokens`` (NaN when it
    sent none) and ``cached_input_tokens`` (NaN when it did not say), and every field of
    ``summarize(...).to_dict()``; ``logs`` maps each load to its request log (a DataFrame in
    chapter 6's schema). Each load gets its own prompts (``prompt_salt`` + the load's index), so
    no load is answered from an earlier load's prompt cache.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    kind, points = load_workloads(workload, concurrencies, rates, requests_per_user)
    rows, logs = [], {}
    salt = bench_kwargs.pop("prompt_salt", 0)
    for index, (value, point) in enumerate(points):
        run = bench(url, point, model, prompt_salt=salt + index, **bench_kwargs)
        frame = records_frame(run.records)
        counts = accounting(run)
        logs[value] = frame
        summary = summarize(frame, percentiles=percentiles).to_dict()
        ok = frame[frame["status"] == "ok"]
        served = ok[ok["input_tokens_from"] == "usage"]
        rows.append(
            {
                kind: value,
                "failed": counts["failed"],
                "decode_tps": decode_tps(frame),
                "arrival_tps": arrival_window_tps(frame),
                "requested_input_tokens": int(ok["requested_input_tokens"].sum()),
                "server_input_tokens": (
                    int(served["input_tokens"].sum()) if len(served) == len(ok) else np.nan
                ),
                "cached_input_tokens": (
                    ok["cached_input_tokens"].sum()
                    if ok["cached_input_tokens"].notna().any()
                    else np.nan
                ),
                **summary,
            }
        )
    return pd.DataFrame(rows), logs


def simulate_sweep(
    workload: Workload,
    concurrencies: Sequence[int] | None = None,
    rates: Sequence[float] | None = None,
    percentiles=(50, 90, 99),
    requests_per_user: int | None = None,
    **simulate_kwargs,
) -> tuple[pd.DataFrame, dict]:
    """``simulate`` at the same load points as ``sweep_server`` (``load_workloads``): the
    prediction to set beside a measured sweep, row for row. ``simulate_kwargs`` go to
    ``llminfer.sim.simulate.simulate`` (``model``, ``gpu``, ``engine``, ``capacity_blocks``,
    ``profile``: a paced server's ``ServeConfig.simulate_kwargs()``).

    Returns (table, logs) as ``sweep_server`` does (``decode_tps`` and ``arrival_tps``
    included; ``failed`` is 0).

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    kind, points = load_workloads(workload, concurrencies, rates, requests_per_user)
    rows, logs = [], {}
    for value, point in points:
        result = simulate(point, **simulate_kwargs)
        frame = result.requests.assign(status="ok")
        logs[value] = frame
        summary = summarize(result.log, percentiles=percentiles).to_dict()
        rows.append(
            {
                kind: value,
                "failed": 0,
                "decode_tps": decode_tps(frame),
                "arrival_tps": arrival_window_tps(frame),
                **summary,
            }
        )
    return pd.DataFrame(rows), logs


def compare_sweeps(
    measured: pd.DataFrame,
    simulated: pd.DataFrame,
    fitted_loads: Sequence[float] = (),
    metrics: Sequence[str] = ("ttft_s_p50", "tpot_s_p50"),
    other: str = "held out",
) -> pd.DataFrame:
    """A measured sweep (``sweep_server``'s table) beside a simulated one (``simulate_sweep``'s,
    or ``SweepFit.predict``'s), load for load: one row per load both hold, with its load column
    (``concurrency`` or ``rate``), ``part`` (``"fit"`` for a load in ``fitted_loads``, else
    ``other``) and for each metric (``ttft_s_p50`` → ``ttft``) ``ttft_measured_ms``,
    ``ttft_simulated_ms`` (milliseconds) and ``ttft_error_pct`` (simulated ÷ measured − 1, %).
    Raises ValueError when the tables vary different loads, share none, or lack a metric.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    kind = load_column(measured)
    if load_column(simulated) != kind:
        raise ValueError(f"measured varies {kind!r} but simulated does not")
    for name, table in (("measured", measured), ("simulated", simulated)):
        missing = [m for m in metrics if m not in table.columns]
        if missing:
            raise ValueError(f"{name} lacks column(s) {', '.join(missing)}")
    both = measured.merge(simulated, on=kind, suffixes=("_measured", "_simulated"))
    if both.empty:
        raise ValueError(f"measured and simulated share no {kind}")
    rows = {kind: both[kind], "part": np.where(both[kind].isin(fitted_loads), "fit", other)}
    for metric in metrics:
        short = metric.split("_")[0]
        m, s = both[f"{metric}_measured"], both[f"{metric}_simulated"]
        rows[f"{short}_measured_ms"] = 1e3 * m
        rows[f"{short}_simulated_ms"] = 1e3 * s
        rows[f"{short}_error_pct"] = 100 * (s / m - 1)
    return pd.DataFrame(rows).sort_values(kind, ignore_index=True)
