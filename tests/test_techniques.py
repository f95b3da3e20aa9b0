"""Chapter 5's techniques: cited numbers, hand-worked cases, properties and bad input."""

import math
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llminfer import get_gpu, get_model, kv_cache_bytes, plan_memory, weight_bytes
from llminfer.cost.latency import estimate_latency
from llminfer.sim import disaggregation, speculative
from llminfer.sim import techniques as T
from llminfer.sim.workload import LogNormal

LLAMA8 = get_model("llama-3.1-8b")
LLAMA70 = get_model("llama-3.1-70b")
H100 = get_gpu("h100-sxm")

# --- speculative decoding (Leviathan, Kalman & Matias, ICML 2023) --------------------------


def test_leviathan_expected_tokens_alpha_08_gamma_4():
    # eq. 1: (1 - 0.8**5) / (1 - 0.8) = 0.67232 / 0.2 = 3.3616
    assert speculative.speculative_tokens_per_step(0.8, 4) == pytest.approx(3.3616)
    assert round(speculative.speculative_tokens_per_step(0.8, 4), 2) == 3.36


def test_speedup_formula_by_hand():
    # (1 - 0.8**5) / ((1 - 0.8) * (4 * 0.05 + 1)) = 3.3616 / 1.2
    assert speculative.speculative_speedup(0.8, 4, 0.05) == pytest.approx(3.3616 / 1.2)
    assert speculative.speculative_speedup(0.5, 3, 0.0) == pytest.approx(1.875)  # (1 - 1/16) / 0.5
    assert speculative.speculative_tokens_per_step(1.0, 5) == 6
    assert speculative.speculative_tokens_per_step(0.0, 5) == 1


def test_best_draft_length_is_the_argmax():
    gamma, speedup = speculative.best_draft_length(0.8, 0.05, max_gamma=16)
    brute = max(range(17), key=lambda g: speculative.speculative_speedup(0.8, g, 0.05))
    assert gamma == brute and speedup == speculative.speculative_speedup(0.8, brute, 0.05)
    # low acceptance and an expensive draft: do not speculate
    assert speculative.best_draft_length(0.2, 0.5) == (0, 1.0)


@pytest.mark.parametrize(("alpha", "gamma"), [(0.8, 4), (0.5, 2), (0.95, 8), (0.3, 1), (0.6, 0)])
def test_monte_carlo_agrees_with_the_formula(alpha, gamma):
    sample = speculative.speculative_monte_carlo(alpha, gamma, n_steps=50_000, seed=11)
    assert abs(sample.z_score) < 4  # within sampling error
    assert sample.mean_tokens == pytest.approx(sample.formula, rel=0.01)
    again = speculative.speculative_monte_carlo(alpha, gamma, n_steps=50_000, seed=11)
    assert again == sample  # seeded


@given(alpha=st.floats(0, 1), gamma=st.integers(0, 32), c=st.floats(0, 2))
def test_speculative_bounds(alpha, gamma, c):
    tokens = speculative.speculative_tokens_per_step(alpha, gamma)
    assert 1 - 1e-9 <= tokens <= gamma + 1 + 1e-9
    assert speculative.speculative_speedup(alpha, gamma, c) <= tokens + 1e-12


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: speculative.speculative_tokens_per_step(1.2, 4), "alpha"),
        (lambda: speculative.speculative_tokens_per_step(0.5, -1), "gamma"),
        (lambda: speculative.speculative_speedup(0.5, 2, -0.1), "cost_ratio"),
        (lambda: speculative.speculative_monte_carlo(0.5, 2, n_steps=1), "n_steps"),
    ],
)
def test_speculative_bad_input(call, name):
    with pytest.raises(ValueError, match=name):
        call()


# --- PagedAttention fragmentation (Kwon et al., SOSP 2023) ----------------------------------


def test_fragmentation_hand_worked():
    # two requests holding 10 and 20 tokens, ending at 30 and 20; max length 64, blocks of 16
    table = T.kv_fragmentation([10, 20], [30, 20], 64, (16, 1)).set_index("policy")
    assert table.loc["reserve max", "allocated_tokens"] == 128
    assert table.loc["reserve max", "utilization"] == 30 / 128
    assert table.loc["reserve final", "allocated_tokens"] == 50
    assert table.loc["reserve final", "utilization"] == 30 / 50
    assert table.loc["paged 16", "allocated_tokens"] == 16 + 32
    assert table.loc["paged 16", "utilization"] == 30 / 48
    assert table.loc["paged 1", "waste"] == 0


