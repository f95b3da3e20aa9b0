"""What the toy server runs with: its model presets (``PRESETS``, ``build_model``), its
scheduler and cache knobs (``ServeConfig``, the same names as ``llminfer.sim.engines.EngineConfig``
and vLLM), and the paced mode's model, GPU and engine profile (``parse_paced``).
``llminfer.serve.engine`` runs an engine from them and ``llminfer.serve.run`` turns them into
``python -m llminfer serve`` arguments and back. Used by notebook 08.
"""

from __future__ import annotations

from dataclasses import dataclass

from llminfer.cost.steptime import StepTimer, step_timer
from llminfer.cost.toy import ToyModel
from llminfer.sim.engines import EngineConfig, kv_capacity_blocks
from llminfer.specs.checks import check_int
from llminfer.specs.hardware import GPU
from llminfer.specs.models import Model
from llminfer.specs.presets import get_gpu, get_model
from llminfer.specs.stepmodel import DEFAULT_PROFILE, PROFILES

#: Model shapes of the toy server. Hidden size 128 keeps every weight matrix in the CPU's own
#: cache, where multiplying 8 rows costs about 1.5x one row (256 wide: about 5x, measured with
#: one BLAS thread); the fixed cost of a step — issuing some 25 array operations per layer —
#: is then shared by the batch, as a GPU shares its weight reads. ``small`` (16 thin layers): a
#: decode step of a few ms at batch 1 on a 2-core machine, under 2x that at batch 8, so 8
#: streams get well over 3x the tokens/s of one; prefill grows with prompt length.
PRESETS: dict[str, dict] = {
    "tiny": {"n_layers": 2, "hidden_size": 128, "n_heads": 4, "n_kv_heads": 2},
    "small": {"n_layers": 16, "hidden_size": 128, "n_heads": 4, "n_kv_heads": 2},
    "medium": {"n_layers": 8, "hidden_size": 256, "n_heads": 8, "n_kv_heads": 2},
}
VOCAB_SIZE = 1024
MAX_CONTEXT = 2048
#: Real-compute mode: step ends a request that arrives while the engine computes waits before
#: the engine sees it (``EngineConfig.handoff_steps``). The step runs inside the event loop
#: (``serve.app._engine_loop``), which turns once per step, and aiohttp needs several turns to
#: read, parse and hand over a request. Measured 2026-12-02 on this 2-core machine (engine and
#: submits stamped, 8 closed-loop users, 128-token prompts): 4 step ends for 40 of 54 requests
#: sent while a step ran, 3 for 12, 5-6 for 2. Paced, the loop turns freely while it waits for
#: the step's end: 0.
REAL_HANDOFF_STEPS = 4


