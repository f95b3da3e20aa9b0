"""Server-side evidence: a saved Prometheus scrape of a vLLM, llama.cpp or SGLang server's
``/metrics`` endpoint.

A request log shows what clients saw; the engine's own gauges and counters say why — how many
requests were waiting and running, how full the KV cache was, how many preemptions happened.
Save one with ``curl -s http://HOST:8000/metrics > scrape.txt`` (once during the load, or once
before and once after: two scrapes give the counters' increase over the run).

The text is read with ``prometheus_client``'s exposition-format parser (the Prometheus
project's own Python client), not with regular expressions. Metric names differ across vLLM
versions; every name below is looked up, the first one present wins:

- waiting / running requests: ``vllm:num_requests_waiting``, ``vllm:num_requests_running``
  (gauges, V0 and V1; vllm/engine/metrics.py, vllm/v1/metrics/loggers.py);
- KV-cache usage (0–1): ``vllm:kv_cache_usage_perc`` (V1, newer releases) or
  ``vllm:gpu_cache_usage_perc`` (V0 and early V1);
- preemptions: the counter ``vllm:num_preemptions_total`` (V0 and V1; the family is
  ``vllm:num_preemptions``);
- swapped requests (V0 only): ``vllm:num_requests_swapped``;
- prompt and generated tokens (counters): ``vllm:prompt_tokens_total``,
  ``vllm:generation_tokens_total``.

llama.cpp's ``llama-server`` (with ``--metrics``; names prefixed ``llamacpp:``, from
``tools/server/server-task.cpp`` ``to_metrics()`` in the llama.cpp vendored by
llama-cpp-python 0.3.36, commit 0c1e5709; ``tests/fixtures/scrapes/llamacpp_*.txt`` are scrapes
of that server):

- running: ``llamacpp:requests_processing`` (busy slots); waiting: ``llamacpp:requests_deferred``
  (requests queued for a free slot);
- KV usage: ``llamacpp:kv_cache_usage_ratio`` — only older builds export it (this one does not;
  its ``tools/server/bench/bench.py`` still queries it), so it is usually absent;
- ``llamacpp:prompt_tokens_total`` ("prompt tokens processed, excluding cached tokens"),
  ``llamacpp:prompt_tokens_cached_total`` ("reused from the cache"),
  ``llamacpp:tokens_predicted_total``; no preemption counter (a slot keeps its request).

SGLang (with ``--enable-metrics``; ``python/sglang/srt/metrics/collector.py`` in 0.5.2,
``srt/observability/metrics_collector.py`` in 0.5.23; ``tests/fixtures/scrapes/sglang.txt`` is
written from those definitions, not scraped from a running server):

- running ``sglang:num_running_reqs``, waiting ``sglang:num_queue_reqs``, KV usage
  ``sglang:token_usage`` (share of the KV token pool in use);
- ``sglang:prompt_tokens_total``, ``sglang:generation_tokens_total``,
  ``sglang:cached_tokens_total``; retractions (SGLang's preemption) are only a gauge
  (``sglang:num_retracted_reqs``, 0.5.23) and are not read as the preemption counter.

``engine`` says whose names were found. Several engines or models in one scrape (label sets)
are summed for counts and the highest usage is kept.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from llminfer.language import _

NAMES = {
    "waiting": ("vllm:num_requests_waiting", "llamacpp:requests_deferred", "sglang:num_queue_reqs"),
    "running": (
        "vllm:num_requests_running",
        "llamacpp:requests_processing",
        "sglang:num_running_reqs",
    ),
    "swapped": ("vllm:num_requests_swapped",),
    "kv_usage": (
        "vllm:kv_cache_usage_perc",
        "vllm:gpu_cache_usage_perc",
        "llamacpp:kv_cache_usage_ratio",
        "sglang:token_usage",
    ),
    "preemptions": ("vllm:num_preemptions_total", "vllm:num_preemptions"),
    "prompt_tokens": (
        "vllm:prompt_tokens_total",
        "llamacpp:prompt_tokens_total",
        "sglang:prompt_tokens_total",
    ),
    "cached_prompt_tokens": ("llamacpp:prompt_tokens_cached_total", "sglang:cached_tokens_total"),
    "generation_tokens": (
        "vllm:generation_tokens_total",
        "llamacpp:tokens_predicted_total",
        "sglang:generation_tokens_total",
    ),
}
_MAX = {"kv_usage"}
#: Counters: combined as their increase from the first scrape to the last.
_COUNTERS = ("preemptions", "prompt_tokens", "cached_prompt_tokens", "generation_tokens")
ENGINES = {"vllm:": "vLLM", "llamacpp:": "llama.cpp", "sglang:": "SGLang"}


@dataclass(frozen=True)
class ServerMetrics:
    """What one scrape (or the combination of several) says about the engine: requests
    ``waiting``, ``running`` and ``swapped`` (counts), ``kv_usage`` (share of KV blocks in use,
    0–1), ``preemptions`` (counter value, or its increase between the first and last scrape),
    each None when the scrape lacks it; ``prompt_tokens``, ``cached_prompt_tokens`` (llama.cpp
    and SGLang: prompt tokens taken from the prefix cache; llama.cpp's ``prompt_tokens`` leaves
    them out) and ``generation_tokens`` (counters, or their increase); ``names`` maps each
    field to the metric name found; ``engine``: ``vLLM``, ``llama.cpp`` or ``SGLang`` (whose
    names were found; several joined by ``+``); ``scrapes``: how many scrapes were combined.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """

    waiting: float | None = None
    running: float | None = None
    swapped: float | None = None
    kv_usage: float | None = None
    preemptions: float | None = None
    names: tuple[tuple[str, str], ...] = ()
    scrapes: int = 1
    source: str = ""
    prompt_tokens: float | None = None
    cached_prompt_tokens: float | None = None
    generation_tokens: float | None = None
    engine: str = ""

    def as_dict(self) -> dict[str, float]:
        """The queue, KV and preemption fields that were found, as ``{"server_" + field:
        value}`` evidence (the token counters are attributes only)."""
        fields = ("waiting", "running", "swapped", "kv_usage", "preemptions")
        return {f"server_{f}": getattr(self, f) for f in fields if getattr(self, f) is not None}


def parse_scrape(text: str, source: str = "<text>") -> ServerMetrics:
    """Read one ``/metrics`` text with ``prometheus_client.parser``; see the module docstring
    for the names looked up. Raises ValueError naming ``source`` when the text is not in the
    Prometheus exposition format or holds no vLLM, llama.cpp or SGLang metric at all.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    from prometheus_client.parser import text_string_to_metric_families

    if not isinstance(text, str):
        raise ValueError(f"scrape {source}: expected text, got {type(text).__name__}")
    samples: dict[str, list[float]] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                samples.setdefault(sample.name, []).append(float(sample.value))
    except (ValueError, TypeError, IndexError, KeyError) as exc:
        raise ValueError(
            _(
                "scrape {source} is not Prometheus text exposition format ({error}); save it "
                "with curl -s http://HOST:PORT/metrics"
            ).format(source=source, error=exc)
        ) from None
    values: dict[str, float] = {}
    names = []
    for field, candidates in NAMES.items():
        for name in candidates:
            found = [v for v in samples.get(name, []) if math.isfinite(v)]
            if found:
                values[field] = max(found) if field in _MAX else float(sum(found))
                names.append((field, name))
                break
    if not values:
        raise ValueError(
            _(
                "scrape {source} holds no vLLM metric, nor llama.cpp's or SGLang's (looked for "
                "{waiting}, {running}, …): is it a vLLM, "
                "llama-server (--metrics) or SGLang (--enable-metrics) server's /metrics?"
            ).format(
                source=source,
                waiting=", ".join(NAMES["waiting"]),
                running=", ".join(NAMES["running"]),
            )
        )
    return ServerMetrics(
        **values, names=tuple(names), source=source, engine=_engine(name for _, name in names)
    )


