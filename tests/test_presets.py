"""Presets against the reference data (model configs, vendor data sheets)."""

import csv
from importlib import resources

import pytest

import llminfer
from llminfer import GPU, Model, get_gpu, get_model, list_gpus, list_models
from llminfer.specs.models import llama_param_count

MODEL_ROWS = list(
    csv.DictReader(
        resources.files("llminfer.specs.presets").joinpath("models.csv").read_text().splitlines()
    )
)


def test_every_reference_model_and_gpu_is_a_preset():
    for name in [
        "llama-2-7b", "llama-2-70b", "llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b",
        "mistral-7b-v0.1", "mixtral-8x7b-v0.1", "qwen2.5-7b", "qwen2.5-72b", "gemma-2-9b",
        "deepseek-v3", "gpt-oss-120b", "falcon-7b", "falcon-40b",
    ]:  # fmt: skip
        assert name in list_models()
    for name in [
        "h100-sxm", "h100-pcie", "h200", "a100-80gb", "a100-40gb", "b200", "l4", "l40s",
        "rtx-4090", "mi300x", "m2-ultra", "m3-max",
    ]:  # fmt: skip
        assert name in list_gpus()


@pytest.mark.parametrize("row", MODEL_ROWS, ids=lambda r: r["key"])
def test_kv_bytes_per_token_matches_the_reference(row):
    # Reference: layers × kv_heads × head_dim × 2 (K and V) × 2 bytes, from each model's config
    # (the row's source column), precomputed in the presets CSV.
    model = get_model(row["key"])
    assert llminfer.kv_bytes_per_token(model, "bf16") == int(row["kv_bytes_per_token_bf16"])
    assert "http" in model.source or "arXiv" in model.source


def test_names_are_case_insensitive_and_accept_display_names_and_hf_ids():
    assert get_model("LLAMA-3.1-8B") is get_model("llama-3.1-8b")
    assert get_model("meta-llama/Llama-3.1-8B").name == "Llama-3.1-8B"
    assert get_model("DeepSeek-V3").kv_lora_rank == 512
    assert get_gpu("H100-SXM").name == "NVIDIA H100 SXM5 80GB"


def test_unknown_names_suggest_the_closest():
    with pytest.raises(ValueError, match=r"name='llama3-8b'.*did you mean 'llama-3.1-8b'"):
        get_model("llama3-8b")
    with pytest.raises(ValueError, match=r"name='h1000'.*h100"):
        get_gpu("h1000")
    with pytest.raises(ValueError, match="name=42"):
        get_model(42)


def test_traps_from_the_reference_notes():
    falcon = get_model("falcon-7b")
    assert falcon.n_kv_heads == 1 and falcon.attention == "MQA"
    gemma = get_model("gemma-2-9b")
    assert gemma.head_dim == 256 != gemma.hidden_size // gemma.n_heads
    assert (gemma.sliding_window, gemma.n_sliding_layers, gemma.n_global_layers) == (4096, 21, 21)
    gpt_oss = get_model("gpt-oss-120b")
    assert gpt_oss.head_dim == 64 != gpt_oss.hidden_size // gpt_oss.n_heads
    assert (gpt_oss.sliding_window, gpt_oss.n_sliding_layers) == (128, 18)
    deepseek = get_model("deepseek-v3")
    assert deepseek.attention == "MLA"
    assert deepseek.kv_lora_rank + deepseek.qk_rope_head_dim == 576
    assert (deepseek.n_params, deepseek.n_active_params) == (671 * 10**9, 37 * 10**9)
    mixtral = get_model("mixtral-8x7b")
    assert mixtral.is_moe and (mixtral.n_experts, mixtral.experts_per_token) == (8, 2)


def test_gpu_figures_are_dense_and_in_base_units():
    h100 = get_gpu("h100-sxm")
    # nvidia-smi reports 81,559 MiB on an "80 GB" H100 (NVIDIA/nccl#1264, modal-client#2797).
    assert h100.memory_bytes == 81_559 * 2**20
    assert h100.marketed_memory_bytes == 80e9
    assert h100.memory_bandwidth == 3.35e12
    assert h100.peak_flops("bf16") == pytest.approx(989.4e12)  # 1,979 "with sparsity" / 2
    assert h100.peak_flops("fp8") == pytest.approx(1978.9e12)
    assert get_gpu("a100-80gb").peak_flops("bf16") == 312e12
    assert get_gpu("b200").peak_flops("fp4") == 9000e12
    assert get_gpu("rtx-4090").peak_flops("bf16") == pytest.approx(165.2e12)  # FP32 accumulate
    assert get_gpu("l4").interconnect_bandwidth is None
    with pytest.raises(ValueError, match=r"dtype='fp8'.*A100"):
        get_gpu("a100-40gb").peak_flops("fp8")
    with pytest.raises(ValueError, match="dtype='int4'"):
        h100.peak_flops("int4")