def test_fragmentation_lands_in_the_papers_ranges():
    # Kwon et al. (SOSP 2023, Fig. 2): KV memory holding tokens is 20.4 % when Orca reserves
    # the maximum length, 38.2 % for its oracle that reserves each request's true final length,
    # 96.3 % with vLLM's paging. The band's low end is "reserve max", its high end the oracle.
    paper = T.PAGED_ATTENTION_PAPER_UTILIZATION
    assert (paper["reserve max"], paper["reserve final"], paper["paged 16"]) == (
        0.204,
        0.382,
        0.963,
    )
    # ShareGPT as the paper uses it: prompts average 161 tokens, outputs 338, max 2,048.
    table = T.fragmentation_simulation(
        LogNormal(161 / math.exp(0.5), 1.0, high=2048),
        LogNormal(338 / math.exp(0.5), 1.0, high=2048),
        2048,
        (16,),
        seed=0,
    ).set_index("policy")
    assert 0.10 <= table.loc["reserve max", "utilization"] <= paper["reserve max"]
    # reservation alone leaves the oracle far above the paper's 38.2 %, which also counts
    # external fragmentation between contiguous regions
    assert table.loc["reserve final", "utilization"] > paper["reserve final"]
    assert table.loc["paged 16", "waste"] < 0.04
    assert table.loc["paged 16", "paper_utilization"] == 0.963


@given(
    st.lists(st.tuples(st.integers(1, 500), st.integers(0, 500)), min_size=1, max_size=40),
    st.integers(1, 64),
)
def test_fragmentation_orders_the_policies(pairs, block):
    current = [c for c, _ in pairs]
    final = [c + extra for c, extra in pairs]
    table = T.kv_fragmentation(current, final, 1000, (block,)).set_index("policy")
    util = table["utilization"]
    assert util["reserve max"] <= util["reserve final"] <= 1
    assert table.loc[f"paged {block}", "allocated_tokens"] - sum(current) <= (block - 1) * len(
        current
    )


# --- prefix caching ---------------------------------------------------------------------


def test_prefix_cache_counts_whole_blocks():
    assert T.cached_prefix_tokens(1000, 300, 16) == 288
    assert T.cached_prefix_tokens(300, 300, 16) == 288  # last prompt token always computed
    assert T.cached_prefix_tokens(100, 1000, 16) == 96
    assert T.cached_prefix_tokens(10, 15, 16) == 0
    savings = T.prefix_cache_savings(1000, 300, 0.5)
    assert savings == {
        "cached_tokens_per_hit": 288,
        "saved_tokens_per_request": 144,
        "saved_share": 0.144,
    }


def test_prefix_cache_ttft_hit_is_faster_and_miss_matches_estimate():
    result = T.prefix_cache_ttft(LLAMA8, H100, 4096, 3000, hit_rate=0.75)
    assert result["cached_tokens"] == 2992
    assert result["hit_s"] < result["miss_s"]
    assert result["miss_s"] == pytest.approx(estimate_latency(LLAMA8, H100, 4096, 2).ttft_s)
    assert result["expected_s"] == pytest.approx(0.75 * result["hit_s"] + 0.25 * result["miss_s"])
    none = T.prefix_cache_ttft(LLAMA8, H100, 4096, 3000, hit_rate=0.0)
    assert none["speedup"] == 1


# --- quantisation --------------------------------------------------------------------------


