"""Chapter 7's case studies: simulated services, each with one known cause and its cure.

Each ``CaseStudy`` is a seeded workload served by the simulator of chapter 5 on a stated
deployment. ``scripts/make_case_studies.py`` writes their logs to ``data/case_<name>.csv``;
notebook 07 diagnoses those logs, applies the suggested change (``fix``) in the simulator and
re-measures with the same workload. All cases share one set of targets, ``CASE_SLO``.

A case's texts (``story``, ``fix_description``, ``fix_label``, the labels of ``attempts``) are
written in English and marked for the "diagnose" catalog; read back, they are in the learner's
language (``llminfer.set_language``, also when it is called after this module is imported).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from llminfer.diagnose.deployment import Deployment, simulate_deployment
from llminfer.diagnose.run import diagnose
from llminfer.language import N_, _
from llminfer.logs.reading import read_requests
from llminfer.logs.summary import summarize
from llminfer.logs.writing import write_log
from llminfer.sim.engines import EngineConfig
from llminfer.sim.simulate import SimResult, simulate
from llminfer.sim.workload import Empirical, LogNormal, Uniform, Workload


class _Text(str):
    """English text made from a catalog template and its values (``_Text(N_("… {n} …"),
    n=128)``), so that it can be said again in the learner's language."""

    def __new__(cls, template: str, **values) -> _Text:
        text = super().__new__(cls, template.format(**values))
        text.template, text.values = template, values
        return text


def _say(text: str) -> str:
    """``text`` (English, marked for the catalog) in the learner's language."""
    if isinstance(text, _Text):
        return _(text.template).format(**text.values)
    return _(text) if text else text  # gettext("") would be the catalog's header


class _Said:
    """A dataclass field that keeps the English text it is given and reads back ``_say(text)``:
    the learner's language when it is read, not when the case was made."""

    def __init__(self, *default: str) -> None:
        self.default = default

    def __set_name__(self, owner, name: str) -> None:
        self.slot = "_said_" + name

    def __get__(self, obj, owner=None):
        if obj is None:  # the dataclass asks for the default
            if not self.default:
                raise AttributeError(self.slot)
            return self.default[0]
        return _say(obj.__dict__[self.slot])

    def __set__(self, obj, value: str) -> None:
        obj.__dict__[self.slot] = value  # a frozen dataclass's __init__ comes through here


#: Targets of the services in the case studies: the first token within 1 s, then at least
#: 50 tokens/s per user (TPOT ≤ 20 ms).
CASE_SLO = {"ttft_s": 1.0, "tpot_s": 0.020}


#: The case measured on a real engine (not simulated): the toy server of chapter 8 under
#: ``llminfer bench`` at two offered loads (requests/s asked of the client), logs in data/ made
#: by ``scripts/make_real_engine_logs.py`` (data/README.md says on which machine, and when).
REAL_CASE_LOGS = {"light": "real_toy_light.csv", "heavy": "real_toy_heavy.csv"}
REAL_CASE_RATES = {"light": 0.5, "heavy": 4.0}
#: Its targets: a CPU toy is slower per token than a GPU, so 50 ms (20 tokens/s per user).
REAL_CASE_SLO = {"ttft_s": 1.0, "tpot_s": 0.050}


#: The engine the first five case studies were written for, spelled out (vLLM V0-like: no
#: chunked prefill, no prefix caching), so a change of the EngineConfig defaults does not
#: change them.
V0_ENGINE = EngineConfig(
    chunked_prefill=False, prefix_caching=False, max_num_seqs=256, max_num_batched_tokens=8192
)
#: The V0-like engine serving long prompts: without chunked prefill vLLM V0 sets
#: ``max_num_batched_tokens = max(max_model_len, 2048)`` (``SchedulerConfig.__post_init__`` in
#: ``vllm/config.py``, v0.6–v0.8), so a prompt always fits one step; here a server started with
#: ``--max-model-len 32768``.
LONG_V0_ENGINE = replace(V0_ENGINE, max_num_batched_tokens=32768)
#: A vLLM-V1-like engine: chunked prefill on with a 2,048-token step budget.
V1_ENGINE = EngineConfig(
    chunked_prefill=True, prefix_caching=False, max_num_seqs=256, max_num_batched_tokens=2048
)
#: The head-of-line case's cure: vLLM V1's --long-prefill-token-threshold, in tokens.
HOL_THRESHOLD = 128