def test_llama_param_count_is_exact_for_llama():
    # Reference: models.json total_params, "exact count for standard Llama layout".
    for key in ["llama-2-7b", "llama-2-70b", "llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b"]:
        m = get_model(key)
        count = llama_param_count(
            m.n_layers, m.hidden_size, m.n_heads, m.n_kv_heads, m.head_dim,
            m.intermediate_size, m.vocab_size,
        )  # fmt: skip
        assert count == m.n_params


def test_custom_model_by_keyword_fills_defaults():
    m = Model(name="tiny", n_layers=2, hidden_size=64, n_heads=4, vocab_size=100)
    assert (m.n_kv_heads, m.head_dim, m.intermediate_size) == (4, 16, 256)
    assert m.n_params == llama_param_count(2, 64, 4, 4, 16, 256, 100)
    assert m.n_active_params == m.n_params


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_layers": 0}, "n_layers=0"),
        ({"n_kv_heads": 3}, "n_kv_heads=3 must divide n_heads=32"),
        ({"hidden_size": -1}, "hidden_size=-1"),
        ({"sliding_window": 4096, "n_sliding_layers": 40}, "n_sliding_layers=40"),
        ({"n_sliding_layers": 4}, "n_sliding_layers=4 needs a sliding_window"),
        ({"kv_lora_rank": 512}, "kv_lora_rank and qk_rope_head_dim"),
        ({"n_experts": 8}, "n_experts and experts_per_token"),
        ({"n_experts": 2, "experts_per_token": 4}, "experts_per_token=4"),
        ({"n_params": 10, "n_active_params": 20}, "n_active_params=20"),
    ],
)
def test_bad_model_raises_naming_the_parameter(kwargs, message):
    base = {"name": "m", "n_layers": 32, "hidden_size": 4096, "n_heads": 32}
    with pytest.raises(ValueError, match=message):
        Model(**{**base, **kwargs})


def test_bad_gpu_raises_naming_the_parameter():
    with pytest.raises(ValueError, match="memory_bytes=0"):
        GPU(name="x", memory_bytes=0, memory_bandwidth=1e12)
    with pytest.raises(ValueError, match="bf16_flops=-1"):
        GPU(name="x", memory_bytes=1e9, memory_bandwidth=1e12, bf16_flops=-1)


# Totals as the driver reports them: nvidia-smi MiB (modal-labs/modal-client#2797 lists A100,
# H100, L4, L40S; NVIDIA/TensorRT-LLM#10278 the B200), rocminfo KB for the MI300X
# (ROCm/legacy-rocm-build#4414), Apple's unified memory in GiB.
DRIVER_MEMORY = {
    "a100-40gb": 40_960 * 2**20,
    "a100-80gb": 81_920 * 2**20,
    "h100-sxm": 81_559 * 2**20,
    "h100-pcie": 81_559 * 2**20,
    "h200": 143_771 * 2**20,
    "b200": 183_359 * 2**20,
    "l4": 23_034 * 2**20,
    "l40s": 46_068 * 2**20,
    "rtx-4090": 24_564 * 2**20,
    "mi300x": 201_310_208 * 1024,
    "m2-ultra": 192 * 2**30,
    "m3-max": 128 * 2**30,
    # nvidia-smi totals in public dumps (gpus.csv memory_source); AMD's two are assumptions.
    "h20": 97_871 * 2**20,
    "h800": 81_559 * 2**20,
    "b300": 275_040 * 2**20,
    "gb300": 284_208 * 2**20,
    "gb200": 189_471 * 2**20,
    "mi325x": 256 * 2**30,
    "mi355x": 288 * 2**30,
    "rtx-5090": 32_607 * 2**20,
}


@pytest.mark.parametrize("key", list_gpus())
def test_every_gpu_holds_driver_memory_with_a_source(key):
    gpu = get_gpu(key)
    assert gpu.memory_bytes == DRIVER_MEMORY[key]
    assert "memory: " in gpu.source and len(gpu.source.split("memory: ")[1]) > 20
    # The driver's total sits within a few per cent below the label read as GiB.
    label_gib = gpu.marketed_memory_bytes / 1e9
    assert 0.93 * label_gib * 2**30 <= gpu.memory_bytes <= label_gib * 2**30
