"""Command line: ``python -m llminfer metrics FILE``, ``diagnose FILE``, ``models``, ``gpus``.

Subcommands register themselves: each module-level ``register_<name>(subparsers)`` function
listed in ``COMMANDS`` adds its parser and sets ``func`` (a callable taking the parsed
arguments and returning an exit code). Another chapter adds a subcommand by writing one such
function and appending it to ``COMMANDS``.

Exit codes: 0 done; 2 anything else — a bad command line, an unreadable or invalid log, no
valid request left, or an internal error (then the line says so and asks for ``--debug``) —
with exactly one ``error: …`` line on stderr naming the file and, where it applies, the row,
file line, column and value, never a traceback (``--debug`` shows one); a usage error
(an unknown option, a bad choice) is one such line too; 130 interrupted. A directory read
with ``--on-error report`` prints one ``warning: …`` line per file it could not read.

The lines a command prints for a person (the ``# source`` header, the rejected-rows report,
the diagnosis) are in the learner's language (``LLMINFER_LANG=zh``); the options, their help,
the ``error:``/``warning:`` prefixes, the exit codes and the JSON keys stay as they are.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import traceback
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd

from llminfer.bench.run import register_bench
from llminfer.language import _
from llminfer.logs.reading import FORMATS, read_requests
from llminfer.logs.schema import LogError, LogSource, RequestLog
from llminfer.logs.summary import summarize
from llminfer.logs.timeunits import TIME_UNITS
from llminfer.serve.run import register_serve
from llminfer.specs.models import check_tensor_parallel
from llminfer.units import DTYPE_BYTES

_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(ms|s|us|µs)?\s*$")
_SCALE = {"ms": 1e-3, "s": 1.0, "us": 1e-6, "µs": 1e-6, None: 1.0}
_SLO_NAMES = {"ttft": "ttft_s", "tpot": "tpot_s", "e2e": "e2e_s", "e2el": "e2e_s"}


def parse_slo(text: str) -> dict[str, float]:
    """``"ttft=500ms,tpot=50ms,e2e=10s"`` → ``{"ttft_s": 0.5, "tpot_s": 0.05, "e2e_s": 10.0}``.

    Units ``ms``, ``s`` (the default) or ``us``; names ``ttft``, ``tpot``, ``e2e``.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    slo: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, value = part.partition("=")
        key = _SLO_NAMES.get(name.strip().lower())
        match = _DURATION.match(value)
        if key is None or match is None:
            raise ValueError(
                f"--slo {part!r} is not NAME=DURATION with NAME in ttft, tpot, e2e and "
                "DURATION like 500ms or 2s"
            )
        if key in slo:
            raise ValueError(f"--slo {text!r} names {name.strip()} twice; give each target once")
        slo[key] = float(match.group(1)) * _SCALE[match.group(2)]
        if not slo[key] > 0:
            raise ValueError(f"--slo {part!r}: a latency target must be more than 0")
    if not slo:
        raise ValueError(f"--slo {text!r} names no target; e.g. ttft=500ms,tpot=50ms")
    return slo