#: The engine profile every case is simulated with (``llminfer.specs.stepmodel.PROFILES``):
#: ``"vllm"``, the measured kernels' constants with split-KV decode attention and CUDA graphs,
#: as vLLM runs them; ``scripts/make_case_studies.py`` writes the logs in data/ from here.
CASE_PROFILE = "vllm"


@dataclass(frozen=True)
class RampWorkload(Workload):
    """A workload whose arrival rate rises linearly from ``rate`` to ``rate_end`` requests/s
    over the run (a Poisson process with that rising rate, drawn from the workload's seed):
    the load of a service whose traffic grows through the day.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """

    rate_end: float = 1.0

    def requests(self) -> pd.DataFrame:
        table = super().requests()
        if self.rate is None or not self.rate_end > 0:
            raise ValueError(f"rate_end={self.rate_end!r} needs rate= and must be > 0")
        n = self.n_requests
        # Cumulative intensity Λ(t) = r0·t + (r1 − r0)·t²/(2T), with T chosen so Λ(T) = n; unit
        # Poisson arrivals u_k mapped through Λ⁻¹ give the ramp.
        r0, r1 = float(self.rate), float(self.rate_end)
        duration = 2 * n / (r0 + r1)
        rng = np.random.default_rng(np.random.SeedSequence(self.seed).spawn(5)[4])
        u = np.concatenate([[0.0], np.cumsum(rng.exponential(1.0, n - 1))])
        a = (r1 - r0) / (2 * duration)
        t = u / r0 if a == 0 else (-r0 + np.sqrt(r0**2 + 4 * a * u)) / (2 * a)
        return table.assign(arrival_s=t)


