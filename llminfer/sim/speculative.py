"""Chapter 5: speculative decoding — a draft guesses γ tokens, the target model checks them in
one pass (Leviathan, Kalman & Matias, ICML 2023). The expected tokens per pass and the speed-up
formulas, a Monte-Carlo check of them, and what happens to the speed-up when the batch grows and
the verification pass stops being free.

What the engines ship (vLLM 0.33.0 ``vllm/config/speculative.py``, ``SpeculativeMethod``):
draft-model, n-gram (prompt lookup, no draft model), suffix decoding, EAGLE and EAGLE-3 heads,
and MTP (multi-token-prediction) layers trained with the model (DeepSeek, Qwen3-Next, MiMo,
GLM-4-MoE, ...). The formulas here take any proposer's acceptance rate α and per-token cost
ratio c; n-gram proposing is nearly free (c ≈ 0) but its α depends on how much the output
repeats the prompt. vLLM V1 does not switch speculation off by load on its own: V0's
``disable_by_batch_size`` is read by nothing in V1 (0.11.0) and was removed by 0.33.0, whose
``num_speculative_tokens_per_batch_size`` sets γ per batch-size range instead.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from llminfer.cost.roofline import attended_pairs
from llminfer.cost.steptime import step_timer
from llminfer.specs.checks import check_int
from llminfer.specs.hardware import GPU
from llminfer.specs.models import Model
from llminfer.specs.stepmodel import StepModel


def _check_probability(name: str, value: object, allow_one: bool = True) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok or not (0 <= value <= 1) or (not allow_one and value == 1):
        limit = "[0, 1]" if allow_one else "[0, 1)"
        raise ValueError(f"{name}={value!r} must be a probability in {limit}")
    return float(value)


def _check_positive(name: str, value: object, allow_zero: bool = False) -> float:
    ok = isinstance(value, (int, float, np.floating)) and not isinstance(value, bool)
    if not ok or math.isnan(value) or value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{name}={value!r} must be a number {'>=' if allow_zero else '>'} 0")
    return float(value)


def speculative_tokens_per_step(alpha: float, gamma: int) -> float:
    """Expected tokens one verification step yields: ``(1 − α^(γ+1)) / (1 − α)``.

    Leviathan, Kalman & Matias (2023), "Fast Inference from Transformers via Speculative
    Decoding", eq. 1. Assumes each of the ``gamma`` drafted tokens is accepted independently
    with probability ``alpha``; the target model's pass always adds one token of its own (the
    correction at the first rejection, or a bonus token when all γ are accepted), so the
    count runs from 1 (α = 0) to γ + 1 (α = 1). α = 0.8, γ = 4 → 3.36 tokens.

    Introduced in: notebooks/05_optimizations.ipynb
    """
    alpha = _check_probability("alpha", alpha)
    gamma = check_int("gamma", gamma, 0)
    if alpha == 1:
        return float(gamma + 1)
    return (1 - alpha ** (gamma + 1)) / (1 - alpha)


def speculative_speedup(alpha: float, gamma: int, cost_ratio: float) -> float:
    """Wall-time speed-up over plain decoding: ``(1 − α^(γ+1)) / ((1 − α)(γc + 1))``.

    Leviathan et al. (2023), Theorem 3.8. One verification step costs γ draft passes of
    relative cost ``cost_ratio`` = c (draft time ÷ target time per token) plus one target
    pass that checks all γ tokens in parallel, assumed to cost the same as one ordinary decode
    step (true while decode is bandwidth bound: γ + 1 tokens read the weights once). Below 1
    the technique slows generation down.

    Introduced in: notebooks/05_optimizations.ipynb
    """
    cost_ratio = _check_positive("cost_ratio", cost_ratio, allow_zero=True)
    tokens = speculative_tokens_per_step(alpha, gamma)
    return tokens / (gamma * cost_ratio + 1)


def best_draft_length(alpha: float, cost_ratio: float, max_gamma: int = 16) -> tuple[int, float]:
    """The draft length γ in ``0..max_gamma`` with the largest speed-up, and that speed-up.

    γ = 0 means "do not speculate" (speed-up 1); it wins when α is low or the draft is dear.

    Introduced in: notebooks/05_optimizations.ipynb
    """
    max_gamma = check_int("max_gamma", max_gamma, 0)
    speedups = [speculative_speedup(alpha, g, cost_ratio) for g in range(max_gamma + 1)]
    best = int(np.argmax(speedups))
    return best, speedups[best]


@dataclass(frozen=True)
class SpeculativeSample:
    """A Monte-Carlo estimate of tokens per verification step: mean, standard error, draws.

    Introduced in: notebooks/05_optimizations.ipynb
    """

    alpha: float
    gamma: int
    n_steps: int
    mean_tokens: float
    std_error: float
    formula: float

    @property
    def z_score(self) -> float:
        """(sample mean − formula) in standard errors; |z| < 4 means they agree."""
        if self.std_error == 0:
            return 0.0 if self.mean_tokens == self.formula else math.inf
        return (self.mean_tokens - self.formula) / self.std_error


def speculative_monte_carlo(
    alpha: float, gamma: int, n_steps: int = 100_000, seed: int = 0
) -> SpeculativeSample:
    """Simulate ``n_steps`` verification steps and count the tokens each yields.

    Each drafted token is accepted with probability ``alpha`` (independently, as the formula
    assumes) until the first rejection; the target adds one token, so a step yields
    (accepted prefix length) + 1. Seeded; the mean should match
    ``speculative_tokens_per_step`` within a few standard errors.

    Introduced in: notebooks/05_optimizations.ipynb
    """
    alpha = _check_probability("alpha", alpha)
    gamma = check_int("gamma", gamma, 0)
    n_steps = check_int("n_steps", n_steps, 2)
    rng = np.random.default_rng(seed)
    accepted = rng.random((n_steps, gamma)) < alpha
    # Length of the run of acceptances from the start = number of leading True values.
    prefix = np.cumprod(accepted, axis=1).sum(axis=1) if gamma else np.zeros(n_steps)
    tokens = prefix + 1
    return SpeculativeSample(
        alpha=alpha,
        gamma=gamma,
        n_steps=n_steps,
        mean_tokens=float(tokens.mean()),
        std_error=float(tokens.std(ddof=1) / math.sqrt(n_steps)),
        formula=speculative_tokens_per_step(alpha, gamma),
    )


def speculative_table(
    alphas: Sequence[float], cost_ratio: float, gammas: Sequence[int] = range(0, 9)
) -> pd.DataFrame:
    """Tokens per step and speed-up for each (α, γ): columns alpha, gamma, tokens_per_step,
    speedup.

    Introduced in: notebooks/05_optimizations.ipynb
    """
    rows = [
        {
            "alpha": a,
            "gamma": g,
            "tokens_per_step": speculative_tokens_per_step(a, g),
            "speedup": speculative_speedup(a, g, cost_ratio),
        }
        for a in alphas
        for g in gammas
    ]
    return pd.DataFrame(rows)


def speculative_batch_table(
    model: Model,
    gpu: GPU,
    alpha: float,
    gamma: int,
    batches: Sequence[int] = (1, 8, 32, 64, 128, 256),
    context_tokens: int = 1024,
    cost_ratio: float = 0.05,
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
    profile: str | StepModel | None = None,
) -> pd.DataFrame:
    """Speculative decoding's speed-up as the batch grows, with the verification step timed
    by ``step_timer`` (the realistic step model fitted to measured kernels, not the bare
    roofline; engine ``profile``, default ``"vllm"``) instead of assumed free.

    Per sequence a verification pass scores γ + 1 tokens against its ``context_tokens`` of KV
    cache: ``batch × (γ + 1)`` tokens in one step (``step_timer``), where plain decoding runs
    ``batch`` tokens. At small batch both steps are bound by reading the weights and cost about
    the same; once ``batch × (γ + 1)`` tokens pass the point where the matrix multiplications
    stop being bandwidth bound the verify step becomes compute bound and costs up to γ + 1
    decode steps, and speculation stops paying. The draft costs ``γ × cost_ratio`` decode steps.
    Speed-up = tokens per step (``speculative_tokens_per_step``) × decode_s ÷ (verify_s + γ ×
    cost_ratio × decode_s). Columns: batch, decode_s, verify_s, verify_over_decode,
    tokens_per_step, speedup.

    Introduced in: notebooks/05_optimizations.ipynb
    """
    gamma = check_int("gamma", gamma, 1)
    cost_ratio = _check_positive("cost_ratio", cost_ratio, allow_zero=True)
    context_tokens = check_int("context_tokens", context_tokens, 1)
    tokens = speculative_tokens_per_step(alpha, gamma)
    timer = step_timer(model, gpu, weight_dtype=weight_dtype, kv_dtype=kv_dtype, profile=profile)
    rows = []
    for batch in batches:
        batch = check_int("batches", batch, 1)
        decode = timer(0, 0, batch, batch * context_tokens)
        new = gamma + 1
        verify = timer(
            batch * new,
            batch * attended_pairs(new, context_tokens),
            0,
            0,
            batch * context_tokens,
        )
        rows.append(
            {
                "batch": batch,
                "decode_s": decode,
                "verify_s": verify,
                "verify_over_decode": verify / decode,
                "tokens_per_step": tokens,
                "speedup": tokens * decode / (verify + gamma * cost_ratio * decode),
            }
        )
    return pd.DataFrame(rows)
