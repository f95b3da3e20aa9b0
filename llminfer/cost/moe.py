"""Chapter 9's byte arithmetic for mixtures of experts: which experts a step touches, what
expert parallelism stores on each GPU, and what the all-to-all sends.

A mixture-of-experts (MoE) layer replaces the dense FFN by ``E`` routed experts of which a
router picks ``k`` per token (plus, in DeepSeek, Kimi, GLM and Llama 4, always-on *shared*
experts). A decode step reads the weights of every expert at least one of its ``T`` tokens
picked: if each token picks its ``k`` of ``E`` uniformly and independently, an expert is
missed by all of them with probability ``(1 − k/E)^T``, so on average

    experts touched per layer = E · (1 − (1 − k/E)^T)

(``experts_touched``; the one place this formula lives: ``llminfer.cost.roofline`` reads
weights through it). Counts are parameters, sizes bytes (GB = 10^9 B), unless a name says
otherwise. Pure functions of ``llminfer.specs``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from llminfer.cost.memory import (
    default_reserve_bytes,
    kv_bytes_per_token,
    kv_cache_bytes,
    weight_bytes,
)
from llminfer.specs.checks import check_int, check_number
from llminfer.specs.hardware import GPU
from llminfer.specs.models import Model, check_tensor_parallel
from llminfer.units import bytes_per_element, check_dtype, format_bytes

#: Attention layouts next to expert parallelism: "dp" = data-parallel attention (every GPU
#: holds all attention weights and only its own sequences' KV cache, as DeepSeek's
#: "MLA/Shared Expert DP144"), "tp" = attention tensor-parallel over the EP group.
ATTENTION_LAYOUTS = ("dp", "tp")
#: Channels that share one FP32 scale when activations are dispatched in FP8 (DeepEP's
#: per-token, per-128-channel scaling, github.com/deepseek-ai/DeepEP README).
DISPATCH_SCALE_CHANNELS = 128


def _check_moe(model: Model) -> Model:
    if not isinstance(model, Model):
        raise ValueError(f"model={model!r} must be a Model (see llminfer.get_model)")
    if not model.is_moe:
        raise ValueError(
            f"model={model.name!r} is dense (n_experts={model.n_experts!r}); "
            "this needs a mixture of experts, e.g. get_model('deepseek-v3')"
        )
    return model


def expert_touch_share(n_experts: int, experts_per_token: int, tokens):
    """Expected share of a layer's ``n_experts`` routed experts that ``tokens`` tokens touch,
    each picking ``experts_per_token`` uniformly and independently: ``1 − (1 − k/E)^T``.

    ``tokens`` may be a number or a numpy array. DeepSeek-V3 (E = 256, k = 8): one token
    touches 8/256 = 3.1 %, 64 tokens 86.8 %, 256 tokens 99.97 %.

    Introduced in: notebooks/09_mixture_of_experts.ipynb
    """
    check_int("n_experts", n_experts, minimum=1)
    check_int("experts_per_token", experts_per_token, minimum=1)
    if experts_per_token > n_experts:
        raise ValueError(f"experts_per_token={experts_per_token} exceeds n_experts={n_experts}")
    if not np.isscalar(tokens):
        tokens = np.asarray(tokens, dtype=float)
    if np.any(np.isnan(tokens)) or np.any(np.asarray(tokens) < 0):
        raise ValueError(f"tokens={tokens!r} must be numbers >= 0")
    return 1 - (1 - experts_per_token / n_experts) ** tokens


def experts_touched(n_experts: int, experts_per_token: int, tokens):
    """Expected distinct routed experts per layer that ``tokens`` tokens read:
    ``E · (1 − (1 − k/E)^T)`` (see ``expert_touch_share``). DeepSeek-V3 at T = 1: 8; T = 64:
    222.4; T = 256: 255.9 of 256.

    Introduced in: notebooks/09_mixture_of_experts.ipynb
    """
    return n_experts * expert_touch_share(n_experts, experts_per_token, tokens)


def saturation_tokens(n_experts: int, experts_per_token: int, share: float = 0.9) -> float:
    """Tokens in a step at which the expected touched share of experts reaches ``share``:
    ``ln(1 − share) / ln(1 − k/E)``. DeepSeek-V3 at 90 %: 72.5 tokens; Mixtral (8, top-2):
    8.0 tokens; gpt-oss-120b (128, top-4): 72.5 tokens.

    Introduced in: notebooks/09_mixture_of_experts.ipynb
    """
    check_int("n_experts", n_experts, minimum=1)
    check_int("experts_per_token", experts_per_token, minimum=1)
    check_number("share", share)
    if not 0 < share < 1:
        raise ValueError(f"share={share!r} must be between 0 and 1 (exclusive)")
    if experts_per_token >= n_experts:
        return 1.0
    return math.log(1 - share) / math.log(1 - experts_per_token / n_experts)


def expert_params(model: Model) -> float:
    """Parameters of one routed expert summed over all MoE layers.

    With ``moe_intermediate_size`` known (every new preset): a SwiGLU expert's gate, up and
    down projections, ``3 × hidden × moe_intermediate × n_moe_layers`` (DeepSeek-V3:
    3 × 7168 × 2048 × 58 = 2,554,331,136). Otherwise it is inferred from the totals,
    ``(n_params − n_active_params) / (E − k)`` (Mixtral: 1,409,286,144 ÷ … per expert), since
    the inactive parameters are exactly the ``E − k`` experts a token skips.

    Introduced in: notebooks/09_mixture_of_experts.ipynb
    """
    m = _check_moe(model)
    if m.moe_intermediate_size is not None:
        return float(3 * m.hidden_size * m.moe_intermediate_size * m.n_moe_layers)
    e, k = m.n_experts, m.experts_per_token
    return (m.n_params - m.n_active_params) / (e - k) if e > k else 0.0


def non_expert_params(model: Model) -> float:
    """Parameters every token uses: attention, dense-FFN layers, shared experts, router, norms,
    embedding and LM head — ``n_params − E × expert_params``. DeepSeek-V3: 17.1 B.

    Introduced in: notebooks/09_mixture_of_experts.ipynb
    """
    m = _check_moe(model)
    return max(0.0, m.n_params - m.n_experts * expert_params(m))


def derived_active_params(model: Model) -> float:
    """Active parameters per token from the architecture: ``non_expert + k × expert``.
    A check on a preset against its card's figure (DeepSeek-V3: 37.53 B derived, card 37 B).

    Introduced in: notebooks/09_mixture_of_experts.ipynb
    """
    m = _check_moe(model)
    return non_expert_params(m) + m.experts_per_token * expert_params(m)


@dataclass(frozen=True)
class MoEWeights:
    """A mixture of experts' weights in bytes: ``non_expert_bytes`` (everything but the routed
    experts, ``embedding_bytes`` of it the input table a step only gathers rows from) and
    ``expert_bytes`` (one routed expert over all MoE layers), for ``n_experts`` experts.

    Introduced in: notebooks/09_mixture_of_experts.ipynb
    """

    model: str
    weight_dtype: str
    expert_dtype: str
    non_expert_bytes: float
    embedding_bytes: float
    expert_bytes: float
    n_experts: int
    experts_per_token: int

    @property
    def total_bytes(self) -> float:
        return self.non_expert_bytes + self.n_experts * self.expert_bytes

    @property
    def active_bytes(self) -> float:
        """Bytes one token's forward pass uses (non-expert + k experts)."""
        return self.non_expert_bytes + self.experts_per_token * self.expert_bytes

    def step_read_bytes(self, tokens) -> float:
        """Bytes a step over ``tokens`` tokens reads on one GPU holding the whole model: the
        non-expert weights (minus the gathered input table) plus the experts touched."""
        touched = self.expert_bytes * self.n_experts
        touched = touched * expert_touch_share(self.n_experts, self.experts_per_token, tokens)
        return self.non_expert_bytes - self.embedding_bytes + touched


