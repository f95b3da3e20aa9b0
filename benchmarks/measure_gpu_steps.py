"""Time real prefill, decode and mixed engine steps of a Llama-shaped model on your own GPU.

Writes a CSV in the shape of ``data/measurements/h200_llama-3.1-8b_steps.csv`` (columns kind,
model, weight_dtype, batch, tokens, context, prefill_chunk, ms_median, ms_min, ms_max, what),
which ``llminfer.cost.calibration.calibrate`` fits the step-time model to::

    python benchmarks/measure_gpu_steps.py --model llama-3.1-8b --out my_steps.csv
    python -c "import llminfer as L; m = L.get_model('llama-3.1-8b'); \\
        print(L.calibrate('my_steps.csv', m, L.get_gpu('h100')).step_model)"

Needs PyTorch with a CUDA (or ROCm) GPU; PyTorch is not a dependency of llminfer, so without it
(or without a GPU) the script says so and exits 0. The model is a minimal Llama forward with
random bf16 weights (timing does not depend on the values): fused QKV and gate/up matmuls,
RMSNorm, RoPE, FlashAttention through ``scaled_dot_product_attention``, a KV cache. Steps run
inside CUDA graphs, as serving engines run them; two eager rows show the launch overhead.
Each figure is the median of ``--reps`` timed replays after warm-up, timed with CUDA events.
Based on the project's reference scripts that produced the H200 table (see
``data/measurements/README.md``). Only Llama-style dense models (no MoE, MLA or sliding window).
"""

from __future__ import annotations

import argparse
import csv
import sys

