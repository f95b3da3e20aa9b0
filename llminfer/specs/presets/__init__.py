"""Reference data the package ships: real model architectures and GPUs.

``models.csv`` and ``gpus.csv`` sit beside this file; each row keeps the source it was taken
from (model configs, papers, vendor data sheets). GPU figures are stored in data-sheet units
(GB/s, TFLOP/s dense, KiB of shared memory per SM) and converted to bytes/s and FLOP/s on
load. Memory is stored in bytes as the driver reports it (``nvidia-smi``'s total, e.g. 81,559 MiB
for an "80 GB" H100), with its own source column; ``marketed_memory_gb`` keeps the data sheet's
label.
"""

from __future__ import annotations

import csv
import difflib
from functools import cache
from importlib import resources

from llminfer.specs.hardware import GPU
from llminfer.specs.models import Model

_MODEL_INT_FIELDS = (
    "n_layers",
    "hidden_size",
    "n_heads",
    "n_kv_heads",
    "head_dim",
    "intermediate_size",
    "vocab_size",
    "max_context",
    "n_params",
    "n_active_params",
    "sliding_window",
    "n_sliding_layers",
    "kv_lora_rank",
    "qk_rope_head_dim",
    "n_experts",
    "experts_per_token",
    "moe_intermediate_size",
    "n_dense_layers",
    "n_shared_experts",
    "n_mtp_layers",
)
#: Integer columns whose empty cell means 0 (a dense model has no dense-layer count to give).
_MODEL_ZERO_DEFAULTS = ("n_sliding_layers", "n_dense_layers", "n_shared_experts", "n_mtp_layers")
# CSV column → (GPU field, factor to base units)
_GPU_COLUMNS = {
    "memory_bytes": ("memory_bytes", 1),
    "marketed_memory_gb": ("marketed_memory_bytes", 1e9),
    "memory_bandwidth_gb_s": ("memory_bandwidth", 1e9),
    "bf16_tflops": ("bf16_flops", 1e12),
    "fp16_tflops": ("fp16_flops", 1e12),
    "fp8_tflops": ("fp8_flops", 1e12),
    "int8_tops": ("int8_flops", 1e12),
    "fp4_tflops": ("fp4_flops", 1e12),
    "fp32_tflops": ("fp32_flops", 1e12),
    "interconnect_gb_s_per_direction": ("interconnect_bandwidth", 1e9),
    "pcie_gb_s_per_direction": ("pcie_bandwidth", 1e9),
    "shared_memory_per_sm_kib": ("shared_memory_per_sm", 1024),
}


def _read_rows(filename: str) -> list[dict[str, str]]:
    text = resources.files(__package__).joinpath(filename).read_text(encoding="utf-8")
    return list(csv.DictReader(text.splitlines()))


def _names(row: dict[str, str]) -> list[str]:
    names = [row["key"], row["name"], *row["aliases"].split(";"), row.get("hf_id", "")]
    return [n.strip().lower() for n in names if n.strip()]


def _index(rows: list[dict[str, str]]) -> dict[str, dict[str, str]]:
    return {name: row for row in rows for name in _names(row)}


def _lookup(kind: str, name: str, index: dict[str, dict[str, str]], keys: list[str]):
    if not isinstance(name, str):
        raise ValueError(f"name={name!r} must be a string naming a {kind} preset")
    row = index.get(name.strip().lower())
    if row is None:
        close = difflib.get_close_matches(name.strip().lower(), keys, n=3, cutoff=0.4)
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else "."
        raise ValueError(f"name={name!r} is not a known {kind}{hint} Known: {', '.join(keys)}")
    return row


@cache
def _model_rows() -> tuple[list[dict[str, str]], dict[str, dict[str, str]]]:
    rows = _read_rows("models.csv")
    return rows, _index(rows)


@cache
def _gpu_rows() -> tuple[list[dict[str, str]], dict[str, dict[str, str]]]:
    rows = _read_rows("gpus.csv")
    return rows, _index(rows)


@cache
def _model_from_row(key: str) -> Model:
    row = _model_rows()[1][key]
    values = {f: (int(row[f]) if row[f] else None) for f in _MODEL_INT_FIELDS}
    for name in _MODEL_ZERO_DEFAULTS:
        values[name] = values[name] or 0
    return Model(name=row["name"], source=row["source"], **values)


@cache
def _gpu_from_row(key: str) -> GPU:
    row = _gpu_rows()[1][key]
    values = {
        field: (float(row[column]) * factor if row[column] else None)
        for column, (field, factor) in _GPU_COLUMNS.items()
    }
    values["sm_count"] = int(row["sm_count"]) if row["sm_count"] else None
    source = f"{row['source']} ; memory: {row['memory_source']}"
    return GPU(name=row["name"], source=source, **values)


def list_models() -> list[str]:
    """Preset model names (lower case keys accepted by ``get_model``).

    Introduced in: notebooks/04_memory_budget.ipynb
    """
    return [row["key"] for row in _model_rows()[0]]


def get_model(name: str) -> Model:
    """The preset ``Model`` called ``name`` (case-insensitive; key, display name or HF id).

    An unknown name raises ValueError suggesting the closest preset names.

    Introduced in: notebooks/04_memory_budget.ipynb
    """
    row = _lookup("model", name, _model_rows()[1], list_models())
    return _model_from_row(row["key"])


def list_gpus() -> list[str]:
    """Preset GPU names (lower case keys accepted by ``get_gpu``).

    Introduced in: notebooks/04_memory_budget.ipynb
    """
    return [row["key"] for row in _gpu_rows()[0]]


def get_gpu(name: str) -> GPU:
    """The preset ``GPU`` called ``name`` (case-insensitive, e.g. ``"h100-sxm"``).

    An unknown name raises ValueError suggesting the closest preset names.

    Introduced in: notebooks/04_memory_budget.ipynb
    """
    row = _lookup("GPU", name, _gpu_rows()[1], list_gpus())
    return _gpu_from_row(row["key"])


def model_table() -> list[dict[str, str]]:
    """The raw rows of models.csv (strings), with notes and sources, for display.

    Introduced in: notebooks/04_memory_budget.ipynb
    """
    return [dict(row) for row in _model_rows()[0]]


def gpu_table() -> list[dict[str, str]]:
    """The raw rows of gpus.csv (strings, data-sheet units), for display.

    Introduced in: notebooks/04_memory_budget.ipynb
    """
    return [dict(row) for row in _gpu_rows()[0]]