def moe_weights(
    model: Model, weight_dtype: str = "bf16", expert_dtype: str | None = None
) -> MoEWeights:
    """Split ``model``'s weights into non-expert and routed-expert bytes.

    ``weight_dtype`` is the format of attention, dense layers, shared experts and embeddings;
    ``expert_dtype`` that of the routed experts (default: the same). gpt-oss ships
    ``expert_dtype="mxfp4"`` with bf16 elsewhere; DeepSeek-V3 ships fp8 throughout. Bytes go
    through ``weight_bytes`` (group scales for fp8/int8/int4/fp4, the formats' own for
    mxfp4/nvfp4). gpt-oss-120b so: 4.33 GB non-expert (bf16) + 60.9 GB experts (mxfp4).

    Introduced in: notebooks/09_mixture_of_experts.ipynb
    """
    m = _check_moe(model)
    weight_dtype = check_dtype(weight_dtype, "weight_dtype")
    expert_dtype = (
        weight_dtype if expert_dtype is None else check_dtype(expert_dtype, "expert_dtype")
    )
    per_expert = expert_params(m)
    shared = non_expert_params(m)
    embed = m.vocab_size * m.hidden_size
    return MoEWeights(
        model=m.name,
        weight_dtype=weight_dtype,
        expert_dtype=expert_dtype,
        non_expert_bytes=weight_bytes(shared, weight_dtype) if shared else 0.0,
        embedding_bytes=weight_bytes(embed, weight_dtype),
        expert_bytes=weight_bytes(per_expert, expert_dtype) if per_expert else 0.0,
        n_experts=m.n_experts,
        experts_per_token=m.experts_per_token,
    )


