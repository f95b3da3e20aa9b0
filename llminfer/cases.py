"""Chapter 7's case studies: five simulated services, each with one bottleneck and its cure.

Each ``CaseStudy`` is a seeded workload served by the simulator of chapter 5 on a stated
deployment. ``scripts/make_case_studies.py`` writes their logs to ``data/case_<name>.csv``;
notebook 07 diagnoses those logs, applies the suggested change (``fix``) in the simulator and
re-measures with the same workload. All cases share one set of targets, ``CASE_SLO``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from llminfer.hardware import GPU
from llminfer.models import Model
from llminfer.presets import get_gpu, get_model
from llminfer.simulate import EngineConfig, SimResult, simulate
from llminfer.workload import Empirical, LogNormal, Uniform, Workload

#: Targets of the services in the case studies: the first token within 1 s, then at least
#: 50 tokens/s per user (TPOT ≤ 20 ms).
CASE_SLO = {"ttft_s": 1.0, "tpot_s": 0.020}


@dataclass(frozen=True)
class Deployment:
    """Where a case runs: model and GPU presets, GPU count, dtypes and engine settings.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """

    model: str = "llama-3.1-8b"
    gpu: str = "h100-sxm"
    n_gpus: int = 1
    weight_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    engine: EngineConfig = field(default_factory=EngineConfig)

    @property
    def model_spec(self) -> Model:
        return get_model(self.model)

    @property
    def gpu_spec(self) -> GPU:
        return get_gpu(self.gpu)

    def diagnose_kwargs(self) -> dict:
        """The keyword arguments ``llminfer.diagnose.diagnose`` needs to know this deployment."""
        return {
            "model": self.model_spec,
            "gpu": self.gpu_spec,
            "engine": self.engine,
            "n_gpus": self.n_gpus,
            "weight_dtype": self.weight_dtype,
            "kv_dtype": self.kv_dtype,
        }


@dataclass(frozen=True)
class CaseStudy:
    """One simulated service: its story, workload, deployment, expected primary bottleneck
    (``expected``, a ``diagnose`` step or None for a healthy service), and the change that
    cures it (``fix``: fields of ``Deployment`` to replace, with ``fix_description``).

    Introduced in: notebooks/07_troubleshooting.ipynb
    """

    name: str
    story: str
    workload: Workload
    deployment: Deployment
    expected: str | None
    fix: dict = field(default_factory=dict)
    fix_description: str = ""

    @property
    def fixed_deployment(self) -> Deployment:
        return replace(self.deployment, **self.fix)

    def run(self, fixed: bool = False) -> SimResult:
        """Simulate the case as found (or with its fix applied), same workload and seed."""
        d = self.fixed_deployment if fixed else self.deployment
        return simulate(
            self.workload,
            d.model_spec,
            d.gpu_spec,
            d.engine,
            n_gpus=d.n_gpus,
            weight_dtype=d.weight_dtype,
            kv_dtype=d.kv_dtype,
        )

    @property
    def data_file(self) -> str:
        return f"case_{self.name}.csv"


_CHAT_PROMPTS = LogNormal(512, 0.6, 16, 4096)
_CHAT_ANSWERS = LogNormal(128, 0.6, 8, 1024)

CASE_STUDIES: dict[str, CaseStudy] = {
    case.name: case
    for case in [
        CaseStudy(
            "healthy",
            "A chat assistant at 4 requests/s on one H100: short prompts, short answers.",
            Workload(600, rate=4, prompt_tokens=_CHAT_PROMPTS, output_tokens=_CHAT_ANSWERS, seed=1),
            Deployment(),
            expected=None,
        ),
        CaseStudy(
            "overloaded",
            "The same kind of service after a launch: 30 requests/s of 1k-token prompts and "
            "256-token answers on one H100.",
            Workload(
                1500,
                rate=30,
                prompt_tokens=LogNormal(1024, 0.5, 16, 8192),
                output_tokens=LogNormal(256, 0.5, 8, 2048),
                seed=2,
            ),
            Deployment(),
            expected="queueing",
            fix={"n_gpus": 2},
            fix_description="serve it on two H100s with tensor parallelism (n_gpus=2)",
        ),
        CaseStudy(
            "long_prompts",
            "Document question answering: 6k–32k-token prompts, one request every 2 s.",
            Workload(
                200,
                rate=0.5,
                prompt_tokens=Uniform(6000, 32000),
                output_tokens=LogNormal(128, 0.5, 8, 1024),
                seed=3,
            ),
            Deployment(),
            expected="prefill",
            fix={"n_gpus": 4},
            fix_description="split the model over four H100s (n_gpus=4): prefill FLOPs per GPU "
            "fall fourfold",
        ),
        CaseStudy(
            "kv_exhausted",
            "A summariser (2k-token prompts, 600-token answers, 4 requests/s) on an H100 the "
            "engine was told to use only 28 % of (gpu_memory_utilization=0.28, e.g. to share it).",
            Workload(
                600,
                rate=4,
                prompt_tokens=LogNormal(2000, 0.4, 16, 8192),
                output_tokens=LogNormal(600, 0.4, 8, 4096),
                seed=4,
            ),
            # 28 % of the 81,559 MiB nvidia-smi reports leaves the KV cache about 5.8 GB
            Deployment(engine=EngineConfig(gpu_memory_utilization=0.28)),
            expected="memory",
            fix={"engine": EngineConfig(gpu_memory_utilization=0.9)},
            fix_description="give the engine 90 % of the GPU (gpu_memory_utilization=0.9)",
        ),
        CaseStudy(
            "prefill_interference",
            "A chat service where 30 % of requests paste a 12k-token document: 4 requests/s, "
            "short answers, chunked prefill off.",
            Workload(
                800,
                rate=4,
                prompt_tokens=Empirical((12000,) * 3 + (200,) * 7),
                output_tokens=LogNormal(48, 0.3, 16, 1024),
                seed=5,
            ),
            Deployment(),
            expected="decode",
            fix={"engine": EngineConfig(chunked_prefill=True, max_num_batched_tokens=512)},
            fix_description="turn on chunked prefill with a 512-token step budget, so long "
            "prompts are split and decodes keep running between the chunks",
        ),
    ]
}


def write_case_logs(directory: str | Path) -> list[Path]:
    """Simulate every case study as found and write ``case_<name>.csv`` into ``directory``.

    Times are written to the microsecond, which is far finer than any rule in ``diagnose``.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for case in CASE_STUDIES.values():
        requests = case.run().requests
        path = directory / case.data_file
        requests.to_csv(path, index=False, float_format="%.6f")
        paths.append(path)
    return paths
