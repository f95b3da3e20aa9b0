"""Mixture-of-experts serving (notebook 09): experts touched, expert bytes, FP4 scales, expert
parallelism's memory and step time, against hand computations and published deployments."""

import math

import pytest

from llminfer import get_gpu, get_model, step_cost
from llminfer.cost.memory import weight_bytes
from llminfer.cost.moe import (
    all_to_all_bytes_per_token,
    derived_active_params,
    expert_params,
    experts_touched,
    moe_weights,
    non_expert_params,
    plan_ep_memory,
    remote_copies_per_token,
    saturation_tokens,
)
from llminfer.cost.roofline import compute_dtype
from llminfer.sim.expert_parallel import ep_step, ep_sweep, expert_bound_batch
from llminfer.specs.models import Model
from llminfer.units import bits_per_element, bytes_per_element

DS = get_model("deepseek-v3")
H800, H100 = get_gpu("h800"), get_gpu("h100-sxm")


# --- experts touched ----------------------------------------------------------------------


def test_experts_touched_against_hand_computation():
    # E·(1 − (1 − k/E)^T), by hand: DeepSeek-V3 E=256, k=8.
    assert experts_touched(256, 8, 1) == pytest.approx(8.0)
    assert experts_touched(256, 8, 64) == pytest.approx(256 * (1 - (31 / 32) ** 64))
    assert experts_touched(256, 8, 64) == pytest.approx(222.44, abs=0.01)
    assert experts_touched(8, 2, 0) == 0
    assert saturation_tokens(256, 8, 0.9) == pytest.approx(math.log(0.1) / math.log(31 / 32))
    assert saturation_tokens(8, 2, 0.9) == pytest.approx(8.004, abs=1e-3)  # Mixtral
    assert expert_bound_batch(DS, ep=144) == pytest.approx(72.525 / 144, rel=1e-4)


def test_roofline_reads_the_touched_experts_through_the_same_formula():
    per_expert = expert_params(DS)  # params of one expert over 58 layers
    assert per_expert == 3 * 7168 * 2048 * 58 == 2_554_331_136
    table = DS.vocab_size * DS.hidden_size
    one = step_cost(DS, 1, 1, 100, "bf16")
    expect = (DS.n_params - 256 * per_expert - table) * 2 + 8 * per_expert * 2
    assert one.weight_bytes == pytest.approx(expect, rel=1e-9)
    many = step_cost(DS, 64, 1, 100, "bf16")
    touched = experts_touched(256, 8, 64)
    assert many.weight_bytes == pytest.approx(expect + (touched - 8) * per_expert * 2, rel=1e-9)


def test_ep1_step_is_step_cost_to_the_byte():
    for batch in (1, 16, 256):
        step = ep_step(DS, H800, batch, 1000, ep=1, weight_dtype="fp8")
        cost = step_cost(DS, batch, 1, 1000, "fp8", "bf16")
        assert step.attention_bytes + step.expert_bytes == pytest.approx(cost.memory_bytes)
        assert step.comm_s == 0.0


# --- presets against their configs -----------------------------------------------------------

CONFIGS = {  # (layers, hidden, heads, kv heads, E, k, expert width, dense layers, shared, vocab)
    "deepseek-v3": (61, 7168, 128, 128, 256, 8, 2048, 3, 1, 129280),
    "qwen3-30b-a3b": (48, 2048, 32, 4, 128, 8, 768, 0, 0, 151936),
    "qwen3-235b-a22b": (94, 4096, 64, 4, 128, 8, 1536, 0, 0, 151936),
    "gpt-oss-20b": (24, 2880, 64, 8, 32, 4, 2880, 0, 0, 201088),
    "gpt-oss-120b": (36, 2880, 64, 8, 128, 4, 2880, 0, 0, 201088),
    "kimi-k2": (61, 7168, 64, 64, 384, 8, 2048, 1, 1, 163840),
    "llama-4-scout": (48, 5120, 40, 8, 16, 1, 8192, 0, 1, 202048),
    "llama-4-maverick": (48, 5120, 40, 8, 128, 1, 8192, 24, 1, 202048),
    "glm-4.5": (92, 5120, 96, 8, 160, 8, 1536, 3, 1, 151552),
    "glm-4.5-air": (46, 4096, 96, 8, 128, 8, 1408, 1, 1, 151552),
}