def test_quantization_table():
    table = T.quantization_table(LLAMA8, H100).set_index("dtype")
    assert table.loc["bf16", "weight_bytes"] == 2 * LLAMA8.n_params
    # INT4 checkpoints quantise only the linear layers of the transformer blocks, in groups of
    # 128 (RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16 model card); the embedding table
    # and LM head (2 x 128,256 x 4,096) stay 16 bit: 5.7 GB for the 8B model, as published
    # AWQ INT4 checkpoints of it weigh (https://n-shot.com/?p=6178: "a lean 5.7 GB").
    embed = 2 * 128_256 * 4096
    assert T.embedding_params(LLAMA8) == embed
    body = LLAMA8.n_params - embed
    assert table.loc["int4", "weight_bytes"] == weight_bytes(body, "int4", 128) + 2 * embed
    assert round(table.loc["int4", "weight_bytes"] / 1e9, 1) == 5.7
    assert table.loc["int4", "bits_per_weight"] > 4 + 16 / 128  # no longer 4.125
    assert T.quantized_weight_bytes(LLAMA8, "bf16") == weight_bytes(LLAMA8, "bf16")
    assert (
        T.quantized_weight_bytes(LLAMA8, "int4", tied_embeddings=True)
        < (table.loc["int4", "weight_bytes"])
    )
    # decode at batch 1 is bandwidth bound: fewer weight bytes, lower floor
    floors = table["tpot_floor_s"]
    assert floors["bf16"] > floors["fp8"] >= floors["int8"] * 0.999 > floors["int4"]
    # not 16 / 4.125: the 16-bit LM head and the KV cache are read at every step
    assert 2.9 < floors["bf16"] / floors["int4"] < 16 / 4.125
    # the bytes weights give up become KV cache
    freed = table["freed_kv_tokens"]
    assert freed["bf16"] == 0 and 0 < freed["fp8"] <= freed["int4"]
    bf16 = plan_memory(LLAMA8, H100, weight_dtype="bf16").capacity_tokens
    int4 = plan_memory(LLAMA8, H100, weight_dtype="int4").capacity_tokens
    assert freed["int4"] < int4 - bf16  # the 16-bit embeddings keep some of the room


def test_fp8_checkpoints_carry_per_channel_not_group_128_scales():
    # FP8 checkpoints in vLLM use per-tensor or per-channel weight scales (or 128 x 128 block
    # scales for DeepSeek-style block FP8); group-128 scales are the INT4 GPTQ/AWQ layout.
    assert T.DEFAULT_SCALES == {"fp8": "channel", "int8": "channel", "int4": "group128"}
    embed = 2 * 128_256 * 4096  # 1,050,673,152 parameters, kept 16 bit
    body = LLAMA8.n_params - embed
    assert body == 6_979_588_096 and body % 4096 == 0
    # per channel: one 2-byte scale per 4,096 weights = 1,704,001 scales = 3,408,002 bytes
    fp8 = body + 1_704_001 * 2 + 2 * embed
    assert T.quantized_weight_bytes(LLAMA8, "fp8") == fp8 == 9_084_342_402
    assert T.quantized_weight_bytes(LLAMA8, "fp8", scales="channel") == fp8
    # per tensor: nothing worth counting; block 128 x 128: 4 bytes (FP32) per 16,384 weights
    assert T.quantized_weight_bytes(LLAMA8, "fp8", "tensor") == body + 2 * embed
    blocks = math.ceil(body / 16384)
    assert T.quantized_weight_bytes(LLAMA8, "fp8", "block128") == body + 4 * blocks + 2 * embed
    # group 128 (INT4): 2 bytes per 128 weights, 0.125 bit per weight
    int4 = body / 2 + math.ceil(body / 128) * 2 + 2 * embed
    assert T.quantized_weight_bytes(LLAMA8, "int4") == int4
    table = T.quantization_table(LLAMA8, H100).set_index("dtype")
    assert table.loc["fp8", "scales"] == "channel" and table.loc["int4", "scales"] == "group128"
    assert round(table.loc["fp8", "bits_per_weight"], 2) == 9.05  # 9.16 with group-128 scales
    assert table.loc["fp8", "weight_bytes"] == fp8
    # the per-format layout can be overridden
    grouped = T.quantization_table(LLAMA8, H100, dtypes=("fp8",), scales={"fp8": "group128"})
    assert grouped.weight_bytes.iloc[0] == body + math.ceil(body / 128) * 2 + 2 * embed
    with pytest.raises(ValueError, match="scales='group64'"):
        T.quantized_weight_bytes(LLAMA8, "fp8", "group64")
    with pytest.raises(ValueError, match="dtype='fp4'"):
        T.quantized_weight_bytes(LLAMA8, "fp4")
    assert T.quantized_weight_bytes(LLAMA8, "fp4", "group128") < int4 + 1


