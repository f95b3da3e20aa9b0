"""A real third-party server to measure: llama.cpp's ``llama-server`` with a tiny random model.

``scripts/build_llama_server.sh`` (``make llama-server``) builds a pinned ``llama-server``
from the llama.cpp sources vendored in the ``llama-cpp-python`` 0.3.36 sdist into a cache
outside the repository (``~/.cache/llminfer/llama.cpp-0.3.36``); ``find_llama_server`` finds
it. ``write_tiny_gguf`` writes a small Llama (2 layers, hidden 64 by default) with random
weights and a working SentencePiece-style vocabulary with the ``gguf`` package — every prompt
word of the load generator (``llminfer.bench.prompts.WORDS``) is one token, so a prompt of N
words is N tokens plus llama.cpp's BOS token, and the model only ever generates whole words
(its output rows for byte, control and partial-word tokens are zero; the others are random,
so one of them always wins). Its chat template adds two words (``user … assistant``), as a
real template adds its own tokens. ``LlamaServer`` starts it on 127.0.0.1, bounded in time,
and stops it by its PID.

Nothing here is a model of anything: the answers are random words. The point is a server
nobody here wrote — its HTTP stack, its keep-alive, its slots and queue, its prompt cache,
its ``/metrics`` — measured by the same client as any other.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import pandas as pd

from llminfer.bench.prompts import WORDS

#: The llama-cpp-python release whose vendored llama.cpp ``scripts/build_llama_server.sh`` builds.
LLAMA_CPP_PYTHON_VERSION = "0.3.36"
#: Words the chat template adds around a message (one token each).
TEMPLATE_WORDS = ("user", "assistant")
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] }} {{ message['content'] }} {% endfor %}"
    "assistant"
)
_SPACE = "\u2581"  # SentencePiece's "▁": a space before a word


def llama_server_path() -> Path:
    """Where ``scripts/build_llama_server.sh`` puts the binary (``LLAMA_CACHE`` or
    ``$XDG_CACHE_HOME``/``~/.cache`` + ``llminfer/llama.cpp-VERSION``), built or not.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    cache = os.environ.get("LLAMA_CACHE")
    if not cache:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        cache = str(Path(base) / "llminfer" / f"llama.cpp-{LLAMA_CPP_PYTHON_VERSION}")
    return Path(cache) / "build" / "bin" / "llama-server"


def find_llama_server() -> Path | None:
    """The built ``llama-server`` (``LLAMA_SERVER`` if set, else ``llama_server_path()``), or
    None when it is not there (build it with ``make llama-server``).

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    path = Path(os.environ.get("LLAMA_SERVER") or llama_server_path())
    return path if path.is_file() and os.access(path, os.X_OK) else None


def tiny_vocab() -> tuple[list[str], list[float], list[int], int]:
    """(tokens, scores, token types, number of control/byte tokens before the words): ``<unk>``,
    ``<s>``, ``</s>``, the 256 byte tokens, ``▁``, then every prompt word and template word as
    ``▁word`` with each of its prefixes (``▁t``, ``▁th``, ``▁the``): llama.cpp's SentencePiece
    tokenizer joins a word from its characters two pieces at a time, and only into pieces that
    are in the vocabulary.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    from gguf import TokenType

    tokens = ["<unk>", "<s>", "</s>", *(f"<0x{b:02X}>" for b in range(256)), _SPACE]
    types = [TokenType.UNKNOWN, TokenType.CONTROL, TokenType.CONTROL]
    types += [TokenType.BYTE] * 256 + [TokenType.NORMAL]
    head = len(tokens)
    seen = set(tokens)
    for word in (*WORDS, *TEMPLATE_WORDS):
        piece = _SPACE + word
        for end in range(2, len(piece) + 1):
            if piece[:end] not in seen:
                seen.add(piece[:end])
                tokens.append(piece[:end])
                types.append(TokenType.NORMAL)
    # longer pieces first when two merges compete (they never do here: every piece starts a word)
    scores = [0.0] * head + [-float(i) for i in range(len(tokens) - head)]
    return tokens, scores, [int(t) for t in types], head