def parse_percentiles(text: str) -> tuple[float, ...]:
    """``"50,90,99.9"`` → ``(50.0, 90.0, 99.9)``: each in (0, 100], each once.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    values: list[float] = []
    for part in (p.strip() for p in text.split(",")):
        value = float(part) if re.fullmatch(r"[0-9]*\.?[0-9]+", part) else math.nan
        if not 0 < value <= 100:
            raise ValueError(
                f"--percentiles {text!r}: {part!r} is not a percentile; give numbers in "
                "(0, 100] separated by commas, e.g. 50,90,99.9"
            )
        if value in values:
            raise ValueError(f"--percentiles {text!r} names {part} twice")
        values.append(value)
    return tuple(values)


#: Rejected rows printed on stderr by ``--on-error report`` (``--rejected FILE`` writes all).
SHOWN_REJECTED = 10


class NoValidRequests(ValueError):
    """``--on-error report`` left no request to analyse (exit 2).

    Introduced in: notebooks/06_log_analysis.ipynb
    """


def _read_log(args: argparse.Namespace) -> RequestLog:
    """Read the log the shared arguments name; report rejected rows; refuse an empty result."""
    on_error = "report" if args.rejected else args.on_error
    log = read_requests(
        args.file,
        format=args.format,
        on_error=on_error,
        time_unit=args.time_unit,
        benchmark=args.benchmark,
    )
    _report_rejected(log, args)
    if len(log) == 0 and not len(log.rejected):
        raise NoValidRequests(
            _("{file}: the log holds no requests (no rows)").format(file=args.file)
        )
    if len(log) == 0:
        rows = log.rejected.loc[log.rejected["row"] >= 0, "row"].nunique()
        raise NoValidRequests(
            _(
                "{file}: no valid request remains — all {rows} row(s) were rejected (reasons above)"
            ).format(file=args.file, rows=rows)
        )
    return log


def _source_line(source: LogSource) -> str:
    """The report's first line, ``# <format> log from <path>``, and one line per assumption
    the reader made (``str(source)`` after ``# `` in English)."""
    if not isinstance(source, LogSource):
        return f"# {source}"
    if source.path:
        header = _("# {format} log from {path}").format(format=source.format, path=source.path)
    else:
        header = _("# {format} log").format(format=source.format)
    said = [_("  assumed: {assumption}").format(assumption=a) for a in source.assumptions]
    return "\n".join([header, *said])


def _metrics(args: argparse.Namespace) -> int:
    slo = parse_slo(args.slo) if args.slo else None
    percentiles = parse_percentiles(args.percentiles) if args.percentiles else (50, 90, 95, 99)
    if args.stream:  # bigger than memory: two batched passes, exact, rows not validated
        for option, given in (("--by", args.by), ("--on-error report", args.on_error != "raise"),
                              ("--rejected", args.rejected),
                              ("--benchmark", args.benchmark is not None)):  # fmt: skip
            if given:
                raise ValueError(f"{option} does not go with --stream (rows are not validated)")
        from llminfer.logs.logstream import summarize_stream

        summary = summarize_stream(
            args.file, percentiles, slo=slo, engine=args.engine, time_unit=args.time_unit
        )
        note = _("# streamed from {file} ({engine}; rows not validated)").format(
            file=_shown(args.file), engine=args.engine
        )
        if args.json:  # stdout is the JSON document alone; the note goes to stderr
            print(note, file=sys.stderr)
            print(json.dumps(_json_safe(summary.to_dict()), indent=2))
        else:
            print(note)
            print(summary)
        return 0
    log = _read_log(args)
    if args.by:
        grouped = summarize(log, percentiles, slo=slo, by=args.by)
        if args.json:
            print(grouped.table.to_json(orient="index", indent=2))
        else:
            print(_source_line(log.source))
            print(grouped)
        return 0
    summary = summarize(log, percentiles, slo=slo)
    if args.json:
        print(json.dumps(_json_safe(summary.to_dict()), indent=2))
    else:
        print(_source_line(log.source))
        print(summary)
    return 0


def _json_safe(values: dict) -> dict:
    """NaN and ±inf as null: JSON has no such numbers (``json.dumps`` would write ``NaN``)."""
    return {
        k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in values.items()
    }


def _shown(name: str) -> str:
    """A file name as one line of text: control characters (a newline) escaped."""
    return name if name.isprintable() else repr(name)[1:-1]


def _add_log_arguments(parser: argparse.ArgumentParser, slo_help: str) -> None:
    """The arguments every command that reads a log shares: the file, its format, the
    latency targets and what to do with bad rows."""
    parser.add_argument(
        "file",
        help="the log: .csv, .csv.gz, .parquet, .json or .jsonl; or a directory or a quoted glob "
        "of CSV/CSV.gz/Parquet files (each request's file in column 'source')",
    )
    parser.add_argument(
        "--format", default="auto", choices=[f for f in FORMATS if f != "dataframe"]
    )
    parser.add_argument("--slo", help=slo_help)
    parser.add_argument(
        "--on-error",
        default="raise",
        choices=["raise", "report"],
        help="bad rows: stop at the first report (raise, the default) or load the valid rows, "
        "count the rejected ones by reason and show the first few (report)",
    )
    parser.add_argument(
        "--rejected",
        metavar="FILE",
        help="write every rejected row (row, line, column, value, reason) to FILE as CSV; "
        "implies --on-error report",
    )
    parser.add_argument(
        "--benchmark",
        type=int,
        metavar="N",
        help="one run (an index; -1 the last) of a file holding several: GuideLLM's benchmarks "
        "(a sweep), vLLM's results appended with --append-result (default: all, column "
        "'benchmark'; metrics --by benchmark gives one row each)",
    )
    parser.add_argument(
        "--time-unit",
        choices=list(TIME_UNITS),
        help="unit of the times in a CSV or Parquet log (default: seconds, refused if "
        "implausible; Arrow timestamps and durations declare their own unit)",
    )


def _report_rejected(log: RequestLog, args: argparse.Namespace) -> None:
    """Counts by reason and the first rows on stderr; every row to ``--rejected FILE``."""
    rejected = log.rejected
    if args.rejected:
        table = rejected
        if len(rejected) and set(log.source.format.split("+")) == {"csv"}:
            table = rejected.assign(line=_lines(rejected, log.source.path))
            first = ["row", "line", "column", "value", "reason"]
            table = table[[*first, *(c for c in table.columns if c not in first)]]
        Path(args.rejected).parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(args.rejected, index=False)
    files = rejected[rejected["row"] < 0]  # whole files not read (a directory, --on-error report)
    for item in files.itertuples(index=False):
        print(f"warning: {_shown(str(item.source))}: {item.reason}", file=sys.stderr)
    rejected = rejected[rejected["row"] >= 0]
    if not len(rejected):
        return
    counts = rejected.groupby("reason", sort=False).size().sort_values(ascending=False)
    out = [
        _("{rows} row(s) rejected ({problems} problem(s)) by reason:").format(
            rows=rejected["row"].nunique(), problems=len(rejected)
        )
    ]
    out += [f"  {n:>8,}  {reason}" for reason, n in counts.items()]
    first = rejected.head(SHOWN_REJECTED)
    with pd.option_context("display.max_colwidth", 60):
        shown = first.to_string(index=False)
    out.append(
        _("first {n}:").format(n=len(first)) if len(rejected) > len(first) else _("all of them:")
    )
    out += ["  " + line for line in shown.splitlines()]
    if args.rejected:
        out.append(_("every rejected row is in {file}").format(file=args.rejected))
    elif len(rejected) > len(first):
        out.append(_("write every one to a file with --rejected FILE"))
    print("\n".join(out), file=sys.stderr)


def _lines(rejected: pd.DataFrame, path: str) -> pd.Series:
    """The file line of each rejected row of a CSV log (one file, or each row's ``source``
    file under a directory or glob); <NA> for a whole file not read."""
    from llminfer.logs.logfile import record_lines

    lines = pd.Series(pd.NA, index=rejected.index, dtype="Int64")
    if "source" not in rejected.columns:
        found = record_lines(path, rejected["row"])
        return rejected["row"].map(found).astype("Int64")
    from llminfer.logs.discovery import log_files

    root = log_files(path)[1]  # the folder the names in 'source' are relative to
    for name, group in rejected[rejected["row"] >= 0].groupby("source", observed=True):
        file = root / str(name)
        if not file.is_file():
            continue
        found = record_lines(file, group["row"])
        lines[group.index] = group["row"].map(found).astype("Int64")
    return lines


def register_metrics(subparsers) -> None:
    """Add ``metrics FILE``: summarise a request log (chapter 6).

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    parser = subparsers.add_parser(
        "metrics",
        help="TTFT, TPOT, E2E, TPS, RPS and goodput of a request log",
        description="Summarise a request log: the article's CSV or a vLLM, GenAI-Perf, AIPerf "
        "or llmperf export.",
    )
    _add_log_arguments(parser, "latency targets for goodput, e.g. ttft=500ms,tpot=50ms")
    parser.add_argument("--json", action="store_true", help="print the summary as flat JSON")
    parser.add_argument(
        "--percentiles", help="latency percentiles to report, e.g. 50,90,99.9 (default 50,90,95,99)"
    )
    parser.add_argument(
        "--by",
        help="also one row per value of this column, e.g. --by source for a directory or glob",
    )
    parser.add_argument(
        "--stream",
        action="store_true",
        help="a log bigger than memory (Parquet/CSV files): exact summary in batched passes",
    )
    parser.add_argument(
        "--engine", default="arrow", choices=["arrow", "duckdb"], help="batch reader for --stream"
    )
    parser.set_defaults(func=_metrics)


#: ``diagnose``'s exit status: what a script or CI job can test without parsing the report.
DIAGNOSE_EXIT = {"ok": 0, "problem": 1, "bad input": 2, "not_enough_data": 3}
_ENGINE_KEYS = {
    "chunked_prefill": bool,
    "prefix_caching": bool,
    "max_num_seqs": int,
    "parallel": int,
    "max_num_batched_tokens": int,
    "chunk": int,
    "gpu_memory_utilization": float,
    "block_size": int,
    "policy": str,
    "long_prefill_token_threshold": int,
    "kv_unified": bool,
    "n_ubatch": int,
}
_TRUE = {"on": True, "true": True, "1": True, "yes": True}
_FALSE = {"off": False, "false": False, "0": False, "no": False}


def parse_engine(text: str):
    """``"chunked_prefill=on,chunk=2048,max_num_seqs=256,gpu_memory_utilization=0.9"`` → an
    ``EngineConfig`` (names as in vLLM without the dashes; ``chunk`` is short for
    ``max_num_batched_tokens``, ``parallel`` (llama.cpp's slots) for ``max_num_seqs``; booleans
    on/off; ``kv_unified`` is llama-server's ``--kv-unified``: on, a step's batch is cut into
    passes of ``n_ubatch`` tokens, off, one pass per run of consecutive slots, as
    ``EngineConfig.ubatch_split`` ``"simple"`` / ``"equal"``). Settings not named keep vLLM
    V0-like values
    (chunked prefill and prefix caching off, 256 sequences, 8,192 tokens per step).

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    from llminfer.sim.engines import EngineConfig

    values: dict = {
        "chunked_prefill": False,
        "prefix_caching": False,
        "max_num_seqs": 256,
        "max_num_batched_tokens": 8192,
    }
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, value = part.partition("=")
        name, value = name.strip().lower().replace("-", "_"), value.strip().lower()
        kind = _ENGINE_KEYS.get(name)
        if kind is None or not value:
            raise ValueError(
                f"--engine {part!r} is not NAME=VALUE with NAME in {', '.join(_ENGINE_KEYS)}"
            )
        try:
            if kind is bool:
                if value not in _TRUE and value not in _FALSE:
                    raise ValueError
                parsed = _TRUE.get(value, False)
            else:
                parsed = kind(value)
        except ValueError:
            raise ValueError(
                f"--engine {part!r}: {name} must be "
                + {bool: "on or off", int: "a whole number", float: "a number", str: "a word"}[kind]
            ) from None
        if name == "kv_unified":
            name, parsed = "ubatch_split", "simple" if parsed else "equal"
        alias = {"chunk": "max_num_batched_tokens", "parallel": "max_num_seqs"}
        values[alias.get(name, name)] = parsed
    try:
        return EngineConfig(**values)
    except ValueError as exc:
        raise ValueError(f"--engine {text!r}: {exc}") from None


def _diagnose(args: argparse.Namespace) -> int:
    from llminfer.diagnose.run import diagnose
    from llminfer.diagnose.scrape import read_scrape
    from llminfer.specs.describe import (
        llama_props,
        llama_slots,
        resolve_gpu,
        resolve_model,
        weight_format_of,
    )

    slo = parse_slo(args.slo) if args.slo else None
    engine = parse_engine(args.engine) if args.engine is not None else None
    model = resolve_model(args.model) if args.model else None
    engine_note = None
    if engine is None and args.model and args.model.startswith(("http://", "https://")):
        # a llama-server: its /props says how many slots it runs, which tells a queue for
        # slots from prompts sent together (what `--engine parallel=N` would say)
        props_url, props = llama_props(args.model)
        slots = llama_slots(props)
        if slots is not None:
            engine = parse_engine(f"parallel={slots}")
            engine_note = _("engine: {slots} slots (--parallel), read from {url}").format(
                slots=slots, url=props_url
            )
    weight_dtype, weights_note = args.weight_dtype, None
    found = weight_format_of(args.model) if args.model and weight_dtype is None else None
    if found is not None:  # the GGUF says what its weights are: Q4_K_M is not bf16
        weight_dtype, ftype, path = found
        weights_note = _("weights: {ftype} in {path}, counted as {dtype}").format(
            ftype=ftype, path=path, dtype=weight_dtype
        )
    gpu = resolve_gpu(args.gpu) if args.gpu else None
    if (model is None) != (gpu is None):
        raise ValueError("--model and --gpu go together: give both or neither")
    for name in ("n_gpus", "replicas"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} {getattr(args, name)} must be ≥ 1")
    if model is not None:
        check_tensor_parallel(model, args.n_gpus, "--n-gpus")
    server = [read_scrape(path) for path in args.metrics] if args.metrics else None
    log = _read_log(args)
    report = diagnose(
        log,
        model=model,
        gpu=gpu,
        engine=engine,
        slo=slo,
        n_gpus=args.n_gpus,
        replicas=args.replicas,
        weight_dtype=weight_dtype or "bf16",
        kv_dtype=args.kv_dtype,
        server=server,
        engine_kind=args.server_kind,
    )
    if args.json:
        notes = {"engine_from": engine_note, "weights_from": weights_note}
        extra = {key: note for key, note in notes.items() if note}
        print(json.dumps({"source": str(log.source), **extra, **report.to_dict()}, indent=2))
    else:
        print(_source_line(log.source))
        for note in (engine_note, weights_note):
            if note:
                print(note)
        print(report)
    return DIAGNOSE_EXIT[report.verdict]


def register_diagnose(subparsers) -> None:
    """Add ``diagnose FILE``: the troubleshooting procedure of chapter 7 on a log. Exit status
    (``DIAGNOSE_EXIT``): 0 ok, 1 a problem was found, 2 bad input, 3 not enough data.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    parser = subparsers.add_parser(
        "diagnose",
        help="walk chapter 7's troubleshooting order over a request log",
        description="Diagnose a request log step by step (workload, failures, memory, "
        "queueing, prefill, decode, saturation), name the primary cause and suggest changes "
        "that fit the deployment.",
        epilog="exit status: 0 ok, 1 a problem was found, 2 bad input, 3 not enough data "
        "(too few requests to judge). Example: diagnose log.csv --model llama-3.1-8b --gpu "
        "h100-sxm --engine chunked_prefill=on,chunk=2048,max_num_seqs=256 --metrics "
        "scrape.txt --json",
    )
    _add_log_arguments(parser, "p90 latency targets, e.g. ttft=1s,tpot=20ms (default 500ms, 50ms)")
    parser.add_argument(
        "--model",
        help="model preset (e.g. llama-3.1-8b; see models), a Hugging Face config.json (or its "
        "folder), a .gguf file, or a llama-server URL whose /props names its GGUF and its "
        "slots (with --gpu; the slots stand for --engine parallel=N unless --engine is given)",
    )
    parser.add_argument(
        "--gpu",
        help="GPU preset (e.g. h100-sxm; see gpus), a JSON/TOML spec file of GPU fields in "
        "bytes, bytes/s and FLOP/s (name, memory_bytes, memory_bandwidth, bf16_flops, …), or "
        "'measure' (this machine, measured with numpy) (with --model)",
    )
    parser.add_argument(
        "--n-gpus", "--tp", dest="n_gpus", type=int, default=1,
        help="GPUs per replica (tensor parallelism)",
    )  # fmt: skip
    parser.add_argument("--replicas", type=int, default=1, help="replicas behind a balancer")
    parser.add_argument(
        "--weight-dtype",
        choices=list(DTYPE_BYTES),
        help="the weights' number format (default: read from the GGUF when --model is a .gguf "
        "file or a llama-server, else bf16)",
    )
    parser.add_argument("--kv-dtype", default="bf16", choices=list(DTYPE_BYTES))
    parser.add_argument(
        "--engine",
        help="engine settings, e.g. chunked_prefill=on,chunk=2048,max_num_seqs=256,"
        "gpu_memory_utilization=0.9; parallel=N for llama-server's slots (max_num_seqs is the "
        "slot count) (unknown if omitted: suggestions then say 'if')",
    )
    parser.add_argument(
        "--metrics",
        action="append",
        metavar="SCRAPE",
        help="a saved /metrics scrape of vLLM, llama-server (--metrics) or SGLang "
        "(--enable-metrics) (curl -s HOST:8000/metrics > scrape.txt), or its http:// URL, read "
        "now; give it twice (before and after the run) to count preemptions during the run",
    )
    parser.add_argument(
        "--server-kind",
        choices=["vllm", "llamacpp", "sglang"],
        help="whose flags the suggestions use (default: the engine --metrics names, else vllm)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(func=_diagnose)


def _presets(args: argparse.Namespace) -> int:
    import dataclasses

    from llminfer.specs.presets import get_gpu, get_model, list_gpus, list_models

    if args.command == "models":
        rows = []
        for key in list_models():
            m = get_model(key)
            rows.append(
                {
                    "key": key,
                    "name": m.name,
                    "params_b": round(m.n_params / 1e9, 2),
                    "layers": m.n_layers,
                    "kv_heads": m.n_kv_heads,
                    "max_context": m.max_context,
                }
            )
    else:
        rows = []
        for key in list_gpus():
            g = get_gpu(key)
            rows.append(
                {
                    "key": key,
                    "name": g.name,
                    "memory_gib": round(g.memory_bytes / 2**30, 1),
                    "bandwidth_tb_s": round(g.memory_bandwidth / 1e12, 2),
                    "bf16_tflops": round(g.bf16_flops / 1e12, 1) if g.bf16_flops else None,
                }
            )
    if args.json:
        full = [
            dataclasses.asdict(get_model(k) if args.command == "models" else get_gpu(k))
            for k in (list_models() if args.command == "models" else list_gpus())
        ]
        print(json.dumps([{"key": r["key"], **f} for r, f in zip(rows, full, strict=True)],
                         indent=2))  # fmt: skip
    else:
        import pandas as pd

        print(pd.DataFrame(rows).to_string(index=False))
    return 0


def register_presets(subparsers) -> None:
    """Add ``models`` and ``gpus``: list the presets ``--model`` and ``--gpu`` accept.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    for name, what in (("models", "model architectures"), ("gpus", "GPUs")):
        parser = subparsers.add_parser(
            name,
            help=f"list the {what} presets (names for --{name[:-1]})",
            description=f"List the {what} llminfer ships (llminfer/presets), with their key "
            "figures; --json gives every field and its source.",
        )
        parser.add_argument("--json", action="store_true", help="every field, as JSON")
        parser.set_defaults(func=_presets)


#: Every subcommand's register function; append one to add a subcommand.
COMMANDS: list[Callable] = [
    register_metrics,
    register_diagnose,
    register_presets,
    register_bench,
    register_serve,
]


class _Parser(argparse.ArgumentParser):
    """argparse's parser with its usage errors as one ``error:`` line (exit 2), like every
    other error of the command line (``--help`` still prints the usage)."""

    def error(self, message: str):
        text = " ".join(message.split())
        self.exit(2, f"error: {self.prog}: {text} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m llminfer`` parser with every subcommand in ``COMMANDS``.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    parser = _Parser(
        prog="python -m llminfer", description="llminfer: why LLM inference is fast or slow"
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        help="on an error, show the Python traceback too (may also follow the subcommand)",
    )
    subparsers = parser.add_subparsers(dest="command", required=True)
    for register in COMMANDS:
        register(subparsers)
    return parser


def error_line(exc: BaseException, args: argparse.Namespace | None = None) -> str:
    """The one ``error: …`` line for an exception: command-line wording, the file named, no
    line breaks.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    if isinstance(exc, LogError):
        text = exc.cli_message()
    elif isinstance(exc, (ValueError, OSError)):
        text = str(exc) or type(exc).__name__
    else:
        command = getattr(args, "command", None) or _("the command")
        text = _(
            "internal error in {command}: {kind}: {error}. This is a bug in "
            "llminfer, not in your input as far as it can tell; run again with --debug and "
            "report the traceback"
        ).format(command=command, kind=type(exc).__name__, error=exc)
    text = " ".join(text.split())  # one line, whatever the message held
    file = getattr(args, "file", None)
    if file and file not in text and _shown(file) not in text and repr(file) not in text:
        text = f"{_shown(file)}: {text}"
    return f"error: {text}"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (see the module docstring).

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv  # accepted anywhere on the line, before or after the subcommand
    argv = [a for a in argv if a != "--debug"]
    args = build_parser().parse_args(argv)  # argparse itself exits 2 on a bad command line
    try:
        with warnings.catch_warnings():
            if not debug:  # numpy/pandas arithmetic warnings say nothing to a CLI user
                warnings.simplefilter("ignore", RuntimeWarning)
            return args.func(args)
    except KeyboardInterrupt:
        print("error: " + _("interrupted"), file=sys.stderr)
        return 130
    except Exception as exc:
        if debug:
            traceback.print_exc()
        print(error_line(exc, args), file=sys.stderr)
        # 2 for every failure: even a bug is met on the user's input, and scripts that call
        # the command line test one code; the line itself says "internal error" for a bug.
        return 2


if __name__ == "__main__":
    sys.exit(main())
