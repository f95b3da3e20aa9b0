"""Server-side evidence: a saved Prometheus scrape of a vLLM server's ``/metrics`` endpoint.

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
- swapped requests (V0 only): ``vllm:num_requests_swapped``.

Several engines or models in one scrape (label sets) are summed for counts and the highest
usage is kept.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

NAMES = {
    "waiting": ("vllm:num_requests_waiting",),
    "running": ("vllm:num_requests_running",),
    "swapped": ("vllm:num_requests_swapped",),
    "kv_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    "preemptions": ("vllm:num_preemptions_total", "vllm:num_preemptions"),
}
_MAX = {"kv_usage"}


@dataclass(frozen=True)
class ServerMetrics:
    """What one scrape (or the combination of several) says about the engine: requests
    ``waiting``, ``running`` and ``swapped`` (counts), ``kv_usage`` (share of KV blocks in use,
    0–1), ``preemptions`` (counter value, or its increase between the first and last scrape),
    each None when the scrape lacks it; ``names`` maps each field to the metric name found;
    ``scrapes``: how many scrapes were combined.

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

    def as_dict(self) -> dict[str, float]:
        """The fields that were found, as ``{"server_" + field: value}`` evidence."""
        fields = ("waiting", "running", "swapped", "kv_usage", "preemptions")
        return {f"server_{f}": getattr(self, f) for f in fields if getattr(self, f) is not None}


def parse_scrape(text: str, source: str = "<text>") -> ServerMetrics:
    """Read one ``/metrics`` text with ``prometheus_client.parser``; see the module docstring
    for the names looked up. Raises ValueError naming ``source`` when the text is not in the
    Prometheus exposition format or holds no vLLM metric at all.

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
            f"scrape {source} is not Prometheus text exposition format ({exc}); save it with "
            "curl -s http://HOST:PORT/metrics"
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
            f"scrape {source} holds no vLLM metric (looked for {', '.join(NAMES['waiting'])}, "
            f"{', '.join(NAMES['kv_usage'])}, …): is it a vLLM server's /metrics?"
        )
    return ServerMetrics(**values, names=tuple(names), source=source)


def read_scrape(path: str | Path) -> ServerMetrics:
    """``parse_scrape`` of a saved file (UTF-8 text).

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"scrape {path} is not UTF-8 text") from None
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

    counters = [s.preemptions for s in scrapes if s.preemptions is not None]
    names = dict(pair for s in scrapes for pair in s.names)
    return ServerMetrics(
        waiting=peak("waiting"),
        running=peak("running"),
        swapped=peak("swapped"),
        kv_usage=peak("kv_usage"),
        preemptions=(counters[-1] - counters[0]) if len(counters) > 1 else peak("preemptions"),
        names=tuple(names.items()),
        scrapes=len(scrapes),
        source=", ".join(s.source for s in scrapes),
    )