PREFILL = [(1, 128), (1, 512), (1, 1024), (1, 2048), (1, 4096), (8, 512)]
DECODE = [(1, 128), (1, 1024), (1, 8192), (8, 1024), (8, 8192), (32, 1024), (32, 8192)]
DECODE += [(64, 2048), (128, 1024), (256, 1024)]
MIXED_BATCH, MIXED_CONTEXT = 32, 2048
MIXED_CHUNKS = [0, 128, 256, 512, 1024, 2048]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="llama-3.1-8b", help="an llminfer preset key")
    parser.add_argument("--out", default="gpu_steps.csv", help="CSV file to write")
    parser.add_argument("--reps", type=int, default=10, help="timed replays per step")
    parser.add_argument("--quick", action="store_true", help="a few shapes only (smoke test)")
    args = parser.parse_args()
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        print("PyTorch is not installed: nothing to measure (pip install torch, then rerun).")
        return 0
    if not torch.cuda.is_available():
        print("No CUDA/ROCm GPU visible to PyTorch: nothing to measure.")
        return 0
    from llminfer import get_model

    m = get_model(args.model)
    if m.is_moe or m.kv_lora_rank is not None or m.sliding_window:
        print(f"{m.name}: only dense Llama-style models are supported by this script.")
        return 2
    dev, bf16 = "cuda", torch.bfloat16
    h, inter, n_layers = m.hidden_size, m.intermediate_size, m.n_layers
    nh, nkv, hd, vocab = m.n_heads, m.n_kv_heads, m.head_dim, m.vocab_size
    group = nh // nkv
    torch.manual_seed(0)
    rows: list[dict] = []

    def timed(fn, warm: int = 3) -> tuple[float, float, float]:
        for _ in range(warm):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(args.reps):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        times.sort()
        return times[len(times) // 2], times[0], times[-1]

    def graphed(fn) -> tuple[float, float, float]:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
        return timed(graph.replay)

    def record(kind: str, ms: tuple, what: str = "", **shape) -> None:
        row = {"kind": kind, "model": args.model, "weight_dtype": "bf16", **shape}
        row.update(ms_median=round(ms[0], 4), ms_min=round(ms[1], 4), ms_max=round(ms[2], 4))
        row["what"] = what
        rows.append(row)
        print(kind, shape, f"{ms[0]:.3f} ms", flush=True)

    # --- the machine's two ceilings
    x = torch.empty(2**30, device=dev, dtype=bf16)
    y = torch.empty_like(x)
    ms = timed(lambda x=x, y=y: y.copy_(x))
    record("ceiling", ms, f"device copy of 2 GiB: {2 * x.numel() * 2 / ms[0] / 1e9:.2f} TB/s")
    del x, y
    a = torch.randn(8192, 8192, device=dev, dtype=bf16)
    b = torch.randn(8192, 8192, device=dev, dtype=bf16)
    ms = timed(lambda a=a, b=b: a @ b)
    record("ceiling", ms, f"bf16 matmul 8192^3: {2 * 8192**3 / ms[0] / 1e9:.0f} TFLOP/s")
    del a, b

    def rand(*shape):
        return torch.randn(*shape, device=dev, dtype=bf16) * 0.02

    layers = [
        {
            "wqkv": rand(h, (nh + 2 * nkv) * hd),
            "wo": rand(nh * hd, h),
            "wgu": rand(h, 2 * inter),
            "wd": rand(inter, h),
            "n1": torch.ones(h, device=dev, dtype=bf16),
            "n2": torch.ones(h, device=dev, dtype=bf16),
        }
        for _ in range(n_layers)
    ]
    emb, lm_head = rand(vocab, h), rand(h, vocab)
    final_norm = torch.ones(h, device=dev, dtype=bf16)
    inv = 1.0 / 500000.0 ** (torch.arange(0, hd, 2, device=dev, dtype=torch.float32) / hd)
    angles = torch.outer(torch.arange(65536, device=dev, dtype=torch.float32), inv)
    cos = torch.cat([angles.cos(), angles.cos()], -1).to(bf16)
    sin = torch.cat([angles.sin(), angles.sin()], -1).to(bf16)

    def rope(t, positions):
        c, s = cos[positions][None, :, None, :], sin[positions][None, :, None, :]
        half = t.shape[-1] // 2
        return t * c + torch.cat([-t[..., half:], t[..., :half]], -1) * s

    def mlp(layer, x, o):
        x = x + o @ layer["wo"]
        z = F.rms_norm(x, (h,), layer["n2"], 1e-5)
        gate, up = (z @ layer["wgu"]).chunk(2, -1)
        return x + (F.silu(gate) * up) @ layer["wd"]

    def new_cache(batch, tokens):
        return [
            (rand(batch, nkv, tokens, hd), rand(batch, nkv, tokens, hd)) for _ in range(n_layers)
        ]

    def prefill(ids, cache):
        batch, t = ids.shape
        x = emb[ids]
        for i, layer in enumerate(layers):
            z = F.rms_norm(x, (h,), layer["n1"], 1e-5)
            q, k, v = (z @ layer["wqkv"]).split([nh * hd, nkv * hd, nkv * hd], -1)
            q = rope(q.view(batch, t, nh, hd), slice(0, t)).transpose(1, 2)
            k = rope(k.view(batch, t, nkv, hd), slice(0, t)).transpose(1, 2)
            v = v.view(batch, t, nkv, hd).transpose(1, 2)
            cache[i][0][:, :, :t] = k
            cache[i][1][:, :, :t] = v
            k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = mlp(layer, x, o.transpose(1, 2).reshape(batch, t, nh * hd))
        return (F.rms_norm(x[:, -1], (h,), final_norm, 1e-5) @ lm_head).argmax(-1)

    def step(tok, cache, context, ids=None, chunk_cache=None):
        """Decode ``tok`` (one token per sequence, ``context`` tokens each incl. this one) and,
        when ``ids`` is given, prefill that chunk of a new request in the same pass."""
        batch = tok.shape[0]
        t = 0 if ids is None else ids.shape[1]
        x = emb[tok] if ids is None else torch.cat([emb[tok], emb[ids[0]]], 0)
        x = x[None]
        for i, layer in enumerate(layers):
            z = F.rms_norm(x, (h,), layer["n1"], 1e-5)
            q, k, v = (z @ layer["wqkv"])[0].split([nh * hd, nkv * hd, nkv * hd], -1)
            here = slice(context - 1, context)
            qd = rope(q[:batch].reshape(batch, 1, nh, hd), here)
            kd = rope(k[:batch].reshape(batch, 1, nkv, hd), here)
            cache[i][0][:, :, context - 1] = kd[:, 0]
            cache[i][1][:, :, context - 1] = v[:batch].reshape(batch, nkv, hd)
            keys, values = cache[i][0][:, :, :context], cache[i][1][:, :, :context]
            od = F.scaled_dot_product_attention(qd.view(batch, nkv, group, hd), keys, values)
            parts = [od.reshape(batch, nh * hd)]
            if t:
                qp = rope(q[batch:].reshape(1, t, nh, hd), slice(0, t)).transpose(1, 2)
                kp = rope(k[batch:].reshape(1, t, nkv, hd), slice(0, t)).transpose(1, 2)
                vp = v[batch:].reshape(1, t, nkv, hd).transpose(1, 2)
                chunk_cache[i][0][:, :, :t] = kp
                chunk_cache[i][1][:, :, :t] = vp
                kp, vp = kp.repeat_interleave(group, 1), vp.repeat_interleave(group, 1)
                op = F.scaled_dot_product_attention(qp, kp, vp, is_causal=True)
                parts.append(op.transpose(1, 2).reshape(t, nh * hd))
            x = mlp(layer, x, torch.cat(parts, 0)[None])
        return (F.rms_norm(x[0, :batch], (h,), final_norm, 1e-5) @ lm_head).argmax(-1)

    prefills = PREFILL[:2] if args.quick else PREFILL
    decodes = DECODE[:3] if args.quick else DECODE
    chunks = MIXED_CHUNKS[:3] if args.quick else MIXED_CHUNKS
    for batch, t in prefills:
        cache, ids = new_cache(batch, t), torch.randint(0, vocab, (batch, t), device=dev)
        record(
            "prefill_graph",
            graphed(lambda ids=ids, cache=cache: prefill(ids, cache)),
            batch=batch,
            tokens=t,
        )
        if (batch, t) == (1, 128):
            record(
                "prefill",
                timed(lambda ids=ids, cache=cache: prefill(ids, cache)),
                batch=1,
                tokens=t,
            )
        del cache
        torch.cuda.empty_cache()
    for batch, context in decodes:
        cache, tok = new_cache(batch, context), torch.randint(0, vocab, (batch,), device=dev)
        ms = graphed(lambda tok=tok, cache=cache, c=context: step(tok, cache, c))
        record("decode_graph", ms, batch=batch, context=context)
        if (batch, context) == (1, 1024):
            ms = timed(lambda tok=tok, cache=cache, c=context: step(tok, cache, c))
            record("decode_eager", ms, batch=1, context=context)
        del cache
        torch.cuda.empty_cache()
    cache = new_cache(MIXED_BATCH, MIXED_CONTEXT)
    tok = torch.randint(0, vocab, (MIXED_BATCH,), device=dev)
    for chunk in chunks:
        if chunk:
            ids, chunk_cache = torch.randint(0, vocab, (1, chunk), device=dev), new_cache(1, chunk)
            ms = graphed(lambda ids=ids, cc=chunk_cache: step(tok, cache, MIXED_CONTEXT, ids, cc))
        else:
            ms = graphed(lambda: step(tok, cache, MIXED_CONTEXT))
        shape = {"batch": MIXED_BATCH, "context": MIXED_CONTEXT, "prefill_chunk": chunk}
        record("mixed_step", ms, **shape)
    columns = ["kind", "model", "weight_dtype", "batch", "tokens", "context", "prefill_chunk"]
    columns += ["ms_median", "ms_min", "ms_max", "what"]
    with open(args.out, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {len(rows)} rows to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
