"""Command line: ``python -m llminfer metrics FILE``, ``diagnose FILE``, ``models``, ``gpus``.

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
    log = read_requests(args.file, format=args.format, on_error=args.on_error)
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
    parser.add_argument("file", help="the log: .csv, .json or .jsonl")
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
    parser.set_defaults(func=_metrics)


#: ``diagnose``'s exit status: what a script or CI job can test without parsing the report.
DIAGNOSE_EXIT = {"ok": 0, "problem": 1, "bad input": 2, "not_enough_data": 3}
_ENGINE_KEYS = {
    "chunked_prefill": bool,
    "prefix_caching": bool,
    "max_num_seqs": int,
    "max_num_batched_tokens": int,
    "chunk": int,
    "gpu_memory_utilization": float,
    "block_size": int,
    "policy": str,
}
_TRUE = {"on": True, "true": True, "1": True, "yes": True}
_FALSE = {"off": False, "false": False, "0": False, "no": False}


def parse_engine(text: str):
    """``"chunked_prefill=on,chunk=2048,max_num_seqs=256,gpu_memory_utilization=0.9"`` → an
    ``EngineConfig`` (names as in vLLM without the dashes; ``chunk`` is short for
    ``max_num_batched_tokens``; booleans on/off). Settings not named keep vLLM V0-like values
    (chunked prefill and prefix caching off, 256 sequences, 8,192 tokens per step).

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    from llminfer.simulate import EngineConfig

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
        values["max_num_batched_tokens" if name == "chunk" else name] = parsed
    try:
        return EngineConfig(**values)
    except ValueError as exc:
        raise ValueError(f"--engine {text!r}: {exc}") from None


def _diagnose(args: argparse.Namespace) -> int:
    from llminfer.diagnose import diagnose
    from llminfer.presets import get_gpu, get_model
    from llminfer.scrape import read_scrape

    slo = parse_slo(args.slo) if args.slo else None
    engine = parse_engine(args.engine) if args.engine is not None else None
    model = get_model(args.model) if args.model else None
    gpu = get_gpu(args.gpu) if args.gpu else None
    if (model is None) != (gpu is None):
        raise ValueError("--model and --gpu go together: give both or neither")
    for name in ("n_gpus", "replicas"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} {getattr(args, name)} must be ≥ 1")
    if model is not None:
        check_tensor_parallel(model, args.n_gpus, "--n-gpus")
    server = [read_scrape(path) for path in args.metrics] if args.metrics else None
    log = read_requests(args.file, format=args.format, on_error=args.on_error)
    report = diagnose(
        log,
        model=model,
        gpu=gpu,
        engine=engine,
        slo=slo,
        n_gpus=args.n_gpus,
        replicas=args.replicas,
        weight_dtype=args.weight_dtype,
        kv_dtype=args.kv_dtype,
        server=server,
    )
    if args.json:
        print(json.dumps({"source": str(log.source), **report.to_dict()}, indent=2))
    else:
        print(f"# {log.source}")
        print(report)
    _report_rejected(log)
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
    parser.add_argument("--model", help="model preset, e.g. llama-3.1-8b (with --gpu; see models)")
    parser.add_argument("--gpu", help="GPU preset, e.g. h100-sxm (with --model; see gpus)")
    parser.add_argument(
        "--n-gpus", "--tp", dest="n_gpus", type=int, default=1,
        help="GPUs per replica (tensor parallelism)",
    )  # fmt: skip
    parser.add_argument("--replicas", type=int, default=1, help="replicas behind a balancer")
    parser.add_argument("--weight-dtype", default="bf16", choices=list(DTYPE_BYTES))
    parser.add_argument("--kv-dtype", default="bf16", choices=list(DTYPE_BYTES))
    parser.add_argument(
        "--engine",
        help="engine settings, e.g. chunked_prefill=on,chunk=2048,max_num_seqs=256,"
        "gpu_memory_utilization=0.9 (unknown if omitted: suggestions then say 'if')",
    )
    parser.add_argument(
        "--metrics",
        action="append",
        metavar="SCRAPE",
        help="a saved vLLM /metrics scrape (curl -s HOST:8000/metrics > scrape.txt); give it "
        "twice (before and after the run) to count preemptions during the run",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(func=_diagnose)


def _presets(args: argparse.Namespace) -> int:
    import dataclasses

    from llminfer.presets import get_gpu, get_model, list_gpus, list_models

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
COMMANDS: list[Callable] = [register_metrics, register_diagnose, register_presets]


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