@pytest.mark.parametrize("key", CONFIGS)
def test_moe_preset_matches_its_config(key):
    m = get_model(key)
    got = (
        m.n_layers, m.hidden_size, m.n_heads, m.n_kv_heads, m.n_experts, m.experts_per_token,
        m.moe_intermediate_size, m.n_dense_layers, m.n_shared_experts, m.vocab_size,
    )  # fmt: skip
    assert got == CONFIGS[key]
    # The architecture's active count stays within 17 % of the card's (cards round, and some
    # leave out the embedding table; gpt-oss, Llama 4 Scout with its vision encoder).
    assert derived_active_params(m) == pytest.approx(m.n_active_params, rel=0.17)


def test_deepseek_v3_config_details():
    assert (DS.kv_lora_rank, DS.qk_rope_head_dim, DS.n_mtp_layers, DS.n_moe_layers) == (
        512, 64, 1, 58,
    )  # fmt: skip
    assert derived_active_params(DS) / 1e9 == pytest.approx(37.53, abs=0.01)  # card: 37B
    assert non_expert_params(DS) / 1e9 == pytest.approx(17.09, abs=0.01)
    # Counted exactly from the config for these (research notes: 3,353,032,704 and 32.86 B).
    for key in ("qwen3-30b-a3b", "qwen3-235b-a22b", "kimi-k2"):
        m = get_model(key)
        assert derived_active_params(m) == pytest.approx(m.n_active_params, rel=1e-9)


def test_new_gpus_against_their_sheets():
    h20 = get_gpu("h20")
    assert (h20.memory_bandwidth, h20.peak_flops("bf16"), h20.peak_flops("fp8")) == (
        4.0e12, 148e12, 296e12,
    )  # fmt: skip
    assert H800.interconnect_bandwidth == 200e9  # 400 GB/s bidirectional NVLink
    assert H800.peak_flops("bf16") == pytest.approx(989.4e12)
    assert get_gpu("b300").peak_flops("fp4") == pytest.approx(13.5e15)
    assert get_gpu("gb300").peak_flops("fp4") == pytest.approx(15e15)
    assert get_gpu("gb200").peak_flops("fp4") == pytest.approx(10e15)
    assert get_gpu("mi355x").peak_flops("fp4") == pytest.approx(10066.3e12)
    assert get_gpu("rtx-5090").memory_bandwidth == 1.792e12
    assert get_gpu("rtx-5090").interconnect_bandwidth is None
    for key in ("h20", "h800", "mi325x"):  # Hopper and CDNA 3: no FP4 tensor cores
        with pytest.raises(ValueError, match="dtype='fp4'"):
            get_gpu(key).peak_flops("fp4")
    for key in ("h20", "h800", "b300", "gb300", "gb200", "mi325x", "mi355x", "rtx-5090"):
        assert "UNCERTAIN" in get_gpu(key).source  # every new row says what is not verified


# --- FP4 ------------------------------------------------------------------------------------


def test_fp4_formats_count_their_scales():
    assert bits_per_element("nvfp4") == 4.5  # FP8 E4M3 scale per 16
    assert bits_per_element("mxfp4") == 4.25  # E8M0 scale per 32
    assert bytes_per_element("fp4") == 0.5
    assert weight_bytes(1000, "nvfp4") == 562.5
    assert weight_bytes(1000, "mxfp4") == 531.25
    assert weight_bytes(1000, "mxfp4", group_size=None) == 531.25  # scales are the format's
    # gpt-oss-20b: MXFP4 experts + BF16 rest against its checkpoint, 13,761,264,768 bytes
    # (model.safetensors.index.json total_size).
    total = moe_weights(get_model("gpt-oss-20b"), "bf16", "mxfp4").total_bytes
    assert total == pytest.approx(13_761_264_768, rel=0.005)