@dataclass(frozen=True)
class CaseStudy:
    """One simulated service: its story, workload, deployment, the cause ``diagnose`` should
    name (``expected``, one of ``llminfer.diagnose.findings.CAUSES`` or None for a healthy
    service), and
    the change that cures it (``fix``: fields of ``Deployment`` to replace, with
    ``fix_description``). Every deployment spells out its ``EngineConfig``. ``token_times``:
    the log keeps the simulator's per-token times (``token_ts``), so ITL and stalls can be
    measured; off for the large cases, whose files would grow from tens of kB to megabytes.
    ``attempts``: the cheaper changes tried before ``fix``, cheapest first, each ``(label,
    cost, change)`` with ``cost`` one of ``llminfer.diagnose.suggestions.COSTS`` and ``change``
    fields of ``Deployment`` replaced in the case as found (one change at a time; a label says
    when a change keeps an earlier one); ``fix_label`` names ``fix`` in that list.
    ``cure_table`` measures them all.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """

    name: str
    story: str = _Said()
    workload: Workload
    deployment: Deployment
    expected: str | None
    fix: dict = field(default_factory=dict)
    fix_description: str = _Said("")
    token_times: bool = False
    attempts: tuple[tuple[str, str, dict], ...] = ()
    fix_label: str = _Said("")

    @property
    def fixed_deployment(self) -> Deployment:
        return replace(self.deployment, **self.fix)

    def run(self, fixed: bool = False) -> SimResult:
        """Simulate the case as found (or with its fix applied), same workload and seed, on
        one replica (see ``requests`` for several)."""
        d = self.fixed_deployment if fixed else self.deployment
        if d.replicas != 1:
            raise ValueError(f"replicas={d.replicas}: use CaseStudy.requests for several")
        return simulate(
            self.workload,
            d.model_spec,
            d.gpu_spec,
            d.engine,
            n_gpus=d.n_gpus,
            weight_dtype=d.weight_dtype,
            kv_dtype=d.kv_dtype,
            profile=d.profile,
        )

    def requests(self, deployment: Deployment | None = None) -> pd.DataFrame:
        """The request log of this workload on ``deployment`` (default: as found), on as many
        replicas as it has (``llminfer.diagnose.deployment.simulate_deployment``); ``token_ts`` only
        when the case keeps ``token_times``."""
        table = simulate_deployment(self.workload, deployment or self.deployment)
        if not self.token_times:
            table = table.drop(columns=["token_ts", "chunk_tokens"], errors="ignore")
        return table

    @property
    def data_file(self) -> str:
        return f"case_{self.name}.csv"

    def tries(self) -> list[tuple[str, str, dict]]:
        """The changes in the order to try them: every ``attempts`` entry, then ``fix``."""
        out = [(_say(label), cost, change) for label, cost, change in self.attempts]
        if self.fix:
            out.append((self.fix_label or self.fix_description, self.fix_cost, self.fix))
        return out

    @property
    def fix_cost(self) -> str:
        """The cost of ``fix``: hardware when it adds GPUs, software when it changes the
        weights' dtype, else an engine setting."""
        d, f = self.deployment, self.fixed_deployment
        if f.n_gpus * f.replicas > d.n_gpus * d.replicas:
            return "hardware"
        if f.weight_dtype != d.weight_dtype:
            return "software"
        return "setting"

    def cure_table(self, slo: dict[str, float] | None = None) -> pd.DataFrame:
        """One row per deployment tried, as found first, then ``tries()`` in order: the
        change, its cost, TTFT and TPOT p90 (s), the share of requests meeting ``slo``
        (default ``CASE_SLO``) and the verdict and cause ``diagnose`` gives, all over the whole
        simulated run of the same seeded workload.

        Introduced in: notebooks/07_troubleshooting.ipynb
        """
        slo = slo or CASE_SLO
        rows = []
        for label, cost, change in [(_("as found"), "—", {}), *self.tries()]:
            d = replace(self.deployment, **change)
            log = read_requests(self.requests(d))
            flat = summarize(log, percentiles=(90,), slo=slo).to_dict()
            report = diagnose(log, slo=slo, **d.diagnose_kwargs())
            rows.append(
                {
                    "change": label,
                    "cost": cost,
                    "ttft_s_p90": flat["ttft_s_p90"],
                    "tpot_s_p90": flat["tpot_s_p90"],
                    "good_fraction": flat["good_fraction"],
                    "verdict": report.verdict,
                    "cause": report.cause or "—",
                }
            )
        return pd.DataFrame(rows).set_index("change")


_CHAT_PROMPTS = LogNormal(512, 0.6, 16, 4096)
_CHAT_ANSWERS = LogNormal(128, 0.6, 8, 1024)

