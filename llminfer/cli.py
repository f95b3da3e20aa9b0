"""Command line: ``python -m llminfer metrics FILE ...`` and ``python -m llminfer diagnose FILE``.

Subcommands register themselves: each module-level ``register_<name>(subparsers)`` function
listed in ``COMMANDS`` adds its parser and sets ``func`` (a callable taking the parsed
arguments and returning an exit code). Another chapter adds a subcommand by writing one such
function and appending it to ``COMMANDS``. Bad input exits 2 with the message on stderr.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Callable, Sequence

from llminfer.logs import FORMATS, read_requests
from llminfer.metrics import summarize
from llminfer.models import check_tensor_parallel
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
        slo[key] = float(match.group(1)) * _SCALE[match.group(2)]
    if not slo:
        raise ValueError(f"--slo {text!r} names no target; e.g. ttft=500ms,tpot=50ms")
    return slo


def _metrics(args: argparse.Namespace) -> int:
    slo = parse_slo(args.slo) if args.slo else None
    if args.stream:  # bigger than memory: two batched passes, exact, rows not validated
        from llminfer.logstream import summarize_stream

        summary = summarize_stream(args.file, slo=slo, engine=args.engine)
        print(f"# streamed from {args.file} ({args.engine}; rows not validated)")
        print(json.dumps(summary.to_dict(), indent=2) if args.json else summary)
        return 0
    log = read_requests(args.file, format=args.format, on_error=args.on_error)
    if args.by:
        grouped = summarize(log, slo=slo, by=args.by)
        if args.json:
            print(grouped.table.to_json(orient="index", indent=2))
        else:
            print(f"# {log.source}")
            print(grouped)
        _report_rejected(log)
        return 0
    summary = summarize(log, slo=slo)
    if args.json:
        flat = {
            k: (None if isinstance(v, float) and math.isnan(v) else v)
            for k, v in summary.to_dict().items()
        }
        print(json.dumps(flat, indent=2))
    else:
        print(f"# {log.source}")
        print(summary)
    _report_rejected(log)
    return 0


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
        help="bad rows: stop (raise) or load the valid rows and list the rejected ones",
    )


def _report_rejected(log) -> None:
    if len(log.rejected):
        print(
            f"{log.rejected['row'].nunique()} row(s) rejected:\n"
            + log.rejected.to_string(index=False),
            file=sys.stderr,
        )


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


def _diagnose(args: argparse.Namespace) -> int:
    from llminfer.diagnose import diagnose
    from llminfer.presets import get_gpu, get_model

    slo = parse_slo(args.slo) if args.slo else None
    log = read_requests(args.file, format=args.format, on_error=args.on_error)
    model = get_model(args.model) if args.model else None
    gpu = get_gpu(args.gpu) if args.gpu else None
    if (model is None) != (gpu is None):
        raise ValueError("--model and --gpu go together: give both or neither")
    if model is not None:
        check_tensor_parallel(model, args.n_gpus, "--n-gpus")
    report = diagnose(
        log,
        model=model,
        gpu=gpu,
        slo=slo,
        n_gpus=args.n_gpus,
        weight_dtype=args.weight_dtype,
        kv_dtype=args.kv_dtype,
    )
    print(f"# {log.source}")
    print(report)
    _report_rejected(log)
    return 0


def register_diagnose(subparsers) -> None:
    """Add ``diagnose FILE``: the troubleshooting procedure of chapter 7 on a log.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    parser = subparsers.add_parser(
        "diagnose",
        help="walk chapter 7's troubleshooting order over a request log",
        description="Diagnose a request log step by step (workload, failures, memory, "
        "queueing, prefill, decode, saturation) and name the primary bottleneck.",
    )
    _add_log_arguments(parser, "latency targets, e.g. ttft=1s,tpot=20ms (default 500ms, 50ms)")
    parser.add_argument("--model", help="model preset, e.g. llama-3.1-8b (with --gpu)")
    parser.add_argument("--gpu", help="GPU preset, e.g. h100-sxm (with --model)")
    parser.add_argument("--n-gpus", type=int, default=1, help="GPUs (tensor parallel)")
    parser.add_argument("--weight-dtype", default="bf16", choices=list(DTYPE_BYTES))
    parser.add_argument("--kv-dtype", default="bf16", choices=list(DTYPE_BYTES))
    parser.set_defaults(func=_diagnose)


#: Every subcommand's register function; append one to add a subcommand.
COMMANDS: list[Callable] = [register_metrics, register_diagnose]


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m llminfer`` parser with every subcommand in ``COMMANDS``.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    parser = argparse.ArgumentParser(
        prog="python -m llminfer", description="llminfer: why LLM inference is fast or slow"
    )
    subparsers = parser.add_subparsers(dest="command", required=True)
    for register in COMMANDS:
        register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (2 on bad input, message on stderr).

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    args = build_parser().parse_args(argv)  # argparse itself exits 2 on a bad command line
    try:
        return args.func(args)
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