def remote_copies_per_token(experts_per_token: int, ep: int) -> float:
    """Expected other GPUs one token's activations go to under expert parallelism over ``ep``
    GPUs: each of the ``ep − 1`` others holds at least one of its ``k`` experts with
    probability ``1 − (1 − 1/ep)^k`` (a token sends one copy per GPU, not per expert, as
    DeepEP does). k = 8: 0 at EP 1, 4.66 at EP 8, 7.75 at EP 144.

    Introduced in: notebooks/09_mixture_of_experts.ipynb
    """
    check_int("experts_per_token", experts_per_token, minimum=1)
    check_int("ep", ep, minimum=1)
    return (ep - 1) * (1 - (1 - 1 / ep) ** experts_per_token)


def all_to_all_bytes_per_token(
    model: Model,
    ep: int,
    dispatch_dtype: str = "fp8",
    combine_dtype: str = "bf16",
) -> tuple[float, float]:
    """Bytes one token sends to other GPUs in one step under EP over ``ep`` GPUs, summed over
    the MoE layers: ``(dispatch, combine)``.

    Per MoE layer a token's hidden vector (``hidden`` numbers) goes to each other GPU that
    holds one of its experts (``remote_copies_per_token``) — *dispatch*, in ``dispatch_dtype``
    (FP8 in DeepSeek's deployment, plus one FP32 scale per 128 channels) — and the experts'
    outputs come back — *combine*, in ``combine_dtype`` (BF16). DeepSeek-V3 at EP 144:
    per layer 7.75 × (7,168 + 224) B dispatch and 7.75 × 14,336 B combine; 3.32 MB + 6.45 MB
    per token over its 58 MoE layers.

    Introduced in: notebooks/09_mixture_of_experts.ipynb
    """
    m = _check_moe(model)
    copies = remote_copies_per_token(m.experts_per_token, ep)
    per_copy_dispatch = m.hidden_size * bytes_per_element(
        check_dtype(dispatch_dtype, "dispatch_dtype")
    )
    if bytes_per_element(dispatch_dtype) <= 1:
        per_copy_dispatch += math.ceil(m.hidden_size / DISPATCH_SCALE_CHANNELS) * 4
    per_copy_combine = m.hidden_size * bytes_per_element(
        check_dtype(combine_dtype, "combine_dtype")
    )
    layers = m.n_moe_layers
    return copies * per_copy_dispatch * layers, copies * per_copy_combine * layers


@dataclass(frozen=True)
class EPMemoryPlan:
    """One GPU's memory under expert parallelism (bytes per GPU unless named otherwise).

    ``experts_per_gpu`` routed experts (redundant ones included) and the non-expert weights
    (a full copy with data-parallel attention, ``1/ep`` with tensor-parallel attention); the
    rest of the usable memory is KV cache: ``capacity_tokens`` tokens at
    ``kv_bytes_per_token`` each, ``max_seqs_per_gpu`` sequences of ``context_tokens``, and
    ``max_seqs_total`` over the group (``×ep`` with DP attention, where each GPU holds only
    its own sequences; ``×1`` with TP attention over an MLA latent, which every GPU stores
    whole).

    Introduced in: notebooks/09_mixture_of_experts.ipynb
    """

    model: str
    gpu: str
    ep: int
    attention: str
    experts_per_gpu: float
    expert_weight_bytes: float
    non_expert_weight_bytes: float
    reserve_bytes: float
    usable_bytes: float
    kv_budget_bytes: float
    kv_bytes_per_token: float
    capacity_tokens: int
    context_tokens: int
    max_seqs_per_gpu: float
    max_seqs_total: float

    @property
    def weight_bytes(self) -> float:
        return self.expert_weight_bytes + self.non_expert_weight_bytes

    @property
    def fits(self) -> bool:
        return self.kv_budget_bytes > 0 and self.max_seqs_per_gpu >= 1

    def __str__(self) -> str:
        return (
            f"{self.model} on {self.ep} x {self.gpu} (EP{self.ep}, {self.attention.upper()} "
            f"attention): {self.experts_per_gpu:g} experts + non-expert weights = "
            f"{format_bytes(self.weight_bytes, binary=False)} per GPU, KV budget "
            f"{format_bytes(max(0.0, self.kv_budget_bytes), binary=False)} = "
            f"{self.capacity_tokens:,} tokens; {self.max_seqs_per_gpu:.1f} sequences of "
            f"{self.context_tokens:,} tokens per GPU, {self.max_seqs_total:,.0f} in all"
        )


