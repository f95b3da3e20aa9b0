"""Chapter 4's side-by-side tables: ``plan_memory`` over many setups and context lengths, and
the KV cache per token of many models, as DataFrames for the notebook (and the only part of
chapter 4's arithmetic that needs pandas: ``llminfer.cost.memory``, which the step-time model
and the toy server import, stays without it).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from llminfer.cost.memory import kv_bytes_per_token, kv_cache_bytes, plan_memory
from llminfer.specs.hardware import GPU
from llminfer.specs.models import Model


def concurrency_table(
    setups: dict[str, tuple[Model, GPU]],
    context_tokens: Sequence[int],
    **plan_kwargs: object,
) -> pd.DataFrame:
    """Max concurrency for each labelled (model, GPU) setup at each context length.

    ``plan_kwargs`` go to ``plan_memory`` (n_gpus, dtypes, utilisation ...). Columns: label,
    context_tokens, max_concurrency, capacity_tokens, fits_one.

    Introduced in: notebooks/04_memory_budget.ipynb
    """
    rows = []
    for label, (model, gpu) in setups.items():
        for context in context_tokens:
            plan = plan_memory(model, gpu, context_tokens=context, **plan_kwargs)
            rows.append(
                {
                    "label": label,
                    "context_tokens": context,
                    "max_concurrency": plan.max_concurrency,
                    "capacity_tokens": plan.capacity_tokens,
                    "fits_one": plan.max_concurrency >= 1,
                }
            )
    return pd.DataFrame(rows)


def kv_per_token_table(models: Sequence[Model], context_tokens: int = 32768) -> pd.DataFrame:
    """KV-cache bytes per token (BF16 and FP8) and per request of ``context_tokens`` tokens.

    One row per model, indexed by name, with the attention family and the fields that size the
    cache (layers, KV heads, head dim, window), so GQA, MQA, MLA and sliding windows can be read
    side by side. ``request_bytes_bf16`` applies the window cap; ``per_token`` does not.

    Introduced in: notebooks/04_memory_budget.ipynb
    """
    rows = []
    for model in models:
        window = (
            f"{model.sliding_window} on {model.n_sliding_layers}/{model.n_layers}"
            if model.sliding_window
            else ""
        )
        rows.append(
            {
                "model": model.name,
                "attention": model.attention,
                "layers": model.n_layers,
                "q_heads": model.n_heads,
                "kv_heads": model.n_kv_heads,
                "head_dim": model.head_dim,
                "window": window,
                "kv_bytes_per_token_bf16": kv_bytes_per_token(model, "bf16"),
                "kv_bytes_per_token_fp8": kv_bytes_per_token(model, "fp8"),
                "request_bytes_bf16": kv_cache_bytes(model, context_tokens, "bf16"),
            }
        )
    return pd.DataFrame(rows).set_index("model")


__all__ = ["concurrency_table", "kv_per_token_table"]
