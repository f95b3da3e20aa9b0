"""Model architectures: the numbers that decide weight bytes, KV-cache bytes and FLOPs.

A ``Model`` is a frozen description of a decoder-only transformer. Presets for real models live
in ``llminfer/specs/presets/models.csv`` (see ``llminfer.specs.presets``); ``Model(...)`` by
keyword builds a
custom one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from llminfer.specs.checks import check_int


def llama_param_count(
    n_layers: int,
    hidden_size: int,
    n_heads: int,
    n_kv_heads: int,
    head_dim: int,
    intermediate_size: int,
    vocab_size: int,
    tie_word_embeddings: bool = False,
) -> int:
    """Parameters of a Llama-style decoder (no biases, SwiGLU MLP, RMSNorm), in parameters.

    Per layer: Q and O projections ``2·hidden·heads·head_dim``, K and V
    ``2·hidden·kv_heads·head_dim``, the MLP ``3·hidden·intermediate`` and two norms
    ``2·hidden``; plus the embedding, the final norm and (unless tied) the LM head
    ``vocab·hidden``. Exact for Llama 2 and 3 (Llama-2-7B → 6,738,415,616).

    Introduced in: notebooks/04_memory_budget.ipynb
    """
    for name, value in (
        ("n_layers", n_layers),
        ("hidden_size", hidden_size),
        ("n_heads", n_heads),
        ("n_kv_heads", n_kv_heads),
        ("head_dim", head_dim),
        ("intermediate_size", intermediate_size),
        ("vocab_size", vocab_size),
    ):
        check_int(name, value, minimum=1)
    attention = 2 * hidden_size * n_heads * head_dim + 2 * hidden_size * n_kv_heads * head_dim
    mlp = 3 * hidden_size * intermediate_size
    per_layer = attention + mlp + 2 * hidden_size
    embeddings = vocab_size * hidden_size * (1 if tie_word_embeddings else 2)
    return n_layers * per_layer + embeddings + hidden_size


@dataclass(frozen=True)
class Model:
    """A decoder-only transformer's shape.

    Sizes are counts (layers, heads, elements); ``n_params`` and ``n_active_params`` are
    parameters (for a mixture of experts, active = used per token). ``head_dim`` defaults to
    ``hidden_size // n_heads`` and ``n_kv_heads`` to ``n_heads`` (plain multi-head attention);
    ``n_params`` defaults to the Llama-style count of ``llama_param_count``.

    Attention variants that change the KV cache:
    - GQA/MQA: ``n_kv_heads < n_heads`` (MQA: 1).
    - Sliding window: ``sliding_window`` tokens on ``n_sliding_layers`` layers, the rest global.
    - MLA (DeepSeek): ``kv_lora_rank + qk_rope_head_dim`` elements per token per layer.

    Mixture of experts (all optional, read from the model's config.json): ``n_experts`` routed
    experts of which ``experts_per_token`` (top-k) work on each token; ``moe_intermediate_size``
    is one routed expert's FFN width (None: ``intermediate_size``, as Mixtral's config has it);
    ``n_dense_layers`` layers have a dense FFN instead (DeepSeek's ``first_k_dense_replace``,
    Llama 4 Maverick's every other layer); ``n_shared_experts`` always-on experts per MoE
    layer (counted in the non-routed part); ``n_mtp_layers`` multi-token-prediction modules
    (``num_nextn_predict_layers``), whose weights ``n_params`` does not include.

    Introduced in: notebooks/04_memory_budget.ipynb
    """

    name: str
    n_layers: int
    hidden_size: int
    n_heads: int
    n_kv_heads: int | None = None
    head_dim: int | None = None
    intermediate_size: int | None = None
    vocab_size: int = 32000
    max_context: int = 4096
    n_params: int | None = None
    n_active_params: int | None = None
    sliding_window: int | None = None
    n_sliding_layers: int = 0
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    n_experts: int | None = None
    experts_per_token: int | None = None
    moe_intermediate_size: int | None = None
    n_dense_layers: int = 0
    n_shared_experts: int = 0
    n_mtp_layers: int = 0
    source: str = field(default="custom", compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name={self.name!r} must be a non-empty string")
        for name in ("n_layers", "hidden_size", "n_heads", "vocab_size", "max_context"):
            check_int(name, getattr(self, name), minimum=1)
        if self.n_kv_heads is None:
            object.__setattr__(self, "n_kv_heads", self.n_heads)
        check_int("n_kv_heads", self.n_kv_heads, minimum=1)
        if self.n_heads % self.n_kv_heads:
            raise ValueError(
                f"n_kv_heads={self.n_kv_heads} must divide n_heads={self.n_heads} "
                "(each KV head serves a whole group of query heads)"
            )
        if self.head_dim is None:
            if self.hidden_size % self.n_heads:
                raise ValueError(
                    f"head_dim is not given and hidden_size={self.hidden_size} is not a "
                    f"multiple of n_heads={self.n_heads}; pass head_dim explicitly"
                )
            object.__setattr__(self, "head_dim", self.hidden_size // self.n_heads)
        check_int("head_dim", self.head_dim, minimum=1)
        if self.intermediate_size is None:
            object.__setattr__(self, "intermediate_size", 4 * self.hidden_size)
        check_int("intermediate_size", self.intermediate_size, minimum=1)
        self._check_sliding_window()
        self._check_mla()
        self._check_experts()
        self._check_params()

    def _check_sliding_window(self) -> None:
        if self.sliding_window is None:
            if self.n_sliding_layers:
                raise ValueError(
                    f"n_sliding_layers={self.n_sliding_layers} needs a sliding_window size"
                )
            return
        check_int("sliding_window", self.sliding_window, minimum=1)
        if not isinstance(self.n_sliding_layers, int) or not (
            1 <= self.n_sliding_layers <= self.n_layers
        ):
            raise ValueError(
                f"n_sliding_layers={self.n_sliding_layers!r} must be between 1 and "
                f"n_layers={self.n_layers} when sliding_window is set"
            )

    def _check_mla(self) -> None:
        if (self.kv_lora_rank is None) != (self.qk_rope_head_dim is None):
            raise ValueError(
                "kv_lora_rank and qk_rope_head_dim describe one MLA cache: give both or neither "
                f"(got kv_lora_rank={self.kv_lora_rank!r}, "
                f"qk_rope_head_dim={self.qk_rope_head_dim!r})"
            )
        if self.kv_lora_rank is not None:
            check_int("kv_lora_rank", self.kv_lora_rank, minimum=1)
            check_int("qk_rope_head_dim", self.qk_rope_head_dim, minimum=1)

    def _check_experts(self) -> None:
        if (self.n_experts is None) != (self.experts_per_token is None):
            raise ValueError(
                "n_experts and experts_per_token describe one mixture of experts: give both or "
                f"neither (got n_experts={self.n_experts!r}, "
                f"experts_per_token={self.experts_per_token!r})"
            )
        if self.n_experts is not None:
            check_int("n_experts", self.n_experts, minimum=1)
            check_int("experts_per_token", self.experts_per_token, minimum=1)
            if self.experts_per_token > self.n_experts:
                raise ValueError(
                    f"experts_per_token={self.experts_per_token} exceeds n_experts={self.n_experts}"
                )
        moe_only = {
            "moe_intermediate_size": self.moe_intermediate_size,
            "n_dense_layers": self.n_dense_layers,
            "n_shared_experts": self.n_shared_experts,
        }
        if self.n_experts is None:
            given = [f"{k}={v!r}" for k, v in moe_only.items() if v not in (None, 0)]
            if given:
                raise ValueError(
                    f"{', '.join(given)} describe a mixture of experts: give n_experts"
                )
        if self.moe_intermediate_size is not None:
            check_int("moe_intermediate_size", self.moe_intermediate_size, minimum=1)
        check_int("n_shared_experts", self.n_shared_experts, minimum=0)
        check_int("n_mtp_layers", self.n_mtp_layers, minimum=0)
        check_int("n_dense_layers", self.n_dense_layers, minimum=0)
        if self.n_dense_layers >= self.n_layers:
            raise ValueError(
                f"n_dense_layers={self.n_dense_layers} must be below n_layers={self.n_layers} "
                "(a mixture of experts needs at least one MoE layer)"
            )

    def _check_params(self) -> None:
        if self.n_params is None:
            count = llama_param_count(
                self.n_layers,
                self.hidden_size,
                self.n_heads,
                self.n_kv_heads,
                self.head_dim,
                self.intermediate_size,
                self.vocab_size,
            )
            object.__setattr__(self, "n_params", count)
        check_int("n_params", self.n_params, minimum=1)
        if self.n_active_params is None:
            object.__setattr__(self, "n_active_params", self.n_params)
        check_int("n_active_params", self.n_active_params, minimum=1)
        if self.n_active_params > self.n_params:
            raise ValueError(
                f"n_active_params={self.n_active_params} exceeds n_params={self.n_params}"
            )

    @property
    def attention(self) -> str:
        """The attention family that sizes the KV cache: "MHA", "GQA", "MQA" or "MLA"."""
        if self.kv_lora_rank is not None:
            return "MLA"
        if self.n_kv_heads == self.n_heads:
            return "MHA"
        return "MQA" if self.n_kv_heads == 1 else "GQA"

    @property
    def is_moe(self) -> bool:
        """True for a mixture of experts (only some parameters work on each token)."""
        return self.n_experts is not None and self.n_experts > 1

    @property
    def n_moe_layers(self) -> int:
        """Layers whose FFN is a mixture of experts (0 for a dense model)."""
        return self.n_layers - self.n_dense_layers if self.is_moe else 0

    @property
    def n_global_layers(self) -> int:
        """Layers that attend to the whole context (the others use the sliding window)."""
        return self.n_layers - self.n_sliding_layers


def tensor_parallel_sizes(model: Model, up_to: int = 1024) -> list[int]:
    """The tensor-parallel degrees (GPU counts) an engine accepts for ``model``, up to ``up_to``.

    vLLM's rule: the attention heads must split evenly (``n_heads % tp == 0``, checked in
    ``ModelConfig.verify_with_parallel_config``), and the KV heads must either split evenly
    (``n_kv_heads % tp == 0``) or, when ``tp`` exceeds them, be replicated a whole number of
    times (``tp % n_kv_heads == 0``, one KV head per GPU; ``QKVParallelLinear`` in
    vllm/model_executor/layers/linear.py). MLA models keep one shared latent per token, so only
    the attention-head rule applies. Llama-3.1-8B (32 heads, 8 KV heads): 1, 2, 4, 8, 16, 32.

    Introduced in: notebooks/04_memory_budget.ipynb
    """
    check_int("up_to", up_to, minimum=1)
    return [tp for tp in range(1, up_to + 1) if _tp_problem(model, tp) is None]


def _tp_problem(model: Model, tp: int) -> str | None:
    if model.n_heads % tp:
        return f"the {model.n_heads} attention heads do not split evenly over {tp} GPUs"
    if model.kv_lora_rank is not None:
        return None
    kv = model.n_kv_heads
    if tp <= kv and kv % tp:
        return f"the {kv} KV heads do not split evenly over {tp} GPUs"
    if tp > kv and tp % kv:
        return f"{tp} GPUs cannot each hold a whole replica of one of the {kv} KV heads"
    return None


def check_tensor_parallel(model: Model, tp: object, name: str = "tp") -> int:
    """Return ``tp`` when ``model`` can be split over that many GPUs, else raise ValueError.

    The message names the parameter (``name``: ``tp``, ``n_gpus`` or ``--n-gpus``), the value
    and the degrees that work (see ``tensor_parallel_sizes``). Llama-3.1-8B at TP = 3 is
    refused: 8 KV heads cannot be split three ways (storing ``8 // 3 = 2`` heads per GPU would
    lose two of them).

    Introduced in: notebooks/04_memory_budget.ipynb
    """
    tp = check_int(name, tp, minimum=1)
    problem = _tp_problem(model, tp)
    if problem is not None:
        allowed = ", ".join(str(t) for t in tensor_parallel_sizes(model, max(tp, model.n_heads)))
        raise ValueError(
            f"{name}={tp}: {model.name} cannot be tensor-parallel over {tp} GPUs ({problem}); "
            f"allowed: {allowed}"
        )
    return tp
