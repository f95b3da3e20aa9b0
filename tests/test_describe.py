"""Describe a server llminfer does not know: --model from a config.json or a GGUF, --gpu from a
spec file or measured; llama.cpp's and SGLang's /metrics read beside vLLM's."""

import json
from pathlib import Path

import pytest

from llminfer.diagnose.scrape import combine, read_scrape
from llminfer.specs.describe import (
    gpu_from_spec,
    llama_props,
    llama_slots,
    model_from_hf_config,
    resolve_gpu,
    resolve_model,
)
from llminfer.specs.presets import get_model

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "scrapes"

LLAMA_31_8B = {  # meta-llama/Llama-3.1-8B config.json (the fields read)
    "_name_or_path": "meta-llama/Llama-3.1-8B",
    "model_type": "llama",
    "num_hidden_layers": 32,
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14336,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "tie_word_embeddings": False,
}


def test_hf_config_gives_the_preset_model(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_31_8B))
    model = resolve_model(str(tmp_path))
    preset = get_model("llama-3.1-8b")
    assert model.n_params == preset.n_params == 8_030_261_248
    assert (model.n_layers, model.n_kv_heads, model.head_dim) == (32, 8, 128)
    assert model.name == "meta-llama/Llama-3.1-8B"


def test_hf_config_sliding_window_experts_and_errors(tmp_path):
    mistral = {**LLAMA_31_8B, "sliding_window": 4096, "vocab_size": 32000}
    assert model_from_hf_config(mistral).n_sliding_layers == 32
    half = {**mistral, "layer_types": ["sliding_attention", "full_attention"] * 16}
    assert model_from_hf_config(half).n_sliding_layers == 16
    assert model_from_hf_config({**mistral, "use_sliding_window": False}).sliding_window is None
    moe = {**LLAMA_31_8B, "num_local_experts": 8, "num_experts_per_tok": 2}
    m = model_from_hf_config(moe)
    assert m.is_moe and m.n_active_params < m.n_params
    with pytest.raises(ValueError, match="num_hidden_layers"):
        model_from_hf_config({"hidden_size": 64})
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match=r"not a readable config\.json"):
        model_from_hf_config(bad)


def test_gpu_spec_json_and_toml_and_measure(tmp_path):
    spec = {"name": "my-npu", "memory_bytes": 24 * 2**30, "memory_bandwidth": 8e11}
    (tmp_path / "npu.json").write_text(json.dumps({**spec, "bf16_flops": 1.2e14}))
    gpu = resolve_gpu(str(tmp_path / "npu.json"))
    assert gpu.name == "my-npu" and gpu.peak_flops("bf16") == 1.2e14
    (tmp_path / "npu.toml").write_text(
        'name = "my-npu"\nmemory_bytes = 25769803776\nmemory_bandwidth = 8.0e11\n'
    )
    assert gpu_from_spec(tmp_path / "npu.toml").memory_bandwidth == 8e11
    (tmp_path / "typo.json").write_text(json.dumps({**spec, "memory_gb": 24}))
    with pytest.raises(ValueError, match=r"unknown GPU field.*memory_gb"):
        gpu_from_spec(tmp_path / "typo.json")
    (tmp_path / "neg.json").write_text(json.dumps({**spec, "memory_bandwidth": -1}))
    with pytest.raises(ValueError, match="memory_bandwidth"):
        gpu_from_spec(tmp_path / "neg.json")
    assert resolve_gpu("h100-sxm").name.startswith("NVIDIA H100")


def test_llama_cpp_scrape_reads_queue_and_token_counters():
    idle = read_scrape(FIXTURES / "llamacpp_metrics_before.txt")
    busy = read_scrape(FIXTURES / "llamacpp_metrics_during.txt")
    assert busy.engine == idle.engine == "llama.cpp"
    assert busy.running is not None and busy.waiting is not None
    assert busy.kv_usage is None and busy.preemptions is None  # this build exports neither
    assert dict(busy.names)["running"] == "llamacpp:requests_processing"
    assert (busy.running, busy.waiting) == (8, 8)  # 16 users, 8 slots: 8 deferred
    after = read_scrape(FIXTURES / "llamacpp_metrics_after.txt")
    run = combine([idle, busy, after])
    assert (run.running, run.waiting) == (8, 8)  # the peaks
    # 96 requests of 128 words + BOS: computed plus cached = 96 x 129; 64 tokens each
    assert run.prompt_tokens + run.cached_prompt_tokens == 96 * 129
    assert run.generation_tokens == 96 * 64


def test_sglang_scrape_reads_its_names():
    s = read_scrape(FIXTURES / "sglang_metrics.txt")
    assert (s.engine, s.running, s.waiting, s.kv_usage) == ("SGLang", 24.0, 7.0, 0.73)
    assert (s.prompt_tokens, s.generation_tokens, s.cached_prompt_tokens) == (
        512000.0,
        64000.0,
        61440.0,
    )
    assert s.as_dict() == {"server_waiting": 7.0, "server_running": 24.0, "server_kv_usage": 0.73}


