"""A small Llama-style decoder in numpy that really runs: prefill, decode and a real KV cache.

RMSNorm, rotary position embeddings (RoPE), grouped-query attention and a SwiGLU MLP, with
seeded random weights. The weights are random, so the text is meaningless, but the arithmetic
is the real arithmetic: prefill multiplies matrices by matrices (all prompt tokens at once),
decode multiplies them by one vector per step and re-reads every weight to do it. Timing the
two on this computer shows chapter 2's point without a GPU.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from llminfer.specs.models import Model

#: numpy dtype names the toy accepts → llminfer's dtype names (for ``kv_cache_bytes``).
DTYPES = {"float32": "fp32", "float16": "fp16"}


@dataclass
class Generation:
    """What ``ToyModel.generate`` returns. Times in seconds, cache size in bytes.

    ``tokens``: the generated token ids (not the prompt). ``prefill_s``: time of the step that
    read the prompt and produced the first token. ``decode_s``: one time per later step.
    ``cache_bytes``: ``nbytes`` of the K and V arrays (0 without a cache), which hold
    ``cache_tokens`` tokens.

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """

    tokens: list[int]
    prefill_s: float
    decode_s: list[float] = field(default_factory=list)
    cache_bytes: int = 0
    cache_tokens: int = 0
    use_cache: bool = True


class ToyModel:
    """A Llama-style decoder with random weights, runnable in numpy.

    ``.config`` is the matching ``Model`` (so ``llminfer.cost.memory`` and
    ``llminfer.cost.roofline``
    describe this very network); ``.n_params`` counts the real arrays and equals
    ``config.n_params``. ``intermediate_size`` defaults to ``Model``'s 4 × hidden.

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """

    def __init__(
        self,
        n_layers: int = 2,
        hidden_size: int = 64,
        n_heads: int = 4,
        n_kv_heads: int = 2,
        vocab_size: int = 256,
        dtype: str = "float32",
        seed: int = 0,
        intermediate_size: int | None = None,
        max_context: int = 2048,
        rope_theta: float = 10000.0,
    ) -> None:
        if dtype not in DTYPES:
            raise ValueError(f"dtype={dtype!r} must be one of {', '.join(DTYPES)}")
        self.config = Model(
            name=f"toy-{n_layers}L-{hidden_size}h",
            n_layers=n_layers,
            hidden_size=hidden_size,
            n_heads=n_heads,
            n_kv_heads=n_kv_heads,
            intermediate_size=intermediate_size,
            vocab_size=vocab_size,
            max_context=max_context,
            source="llminfer.cost.toy.ToyModel (random weights)",
        )
        c = self.config
        if c.head_dim % 2:
            raise ValueError(f"hidden_size / n_heads = {c.head_dim} must be even for RoPE")
        self.dtype = np.dtype(dtype)
        self.kv_dtype = DTYPES[dtype]
        rng = np.random.default_rng(seed)

        def uniform(shape: tuple[int, int], std: float) -> np.ndarray:
            # Uniform on [-std·√3, std·√3) (variance std², like PyTorch's default nn.Linear
            # init, which is uniform too): numpy draws float32 uniforms 8× faster than normals
            # (155M weights: 0.3 s against 2.7 s), and a random toy needs no particular shape.
            # Scaled in place and not copied when the dtype is float32.
            weights = rng.random(shape, np.float32)
            weights -= 0.5
            weights *= 2 * math.sqrt(3) * std
            return weights.astype(self.dtype, copy=False)

        def w(fan_in: int, fan_out: int) -> np.ndarray:
            return uniform((fan_in, fan_out), fan_in**-0.5)

        h, d, inter = c.hidden_size, c.head_dim, c.intermediate_size
        self.embed = uniform((c.vocab_size, h), 1.0)
        self.layers = [
            {
                "attn_norm": np.ones(h, self.dtype),
                "wq": w(h, c.n_heads * d),
                "wk": w(h, c.n_kv_heads * d),
                "wv": w(h, c.n_kv_heads * d),
                "wo": w(c.n_heads * d, h),
                "mlp_norm": np.ones(h, self.dtype),
                "w_gate": w(h, inter),
                "w_up": w(h, inter),
                "w_down": w(inter, h),
            }
            for _ in range(c.n_layers)
        ]
        self.final_norm = np.ones(h, self.dtype)
        self.lm_head = w(h, c.vocab_size)
        inv_freq = 1.0 / rope_theta ** (np.arange(0, d, 2) / d)
        angles = np.outer(np.arange(c.max_context), inv_freq)
        self._cos = np.cos(angles).astype(self.dtype)
        self._sin = np.sin(angles).astype(self.dtype)

    @property
    def n_params(self) -> int:
        """Parameters in the real arrays (embedding, layers, final norm, LM head)."""
        arrays = [self.embed, self.final_norm, self.lm_head]
        arrays += [a for layer in self.layers for a in layer.values()]
        return sum(a.size for a in arrays)

    @property
    def weight_bytes(self) -> int:
        """Bytes of all weight arrays."""
        return self.n_params * self.dtype.itemsize

    def _rms_norm(self, x: np.ndarray, weight: np.ndarray) -> np.ndarray:
        variance = np.mean(x * x, axis=-1, keepdims=True)
        return (x / np.sqrt(variance + 1e-6)) * weight

    def _rope(self, x: np.ndarray, start: int) -> np.ndarray:
        """Rotate pairs (first half, second half) of each head's dims by position angles."""
        positions = slice(start, start + x.shape[1])
        cos, sin = self._cos[positions], self._sin[positions]
        half = x.shape[-1] // 2
        x1, x2 = x[..., :half], x[..., half:]
        return np.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)

    def _attention(self, layer: dict, x: np.ndarray, start: int, cache: list | None, i: int):
        c = self.config
        t, d, group = x.shape[0], c.head_dim, c.n_heads // c.n_kv_heads
        q = (x @ layer["wq"]).reshape(t, c.n_heads, d).transpose(1, 0, 2)
        k = (x @ layer["wk"]).reshape(t, c.n_kv_heads, d).transpose(1, 0, 2)
        v = (x @ layer["wv"]).reshape(t, c.n_kv_heads, d).transpose(1, 0, 2)
        q, k = self._rope(q, start), self._rope(k, start)
        if cache is not None:  # write this step's K, V; attend to everything cached so far
            keys, values = cache[i]
            keys[:, start : start + t] = k
            values[:, start : start + t] = v
            k, v = keys[:, : start + t], values[:, : start + t]
        s = k.shape[1]
        # Grouped-query attention: each KV head serves `group` query heads.
        qg = q.reshape(c.n_kv_heads, group * t, d)
        # np.sqrt's float64 scalar makes the scores float64: kept on purpose, since the saved toy
        # sweeps and step tables measured this toy (float32 scores halve a long prefill's time
        # and move the toy server's 8-user TTFT; data/measurements/README.md)
        scores = (qg @ k.transpose(0, 2, 1)).reshape(c.n_kv_heads, group, t, s) / np.sqrt(d)
        causal = np.arange(s)[None, :] > (start + np.arange(t))[:, None]
        scores = np.where(causal, -np.inf, scores)
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        probs = (scores / scores.sum(axis=-1, keepdims=True)).astype(self.dtype)
        out = probs.reshape(c.n_kv_heads, group * t, s) @ v
        out = out.reshape(c.n_heads, t, d).transpose(1, 0, 2).reshape(t, c.n_heads * d)
        return out @ layer["wo"]

    def forward(self, ids: Sequence[int], start: int = 0, cache: list | None = None) -> np.ndarray:
        """Logits (tokens × vocab) for ``ids`` at positions ``start, start+1, …``.

        With ``cache`` (a list of per-layer (K, V) arrays from ``new_cache``) the step writes
        its keys and values there and attends to the ``start`` tokens already cached.
        """
        x = self.embed[np.asarray(ids)]
        for i, layer in enumerate(self.layers):
            x = x + self._attention(layer, self._rms_norm(x, layer["attn_norm"]), start, cache, i)
            hidden = self._rms_norm(x, layer["mlp_norm"])
            gate = hidden @ layer["w_gate"]
            swish = gate / (1 + np.exp(-gate))  # SiLU
            x = x + (swish * (hidden @ layer["w_up"])) @ layer["w_down"]
        return self._rms_norm(x, self.final_norm) @ self.lm_head

    def new_cache(self, tokens: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """Empty K and V arrays (kv_heads × tokens × head_dim) for every layer."""
        c = self.config
        shape = (c.n_kv_heads, tokens, c.head_dim)
        return [(np.zeros(shape, self.dtype), np.zeros(shape, self.dtype)) for _ in self.layers]

    def generate(self, prompt_ids: Sequence[int], n_new: int, use_cache: bool = True):
        """Greedy generation of ``n_new`` tokens after ``prompt_ids``; returns a ``Generation``.

        With the cache, the prefill step fills K and V for the prompt and each decode step
        pushes one token through the model. Without it, every step re-runs the whole
        sequence (the same tokens, much more work). The cache holds
        ``len(prompt_ids) + n_new − 1`` tokens: the last generated token is never fed back.

        Introduced in: notebooks/02_prefill_and_decode.ipynb
        """
        c = self.config
        ids = [int(t) for t in prompt_ids]
        if not ids:
            raise ValueError("prompt_ids must hold at least one token id")
        bad = [t for t in ids if not 0 <= t < c.vocab_size]
        if bad:
            raise ValueError(f"prompt_ids contains {bad[0]}; ids must be in [0, {c.vocab_size})")
        if isinstance(n_new, bool) or not isinstance(n_new, int) or n_new < 1:
            raise ValueError(f"n_new={n_new!r} must be a positive integer")
        total = len(ids) + n_new - 1
        if total > c.max_context:
            raise ValueError(
                f"prompt ({len(ids)}) + n_new ({n_new}) − 1 = {total} tokens exceeds "
                f"max_context={c.max_context}"
            )
        cache = self.new_cache(total) if use_cache else None
        start = time.perf_counter()
        logits = self.forward(ids, 0, cache)
        tokens = [int(np.argmax(logits[-1]))]
        prefill_s = time.perf_counter() - start
        decode_s = []
        for _ in range(n_new - 1):
            start = time.perf_counter()
            if cache is not None:
                position = len(ids) + len(tokens) - 1
                logits = self.forward(tokens[-1:], position, cache)
            else:
                logits = self.forward(ids + tokens, 0, None)
            tokens.append(int(np.argmax(logits[-1])))
            decode_s.append(time.perf_counter() - start)
        cache_bytes = sum(k.nbytes + v.nbytes for k, v in cache) if cache else 0
        return Generation(
            tokens=tokens,
            prefill_s=prefill_s,
            decode_s=decode_s,
            cache_bytes=cache_bytes,
            cache_tokens=total if use_cache else 0,
            use_cache=use_cache,
        )