def test_decode_floor_does_not_stream_the_input_embedding_table():
    # A decode step gathers one row of the input embedding table per sequence; the LM head
    # (vocab x hidden) is read whole. So the floor reads weights minus (table - rows) + KV.
    table = T.quantization_table(LLAMA8, H100, context_tokens=4096).set_index("dtype")
    kv = 4096 * 131072  # 128 KiB per token for Llama-3.1-8B in BF16
    unread = 128_256 * 4096 * 2 - 4096 * 2
    streamed = 2 * LLAMA8.n_params - unread + kv
    assert T.decode_bytes_per_step(LLAMA8, "bf16", 4096) == streamed
    assert table.loc["bf16", "tpot_floor_s"] == pytest.approx(streamed / H100.memory_bandwidth)
    tied = T.decode_bytes_per_step(LLAMA8, "bf16", 4096, tied_embeddings=True)
    # tied: the one shared matrix (counted once in n_params) is read whole, as the LM head
    assert tied == 2 * LLAMA8.n_params + kv


# --- tensor parallelism ------------------------------------------------------------------


def test_tensor_parallel_pcie_pays_more_for_communication():
    table = T.tensor_parallel_table(LLAMA70, H100, (1, 2, 4, 8))
    nv = table[table.link == "NVLink"].set_index("n_gpus")
    pcie = table[table.link == "PCIe"].set_index("n_gpus")
    assert nv.loc[1, "comm_s"] == 0 and pcie.loc[1, "comm_s"] == 0
    for n in (2, 4, 8):
        assert pcie.loc[n, "comm_s"] > nv.loc[n, "comm_s"] > 0
    # weights split n ways: memory time falls nearly in proportion
    assert nv.loc[8, "memory_s"] < nv.loc[1, "memory_s"] / 6
    # ... but the speed-up stays below n and its efficiency falls
    assert (nv["speedup"] <= nv.index + 1e-9).all()
    assert nv.loc[8, "efficiency"] < nv.loc[2, "efficiency"] <= 1
    # 141 GB of weights: one H100 (81,559 MiB = 85.5 GB) cannot hold them; two (70.6 GB each
    # of 77.0 GB usable at 90 %) leave a few GB of KV room, enough for the timed batch
    # (one sequence of 1,024 tokens)
    assert not nv.loc[1, "fits"] and nv.loc[2, "fits"]
    assert (nv["fits"] == (nv["kv_capacity_tokens"] >= 1 * 1024)).all()
    # at batch 256 the all-reduces carry 256 tokens' activations: PCIe eats the gain
    big = T.tensor_parallel_table(LLAMA70, H100, (1, 8), batch=256).set_index(["link", "n_gpus"])
    assert big.loc[("PCIe", 8), "efficiency"] < 0.75 * big.loc[("NVLink", 8), "efficiency"]


def test_tensor_parallel_fits_means_the_timed_batch_fits():
    # 256 sequences x 2,048 tokens = 524,288 tokens of KV (320 KiB each for the 70B model):
    # four H100s hold the weights but not this batch, eight do.
    table = T.tensor_parallel_table(LLAMA70, H100, (4, 8), batch=256, context_tokens=2048)
    nv = table[table.link == "NVLink"].set_index("n_gpus")
    assert nv.loc[4, "kv_capacity_tokens"] < 256 * 2048 <= nv.loc[8, "kv_capacity_tokens"]
    assert not nv.loc[4, "fits"] and nv.loc[8, "fits"]


# --- prefill/decode disaggregation --------------------------------------------------------


def test_kv_transfer_by_hand():
    # 4,096 tokens × 128 KiB = 0.5 GiB over NVLink 4 (450 GB/s per direction)
    seconds = disaggregation.kv_transfer_seconds(LLAMA8, 4096, 450e9)
    assert seconds == pytest.approx(4096 * 131072 / 450e9)
    table = disaggregation.disaggregation_table(LLAMA8, H100, [512, 4096])
    row = table[(table.prompt_tokens == 4096) & (table.link == "PCIe")].iloc[0]
    assert row.kv_bytes == kv_cache_bytes(LLAMA8, 4096)
    assert row.transfer_s == pytest.approx(row.kv_bytes / H100.pcie_bandwidth)
    assert row.prefill_s == pytest.approx(estimate_latency(LLAMA8, H100, 4096, 2).ttft_s)
    nv = table[table.link == "NVLink"]
    assert (nv.transfer_over_prefill < 1).all()