CASE_STUDIES: dict[str, CaseStudy] = {
    case.name: case
    for case in [
        CaseStudy(
            "healthy",
            N_("A chat assistant at 4 requests/s on one H100: short prompts, short answers."),
            Workload(600, rate=4, prompt_tokens=_CHAT_PROMPTS, output_tokens=_CHAT_ANSWERS, seed=1),
            Deployment(profile=CASE_PROFILE, engine=V0_ENGINE),
            expected=None,
        ),
        CaseStudy(
            "overloaded",
            N_(
                "The same kind of service after a launch: 21 requests/s of 1k-token prompts and "
                "256-token answers on one H100."
            ),
            Workload(
                1500,
                rate=21,
                prompt_tokens=LogNormal(1024, 0.5, 16, 8192),
                output_tokens=LogNormal(256, 0.5, 8, 2048),
                seed=2,
            ),
            Deployment(profile=CASE_PROFILE, engine=V0_ENGINE),
            expected="overload",
            fix={"n_gpus": 2},
            fix_label=N_("TP = 2 (n_gpus=2)"),
            fix_description=N_("tensor parallelism over two H100s (n_gpus=2)"),
            attempts=(
                (N_("FP8 weights (weight_dtype='fp8')"), "software", {"weight_dtype": "fp8"}),
            ),
        ),
        CaseStudy(
            "long_prompts",
            N_(
                "Document question answering: 6k–32k-token prompts, one request every 2 s, on one "
                "H100 (no chunked prefill, --max-model-len 32768)."
            ),
            Workload(
                200,
                rate=0.5,
                prompt_tokens=Uniform(6000, 32000),
                output_tokens=LogNormal(128, 0.5, 8, 1024),
                seed=3,
            ),
            Deployment(profile=CASE_PROFILE, engine=LONG_V0_ENGINE),
            expected="too_slow",
            fix={"weight_dtype": "fp8"},
            fix_label=N_("FP8 weights (weight_dtype='fp8')"),
            fix_description=N_(
                "FP8 weights (weight_dtype='fp8', W8A8 on Hopper): twice the tensor-"
                "core FLOP/s for every prompt token, and half the weight bytes per decode step"
            ),
            attempts=(
                (
                    N_("chunked prefill, 2,048-token steps"),
                    "setting",
                    {"engine": V1_ENGINE},
                ),
            ),
            token_times=True,
        ),
        CaseStudy(
            "kv_exhausted",
            N_(
                "A summariser (2k-token prompts, 600-token answers, 4 requests/s) on an H100 the "
                "engine was told to use only 28 % of (gpu_memory_utilization=0.28, e.g. to share "
                "it)."
            ),
            Workload(
                600,
                rate=4,
                prompt_tokens=LogNormal(2000, 0.4, 16, 8192),
                output_tokens=LogNormal(600, 0.4, 8, 4096),
                seed=4,
            ),
            # 28 % of the 81,559 MiB nvidia-smi reports leaves the KV cache about 5.8 GB
            Deployment(
                profile=CASE_PROFILE, engine=replace(V0_ENGINE, gpu_memory_utilization=0.28)
            ),
            expected="kv_pressure",
            fix={"engine": replace(V0_ENGINE, gpu_memory_utilization=0.9)},
            fix_label="gpu_memory_utilization 0.28 → 0.9",
            fix_description=N_("give the engine 90 % of the GPU (gpu_memory_utilization=0.9)"),
        ),
        CaseStudy(
            "prefill_interference",
            N_(
                "A chat service where 30 % of requests paste an 8k-token document: 4 requests/s, "
                "short answers (32 tokens), chunked prefill off (V0-like engine)."
            ),
            Workload(
                800,
                rate=4,
                prompt_tokens=Empirical((8000,) * 3 + (200,) * 7),
                output_tokens=LogNormal(32, 0.3, 16, 1024),
                seed=5,
            ),
            Deployment(profile=CASE_PROFILE, engine=LONG_V0_ENGINE),
            expected="interference",
            fix={
                "engine": replace(LONG_V0_ENGINE, chunked_prefill=True, max_num_batched_tokens=384)
            },
            fix_label=N_("chunked prefill, 384-token steps"),
            fix_description=N_(
                "turn on chunked prefill with a 384-token step budget, so a document "
                "is split over ~21 steps and decodes keep running between the chunks (the stalls "
                "go; each chunk still costs its compute, so a smaller budget trades the documents' "
                "TTFT for smoother decoding)"
            ),
            token_times=True,
        ),
        CaseStudy(
            "head_of_line",
            N_(
                "A chat service on a V1-like engine (chunked prefill on, 2,048-token steps) where "
                "one request in twenty pastes a 50k-token report: 1 request/s."
            ),
            Workload(
                600,
                rate=1.0,
                prompt_tokens=Empirical((50000,) + (300,) * 19),
                output_tokens=LogNormal(64, 0.3, 16, 1024),
                seed=6,
            ),
            Deployment(profile=CASE_PROFILE, engine=V1_ENGINE),
            expected="head_of_line",
            fix={"engine": replace(V1_ENGINE, long_prefill_token_threshold=HOL_THRESHOLD)},
            fix_label=f"--long-prefill-token-threshold {HOL_THRESHOLD}",
            fix_description=_Text(
                N_(
                    "cap each request's prefill chunk per step at {threshold} tokens "
                    "(--long-prefill-token-threshold {threshold}, vLLM V1; default 0 = no cap): a "
                    "long prompt no longer takes the whole step, so the short prompts behind it "
                    "are prefilled in the same steps (the long prompts' own prefill takes more "
                    "steps)"
                ),
                threshold=HOL_THRESHOLD,
            ),
            token_times=True,
        ),
        CaseStudy(
            "busy",
            N_(
                "The 1k-token chat service on a V1-like engine (chunked prefill on) at 15 "
                "requests/s: the server keeps up, TTFT is fine, TPOT is not."
            ),
            Workload(
                1500,
                rate=15,
                prompt_tokens=LogNormal(1024, 0.5, 16, 8192),
                output_tokens=LogNormal(256, 0.5, 8, 2048),
                seed=7,
            ),
            Deployment(profile=CASE_PROFILE, engine=V1_ENGINE),
            expected="overload",
            fix={"weight_dtype": "fp8"},
            fix_label=N_("FP8 weights (weight_dtype='fp8')"),
            fix_description=N_(
                "FP8 weights (weight_dtype='fp8'): each decode step reads half the "
                "weight bytes, so ~150 requests decoding together step faster"
            ),
            attempts=(
                (
                    "--max-num-seqs 64",
                    "setting",
                    {"engine": replace(V1_ENGINE, max_num_seqs=64)},
                ),
            ),
        ),
        CaseStudy(
            "ramp",
            N_(
                "Traffic that grows from 3 to 25 requests/s over 80 s (1k-token prompts, "
                "256-token answers, V1-like engine): fine at first, overloaded at the end."
            ),
            RampWorkload(
                1200,
                rate=3,
                rate_end=25,
                prompt_tokens=LogNormal(1024, 0.5, 16, 8192),
                output_tokens=LogNormal(256, 0.5, 8, 2048),
                seed=8,
            ),
            Deployment(profile=CASE_PROFILE, engine=V1_ENGINE),
            expected="overload",
            fix={"n_gpus": 2},
            fix_label=N_("TP = 2 (n_gpus=2)"),
            fix_description=N_("tensor parallelism over two H100s (n_gpus=2)"),
            attempts=(
                (N_("FP8 weights (weight_dtype='fp8')"), "software", {"weight_dtype": "fp8"}),
            ),
        ),
        CaseStudy(
            "slow_gpu",
            N_(
                "Llama-3.1-8B in BF16 on one L4 (300 GB/s) for a chat service with a 20 ms TPOT "
                "target, at a light 0.3 requests/s."
            ),
            Workload(
                300, rate=0.3, prompt_tokens=_CHAT_PROMPTS, output_tokens=_CHAT_ANSWERS, seed=9
            ),
            Deployment(gpu="l4", profile=CASE_PROFILE, engine=V1_ENGINE),
            expected="too_slow",
            fix={"weight_dtype": "fp8", "n_gpus": 2},
            fix_label=N_("FP8 weights + TP = 2 (n_gpus=2)"),
            fix_description=N_(
                "FP8 weights on two L4s with tensor parallelism (keeps the FP8 "
                "weights): a quarter of the weight bytes per GPU per step"
            ),
            attempts=(
                (N_("FP8 KV cache (kv_dtype='fp8')"), "setting", {"kv_dtype": "fp8"}),
                (N_("FP8 weights (weight_dtype='fp8')"), "software", {"weight_dtype": "fp8"}),
            ),
        ),
    ]
}


def write_case_logs(directory: str | Path) -> list[Path]:
    """Simulate every case study as found and write ``case_<name>.csv`` into ``directory``
    (several replicas: one log, with a ``replica`` column).

    Times (``token_ts`` too, space-separated) are written to the microsecond, far finer than
    any rule in ``diagnose`` (``llminfer.bench.results.write_log``).

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for case in CASE_STUDIES.values():
        paths.append(write_log(case.requests(), directory / case.data_file))
    return paths
