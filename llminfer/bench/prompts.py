"""What the load generator sends: prompts of exactly the requested number of words, drawn from
``WORDS`` (each a single token in the usual BPE vocabularies and in the tiny GGUF that
``llminfer.bench.llamacpp`` writes), with shared prefixes where a workload asks for them, and a
fresh stream of words for each load and for the warm-up (``plan_requests``' ``salt``) so that no
measured prompt is a cache hit of an earlier one. ``llminfer.bench.client`` sends them.
Used by notebook 08.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from llminfer.sim.workload import Workload

#: Prompt words: common English words, each a single token in the usual BPE vocabularies.
WORDS = (
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "that",
    "for",
    "it",
    "as",
    "was",
    "with",
    "be",
    "by",
    "on",
    "not",
    "he",
    "this",
    "are",
    "or",
    "his",
    "from",
    "at",
    "which",
    "but",
    "have",
    "an",
    "they",
    "you",
    "were",
    "her",
    "she",
    "there",
    "one",
    "all",
    "we",
    "their",
    "can",
    "has",
    "been",
    "if",
    "more",
    "when",
    "will",
    "would",
    "who",
    "so",
    "no",
    "time",
    "out",
    "up",
    "into",
    "some",
    "could",
    "them",
    "other",
    "than",
    "then",
    "now",
    "only",
    "its",
    "over",
    "also",
    "after",
    "new",
    "two",
    "first",
    "any",
    "these",
    "may",
    "such",
    "like",
    "our",
    "how",
    "even",
    "most",
    "made",
    "well",
    "back",
    "through",
    "where",
    "much",
    "down",
    "way",
    "should",
    "because",
    "each",
    "just",
    "those",
    "people",
    "very",
    "good",
    "day",
)


def make_prompt(n_tokens: int, rng: np.random.Generator, prefix: str = "") -> str:
    """A prompt of ``n_tokens`` words: ``prefix`` (shared words) then random words.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    have = len(prefix.split())
    words = rng.choice(len(WORDS), size=max(n_tokens - have, 0))
    return " ".join([prefix, *(WORDS[i] for i in words)]).strip()


#: The ``salt`` of warm-up prompts: a stream of its own, never a measured load's.
WARMUP_SALT = 2**32 - 1


def plan_requests(workload: Workload, salt: int = 0, avoid=()) -> pd.DataFrame:
    """``workload.requests()`` plus a ``prompt`` column of text with that many words; requests
    of one prefix group share their first ``prefix_tokens`` words.

    ``salt`` picks another stream of random words for the same workload (the same lengths,
    the same shared prefixes): ``run_bench`` draws its warm-up with ``WARMUP_SALT`` and
    ``sweep_server`` gives every load its own salt, so that no measured prompt was sent before
    and a server's prompt cache (llama.cpp's ``cache_prompt``, vLLM's prefix caching) cannot
    answer it from an earlier request. Only the shared prefix (``shared_prefix_tokens``) is
    reused on purpose. ``salt=0`` is the plain plan. A prompt equal to one in ``avoid`` (a set
    of texts, e.g. the measured ones) is drawn again (at most 100 times: a one-word prompt
    has only so many).

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    if isinstance(salt, bool) or not isinstance(salt, int) or not 0 <= salt < 2**32:
        raise ValueError(f"salt={salt!r} must be an integer from 0 to 2**32 - 1")
    table = workload.requests()
    entropy = workload.seed if salt == 0 else [workload.seed, salt]
    rng = np.random.default_rng(np.random.SeedSequence(entropy).spawn(5)[4])
    avoid = set(avoid)
    longest = int(table["prefix_tokens"].max()) if len(table) else 0
    prefixes = {
        group: make_prompt(longest, np.random.default_rng([workload.seed, int(group)]))
        for group in sorted(set(table["prefix_group"]) - {-1})
    }
    prompts = []
    for group, prefix_tokens, tokens in zip(
        table["prefix_group"], table["prefix_tokens"], table["prompt_tokens"], strict=True
    ):
        prefix = " ".join(prefixes[group].split()[:prefix_tokens]) if group >= 0 else ""
        prompt = make_prompt(int(tokens), rng, prefix)
        for _ in range(100 if avoid else 0):
            if prompt not in avoid:
                break
            prompt = make_prompt(int(tokens), rng, prefix)
        prompts.append(prompt)
    return table.assign(prompt=prompts)
