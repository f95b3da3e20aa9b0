"""Describe a model or a device the presets do not know: from the files that describe it.

A ``Model`` from

- a Hugging Face ``config.json`` (a file, or a folder holding one): ``model_from_hf_config``;
- a GGUF file (llama.cpp's format): ``model_from_gguf`` reads its metadata with the ``gguf``
  package and counts the parameters from its tensors;
- a running ``llama-server``: ``model_from_llama_props`` asks its ``/props`` for
  ``model_path`` and reads that GGUF (the server must run on this machine); the same
  ``/props`` (``llama_props``) also says how many slots it runs (``llama_slots``);

the format a GGUF's weights are stored in (``gguf_weight_format``: ``Q4_K_M`` counts as int4,
``F32`` as fp32), which ``weight_format_of`` finds for ``--model``;

and a ``GPU`` from a spec file (``gpu_from_spec``: JSON, or TOML on Python ≥ 3.11) whose keys are
the ``GPU`` dataclass fields in base units — bytes, bytes/s, FLOP/s::

    {"name": "my-accelerator", "memory_bytes": 25769803776, "memory_bandwidth": 8.0e11,
     "bf16_flops": 1.2e14, "fp32_flops": 3.0e13}

(``name``, ``memory_bytes`` and ``memory_bandwidth`` are required) or measured on this machine
(``measure``: ``llminfer.specs.hardware.measure_machine``). ``resolve_model`` and
``resolve_gpu`` take what the command line's ``--model`` and ``--gpu`` are given and fall back
to the presets.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from llminfer.specs.hardware import GPU, measure_machine
from llminfer.specs.models import Model, llama_param_count

_GPU_FIELDS = tuple(f.name for f in dataclasses.fields(GPU) if f.name != "step_model")


def _int(config: dict, *keys: str, default=None):
    for key in keys:
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return default


def model_from_hf_config(config: dict | str | Path, name: str | None = None) -> Model:
    """A ``Model`` from a Hugging Face ``config.json`` (a dict, the file, or its folder).

    Read: ``num_hidden_layers``, ``hidden_size``, ``num_attention_heads``,
    ``num_key_value_heads`` (default: the attention heads), ``head_dim``,
    ``intermediate_size``, ``vocab_size``, ``max_position_embeddings``, ``tie_word_embeddings``;
    a sliding window (``sliding_window``, on every layer unless ``layer_types`` names the
    ``sliding_attention`` ones, off when ``use_sliding_window`` is false); experts
    (``num_local_experts`` or ``n_routed_experts`` with ``num_experts_per_tok``, expert MLP
    width ``moe_intermediate_size``); MLA (``kv_lora_rank``, ``qk_rope_head_dim``). A model
    whose config nests the text model (``text_config``) is read from that. Parameters are the
    Llama-style count (``llama_param_count``; for experts, every expert's MLP counted and the
    active ones separately) — an estimate for other architectures.

    Introduced in: notebooks/04_memory_budget.ipynb
    """
    source = "config dict"
    if not isinstance(config, dict):
        path = Path(config)
        if path.is_dir():
            path = path / "config.json"
        try:
            config = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ValueError(f"{path}: not a readable config.json ({exc})") from None
        source = str(path)
        if not isinstance(config, dict):
            raise ValueError(f"{path}: a config.json holds one JSON object")
    if isinstance(config.get("text_config"), dict):
        config = {**config, **config["text_config"]}
    missing = [
        k
        for k in ("num_hidden_layers", "hidden_size", "num_attention_heads")
        if _int(config, k) is None
    ]
    if missing:
        raise ValueError(
            f"{source}: a Hugging Face config.json needs {', '.join(missing)} (integers)"
        )
    n_layers, hidden = config["num_hidden_layers"], config["hidden_size"]
    n_heads = config["num_attention_heads"]
    n_kv = _int(config, "num_key_value_heads", default=n_heads)
    head_dim = _int(config, "head_dim", default=hidden // n_heads)
    intermediate = _int(config, "intermediate_size", default=4 * hidden)
    vocab = _int(config, "vocab_size", default=32000)
    window = _int(config, "sliding_window")
    if config.get("use_sliding_window") is False:
        window = None
    n_sliding = 0
    if window is not None:
        types = config.get("layer_types")
        n_sliding = (
            sum(t == "sliding_attention" for t in types) if isinstance(types, list) else n_layers
        )
        window = window if n_sliding else None
    n_experts = _int(config, "num_local_experts", "n_routed_experts", "num_experts")
    per_token = _int(config, "num_experts_per_tok") if n_experts else None
    tied = bool(config.get("tie_word_embeddings", False))
    params = active = None
    if n_experts and per_token:
        expert = _int(config, "moe_intermediate_size", default=intermediate)
        dense = llama_param_count(n_layers, hidden, n_heads, n_kv, head_dim, 1, vocab, tied)
        dense -= n_layers * 3 * hidden  # the stand-in 1-wide MLP
        params = dense + n_layers * n_experts * 3 * hidden * expert
        active = dense + n_layers * per_token * 3 * hidden * expert
    else:
        n_experts = per_token = None
        params = llama_param_count(
            n_layers, hidden, n_heads, n_kv, head_dim, intermediate, vocab, tied
        )
    return Model(
        name=name or str(config.get("_name_or_path") or config.get("model_type") or source),
        n_layers=n_layers,
        hidden_size=hidden,
        n_heads=n_heads,
        n_kv_heads=n_kv,
        head_dim=head_dim,
        intermediate_size=intermediate,
        vocab_size=vocab,
        max_context=_int(config, "max_position_embeddings", default=4096),
        n_params=params,
        n_active_params=active,
        sliding_window=window,
        n_sliding_layers=n_sliding,
        kv_lora_rank=_int(config, "kv_lora_rank"),
        qk_rope_head_dim=_int(config, "qk_rope_head_dim") if _int(config, "kv_lora_rank") else None,
        n_experts=n_experts,
        experts_per_token=per_token,
        source=source,
    )


def _gguf_reader(path: Path):
    """A ``gguf.GGUFReader`` over ``path``; ValueError when gguf is missing or the file is not
    a readable GGUF."""
    try:
        from gguf import GGUFReader
    except ImportError:  # pragma: no cover - gguf is in requirements.txt
        raise ValueError("reading a GGUF file needs the gguf package (pip install gguf)") from None
    try:
        return GGUFReader(str(path))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: not a readable GGUF file ({exc})") from None


def model_from_gguf(path: str | Path, name: str | None = None) -> Model:
    """A ``Model`` from a GGUF file's metadata (``{arch}.block_count``, ``.embedding_length``,
    ``.attention.head_count``, ``.attention.head_count_kv``, ``.attention.key_length``,
    ``.feed_forward_length``, ``.context_length``, ``.expert_count``,
    ``.expert_used_count``; the vocabulary from ``tokenizer.ggml.tokens``); ``n_params`` is
    the exact element count of its tensors. Needs the ``gguf`` package.

    Introduced in: notebooks/04_memory_budget.ipynb
    """
    path = Path(path)
    reader = _gguf_reader(path)

    def field(key: str):
        item = reader.fields.get(key)
        return None if item is None else item.contents()

    arch = field("general.architecture")
    if not isinstance(arch, str):
        raise ValueError(f"{path}: GGUF without general.architecture")

    def number(key: str, default=None):
        value = field(f"{arch}.{key}")
        if isinstance(value, list):  # per-layer values: the largest
            value = max(value) if value else None
        return int(value) if isinstance(value, (int, float)) else default

    missing = [
        key
        for key in ("block_count", "embedding_length", "attention.head_count")
        if number(key) is None
    ]
    if missing:
        raise ValueError(f"{path}: GGUF lacks {', '.join(f'{arch}.{k}' for k in missing)}")
    hidden, n_heads = number("embedding_length"), number("attention.head_count")
    tokens = field("tokenizer.ggml.tokens")
    n_experts = number("expert_count") or None
    per_token = number("expert_used_count") if n_experts else None
    n_params = int(sum(int(t.n_elements) for t in reader.tensors))
    return Model(
        name=name or str(field("general.name") or path.stem),
        n_layers=number("block_count"),
        hidden_size=hidden,
        n_heads=n_heads,
        n_kv_heads=number("attention.head_count_kv", n_heads),
        head_dim=number("attention.key_length", hidden // n_heads),
        intermediate_size=number("feed_forward_length", 4 * hidden),
        vocab_size=len(tokens) if isinstance(tokens, list) and tokens else 32000,
        max_context=number("context_length", 4096),
        n_params=n_params,
        n_active_params=None if n_experts else n_params,
        n_experts=n_experts if per_token else None,
        experts_per_token=per_token or None,
        source=f"{path} (GGUF, {arch})",
    )


def gguf_weight_format(path: str | Path) -> tuple[str, str]:
    """The number format a GGUF file's weights are stored in, as ``(dtype, ftype)``: ``ftype``
    is llama.cpp's name for the file (``general.file_type``: ``F32``, ``F16``, ``Q8_0``,
    ``Q4_K_M``, …; by the tensors' own types when the file names none) and ``dtype`` the
    ``llminfer.units.DTYPE_BYTES`` key with the nearest bytes per weight, from the tensors'
    bytes over their elements (the block scales included): ≥ 3 bytes ``fp32``, ≥ 1.5 bytes
    ``bf16`` (``fp16`` for an F16 file), ≥ 0.78 bytes (Q6_K's 6.56 bits) ``int8``, else
    ``int4`` (Q5_K_M's 5.5 bits included). Needs the ``gguf`` package.

    Introduced in: notebooks/04_memory_budget.ipynb
    """
    path = Path(path)
    reader = _gguf_reader(path)
    from gguf import LlamaFileType  # present: _gguf_reader imported gguf

    elements = sum(int(t.n_elements) for t in reader.tensors)
    if elements == 0:
        raise ValueError(f"{path}: a GGUF without tensors has no weight format")
    bytes_per_weight = sum(int(t.n_bytes) for t in reader.tensors) / elements
    field = reader.fields.get("general.file_type")
    code = None if field is None else field.contents()
    try:
        ftype = LlamaFileType(int(code)).name.removeprefix("MOSTLY_").removeprefix("ALL_")
    except (TypeError, ValueError):  # not named: the type most of the bytes are in
        by_type: dict[str, int] = {}
        for t in reader.tensors:
            by_type[t.tensor_type.name] = by_type.get(t.tensor_type.name, 0) + int(t.n_bytes)
        ftype = max(by_type, key=by_type.get)
    if bytes_per_weight >= 3:
        dtype = "fp32"
    elif bytes_per_weight >= 1.5:
        dtype = "fp16" if ftype == "F16" else "bf16"
    elif bytes_per_weight >= 0.78:
        dtype = "int8"
    else:
        dtype = "int4"
    return dtype, ftype


def weight_format_of(text: str) -> tuple[str, str, str] | None:
    """``--model``'s weight format where the model's file says it, as ``(dtype, ftype, file)``
    (``gguf_weight_format``): a ``.gguf`` file, or a llama-server URL whose ``/props`` names
    its GGUF on this machine; None for a preset or a ``config.json`` (they name no stored
    format, so ``--weight-dtype``'s bf16 stands).

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    if text.startswith(("http://", "https://")):
        _, props = llama_props(text)
        path = props.get("model_path")
        if not isinstance(path, str) or not Path(path).is_file():
            return None
    elif _is_gguf(Path(text)):
        path = text
    else:
        return None
    return (*gguf_weight_format(path), str(path))


def llama_props(url: str, timeout_s: float = 10.0) -> tuple[str, dict]:
    """A running ``llama-server``'s ``/props`` (``url`` is that address, the server's base or its
    ``/v1`` base) as ``(props_url, props)``: ``model_path``, ``total_slots`` (its
    ``--parallel``), ``model_alias``, …. ValueError names the address when it cannot be read or
    is not a JSON object.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    import urllib.request

    props_url = (
        url
        if url.rstrip("/").endswith("/props")
        else url.rstrip("/").removesuffix("/v1") + "/props"
    )
    try:
        with urllib.request.urlopen(props_url, timeout=timeout_s) as reply:
            props = json.loads(reply.read().decode("utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"--model {url}: could not read {props_url} ({exc})") from None
    if not isinstance(props, dict):
        raise ValueError(f"{props_url} is not a JSON object (is it a llama-server's /props?)")
    return props_url, props


def llama_slots(props: dict) -> int | None:
    """The slots (concurrent sequences, ``--parallel``) a llama-server's ``/props`` reports as
    ``total_slots``, or None when it names none (an older build, another server).

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    slots = props.get("total_slots")
    valid = isinstance(slots, int) and not isinstance(slots, bool) and slots > 0
    return slots if valid else None


def model_from_llama_props(url: str, timeout_s: float = 10.0) -> Model:
    """The model a running ``llama-server`` serves: its ``/props`` (``llama_props``; ``url`` is
    that address or the server's base) names ``model_path``, read with ``model_from_gguf`` — so
    the server must run on this machine (or the file be reachable at the same path). The name
    is the server's ``--alias`` when it was given one, else the GGUF's ``general.name``.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    props_url, props = llama_props(url, timeout_s)
    path = props.get("model_path")
    if not isinstance(path, str) or not path:
        raise ValueError(f"{props_url} names no model_path (is it a llama-server's /props?)")
    if not Path(path).is_file():
        raise ValueError(
            f"{props_url} serves {path}, which is not a file on this machine: give the GGUF "
            "file or its config.json to --model instead"
        )
    alias = props.get("model_alias")  # the path itself unless --alias was given
    named = isinstance(alias, str) and alias and alias != path
    return model_from_gguf(path, name=alias if named else None)


def gpu_from_spec(path: str | Path) -> GPU:
    """A ``GPU`` from a JSON or TOML file of ``GPU`` fields in base units (see the module
    docstring; ``step_model`` cannot be given). Unknown keys are refused, naming the known ones.

    Introduced in: notebooks/04_memory_budget.ipynb
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the GPU spec ({exc})") from None
    try:
        if path.suffix.lower() == ".toml":
            try:
                import tomllib
            except ImportError:  # Python 3.10
                raise ValueError(f"{path}: TOML needs Python >= 3.11; write it as JSON") from None
            spec = tomllib.loads(text)
        else:
            spec = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{path}: not valid {path.suffix.lstrip('.') or 'JSON'} ({exc})") from None
    if not isinstance(spec, dict):
        raise ValueError(f"{path}: a GPU spec is one object of GPU fields")
    unknown = sorted(set(spec) - set(_GPU_FIELDS))
    if unknown:
        raise ValueError(
            f"{path}: unknown GPU field(s) {', '.join(unknown)}; known: {', '.join(_GPU_FIELDS)} "
            "(bytes, bytes/s, FLOP/s)"
        )
    try:
        return GPU(**{"source": str(path), **spec})
    except TypeError as exc:
        raise ValueError(f"{path}: {exc}") from None
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None


def _is_gguf(path: Path) -> bool:
    if path.suffix.lower() == ".gguf":
        return True
    if not path.is_file():
        return False
    with path.open("rb") as file:  # a GGUF of many GB: its first 4 bytes only
        return file.read(4) == b"GGUF"


def resolve_model(text: str) -> Model:
    """``--model``: a llama-server URL (``http://…``, its ``/props`` is read), a ``.gguf``
    file, a ``config.json`` (or a folder with one), else a preset name.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    from llminfer.specs.presets import get_model

    if text.startswith(("http://", "https://")):
        return model_from_llama_props(text)
    path = Path(text)
    if _is_gguf(path):
        return model_from_gguf(path)
    if path.is_file() or (path.is_dir() and (path / "config.json").is_file()):
        return model_from_hf_config(path)
    return get_model(text)


def resolve_gpu(text: str) -> GPU:
    """``--gpu``: ``measure`` (this machine, ``measure_machine``), a JSON/TOML spec file, else
    a preset name.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    from llminfer.specs.presets import get_gpu

    if text.strip().lower() == "measure":
        return measure_machine()
    if Path(text).is_file():
        return gpu_from_spec(text)
    return get_gpu(text)
