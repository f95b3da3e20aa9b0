"""Answers to notebook 09's "Try it" questions, computed with llminfer.cost.moe and
llminfer.sim.expert_parallel."""

from llminfer.exercises import Exercise
from llminfer.language import N_


def _touched_at_32() -> float:
    from llminfer.cost.moe import experts_touched
    from llminfer.specs.presets import get_model

    m = get_model("deepseek-v3")
    return float(experts_touched(m.n_experts, m.experts_per_token, 32))


def _qwen_bound_batch() -> float:
    from llminfer.sim.expert_parallel import expert_bound_batch
    from llminfer.specs.presets import get_model

    return expert_bound_batch(get_model("qwen3-30b-a3b"), ep=1, share=0.9)


def _gpt_oss_20b_gb() -> float:
    from llminfer.cost.moe import moe_weights
    from llminfer.specs.presets import get_model

    return moe_weights(get_model("gpt-oss-20b"), "bf16", "mxfp4").total_bytes / 1e9


def _deepseek_seqs_per_gpu() -> float:
    from llminfer.cost.moe import plan_ep_memory
    from llminfer.specs.presets import get_gpu, get_model

    plan = plan_ep_memory(
        get_model("deepseek-v3"), get_gpu("h800"), 144, "fp8", redundant_experts=32,
        context_tokens=4989,
    )  # fmt: skip
    return plan.max_seqs_per_gpu


def _lmsys_bound() -> str:
    from llminfer.sim.expert_parallel import ep_step
    from llminfer.specs.presets import get_gpu, get_model

    step = ep_step(
        get_model("deepseek-v3"), get_gpu("h100-sxm"), 256, 2000, ep=72, redundant_experts=32,
        overlap=True,
    )  # fmt: skip
    return step.bound


EXERCISES: tuple[Exercise, ...] = (
    Exercise(
        "09.1",
        N_(
            "DeepSeek-V3 (256 routed experts, 8 per token): how many distinct routed experts per "
            "layer does a decode step of 32 sequences read, on average, when one GPU holds them "
            "all?"
        ),
        _touched_at_32,
        unit="experts",
        hint=N_("E·(1 − (1 − k/E)^T) with E = 256, k = 8, T = 32."),
    ),
    Exercise(
        "09.2",
        N_(
            "Qwen3-30B-A3B (128 experts, 8 per token) on one GPU: from how many sequences per "
            "decode step does the step touch 90 % of the experts?"
        ),
        _qwen_bound_batch,
        unit="sequences",
        hint=N_("Solve 1 − (1 − k/E)^T = 0.9 for T: T = ln(0.1) / ln(1 − 8/128)."),
    ),
    Exercise(
        "09.3",
        N_(
            "gpt-oss-20b ships its experts in MXFP4 and everything else in BF16. How many GB "
            "(10^9 bytes) are its weights?"
        ),
        _gpt_oss_20b_gb,
        unit="GB",
        hint=N_(
            "MXFP4 is 4.25 bits per weight (an E8M0 scale per 32); moe_weights splits the "
            "experts from the rest."
        ),
    ),
    Exercise(
        "09.4",
        N_(
            "DeepSeek-V3 in FP8 on H800s, EP144 with 32 redundant experts and data-parallel "
            "attention: how many sequences of 4,989 tokens fit in one GPU's KV cache?"
        ),
        _deepseek_seqs_per_gpu,
        unit="sequences",
        hint=N_(
            "plan_ep_memory(model, gpu, 144, 'fp8', redundant_experts=32, context_tokens=4989)."
        ),
    ),
    Exercise(
        "09.5",
        N_(
            "LMSYS's decode setup (H100, EP72, 256 sequences per GPU of 2,000 tokens, two-batch "
            "overlap): which part bounds the step in the model: attention, experts or all-to-all?"
        ),
        _lmsys_bound,
        rel_tol=0.0,
        hint=N_("ep_step(...).bound; compare comm_s with attention_s + expert_s."),
        accept=("all to all", "alltoall", "a2a", "communication"),
    ),
)