def test_fp4_flops_only_where_the_gpu_has_them():
    assert compute_dtype("nvfp4", get_gpu("b200")) == "fp4"
    assert compute_dtype("mxfp4", get_gpu("mi355x")) == "fp4"
    assert compute_dtype("mxfp4", H100) == "bf16"  # dequantised, multiplied in 16 bits
    assert compute_dtype("nvfp4", get_gpu("h20")) == "bf16"


# --- expert parallelism: memory -------------------------------------------------------------


def test_ep_memory_deepseek_decode_layout():
    plan = plan_ep_memory(DS, H800, 144, "fp8", redundant_experts=32, context_tokens=4989)
    assert plan.experts_per_gpu == 2  # (256 + 32) / 144, as DeepSeek's day-6 post says
    assert plan.expert_weight_bytes == pytest.approx(2 * weight_bytes(expert_params(DS), "fp8"))
    assert plan.non_expert_weight_bytes == pytest.approx(weight_bytes(non_expert_params(DS), "fp8"))
    assert plan.kv_bytes_per_token == 70_272  # each rank its own full latent, no replication
    assert plan.max_seqs_total == pytest.approx(144 * plan.max_seqs_per_gpu)
    assert plan.max_seqs_per_gpu == pytest.approx(149.1, abs=0.1)


def test_tp_attention_replicates_the_mla_latent():
    dp = plan_ep_memory(DS, H800, 16, "fp8", attention="dp", context_tokens=4096)
    tp = plan_ep_memory(DS, H800, 16, "fp8", attention="tp", context_tokens=4096)
    assert tp.kv_bytes_per_token == dp.kv_bytes_per_token == 70_272
    assert tp.non_expert_weight_bytes == pytest.approx(dp.non_expert_weight_bytes / 16)
    assert tp.max_seqs_total == tp.max_seqs_per_gpu  # every GPU holds every sequence
    assert dp.max_seqs_total > 5 * tp.max_seqs_total


def test_all_to_all_bytes_against_hand_computation():
    copies = remote_copies_per_token(8, 144)
    assert copies == pytest.approx(143 * (1 - (143 / 144) ** 8))
    assert remote_copies_per_token(8, 1) == 0
    dispatch, combine = all_to_all_bytes_per_token(DS, 144)
    assert dispatch == pytest.approx(copies * (7168 + 56 * 4) * 58)  # fp8 + fp32 per 128
    assert combine == pytest.approx(copies * 7168 * 2 * 58)  # bf16


# --- expert parallelism: step time and the published deployments ----------------------------

#: Stated in notebook 09: the model's estimates are within this factor of the published
#: figures, and never below them (a roofline at DEFAULT_EFFICIENCY is optimistic).
FACTOR = 2.5


def test_deepseek_day6_decode_per_h800_node():
    # DeepSeek open-infra-index day 6: ~14.8k output tokens/s per H800 node, 20-22 tokens/s
    # per user, EP144, mean KV length 4,989; 14.8k / 8 / 21 ≈ 88 sequences per GPU.
    step = ep_step(DS, H800, 88, 4989, ep=144, redundant_experts=32, overlap=True)
    per_node = 8 * step.tokens_per_s_per_gpu
    assert 14.8e3 <= per_node <= FACTOR * 14.8e3
    assert 20 <= step.tokens_per_s_per_user <= FACTOR * 22


def test_lmsys_96_h100_decode_and_prefill_per_node():
    # LMSYS 2025-05-05: decode 22,282 tokens/s per node (EP72, 256 per GPU, 2,000-token
    # inputs); prefill 54,543 tokens/s per node at 2K (EP32, 16,384 tokens per GPU).
    decode = ep_step(DS, H100, 256, 2000, ep=72, redundant_experts=32, overlap=True)
    assert 22_282 <= 8 * decode.tokens_per_s_per_gpu <= FACTOR * 22_282
    prefill = ep_step(DS, H100, 8, 0, ep=32, new_tokens=2048, redundant_experts=32, overlap=True)
    assert 54_543 <= 8 * prefill.tokens_per_s_per_gpu <= FACTOR * 54_543