def test_gguf_model_reads_back_its_shape_and_exact_parameter_count(tmp_path):
    pytest.importorskip("gguf", reason="GGUF files are read with gguf (requirements.txt)")
    from llminfer.bench.llamacpp import tiny_vocab, write_tiny_gguf
    from llminfer.specs.models import llama_param_count

    path = write_tiny_gguf(tmp_path / "tiny.gguf", n_layers=2, hidden=64, n_heads=4, n_kv_heads=2)
    model = resolve_model(str(path))
    vocab = len(tiny_vocab()[0])
    assert (model.n_layers, model.hidden_size, model.n_heads, model.n_kv_heads) == (2, 64, 4, 2)
    assert (model.head_dim, model.intermediate_size, model.vocab_size) == (16, 128, vocab)
    assert model.name == "llminfer-tiny-random" and model.max_context == 4096
    assert model.n_params == llama_param_count(2, 64, 4, 2, 16, 128, vocab)
    with pytest.raises(ValueError, match="not a readable GGUF"):
        (tmp_path / "bad.gguf").write_bytes(b"GGUF nonsense")
        resolve_model(str(tmp_path / "bad.gguf"))


def test_llama_props_and_slots_from_a_server_on_loopback():
    """/props as llama.cpp 0.3.36's llama-server answers it (--parallel 3: total_slots 3), from a
    stand-in server on 127.0.0.1; then what a bad answer or no server gives."""
    import http.server
    import threading

    answers = {"/props": {"total_slots": 3, "model_path": "/x.gguf"}, "/v2/props": [1, 2]}

    class Props(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps(answers.get(self.path, {})).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Props)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"
    try:
        for url in (base, base + "/v1", base + "/v1/", base + "/props"):
            props_url, props = llama_props(url)
            assert props_url == base + "/props" and llama_slots(props) == 3
        with pytest.raises(ValueError, match="is not a JSON object"):
            llama_props(base + "/v2/props")
    finally:
        server.shutdown()
        server.server_close()
    with pytest.raises(ValueError, match=f"could not read {base}/props"):
        llama_props(base, timeout_s=2)  # nobody listens there now
    for props in ({}, {"total_slots": 0}, {"total_slots": True}, {"total_slots": "4"}):
        assert llama_slots(props) is None, props


def _gguf_of(path, quant, file_type):
    """A one-tensor GGUF whose weights are stored as ``quant`` (a GGMLQuantizationType name)."""
    import gguf
    import numpy as np

    data = np.random.default_rng(0).standard_normal((8, 64)).astype(np.float32)
    kind = gguf.GGMLQuantizationType[quant]
    writer = gguf.GGUFWriter(str(path), "llama")
    if file_type is not None:
        writer.add_file_type(gguf.LlamaFileType[file_type])
    if kind in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16):
        writer.add_tensor(
            "blk.0.ffn_up.weight", data.astype(np.float16 if quant == "F16" else "f4")
        )
    else:
        writer.add_tensor("blk.0.ffn_up.weight", gguf.quants.quantize(data, kind), raw_dtype=kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.mark.parametrize(
    ("quant", "file_type", "expected"),
    [
        # bytes per weight from ggml's block layouts: Q8_0 = 32 int8 + one fp16 scale (34 B / 32),
        # Q4_0 = 32 nibbles + one fp16 scale (18 B / 32)
        ("F32", "ALL_F32", ("fp32", "F32")),
        ("F16", "MOSTLY_F16", ("fp16", "F16")),
        ("Q8_0", "MOSTLY_Q8_0", ("int8", "Q8_0")),
        ("Q4_0", "MOSTLY_Q4_0", ("int4", "Q4_0")),
        ("Q8_0", None, ("int8", "Q8_0")),  # no general.file_type: named by its tensors' type
        ("F16", "MOSTLY_BF16", ("bf16", "BF16")),  # the name the file gives wins over fp16
    ],
)
def test_gguf_weight_format_from_file_type_and_bytes_per_weight(
    tmp_path, quant, file_type, expected
):
    pytest.importorskip("gguf", reason="GGUF files are read with gguf (requirements.txt)")
    from llminfer.specs.describe import gguf_weight_format, weight_format_of

    path = _gguf_of(tmp_path / "w.gguf", quant, file_type)
    assert gguf_weight_format(path) == expected
    assert weight_format_of(str(path)) == (*expected, str(path))


def test_weight_format_of_presets_and_configs_is_none(tmp_path):
    from llminfer.specs.describe import weight_format_of

    (tmp_path / "config.json").write_text(json.dumps(LLAMA_31_8B))
    assert weight_format_of("llama-3.1-8b") is None
    assert weight_format_of(str(tmp_path / "config.json")) is None
    assert weight_format_of(str(tmp_path)) is None
