"""What arrives at a simulated server: when requests come, how long their prompts and answers are.

A ``Workload`` is a seeded recipe. Arrivals are an open loop at a rate (Poisson, or burstier or
smoother gamma-distributed gaps, the same knob as vLLM's ``benchmark_serving --burstiness``) or a
closed loop of N users who each wait for their answer (and optionally think) before asking again.
Lengths are a fixed int, a ``(low, high)`` tuple (uniform, both ends included) or a distribution
object from this module (``LogNormal``, ``Empirical`` drawn from a request log). Requests may share
a prompt prefix (a system prompt) in groups, which prefix caching can reuse.

Arrivals, lengths and prefix groups come from independent random streams of one seed, so changing
the rate of a workload leaves its lengths unchanged: a sweep compares like with like.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from llminfer.specs.checks import check_int


@dataclass(frozen=True)
class Fixed:
    """Every request has exactly ``tokens`` tokens.

    Introduced in: notebooks/05_optimizations.ipynb
    """

    tokens: int

    def __post_init__(self) -> None:
        check_int("tokens", self.tokens, minimum=1)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return np.full(n, self.tokens, dtype=np.int64)

    def mean(self) -> float:
        return float(self.tokens)


@dataclass(frozen=True)
class Uniform:
    """Lengths uniform on the integers ``low..high`` (both included).

    Introduced in: notebooks/05_optimizations.ipynb
    """

    low: int
    high: int

    def __post_init__(self) -> None:
        check_int("low", self.low, minimum=1)
        check_int("high", self.high, minimum=self.low)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.integers(self.low, self.high + 1, size=n, dtype=np.int64)

    def mean(self) -> float:
        return (self.low + self.high) / 2


@dataclass(frozen=True)
class LogNormal:
    """Lengths whose logarithm is normal: median ``median`` tokens, log-spread ``sigma``,
    rounded and clipped to ``low..high``. Real prompt and answer lengths are right-skewed like
    this: most are short, a few are very long.

    Introduced in: notebooks/05_optimizations.ipynb
    """

    median: float
    sigma: float = 1.0
    low: int = 1
    high: int | None = None

    def __post_init__(self) -> None:
        if not (isinstance(self.median, (int, float)) and self.median >= 1):
            raise ValueError(f"median={self.median!r} must be a number of tokens >= 1")
        if not (isinstance(self.sigma, (int, float)) and self.sigma >= 0):
            raise ValueError(f"sigma={self.sigma!r} must be >= 0")
        check_int("low", self.low, minimum=1)
        if self.high is not None:
            check_int("high", self.high, minimum=self.low)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        values = np.rint(rng.lognormal(math.log(self.median), self.sigma, size=n))
        return np.clip(values, self.low, self.high).astype(np.int64)

    def mean(self) -> float:
        """Mean of the unclipped distribution, median · exp(σ²/2)."""
        return self.median * math.exp(self.sigma**2 / 2)


@dataclass(frozen=True)
class Empirical:
    """Lengths drawn with replacement from observed ``values`` (e.g. a request log's column).

    Introduced in: notebooks/05_optimizations.ipynb
    """

    values: tuple[int, ...]

    def __post_init__(self) -> None:
        values = tuple(int(v) for v in self.values)
        if not values or min(values) < 1:
            raise ValueError("values must hold at least one length, each >= 1 token")
        object.__setattr__(self, "values", values)

    @classmethod
    def from_log(cls, log: pd.DataFrame | object, column: str) -> Empirical:
        """Lengths from a request log: ``column`` is e.g. ``"input_tokens"`` or
        ``"output_tokens"``; a ``RequestLog`` or a DataFrame both work."""
        frame = getattr(log, "df", log)
        if not isinstance(frame, pd.DataFrame) or column not in frame.columns:
            raise ValueError(f"column={column!r} is not a column of the log")
        values = frame[column].dropna()
        return cls(tuple(int(v) for v in values if v >= 1))

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.choice(np.asarray(self.values, dtype=np.int64), size=n, replace=True)

    def mean(self) -> float:
        return float(np.mean(self.values))


LengthSpec = int | tuple[int, int] | Fixed | Uniform | LogNormal | Empirical


def as_length_distribution(spec: object, name: str = "tokens"):
    """Turn an int (fixed), a ``(low, high)`` tuple (uniform) or a distribution object into a
    distribution with ``.sample(n, rng)`` and ``.mean()``; ValueError naming ``name`` otherwise.

    Introduced in: notebooks/05_optimizations.ipynb
    """
    if isinstance(spec, bool):
        raise ValueError(f"{name}={spec!r} must be an int, a (low, high) tuple or a distribution")
    if isinstance(spec, (int, np.integer)):
        if spec < 1:
            raise ValueError(f"{name}={spec!r} must be >= 1 token")
        return Fixed(int(spec))
    if isinstance(spec, tuple):
        if len(spec) != 2 or not all(isinstance(v, (int, np.integer)) for v in spec):
            raise ValueError(f"{name}={spec!r} must be a (low, high) tuple of token counts")
        low, high = int(spec[0]), int(spec[1])
        if not 1 <= low <= high:
            raise ValueError(f"{name}={spec!r} needs 1 <= low <= high")
        return Uniform(low, high)
    if hasattr(spec, "sample") and hasattr(spec, "mean"):
        return spec
    raise ValueError(f"{name}={spec!r} must be an int, a (low, high) tuple or a distribution")


def _is_real(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float, np.integer, np.floating))


@dataclass(frozen=True)
class Workload:
    """A seeded stream of ``n_requests`` requests.

    - Exactly one of ``rate`` (requests/s, open loop; ``float("inf")`` sends all at t = 0) or
      ``concurrency`` (closed loop: that many users, each sending its next request
      ``think_time_s`` seconds after its previous answer ended).
    - ``burstiness``: shape of the gamma-distributed gaps between open-loop arrivals, mean gap
      1/rate; 1 is a Poisson process, below 1 burstier, above 1 more regular.
    - ``prompt_tokens``/``output_tokens``: an int, a ``(low, high)`` tuple or a distribution.
      ``prompt_tokens`` counts the whole prompt, shared prefix included.
    - ``shared_prefix_tokens``, ``prefix_groups``, ``prefix_share``: a share of requests starts
      with one of ``prefix_groups`` common prefixes of that many tokens (capped at the prompt
      length minus one, since the last prompt token must always be computed).
    - ``send_gap_s`` (closed loop; an open loop's arrivals come from ``rate``): the load
      generator sends one request at a time, at least this many seconds after the one it
      sent before, so users ready at the same moment (all of them at the start, several
      whose answers ended in one step) send one after another, not together. 0 (the
      default) sends them all at once. A real client has such a gap (``llminfer bench``:
      0.3-0.4 ms per request on 2 shared cores); ``llminfer.bench.fit.measured_send_gap_s``
      reads it from a sweep's logs. ``bench`` itself ignores both fields: they describe it.
    - ``request_latency_s``: seconds the server spends on each request before its engine can
      schedule it (HTTP, parsing, tokenization, the hop to the engine), on
      ``request_handlers`` at once: a request is handled from its send (``start_ts``) or once a
      handler is free, whichever is later, so with one handler (the default) requests sent
      together reach the engine this far apart. It adds to TTFT without costing a step; 0 (the
      default) hands every request over at once.
    - ``request_handlers``: how many requests the server handles at once for
      ``request_latency_s``: 1 (the default) one after another, as the toy server's single
      asyncio loop; llama.cpp's ``llama-server`` parses requests on a pool of
      ``max(--parallel + 4, cores - 1)`` HTTP threads (``--threads-http``; 0.3.36
      ``tools/server/server-http.cpp`` L149-153), so requests sent together reach its engine
      together; ``None``: every request at once.

    Introduced in: notebooks/05_optimizations.ipynb
    """

    n_requests: int
    rate: float | None = None
    concurrency: int | None = None
    burstiness: float = 1.0
    prompt_tokens: LengthSpec = 512
    output_tokens: LengthSpec = 128
    think_time_s: float = 0.0
    shared_prefix_tokens: int = 0
    prefix_groups: int = 1
    prefix_share: float = 1.0
    seed: int = 0
    send_gap_s: float = 0.0
    request_latency_s: float = 0.0
    request_handlers: int | None = 1

    def __post_init__(self) -> None:
        check_int("n_requests", self.n_requests, minimum=1)
        if (self.rate is None) == (self.concurrency is None):
            raise ValueError(
                f"rate={self.rate!r}, concurrency={self.concurrency!r}: give exactly one "
                "(rate for an open loop, concurrency for a closed loop of users)"
            )
        if self.rate is not None and (
            isinstance(self.rate, bool)
            or not isinstance(self.rate, (int, float))
            or not self.rate > 0
        ):
            raise ValueError(f"rate={self.rate!r} must be > 0 requests/s (inf = all at once)")
        if self.concurrency is not None:
            check_int("concurrency", self.concurrency, minimum=1)
        if not (
            _is_real(self.burstiness) and math.isfinite(self.burstiness) and self.burstiness > 0
        ):
            raise ValueError(
                f"burstiness={self.burstiness!r} must be a finite number > 0 (1 = Poisson)"
            )
        # An infinite think time would release no further request: the run would never end.
        if not (
            _is_real(self.think_time_s)
            and math.isfinite(self.think_time_s)
            and self.think_time_s >= 0
        ):
            raise ValueError(
                f"think_time_s={self.think_time_s!r} must be a finite number of seconds >= 0"
            )
        for name in ("send_gap_s", "request_latency_s"):
            value = getattr(self, name)
            if not (_is_real(value) and math.isfinite(value) and value >= 0):
                raise ValueError(f"{name}={value!r} must be a finite number of seconds >= 0")
        if self.request_handlers is not None:
            check_int("request_handlers", self.request_handlers, minimum=1)
        as_length_distribution(self.prompt_tokens, "prompt_tokens")
        as_length_distribution(self.output_tokens, "output_tokens")
        check_int("shared_prefix_tokens", self.shared_prefix_tokens, minimum=0)
        check_int("prefix_groups", self.prefix_groups, minimum=1)
        if not (isinstance(self.prefix_share, (int, float)) and 0 <= self.prefix_share <= 1):
            raise ValueError(f"prefix_share={self.prefix_share!r} must be in [0, 1]")
        check_int("seed", self.seed, minimum=0)

    @property
    def closed_loop(self) -> bool:
        return self.concurrency is not None

    def requests(self) -> pd.DataFrame:
        """The drawn requests, one row each: ``request_id``, ``arrival_s`` (NaN in a closed loop,
        where arrivals depend on the server), ``prompt_tokens``, ``output_tokens``,
        ``prefix_group`` (-1 = no shared prefix) and ``prefix_tokens``."""
        n = self.n_requests
        arrival_rng, prompt_rng, output_rng, prefix_rng = (
            np.random.default_rng(s) for s in np.random.SeedSequence(self.seed).spawn(4)
        )
        prompts = as_length_distribution(self.prompt_tokens, "prompt_tokens").sample(n, prompt_rng)
        outputs = as_length_distribution(self.output_tokens, "output_tokens").sample(n, output_rng)
        if self.closed_loop:
            arrivals = np.full(n, np.nan)
        elif math.isinf(self.rate):
            arrivals = np.zeros(n)
        else:
            scale = 1.0 / (self.rate * self.burstiness)
            gaps = arrival_rng.gamma(self.burstiness, scale, size=n)
            arrivals = np.concatenate([[0.0], np.cumsum(gaps[:-1])])
        groups = np.full(n, -1, dtype=np.int64)
        prefix = np.zeros(n, dtype=np.int64)
        if self.shared_prefix_tokens > 0:
            shares = prefix_rng.random(n) < self.prefix_share
            drawn = prefix_rng.integers(0, self.prefix_groups, size=n)
            groups = np.where(shares, drawn, -1)
            prefix = np.where(shares, np.minimum(self.shared_prefix_tokens, prompts - 1), 0)
        return pd.DataFrame(
            {
                "request_id": [f"r{i}" for i in range(n)],
                "arrival_s": arrivals,
                "prompt_tokens": prompts,
                "output_tokens": outputs,
                "prefix_group": groups,
                "prefix_tokens": prefix,
            }
        )

    def describe(self) -> str:
        """One line saying what this workload is."""
        load = (
            f"{self.concurrency} users (closed loop)"
            if self.closed_loop
            else f"{self.rate:g} req/s (open loop, burstiness {self.burstiness:g})"
        )
        return f"{self.n_requests} requests at {load}"


def length_mean(spec: object, name: str = "tokens") -> float:
    """Mean of a length spec (int, tuple or distribution), in tokens.

    Introduced in: notebooks/05_optimizations.ipynb
    """
    return as_length_distribution(spec, name).mean()


def sample_lengths(spec: object, n: int, seed: int = 0, name: str = "tokens") -> np.ndarray:
    """``n`` lengths drawn from a length spec with a seeded generator, as int64 tokens.

    Introduced in: notebooks/05_optimizations.ipynb
    """
    check_int("n", n, minimum=1)
    return as_length_distribution(spec, name).sample(n, np.random.default_rng(seed))


__all__ = [
    "Empirical",
    "Fixed",
    "LogNormal",
    "Uniform",
    "Workload",
    "as_length_distribution",
    "length_mean",
    "sample_lengths",
]