def test_directions_imbalance_overlap_and_ep():
    base = dict(ep=72, redundant_experts=32)
    even = ep_step(DS, H100, 256, 2000, **base)
    hot = ep_step(DS, H100, 256, 2000, imbalance=2.54, **base)
    assert hot.step_s > 2 * even.step_s  # the hottest GPU sets the pace
    # Two-batch overlap: loses at 32 sequences per GPU, wins at 256 (LMSYS: -27 %, +25.5 %).
    for batch, better in ((32, False), (256, True)):
        plain = ep_step(DS, H100, batch, 2000, **base)
        tbo = ep_step(DS, H100, batch, 2000, overlap=True, **base)
        assert (tbo.step_s < plain.step_s) == better
    # A single GPU reads all experts from ~73 sequences; EP144's GPUs from one.
    table = ep_sweep(DS, H800, [1, 4, 64, 256], eps=[1, 144], context_tokens=2000)
    one = table[table.ep == 1].set_index("batch")
    assert one.loc[1, "touched_share"] < 0.05 and one.loc[256, "touched_share"] > 0.99
    assert table[table.ep == 144].set_index("batch").loc[4, "touched_share"] > 0.99


# --- bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: ep_step(get_model("llama-3.1-8b"), H100, 1, 10), "mixture-of-experts"),
        (lambda: ep_step(DS, H100, 1, 10, ep=1, imbalance=2.0), "imbalance=2.0"),
        (lambda: ep_step(DS, H100, 1, 10, ep=8, overlap=True), "batch=1"),
        (lambda: ep_step(DS, H100, 1, 10, ep=300), "ep=300"),
        (lambda: plan_ep_memory(DS, H100, 8, attention="pp"), "attention='pp'"),
        (lambda: saturation_tokens(256, 8, 1.0), "share=1.0"),
        (lambda: experts_touched(8, 9, 1), "experts_per_token=9"),
        (lambda: expert_params(get_model("llama-3.1-8b")), "is dense"),
    ],
)
def test_bad_input_names_the_parameter(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_model_moe_fields_are_checked():
    base = {"name": "m", "n_layers": 4, "hidden_size": 64, "n_heads": 4}
    with pytest.raises(ValueError, match="n_dense_layers=1 describe a mixture"):
        Model(**base, n_dense_layers=1)
    with pytest.raises(ValueError, match="n_dense_layers=4 must be below"):
        Model(**base, n_experts=8, experts_per_token=2, n_dense_layers=4)
    m = Model(**base, n_experts=8, experts_per_token=2, n_dense_layers=1, moe_intermediate_size=32)
    assert m.n_moe_layers == 3 and expert_params(m) == 3 * 64 * 32 * 3


def test_ep_step_time_drives_the_simulator_with_the_same_model():
    from llminfer.sim.expert_parallel import EPStepTime, ep_capacity_blocks
    from llminfer.sim.simulate import simulate
    from llminfer.sim.workload import Workload

    timer = EPStepTime(DS, H800, 144, redundant_experts=32, overlap=True)
    step = ep_step(DS, H800, 88, 4989, ep=144, redundant_experts=32, overlap=True)
    assert timer(0, 0, 88, 88 * 4989) == pytest.approx(step.step_s, rel=1e-12)
    assert timer(0, 0, 0, 0) == 0.0
    qwen, h200 = get_model("qwen3-30b-a3b"), get_gpu("h200")
    users = Workload(128, concurrency=32, prompt_tokens=200, output_tokens=100, seed=0)
    tps = {}
    for ep in (1, 8):
        blocks = ep_capacity_blocks(qwen, h200, ep, weight_dtype="bf16")
        run = simulate(
            users, qwen, h200, step_time=EPStepTime(qwen, h200, ep, weight_dtype="bf16"),
            capacity_blocks=blocks,
        )  # fmt: skip
        req = run.requests
        tps[ep] = req.output_tokens.sum() / (req.end_ts.max() - req.start_ts.min())
    assert tps[8] > 2 * tps[1]  # each EP8 GPU reads 16 experts per layer, not 128
    with pytest.raises(ValueError, match="weights leave no KV cache"):
        ep_capacity_blocks(DS, H800, 8)