def _engine(names) -> str:
    names = list(names)
    found = {engine for prefix, engine in ENGINES.items() for n in names if n.startswith(prefix)}
    return "+".join(sorted(found))


def read_scrape(path: str | Path, timeout_s: float = 10.0) -> ServerMetrics:
    """``parse_scrape`` of a saved file (UTF-8 text), or of an ``http(s)://`` URL fetched now
    (``timeout_s``), e.g. ``http://127.0.0.1:8080/metrics``.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    if isinstance(path, str) and path.startswith(("http://", "https://")):
        import urllib.request

        try:
            with urllib.request.urlopen(path, timeout=timeout_s) as reply:
                text = reply.read().decode("utf-8", errors="replace")
        except (OSError, ValueError) as exc:
            raise ValueError(
                _("scrape {source}: could not fetch it: {error}").format(source=path, error=exc)
            ) from None
        return parse_scrape(text, source=path)
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(_("scrape {source} is not UTF-8 text").format(source=path)) from None
    return parse_scrape(text, source=str(path))


def combine(scrapes: Sequence[ServerMetrics]) -> ServerMetrics:
    """Several scrapes of one run, in time order, as one: the highest waiting, running, swapped
    and KV usage seen, and the preemption counter's increase from the first scrape to the last
    (its value when there is only one).

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    scrapes = list(scrapes)
    if not scrapes or not all(isinstance(s, ServerMetrics) for s in scrapes):
        raise ValueError("scrapes must be a non-empty list of ServerMetrics (see read_scrape)")
    if len(scrapes) == 1:
        return scrapes[0]

    def peak(field: str) -> float | None:
        seen = [getattr(s, field) for s in scrapes if getattr(s, field) is not None]
        return max(seen) if seen else None

    def increase(field: str) -> float | None:
        counters = [getattr(s, field) for s in scrapes if getattr(s, field) is not None]
        return (counters[-1] - counters[0]) if len(counters) > 1 else peak(field)

    names = dict(pair for s in scrapes for pair in s.names)
    return ServerMetrics(
        waiting=peak("waiting"),
        running=peak("running"),
        swapped=peak("swapped"),
        kv_usage=peak("kv_usage"),
        **{field: increase(field) for field in _COUNTERS},
        names=tuple(names.items()),
        scrapes=len(scrapes),
        source=", ".join(s.source for s in scrapes),
        engine=_engine(names.values()),
    )