def write_tiny_gguf(
    path: str | Path,
    n_layers: int = 2,
    hidden: int = 64,
    n_heads: int = 4,
    n_kv_heads: int = 2,
    intermediate: int = 128,
    context: int = 4096,
    seed: int = 0,
) -> Path:
    """Write a random-weight Llama in GGUF (F32) that ``llama-server`` loads, with the vocabulary
    of ``tiny_vocab`` and ``CHAT_TEMPLATE``; returns ``path``. A fraction of a megabyte.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    import gguf

    path = Path(path)
    tokens, scores, types, _ = tiny_vocab()
    whole = {_SPACE + w for w in WORDS}  # the only tokens the model may generate
    rng = np.random.default_rng(seed)
    head_dim = hidden // n_heads

    def weight(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.5 / np.sqrt(shape[-1])).astype(np.float32)

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("llminfer-tiny-random")
    writer.add_context_length(context)
    writer.add_embedding_length(hidden)
    writer.add_block_count(n_layers)
    writer.add_feed_forward_length(intermediate)
    writer.add_head_count(n_heads)
    writer.add_head_count_kv(n_kv_heads)
    writer.add_rope_dimension_count(head_dim)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    writer.add_chat_template(CHAT_TEMPLATE)
    vocab = len(tokens)
    writer.add_tensor("token_embd.weight", weight(vocab, hidden))
    writer.add_tensor("output_norm.weight", np.ones(hidden, dtype=np.float32))
    output = weight(vocab, hidden)
    output[[i for i, t in enumerate(tokens) if t not in whole]] = 0.0
    writer.add_tensor("output.weight", output)
    for layer in range(n_layers):
        name = f"blk.{layer}."
        writer.add_tensor(name + "attn_norm.weight", np.ones(hidden, dtype=np.float32))
        writer.add_tensor(name + "attn_q.weight", weight(n_heads * head_dim, hidden))
        writer.add_tensor(name + "attn_k.weight", weight(n_kv_heads * head_dim, hidden))
        writer.add_tensor(name + "attn_v.weight", weight(n_kv_heads * head_dim, hidden))
        writer.add_tensor(name + "attn_output.weight", weight(hidden, n_heads * head_dim))
        writer.add_tensor(name + "ffn_norm.weight", np.ones(hidden, dtype=np.float32))
        writer.add_tensor(name + "ffn_gate.weight", weight(intermediate, hidden))
        writer.add_tensor(name + "ffn_up.weight", weight(intermediate, hidden))
        writer.add_tensor(name + "ffn_down.weight", weight(hidden, intermediate))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LlamaServer:
    """``llama-server`` in a child process on 127.0.0.1: ``.url`` (``http://127.0.0.1:PORT/v1``)
    once ``/health`` answers 200, ``.base`` without ``/v1``, ``.get(path)`` for ``/props``,
    ``/slots`` or ``/metrics``, ``.stop()`` by PID. ``args`` go to the server as they are
    (``--parallel 8`` is the default here, with ``--metrics``). ``threads=1``: on the shared
    2-core machine the test sweep took 0.3–13 s with 2 compute threads as the load of other
    work changed, 0.2–0.7 s with 1 (at a lower load: not compared under the same load). The
    server is killed after
    ``shutdown_after`` seconds however the caller ends. A context manager.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """

    def __init__(
        self,
        model: str | Path,
        args: list[str] | None = None,
        binary: str | Path | None = None,
        parallel: int = 8,
        context: int = 8192,
        threads: int = 1,
        shutdown_after: float = 600.0,
        ready_s: float = 60.0,
    ) -> None:
        binary = binary or find_llama_server()
        if binary is None:
            raise FileNotFoundError(
                f"llama-server is not built ({llama_server_path()} is missing): make llama-server"
            )
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.url = self.base + "/v1"
        command = [str(binary), "-m", str(model), "--host", "127.0.0.1"]
        command += ["--port", str(self.port), "--parallel", str(parallel), "-c", str(context)]
        command += ["--threads", str(threads), "--metrics"]
        command += ["--no-warmup", *(args or [])]
        self.command = command
        self._lines: collections.deque[str] = collections.deque(maxlen=200)
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
        )
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()
        self._timer = threading.Timer(shutdown_after, self.stop)
        self._timer.daemon = True
        self._timer.start()
        try:
            self._wait_ready(ready_s)
        except BaseException:
            self.stop()
            raise

    def _drain(self) -> None:
        for line in self.process.stdout:
            self._lines.append(line)

    def _wait_ready(self, ready_s: float) -> None:
        deadline = time.monotonic() + ready_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            try:
                with urllib.request.urlopen(self.base + "/health", timeout=2) as reply:
                    if reply.status == 200:
                        return
            except (OSError, ValueError):
                pass
            time.sleep(0.1)
        raise RuntimeError(
            f"llama-server did not become ready in {ready_s:.0f} s (exit {self.process.poll()}):\n"
            + self.output()[-3000:]
        )

    def output(self) -> str:
        """What the server printed (its last 200 lines)."""
        return "".join(list(self._lines))

    def get(self, path: str, timeout_s: float = 10.0):
        """GET ``base + path``: parsed JSON, or the text for ``/metrics``."""
        with urllib.request.urlopen(self.base + path, timeout=timeout_s) as reply:
            body = reply.read().decode("utf-8")
        return body if path.startswith("/metrics") else json.loads(body)

    def stop(self, timeout_s: float = 10.0) -> int:
        """SIGTERM to the server's PID, then SIGKILL if it has not ended; its exit code."""
        self._timer.cancel()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def __enter__(self) -> LlamaServer:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


__all__ = [
    "CHAT_TEMPLATE",
    "LlamaServer",
    "find_llama_server",
    "llama_server_path",
    "tiny_vocab",
    "write_tiny_gguf",
]


#: ``llama-batched-bench``'s table columns (markdown header → name here, units in the name).
BATCHED_BENCH_COLUMNS = {
    "PP": "pp",
    "TG": "tg",
    "B": "b",
    "N_KV": "n_kv",
    "T_PP s": "t_pp_s",
    "S_PP t/s": "s_pp_tps",
    "T_TG s": "t_tg_s",
    "S_TG t/s": "s_tg_tps",
    "T s": "t_s",
    "S t/s": "s_tps",
}
#: The same columns as ``--output-format jsonl`` names them.
_BATCHED_BENCH_JSON = {
    "pp": "pp",
    "tg": "tg",
    "pl": "b",
    "n_kv": "n_kv",
    "t_pp": "t_pp_s",
    "speed_pp": "s_pp_tps",
    "t_tg": "t_tg_s",
    "speed_tg": "s_tg_tps",
    "t": "t_s",
    "speed": "s_tps",
}
#: Run settings that batched-bench prints (markdown: its ``main: ...`` line; JSONL: per row).
_BATCHED_BENCH_SETTINGS = ("n_kv_max", "n_batch", "n_ubatch", "is_pp_shared", "n_threads")


def read_batched_bench(source: str | Path) -> pd.DataFrame:
    """``llama-batched-bench``'s results as a table: a path or the text itself, in its default
    markdown output or ``--output-format jsonl``. One row per (PP, TG, B): ``pp`` prompt tokens
    per sequence, ``tg`` generated tokens per sequence, ``b`` parallel sequences, ``n_kv`` KV
    cells used, ``t_pp_s``/``t_tg_s``/``t_s`` seconds of the prompt phase (all B prompts),
    the generation phase (TG steps of B tokens) and both, ``s_pp_tps``/``s_tg_tps``/``s_tps``
    tokens per second (from markdown, the times are recomputed from the speeds, which it
    prints to more digits); plus ``n_batch``, ``n_ubatch``, ``n_kv_max``, ``is_pp_shared`` and
    ``n_threads`` where the output states them. Raises ValueError when no result row is found.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    text = str(source)
    if "\n" not in text and Path(text).is_file():
        text = Path(text).read_text()
    rows, settings = [], {}
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            record = json.loads(line)
            row = {new: record[old] for old, new in _BATCHED_BENCH_JSON.items() if old in record}
            row.update({k: record[k] for k in _BATCHED_BENCH_SETTINGS if k in record})
            rows.append(row)
        elif "n_kv_max" in line and "=" in line:  # "main: n_kv_max = 4096, n_batch = 2048, ..."
            for part in line.split(":", 1)[-1].split(","):
                key, _, value = part.partition("=")
                if key.strip() in _BATCHED_BENCH_SETTINGS and value.strip().lstrip("-").isdigit():
                    settings[key.strip()] = int(value)
        elif line.startswith("|") and not set(line) <= set("|-: "):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if cells[0] == "PP":
                header = [BATCHED_BENCH_COLUMNS.get(c, c) for c in cells]
                continue
            row = dict(zip(header, (float(c) for c in cells), strict=True))
            # the markdown prints seconds to 3 decimals (a 1.2 ms prompt reads 0.001) and the
            # speeds to 2: the times are recomputed from the speeds, tokens ÷ tokens/s
            prompts = row["pp"] * (1 if settings.get("is_pp_shared") else row["b"])
            for t, speed, tokens in (
                ("t_pp_s", "s_pp_tps", prompts),
                ("t_tg_s", "s_tg_tps", row["b"] * row["tg"]),
            ):
                if row.get(speed, 0) > 0:
                    row[t] = tokens / row[speed]
            rows.append(row)
    if not rows:
        raise ValueError("no llama-batched-bench result rows (a '| PP | TG | B |' table or JSONL)")
    table = pd.DataFrame(rows)
    for key, value in settings.items():
        table[key] = value
    for column in ("pp", "tg", "b", "n_kv", *_BATCHED_BENCH_SETTINGS):
        if column in table:
            table[column] = table[column].astype(int)
    return table


def batched_bench_steps(table: pd.DataFrame, n_batch: int | None = None) -> pd.DataFrame:
    """``read_batched_bench``'s table as timed engine steps, in the measurement schema of
    ``llminfer.cost.calibration.read_measurements``: per row one decode step (``kind``
    ``decode_graph``, ``batch`` = B sequences, ``context`` = PP + (TG + 1) / 2 tokens, the mean
    over the TG steps, ``ms_median`` = T_TG ÷ TG) and, where all B prompts fit one batch (B ×
    PP ≤ ``n_batch``, default the table's own or llama.cpp's 2,048) and are not shared, one
    prefill step (``kind`` ``prefill_graph``, ``batch`` B, ``tokens`` PP, ``ms_median`` =
    T_PP). Milliseconds, tokens, sequences.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    if n_batch is None:
        n_batch = int(table["n_batch"].iloc[0]) if "n_batch" in table else 2048
    rows = []
    for _, r in table.iterrows():
        b, pp, tg = int(r["b"]), int(r["pp"]), int(r["tg"])
        shared = bool(r.get("is_pp_shared", 0))
        if pp > 0 and not shared and b * pp <= n_batch and r["t_pp_s"] > 0:
            rows.append(
                {"kind": "prefill_graph", "batch": b, "tokens": pp, "ms_median": 1e3 * r["t_pp_s"]}
            )
        if tg > 0 and r["t_tg_s"] > 0:
            rows.append(
                {
                    "kind": "decode_graph",
                    "batch": b,
                    "context": pp + round((tg + 1) / 2),
                    "ms_median": 1e3 * r["t_tg_s"] / tg,
                }
            )
    return pd.DataFrame(rows, columns=["kind", "batch", "tokens", "context", "ms_median"])
