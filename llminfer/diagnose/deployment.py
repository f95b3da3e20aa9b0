"""What a service runs on: model, GPU, tensor parallelism, replicas, dtypes and engine settings.

``diagnose`` takes these so that its suggestions fit the deployment (never "turn on chunked
prefill" when it is on); the case studies of chapter 7 run on them; ``simulate_deployment``
serves a workload on one or several replicas (a round-robin load balancer in front of
independent engines, each simulated by chapter 5's engine).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from llminfer.sim.engines import EngineConfig
from llminfer.sim.simulate import SimResult, simulate
from llminfer.sim.workload import Workload
from llminfer.specs.checks import check_int
from llminfer.specs.hardware import GPU
from llminfer.specs.models import Model
from llminfer.specs.presets import get_gpu, get_model
from llminfer.specs.stepmodel import get_profile


@dataclass(frozen=True)
class Deployment:
    """Where a service runs: model and GPU presets, ``n_gpus`` (tensor parallelism within one
    replica), ``replicas`` (independent copies behind a load balancer), dtypes, the engine's
    settings and its step-time ``profile`` (``"vllm"`` or the measured ``"pytorch"``). A
    deployment uses ``n_gpus × replicas`` GPUs.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """

    model: str = "llama-3.1-8b"
    gpu: str = "h100-sxm"
    n_gpus: int = 1
    weight_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    engine: EngineConfig = field(
        default_factory=lambda: EngineConfig(
            chunked_prefill=False,
            prefix_caching=False,
            max_num_seqs=256,
            max_num_batched_tokens=8192,
        )
    )
    replicas: int = 1
    #: The engine whose step times the simulation uses (``llminfer.specs.stepmodel.PROFILES``).
    profile: str = "vllm"

    def __post_init__(self) -> None:
        get_profile(self.profile)  # a ValueError naming the profiles for an unknown one
        check_int("n_gpus", self.n_gpus, 1)
        check_int("replicas", self.replicas, 1)
        if not isinstance(self.engine, EngineConfig):
            raise ValueError(f"engine={self.engine!r} must be an llminfer.EngineConfig")

    @property
    def model_spec(self) -> Model:
        return get_model(self.model)

    @property
    def gpu_spec(self) -> GPU:
        return get_gpu(self.gpu)

    @property
    def total_gpus(self) -> int:
        return self.n_gpus * self.replicas

    def diagnose_kwargs(self) -> dict:
        """The keyword arguments ``llminfer.diagnose.run.diagnose`` needs to know this
        deployment."""
        return {
            "model": self.model_spec,
            "gpu": self.gpu_spec,
            "engine": self.engine,
            "n_gpus": self.n_gpus,
            "replicas": self.replicas,
            "weight_dtype": self.weight_dtype,
            "kv_dtype": self.kv_dtype,
        }


@dataclass(frozen=True)
class _ReplicaShare(Workload):
    """Every ``replicas``-th request of ``base`` (any workload), starting at ``index``: one
    replica's share under a round-robin load balancer."""

    base: Workload | None = None
    replicas: int = 1
    index: int = 0

    def requests(self) -> pd.DataFrame:
        table = self.base.requests()
        return table.iloc[self.index :: self.replicas].reset_index(drop=True)


def simulate_deployment(workload: Workload, deployment: Deployment) -> pd.DataFrame:
    """Serve ``workload`` on ``deployment`` and return the request log (the simulator's
    columns, plus ``replica`` when there are several), sorted by arrival. Requests go
    round-robin to ``replicas`` independent engines (open loop only: a closed loop's users
    would follow their replica).

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    if not isinstance(deployment, Deployment):
        raise ValueError(
            f"deployment={deployment!r} must be an llminfer.diagnose.deployment.Deployment"
        )
    if deployment.replicas > 1 and workload.closed_loop:
        raise ValueError(
            f"replicas={deployment.replicas} needs an open-loop workload (rate=...), "
            "not concurrency"
        )
    frames = []
    for index in range(deployment.replicas):
        share = workload
        if deployment.replicas > 1:
            fields = {k: getattr(workload, k) for k in Workload.__dataclass_fields__}
            share = _ReplicaShare(
                **fields, base=workload, replicas=deployment.replicas, index=index
            )
        result: SimResult = simulate(
            share,
            deployment.model_spec,
            deployment.gpu_spec,
            deployment.engine,
            n_gpus=deployment.n_gpus,
            weight_dtype=deployment.weight_dtype,
            kv_dtype=deployment.kv_dtype,
            profile=deployment.profile,
        )
        requests = result.requests
        frames.append(requests.assign(replica=index) if deployment.replicas > 1 else requests)
    table = pd.concat(frames, ignore_index=True)
    return table.sort_values("start_ts", kind="stable").reset_index(drop=True)