def plan_ep_memory(
    model: Model,
    gpu: GPU,
    ep: int,
    weight_dtype: str = "fp8",
    expert_dtype: str | None = None,
    kv_dtype: str = "bf16",
    attention: str = "dp",
    redundant_experts: int = 0,
    context_tokens: int = 4096,
    gpu_memory_utilization: float = 0.9,
    reserve_bytes: float | None = None,
) -> EPMemoryPlan:
    """Memory of one GPU when ``model``'s routed experts are spread over ``ep`` GPUs.

    Experts per GPU: ``(n_experts + redundant_experts) / ep`` (DeepSeek's decode: (256 + 32) /
    144 = 2). Non-expert weights: whole on every GPU with ``attention="dp"``, ``1/ep`` with
    ``"tp"``. KV per token: the full latent (MLA) or all KV heads with DP attention; with TP
    attention, heads are sharded as ``kv_bytes_per_token(model, tp=ep)`` says — and an MLA
    latent cannot be sharded, so every GPU stores every sequence's latent. ``reserve_bytes``
    defaults to ``default_reserve_bytes`` (runtime + activation peak).

    Introduced in: notebooks/09_mixture_of_experts.ipynb
    """
    m = _check_moe(model)
    ep = check_int("ep", ep, minimum=1)
    check_int("redundant_experts", redundant_experts, minimum=0)
    check_int("context_tokens", context_tokens, minimum=1)
    if attention not in ATTENTION_LAYOUTS:
        raise ValueError(f"attention={attention!r} must be one of {', '.join(ATTENTION_LAYOUTS)}")
    if ep > m.n_experts + redundant_experts:
        raise ValueError(
            f"ep={ep} exceeds the {m.n_experts + redundant_experts} experts to place "
            "(n_experts + redundant_experts): some GPU would hold none"
        )
    if isinstance(gpu_memory_utilization, bool) or not (
        isinstance(gpu_memory_utilization, (int, float)) and 0 < gpu_memory_utilization <= 1
    ):
        raise ValueError(f"gpu_memory_utilization={gpu_memory_utilization!r} must be in (0, 1]")
    tp = 1 if attention == "dp" else check_tensor_parallel(m, ep, "ep")
    w = moe_weights(m, weight_dtype, expert_dtype)
    per_gpu = (m.n_experts + redundant_experts) / ep
    expert_b = per_gpu * w.expert_bytes
    non_expert_b = w.non_expert_bytes / tp
    if reserve_bytes is None:
        reserve_bytes = default_reserve_bytes(m, tp=tp)
    else:
        check_number("reserve_bytes", reserve_bytes)
    usable = float(gpu.memory_bytes) * gpu_memory_utilization
    budget = usable - expert_b - non_expert_b - reserve_bytes
    per_token = kv_bytes_per_token(m, kv_dtype, tp=tp)
    capacity = int(max(0.0, budget) // per_token)
    per_seq = kv_cache_bytes(m, context_tokens, kv_dtype, tp=tp)
    seqs = max(0.0, budget) / per_seq
    total = seqs * (ep if attention == "dp" else 1)
    return EPMemoryPlan(
        model=m.name,
        gpu=gpu.name,
        ep=ep,
        attention=attention,
        experts_per_gpu=per_gpu,
        expert_weight_bytes=expert_b,
        non_expert_weight_bytes=non_expert_b,
        reserve_bytes=float(reserve_bytes),
        usable_bytes=usable,
        kv_budget_bytes=budget,
        kv_bytes_per_token=per_token,
        capacity_tokens=capacity,
        context_tokens=context_tokens,
        max_seqs_per_gpu=seqs,
        max_seqs_total=total,
    )