def parse_paced(spec: str) -> tuple[Model, GPU, str]:
    """``"MODEL:GPU[:PROFILE]"`` (e.g. ``"llama-3.1-8b:h100-sxm:vllm"``) as the preset
    ``Model``, the preset ``GPU`` and the engine profile name (default ``"vllm"``; see
    ``llminfer.specs.stepmodel.PROFILES``). ValueError names what is wrong.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    parts = spec.split(":") if isinstance(spec, str) else []
    if len(parts) not in (2, 3) or not all(p.strip() for p in parts):
        raise ValueError(
            f"paced={spec!r} must be 'MODEL:GPU' or 'MODEL:GPU:PROFILE', "
            "e.g. 'llama-3.1-8b:h100-sxm:vllm'"
        )
    profile = parts[2].strip() if len(parts) == 3 else DEFAULT_PROFILE
    if profile not in PROFILES:
        raise ValueError(f"paced={spec!r}: profile {profile!r} is not one of {', '.join(PROFILES)}")
    return get_model(parts[0].strip()), get_gpu(parts[1].strip()), profile


@dataclass(frozen=True)
class ServeConfig:
    """The toy engine's scheduler and cache knobs (names as ``EngineConfig`` and vLLM use).

    ``max_num_seqs``: most running sequences; ``max_num_batched_tokens``: most tokens one step
    computes (prompt tokens + one per decoding sequence); ``chunked_prefill``: split prompts
    over steps; ``block_size``: tokens per KV block; ``num_kv_blocks``: KV cache capacity in
    blocks (vLLM's ``num_gpu_blocks``), so capacity = ``num_kv_blocks × block_size`` tokens.

    ``paced``: ``None`` (the real mode: the numpy ``ToyModel`` computes every step on this CPU)
    or ``"MODEL:GPU[:PROFILE]"`` (``parse_paced``): each step lasts what
    ``step_timer(model, gpu, profile=...)`` predicts (see this module's docstring). Left at
    None, ``num_kv_blocks`` is 1,024 in the real mode and, paced, the blocks ``plan_memory``
    leaves for that model on that GPU at ``gpu_memory_utilization`` (``kv_capacity_blocks``,
    the same capacity ``simulate`` uses). ``max_model_len``: the most tokens (prompt + output)
    one request may hold, vLLM's ``--max-model-len``; None: the model's context (the toy's
    ``MAX_CONTEXT``, or the paced model's). ``ToyEngine`` refuses one above that context or
    above what the KV cache holds, as vLLM refuses to start.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """

    max_num_seqs: int = 16
    max_num_batched_tokens: int = 512
    chunked_prefill: bool = True
    block_size: int = 16
    num_kv_blocks: int | None = None
    paced: str | None = None
    gpu_memory_utilization: float = 0.9
    max_model_len: int | None = None

    def __post_init__(self) -> None:
        check_int("max_num_seqs", self.max_num_seqs, 1)
        if self.max_model_len is not None:
            checked = check_int("max_model_len", self.max_model_len, 2)
            object.__setattr__(self, "max_model_len", checked)
        check_int("max_num_batched_tokens", self.max_num_batched_tokens, 1)
        check_int("block_size", self.block_size, 1)
        if not isinstance(self.chunked_prefill, bool):
            raise ValueError(f"chunked_prefill={self.chunked_prefill!r} must be True or False")
        if self.paced is not None:
            parse_paced(self.paced)
        u = self.gpu_memory_utilization
        if isinstance(u, bool) or not isinstance(u, (int, float)) or not 0 < u <= 1:
            raise ValueError(f"gpu_memory_utilization={u!r} must be in (0, 1]")
        if self.num_kv_blocks is None:
            if self.paced is None:
                blocks = 1024
            else:
                model, gpu, _ = parse_paced(self.paced)
                blocks = kv_capacity_blocks(model, gpu, self.engine_config())
            object.__setattr__(self, "num_kv_blocks", blocks)
        check_int("num_kv_blocks", self.num_kv_blocks, 1)

    @property
    def capacity_tokens(self) -> int:
        """KV cache capacity in tokens."""
        return self.num_kv_blocks * self.block_size

    def engine_config(self) -> EngineConfig:
        """The matching ``llminfer.sim.engines.EngineConfig`` (continuous batching, no prefix
        caching), so ``simulate`` can be set beside a measurement of this server."""
        return EngineConfig(
            policy="continuous",
            max_num_seqs=self.max_num_seqs,
            max_num_batched_tokens=self.max_num_batched_tokens,
            chunked_prefill=self.chunked_prefill,
            block_size=self.block_size,
            gpu_memory_utilization=self.gpu_memory_utilization,
            prefix_caching=False,
            # real compute: the step runs inside the event loop that reads requests
            handoff_steps=REAL_HANDOFF_STEPS if self.paced is None else 0,
        )

    def paced_parts(self) -> tuple[Model, GPU, str]:
        """(model, GPU, profile) a paced server stands for; ValueError in the real mode."""
        if self.paced is None:
            raise ValueError("paced=None: this configuration is the real mode, not paced")
        return parse_paced(self.paced)

    def step_timer(self) -> StepTimer:
        """The ``StepTimer`` a paced engine times its steps with."""
        model, gpu, profile = self.paced_parts()
        return step_timer(model, gpu, profile=profile)

    def simulate_kwargs(self) -> dict:
        """What ``llminfer.sim.simulate`` (or ``sweep``) needs besides the workload to predict
        this paced server: ``model``, ``gpu``, ``engine``, ``capacity_blocks``, ``profile``."""
        model, gpu, profile = self.paced_parts()
        return {
            "model": model,
            "gpu": gpu,
            "engine": self.engine_config(),
            "capacity_blocks": self.num_kv_blocks,
            "profile": profile,
        }

    def command_line(self) -> list[str]:
        """These settings as ``python -m llminfer serve`` arguments (for ``ServerProcess``)."""
        args = [
            "--max-num-seqs", str(self.max_num_seqs),
            "--max-num-batched-tokens", str(self.max_num_batched_tokens),
            "--block-size", str(self.block_size),
            "--num-kv-blocks", str(self.num_kv_blocks),
        ]  # fmt: skip
        if not self.chunked_prefill:
            args.append("--no-chunked-prefill")
        if self.paced is not None:
            args += ["--paced", self.paced]
        if self.max_model_len is not None:
            args += ["--max-model-len", str(self.max_model_len)]
        return args


def build_model(preset: str = "small", seed: int = 0) -> ToyModel:
    """The ``ToyModel`` of a preset name in ``PRESETS`` (float32, seeded weights).

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    if preset not in PRESETS:
        raise ValueError(f"preset={preset!r} is not known; use one of {', '.join(PRESETS)}")
    return ToyModel(**PRESETS[preset], vocab_size=VOCAB_SIZE, max_context=MAX_CONTEXT, seed=seed)
