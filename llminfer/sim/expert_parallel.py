"""Chapter 9's step timer for mixture-of-experts serving with expert parallelism (EP).

Under EP over ``ep`` GPUs each GPU holds ``(E + redundant)/ep`` routed experts; with
data-parallel attention (DeepSeek's deployment) each GPU also holds all the non-expert
weights and runs attention for its own ``batch`` sequences. A step on one GPU then has three
parts, each timed with the roofline of ``llminfer.cost.roofline`` at ``DEFAULT_EFFICIENCY``
(not an engine profile):

1. **attention side** — attention, dense layers, shared experts, LM head for its own batch:
   exactly what ``step_cost`` counts for that batch, minus the routed experts;
2. **experts** — its own experts for the tokens the *whole group* routes to them: the
   hottest GPU gets ``imbalance ×`` the mean (it sets the step time: every GPU waits for it
   at the next all-to-all), and touches ``E_local·(1 − (1 − k/E)^(T·imbalance))`` of its
   experts (``llminfer.cost.moe``);
3. **all-to-all** — dispatch and combine bytes (``all_to_all_bytes_per_token``) over NVLink
   within a node (``gpu.interconnect_bandwidth``) and over the network beyond it.

Without overlap the step is the sum of the three. With two-batch overlap (DeepSeek's
"dual-batch overlap", SGLang's TBO) the batch is split in two micro-batches whose compute
hides the other's communication: ``max(compute(b/2) + compute(b/2), all-to-all(b))`` —
each micro-batch reads the weights again, which is why overlap loses at small batches.

With ``ep=1`` (one GPU holds everything) the step's bytes and FLOP are ``step_cost``'s to the
byte; tests hold it to that. ``ep_step`` times a uniform batch, ``ep_sweep`` many of them;
``EPStepTime`` is the same step as a ``step_time=`` for ``llminfer.sim.simulate.simulate``
(one attention rank, with ``ep_capacity_blocks`` as its KV capacity).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import pandas as pd

from llminfer.cost.moe import (
    all_to_all_bytes_per_token,
    expert_params,
    expert_touch_share,
    moe_weights,
    plan_ep_memory,
    saturation_tokens,
)
from llminfer.cost.roofline import as_efficiency, compute_dtype, mixed_step_cost, step_cost
from llminfer.specs.checks import check_int, check_number
from llminfer.specs.hardware import GPU
from llminfer.specs.models import Model
from llminfer.units import check_dtype

#: Network bandwidth per GPU, bytes/s per direction: one 400 Gb/s InfiniBand NIC per GPU
#: (DeepSeek-V3 report arXiv:2412.19437 §3.1: H800 nodes with "InfiniBand (IB) ... 50GB/s";
#: the LMSYS 96-H100 cluster is "connected via InfiniBand").
NETWORK_BYTES_PER_S = 50e9
#: GPUs per node that NVLink joins (HGX/DGX H100, H800, H20, B200 boards).
GPUS_PER_NODE = 8
PARTS = ("attention", "experts", "all-to-all")


@dataclass(frozen=True)
class EPStep:
    """One step on the hottest GPU of an EP group (seconds, bytes and FLOP per GPU).

    ``attention_s``, ``expert_s``, ``comm_s``: the three parts; ``step_s`` combines them
    (sum, or the overlapped maximum). ``tokens_per_s_per_gpu`` = new tokens of this GPU's
    batch ÷ step; ``tokens_per_s_per_user`` = one sequence's new tokens ÷ step (decode: 1 ÷
    step). ``experts_touched_per_gpu``: of ``experts_per_gpu``. ``bound``: the longest part.

    Introduced in: notebooks/09_mixture_of_experts.ipynb
    """

    model: str
    gpu: str
    ep: int
    batch: int
    new_tokens: int
    context_tokens: int
    imbalance: float
    overlap: bool
    attention_s: float
    expert_s: float
    comm_s: float
    step_s: float
    attention_bytes: float
    expert_bytes: float
    comm_bytes: float
    experts_per_gpu: float
    experts_touched_per_gpu: float
    bound: str

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return self.batch * self.new_tokens / self.step_s

    @property
    def tokens_per_s_per_user(self) -> float:
        return self.new_tokens / self.step_s

    def to_dict(self) -> dict[str, object]:
        return {
            **asdict(self),
            "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu,
            "tokens_per_s_per_user": self.tokens_per_s_per_user,
        }


def _parts(m, gpu, w, p_expert, base, tokens, ep, imbalance, e_local, eff):
    """(attention s, expert s, attention bytes, expert bytes, touched) of one micro-batch whose
    one-GPU cost is ``base`` (``step_cost``) over ``tokens`` new tokens on this GPU."""
    weight_dtype = w.weight_dtype
    if tokens == 0:
        return 0.0, 0.0, 0.0, 0.0, 0.0
    k, e = m.experts_per_token, m.n_experts
    expert_flops_mean = 2 * k * tokens * p_expert
    attn_flops = base.flops - expert_flops_mean
    attn_bytes = base.memory_bytes - base.weight_bytes + w.non_expert_bytes - w.embedding_bytes
    hot_tokens = tokens * ep * imbalance  # the group's tokens, as seen by the hottest experts
    touched = e_local * expert_touch_share(e, k, hot_tokens)
    expert_bytes = touched * w.expert_bytes
    expert_flops = expert_flops_mean * imbalance
    rate_a = gpu.peak_flops(compute_dtype(weight_dtype, gpu)) * eff.compute
    rate_e = gpu.peak_flops(compute_dtype(w.expert_dtype, gpu)) * eff.compute
    bandwidth = gpu.memory_bandwidth * eff.memory
    attention_s = max(attn_flops / rate_a, attn_bytes / bandwidth)
    expert_s = max(expert_flops / rate_e, expert_bytes / bandwidth)
    return attention_s, expert_s, attn_bytes, expert_bytes, touched


def ep_step(
    model: Model,
    gpu: GPU,
    batch: int,
    context_tokens: int,
    ep: int = 1,
    new_tokens: int = 1,
    weight_dtype: str = "fp8",
    expert_dtype: str | None = None,
    kv_dtype: str = "bf16",
    imbalance: float = 1.0,
    overlap: bool = False,
    redundant_experts: int = 0,
    dispatch_dtype: str = "fp8",
    combine_dtype: str = "bf16",
    gpus_per_node: int = GPUS_PER_NODE,
    network_bandwidth: float = NETWORK_BYTES_PER_S,
    efficiency=None,
) -> EPStep:
    """Time one step of ``model`` on the hottest GPU of an EP group of ``ep`` GPUs.

    Each GPU runs data-parallel attention for ``batch`` sequences, each adding ``new_tokens``
    tokens (1 = decode; a prompt chunk = prefill) after ``context_tokens`` cached ones; its
    experts serve the group's ``batch × new_tokens × ep`` tokens. ``imbalance`` ≥ 1 is the
    hottest GPU's load over the mean (1 = perfectly balanced; EPLB's job is to bring it
    down). ``overlap`` = two-batch overlap. All-to-all beyond ``gpus_per_node`` GPUs crosses
    the network at ``network_bandwidth`` bytes/s per GPU per direction, within a node
    NVLink; the hottest GPU moves ``imbalance ×`` the mean bytes. ``efficiency`` as in
    ``llminfer.cost.roofline`` (default 0.6 of peak FLOP/s, 0.8 of bandwidth).

    What is left out (where the model stops): kernel launch and per-layer latencies, the
    all-to-all's own latency at small messages, routing that is not uniform (``imbalance``
    stands for all of it), DeepEP's deduplication per node, MTP and speculative decoding.

    Introduced in: notebooks/09_mixture_of_experts.ipynb
    """
    if not isinstance(model, Model) or not model.is_moe:
        raise ValueError(f"model={model!r} must be a mixture-of-experts Model")
    check_int("batch", batch, minimum=1)
    check_int("context_tokens", context_tokens, minimum=0)
    check_int("new_tokens", new_tokens, minimum=1)
    check_int("ep", ep, minimum=1)
    check_int("redundant_experts", redundant_experts, minimum=0)
    check_int("gpus_per_node", gpus_per_node, minimum=1)
    check_number("network_bandwidth", network_bandwidth, inclusive=False)
    check_number("imbalance", imbalance, minimum=1.0)
    if ep == 1 and imbalance != 1.0:
        raise ValueError(f"imbalance={imbalance!r} needs ep > 1: one GPU is never imbalanced")
    if ep > model.n_experts + redundant_experts:
        raise ValueError(
            f"ep={ep} exceeds the {model.n_experts + redundant_experts} experts to place"
        )
    if not isinstance(overlap, bool):
        raise ValueError(f"overlap={overlap!r} must be True or False")
    if overlap and batch < 2:
        raise ValueError(f"overlap=True splits the batch in two: batch={batch} must be >= 2")
    check_dtype(weight_dtype, "weight_dtype")
    eff = as_efficiency(efficiency)
    w = moe_weights(model, weight_dtype, expert_dtype)
    p_expert = expert_params(model)
    e_local = (model.n_experts + redundant_experts) / ep

    def compute(b: int):
        if b == 0:
            return 0.0, 0.0, 0.0, 0.0, 0.0
        base = step_cost(model, b, new_tokens, context_tokens, weight_dtype, kv_dtype, tp=1)
        return _parts(model, gpu, w, p_expert, base, b * new_tokens, ep, imbalance, e_local, eff)

    comm_per_token = _comm_per_token(
        model, gpu, ep, dispatch_dtype, combine_dtype, gpus_per_node, network_bandwidth
    )
    comm_bytes = batch * new_tokens * comm_per_token[0] * imbalance
    comm_s = batch * new_tokens * comm_per_token[1] * imbalance
    if overlap:
        first, second = compute((batch + 1) // 2), compute(batch // 2)
        attention_s, expert_s = first[0] + second[0], first[1] + second[1]
        attention_bytes, expert_bytes = first[2] + second[2], first[3] + second[3]
        touched = first[4]
        step_s = max(attention_s + expert_s, comm_s)
    else:
        attention_s, expert_s, attention_bytes, expert_bytes, touched = compute(batch)
        step_s = attention_s + expert_s + comm_s
    times = dict(zip(PARTS, (attention_s, expert_s, comm_s), strict=True))
    return EPStep(
        model=model.name,
        gpu=gpu.name,
        ep=ep,
        batch=batch,
        new_tokens=new_tokens,
        context_tokens=context_tokens,
        imbalance=float(imbalance),
        overlap=overlap,
        attention_s=attention_s,
        expert_s=expert_s,
        comm_s=comm_s,
        step_s=step_s,
        attention_bytes=attention_bytes,
        expert_bytes=expert_bytes,
        comm_bytes=comm_bytes,
        experts_per_gpu=e_local,
        experts_touched_per_gpu=float(touched),
        bound=max(times, key=times.get),
    )


def _comm_per_token(model, gpu, ep, dispatch_dtype, combine_dtype, gpus_per_node, network):
    """(bytes, seconds) of all-to-all per token on one GPU of an EP group of ``ep``."""
    dispatch, combine = all_to_all_bytes_per_token(model, ep, dispatch_dtype, combine_dtype)
    per_token = dispatch + combine
    if ep == 1:
        return per_token, 0.0
    remote = max(0, ep - gpus_per_node) / (ep - 1)  # share of other GPUs on other nodes
    link = gpu.interconnect_bandwidth or gpu.pcie_bandwidth
    if link is None and remote < 1:
        raise ValueError(f"gpu={gpu.name!r} lists no GPU-to-GPU link for ep={ep}")
    local_s = per_token * (1 - remote) / link if remote < 1 else 0.0
    return per_token, max(local_s, per_token * remote / network)


class EPStepTime:
    """A step-time callable for ``llminfer.sim.simulate.simulate(step_time=...)``: one
    data-parallel attention rank of an EP group, every other rank assumed as loaded as it.

    Called with an engine step's counts (prefill tokens, attended pairs, decoding sequences,
    their cached tokens, cached tokens prompt chunks attend to), it returns seconds: the
    same three parts as ``ep_step`` (attention side from ``mixed_step_cost``, the hottest
    GPU's experts over the group's ``ep ×`` tokens, the all-to-all), summed, or with
    ``overlap`` the two half-steps' compute against the all-to-all. Pair it with
    ``capacity_blocks = ep_capacity_blocks(...)``. With ``ep=1`` it times a step at the
    roofline of ``DEFAULT_EFFICIENCY`` (not an engine profile).

    Introduced in: notebooks/09_mixture_of_experts.ipynb
    """

    def __init__(
        self,
        model: Model,
        gpu: GPU,
        ep: int = 1,
        weight_dtype: str = "fp8",
        expert_dtype: str | None = None,
        kv_dtype: str = "bf16",
        imbalance: float = 1.0,
        overlap: bool = False,
        redundant_experts: int = 0,
        dispatch_dtype: str = "fp8",
        combine_dtype: str = "bf16",
        gpus_per_node: int = GPUS_PER_NODE,
        network_bandwidth: float = NETWORK_BYTES_PER_S,
        efficiency=None,
    ) -> None:
        # One call validates every argument the way ep_step does.
        ep_step(
            model, gpu, 2, 1, ep=ep, weight_dtype=weight_dtype, expert_dtype=expert_dtype,
            kv_dtype=kv_dtype, imbalance=imbalance, overlap=overlap,
            redundant_experts=redundant_experts, dispatch_dtype=dispatch_dtype,
            combine_dtype=combine_dtype, gpus_per_node=gpus_per_node,
            network_bandwidth=network_bandwidth, efficiency=efficiency,
        )  # fmt: skip
        self.model, self.gpu, self.ep = model, gpu, ep
        self.kv_dtype, self.imbalance, self.overlap = kv_dtype, float(imbalance), overlap
        self.weights = moe_weights(model, weight_dtype, expert_dtype)
        self.p_expert = expert_params(model)
        self.e_local = (model.n_experts + redundant_experts) / ep
        self.eff = as_efficiency(efficiency)
        self.comm_s_per_token = _comm_per_token(
            model, gpu, ep, dispatch_dtype, combine_dtype, gpus_per_node, network_bandwidth
        )[1]

    def _compute(self, pt, pa, ds, dc, pc) -> float:
        tokens = pt + ds
        if tokens == 0:
            return 0.0
        base = mixed_step_cost(
            self.model, pt, pa, ds, dc, pc, self.weights.weight_dtype, self.kv_dtype
        )
        parts = _parts(
            self.model, self.gpu, self.weights, self.p_expert, base, tokens, self.ep,
            self.imbalance, self.e_local, self.eff,
        )  # fmt: skip
        return parts[0] + parts[1]

    def __call__(self, pt: int, pa: int, ds: int, dc: int, pc: int = 0) -> float:
        tokens = pt + ds
        if tokens == 0:
            return 0.0
        comm = tokens * self.comm_s_per_token * self.imbalance
        if not self.overlap or tokens < 2:
            return self._compute(pt, pa, ds, dc, pc) + comm
        halves = [
            (p, a, d, c, q)
            for p, a, d, c, q in (
                ((pt + 1) // 2, (pa + 1) // 2, (ds + 1) // 2, (dc + 1) // 2, (pc + 1) // 2),
                (pt // 2, pa // 2, ds // 2, dc // 2, pc // 2),
            )
        ]
        return max(sum(self._compute(*h) for h in halves), comm)


def ep_capacity_blocks(
    model: Model,
    gpu: GPU,
    ep: int,
    block_size: int = 16,
    weight_dtype: str = "fp8",
    expert_dtype: str | None = None,
    kv_dtype: str = "bf16",
    redundant_experts: int = 0,
    gpu_memory_utilization: float = 0.9,
) -> int:
    """KV blocks of ``block_size`` tokens one DP-attention rank holds under EP over ``ep``
    GPUs (``plan_ep_memory``'s KV budget), for ``simulate(capacity_blocks=...)``.

    Introduced in: notebooks/09_mixture_of_experts.ipynb
    """
    check_int("block_size", block_size, minimum=1)
    plan = plan_ep_memory(
        model, gpu, ep, weight_dtype, expert_dtype, kv_dtype,
        redundant_experts=redundant_experts, gpu_memory_utilization=gpu_memory_utilization,
    )  # fmt: skip
    blocks = plan.capacity_tokens // block_size
    if blocks < 1:
        raise ValueError(
            f"{model.name} on EP{ep} x {gpu.name}: the weights leave no KV cache "
            f"({plan.kv_budget_bytes / 1e9:.1f} GB); use more GPUs or narrower weights"
        )
    return blocks


def ep_sweep(
    model: Model,
    gpu: GPU,
    batches,
    eps=(1,),
    context_tokens: int = 2000,
    **kwargs,
) -> pd.DataFrame:
    """``ep_step`` for every batch (sequences per GPU) and EP degree: one row each, with
    ``ep``, ``batch``, the part times, ``step_s``, ``tokens_per_s_per_gpu``,
    ``tokens_per_s_per_user``, ``experts_touched_per_gpu``, ``touched_share`` (of the GPU's
    experts), ``bound``, and from ``plan_ep_memory`` (DP attention) ``max_seqs_per_gpu``
    and ``fits`` (the batch's KV cache fits beside the weights). ``kwargs`` go to
    ``ep_step``.

    Introduced in: notebooks/09_mixture_of_experts.ipynb
    """
    memory_keys = ("weight_dtype", "expert_dtype", "kv_dtype", "redundant_experts")
    memory_kwargs = {k: v for k, v in kwargs.items() if k in memory_keys}
    rows = []
    for ep in eps:
        plan = plan_ep_memory(
            model, gpu, int(ep), context_tokens=max(1, context_tokens), **memory_kwargs
        )
        for batch in batches:
            step = ep_step(model, gpu, int(batch), context_tokens, ep=int(ep), **kwargs)
            row = step.to_dict()
            row["touched_share"] = step.experts_touched_per_gpu / step.experts_per_gpu
            row["max_seqs_per_gpu"] = plan.max_seqs_per_gpu
            row["fits"] = plan.max_seqs_per_gpu >= batch
            rows.append(row)
    return pd.DataFrame(rows)


def expert_bound_batch(
    model: Model,
    ep: int = 1,
    share: float = 0.9,
    redundant_experts: int = 0,
) -> float:
    """Sequences per GPU (decode, one token each) at which each GPU's decode step touches
    ``share`` of its experts: ``saturation_tokens(E, k, share) / ep``. Below it a step reads
    roughly the *active* experts' bytes (cheap per step, costly per token as the batch
    shrinks); above it nearly *all* the GPU's experts, whose bytes then stay fixed while
    the batch grows. EP moves the point to ``1/ep`` of the one-GPU batch — and makes what
    is read there ``1/ep`` of the experts. DeepSeek-V3 at 90 %: 72.5 at EP 1, 0.5 at EP 144.

    Introduced in: notebooks/09_mixture_of_experts.ipynb
    """
    if not isinstance(model, Model) or not model.is_moe:
        raise ValueError(f"model={model!r} must be a mixture-of-experts Model")
    check_int("ep", ep, minimum=1)
    check_int("redundant_experts", redundant_experts, minimum=0)
    return saturation_tokens(model.n_experts, model.experts_per_token, share) / ep