def test_links_required():
    bare = replace(H100, interconnect_bandwidth=None, pcie_bandwidth=None)
    with pytest.raises(ValueError, match="link"):
        T.tensor_parallel_table(LLAMA8, bare)
    with pytest.raises(ValueError, match="link"):
        disaggregation.disaggregation_table(LLAMA8, bare, [512])
    with pytest.raises(ValueError, match="link_bandwidth"):
        disaggregation.kv_transfer_seconds(LLAMA8, 10, 0)
    assert math.isfinite(disaggregation.kv_transfer_seconds(LLAMA8, 10, 1e9))


def test_pull_transfer_exposes_the_whole_copy_by_hand():
    # vLLM's NixlConnector (0.33.0 nixl/pull_scheduler.py: "It will be read from D upon
    # completion") reads the blocks after the prefill has finished: nothing overlaps.
    # 32,768 tokens x 128 KiB = 4 GiB = 4,294,967,296 B over 100 Gb/s Ethernet (12.5e9 B/s):
    # 0.34359738368 s, all of it in TTFT.
    copy = 32768 * 131072 / 12.5e9
    assert copy == pytest.approx(0.34359738368)
    assert disaggregation.kv_transfer_seconds(LLAMA8, 32768, 12.5e9) == pytest.approx(copy)
    assert disaggregation.exposed_transfer_seconds(copy, 1.44, 32) == copy  # the default is "pull"
    assert disaggregation.exposed_transfer_seconds(copy, 1.44, 32, transfer="pull") == copy
    # layer-wise push over 32 layers: only the last layer's share, 0.3436 / 32 = 10.737 ms
    layerwise = disaggregation.exposed_transfer_seconds(copy, 1.44, 32, transfer="layerwise")
    assert layerwise == pytest.approx(0.010737418240)
    table = disaggregation.disaggregation_table(
        LLAMA8, H100, [32768], links=disaggregation.KV_LINKS
    ).set_index("link")
    eth = table.loc["100 Gb/s Ethernet"]
    assert eth.transfer == "pull" and eth.exposed_s == eth.transfer_s == pytest.approx(copy)
    lw = disaggregation.disaggregation_table(
        LLAMA8, H100, [32768], links=disaggregation.KV_LINKS, transfer="layerwise"
    )
    assert lw.set_index("link").loc["100 Gb/s Ethernet", "exposed_s"] == pytest.approx(layerwise)
    assert disaggregation.TRANSFER_MODES == ("pull", "layerwise")
    with pytest.raises(ValueError, match="transfer='push'"):
        disaggregation.exposed_transfer_seconds(copy, 1.0, 32, transfer="push")
    with pytest.raises(ValueError, match="transfer="):
        disaggregation.disaggregation_table(LLAMA8, H100, [512], transfer="layer")


def test_layerwise_transfer_overlaps_the_prefill_by_hand():
    # 32 layers; a link faster than the prefill leaves only the last layer's share exposed
    lw = "layerwise"
    assert disaggregation.exposed_transfer_seconds(0.32, 1.0, 32, lw) == pytest.approx(0.01)
    # a slow link: the copy is the bottleneck from the first layer on
    assert disaggregation.exposed_transfer_seconds(3.2, 1.0, 32, lw) == pytest.approx(
        3.2 - 1.0 + 1.0 / 32
    )
    # one layer: nothing overlaps, as with pull
    assert disaggregation.exposed_transfer_seconds(0.5, 1.0, 1, lw) == 0.5
    table = disaggregation.disaggregation_table(
        LLAMA8, H100, [4096, 32768], links=disaggregation.KV_LINKS, transfer=lw
    )
    assert (table.exposed_s <= table.transfer_s + 1e-15).all()
    assert (table.exposed_s >= table.transfer_s / LLAMA8.n_layers - 1e-15).all()
    assert set(table.link) == set(disaggregation.KV_LINKS)
    # 400 Gb/s InfiniBand = 50 GB/s; 100 Gb/s Ethernet = 12.5 GB/s (bits / 8)
    assert disaggregation.KV_LINKS["400 Gb/s InfiniBand"] == 400e9 / 8
    assert disaggregation.KV_LINKS["100 Gb/s Ethernet"] == 100e9 / 8
    with pytest.raises(ValueError, match="n_layers"):
        disaggregation.exposed_transfer_seconds(1.0, 1.0, 0)
    with pytest.raises(ValueError, match="prefill_s"):
        disaggregation.exposed_transfer_seconds(1.0, -1.0, 32)
    with pytest.raises(ValueError, match="transfer_s"):
        disaggregation.exposed_transfer_seconds(math.nan, 1.0, 32)


def test_disaggregation_removes_prefill_from_the_decode_gpu():
    from llminfer.sim.workload import Workload

    workload = Workload(
        150,
        rate=8.0,
        prompt_tokens=LogNormal(3000, 0.8, high=16_000),
        output_tokens=LogNormal(150, 0.8, high=600),
        seed=5,
    )
    table = disaggregation.compare_with_disaggregation(workload, LLAMA8, H100)
    v1, v0 = table.loc["colocated, V1 chunked prefill"], table.loc["colocated, V0"]
    pd_ = table.loc["disaggregated, KV pulled after prefill"]
    # no prompt ever shares a step with the decode GPU's streams: the smoothest ITL
    assert pd_["itl_s_p99"] < v1["itl_s_p99"] < v0["itl_s_p99"]
    assert (table["gpus"] == 2).all()
    # pulling the whole cache after the prefill (vLLM NixlConnector) costs TTFT more than
    # pushing it layer by layer; the decode side is the same
    lw = disaggregation.compare_with_disaggregation(
        workload, LLAMA8, H100, colocated={}, transfer="layerwise"
    ).loc["disaggregated, KV pushed per layer"]
    assert lw["ttft_s_p50"] < pd_["ttft_s_p50"] and lw["itl_s_p99"] == pd_["itl_s_p99"]
    with pytest.raises(ValueError, match="transfer="):
        disaggregation.compare_with_disaggregation(workload, LLAMA8, H100, transfer="eager")
    with pytest.raises(ValueError, match="open loop"):
        disaggregation.compare_with_disaggregation(Workload(10, concurrency=2), LLAMA8, H100)


def test_speculation_stops_paying_at_large_batch():
    # At batch 1 verifying gamma + 1 tokens costs one decode step (bandwidth bound); at large
    # batch the verify step is compute bound and costs several decode steps.
    table = speculative.speculative_batch_table(
        LLAMA8, H100, alpha=0.6, gamma=4, batches=(1, 64, 512, 1024), context_tokens=256
    ).set_index("batch")
    assert table.loc[1, "verify_over_decode"] == pytest.approx(1, abs=0.02)
    assert table.loc[1, "speedup"] == pytest.approx(
        speculative.speculative_speedup(0.6, 4, 0.05), rel=0.02
    )
    assert table["speedup"].is_monotonic_decreasing
    assert table["verify_over_decode"].is_monotonic_increasing
    assert table.loc[1024, "verify_over_decode"] <= 5 + 1e-9  # at most gamma + 1 decode steps
    assert table.loc[1024, "speedup"] < 1  # slower than not speculating


def test_every_timed_technique_takes_the_engine_profile():
    # profile= reaches the step timer: each table's times are the named engine's step times
    from llminfer.cost.roofline import attended_pairs
    from llminfer.cost.steptime import step_timer

    pytorch = step_timer(LLAMA8, H100, profile="pytorch")
    vllm = step_timer(LLAMA8, H100)  # the default profile, "vllm"
    table = disaggregation.disaggregation_table(LLAMA8, H100, [4096], profile="pytorch")
    assert table.prefill_s.iloc[0] == pytorch(4096, attended_pairs(4096, 0), 0, 0)
    assert disaggregation.disaggregation_table(LLAMA8, H100, [4096]).prefill_s.iloc[0] == vllm(
        4096, attended_pairs(4096, 0), 0, 0
    )
    spec = speculative.speculative_batch_table(LLAMA8, H100, 0.6, 4, (8,), 4096, profile="pytorch")
    assert spec.decode_s.iloc[0] == pytorch(0, 0, 8, 8 * 4096)
    ttft = T.prefix_cache_ttft(LLAMA8, H100, 4096, 3000, 0.5, profile="pytorch")
    assert ttft["miss_s"] == pytorch(4096, attended_pairs(4096, 0), 0, 0)
    tp = T.tensor_parallel_table(LLAMA8, H100, (1,), profile="pytorch").iloc[0]
    assert tp.memory_s == pytorch.breakdown(0, 0, 1, 1024)[1]
    with pytest.raises(ValueError, match="profile='sglang'"):
        disaggregation.disaggregation_table(LLAMA8, H100, [512], profile="sglang")
