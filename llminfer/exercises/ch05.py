"""Answers to notebook 05's "Try it" questions, each computed by llminfer."""

from __future__ import annotations

from dataclasses import replace
from functools import cache

from llminfer.exercises import Exercise
from llminfer.language import N_
from llminfer.specs.presets import get_gpu, get_model


def _llama8():
    return get_model("llama-3.1-8b")


def _h100():
    return get_gpu("h100-sxm")


def _gpus_for_70b() -> int:
    from llminfer.sim.techniques import tensor_parallel_table

    table = tensor_parallel_table(get_model("llama-3.1-70b"), _h100(), (1, 2, 4, 8), batch=1)
    nv = table[table.link == "NVLink"]
    return int(nv.loc[nv.kv_capacity_tokens > 0, "n_gpus"].min())


def _waste_256() -> float:
    from llminfer.sim.techniques import fragmentation_simulation

    table = fragmentation_simulation((1, 1024), (1, 1024), 2048, (256,)).set_index("policy")
    return float(table.loc["paged 256", "waste"])


def _low_load_activity() -> str:
    """What the V0-style continuous server of section 4 spends most of its time on at 0.2
    requests/s: "idle", "prefill" or "decode"."""
    from llminfer.sim.engines import V0_ENGINE
    from llminfer.sim.simulate import simulate
    from llminfer.sim.workload import LogNormal, Workload

    workload = Workload(
        100,
        rate=0.2,
        prompt_tokens=LogNormal(500, 1.0, high=8000),
        output_tokens=LogNormal(200, 1.0, high=2000),
    )
    result = simulate(workload, _llama8(), _h100(), replace(V0_ENGINE, max_num_seqs=64))
    steps, req = result.steps, result.requests
    window = req.end_ts.max() - req.start_ts.min()
    prefill = steps.loc[steps.prefill_tokens > 0, "duration_s"].sum()
    decode = steps.loc[steps.prefill_tokens == 0, "duration_s"].sum()
    shares = {"idle": window - prefill - decode, "prefill": prefill, "decode": decode}
    return max(shares, key=shares.get)


def _reused_15() -> int:
    from llminfer.sim.techniques import cached_prefix_tokens

    return cached_prefix_tokens(4096, 15)


def _break_even_alpha() -> float:
    """Smallest acceptance rate at which some draft length beats plain decoding, c = 0.2."""
    from llminfer.sim.speculative import best_draft_length

    low, high = 0.0, 1.0
    for _ in range(40):
        mid = (low + high) / 2
        if best_draft_length(mid, 0.2)[0] == 0:
            low = mid
        else:
            high = mid
    return high


def _pcie_speedup_batch1() -> float:
    from llminfer.sim.techniques import tensor_parallel_table

    table = tensor_parallel_table(get_model("llama-3.1-70b"), _h100(), (1, 8), batch=1)
    return float(table.set_index(["link", "n_gpus"]).loc[("PCIe", 8), "speedup"])


def _exposed_ms_512() -> float:
    """What the KV copy of a 512-token prompt adds to TTFT over 100 Gb/s Ethernet when the
    decode side pulls it after the prefill (vLLM's NixlConnector)."""
    from llminfer.sim.disaggregation import KV_LINKS, disaggregation_table

    table = disaggregation_table(_llama8(), _h100(), [512], links=KV_LINKS, transfer="pull")
    return float(table.set_index("link").loc["100 Gb/s Ethernet", "exposed_s"] * 1e3)


@cache
def _chunk_table():
    from llminfer.sim.engines import V0_ENGINE, EngineConfig
    from llminfer.sim.loadsweep import compare_engines
    from llminfer.sim.workload import LogNormal, Workload

    workload = Workload(
        400,
        rate=4,
        prompt_tokens=LogNormal(2000, 1.0, high=16000),
        output_tokens=LogNormal(250, 0.8, high=1000),
    )
    engines = {
        "V0": replace(V0_ENGINE, max_num_batched_tokens=16384),
        "V1": EngineConfig(prefix_caching=False, max_num_batched_tokens=2048),
    }
    return compare_engines(workload, _llama8(), _h100(), engines, percentiles=(99,))


def _v0_over_v1_itl() -> float:
    table = _chunk_table()
    return float(table.loc["V0", "itl_s_p99"] / table.loc["V1", "itl_s_p99"])


def _spec_losing_batch() -> int:
    from llminfer.sim.speculative import speculative_batch_table

    batches = [2**k for k in range(11)]
    table = speculative_batch_table(_llama8(), _h100(), 0.6, 4, batches, context_tokens=256)
    return int(table.loc[table.speedup < 1, "batch"].min())


EXERCISES: tuple[Exercise, ...] = (
    Exercise(
        "05.1",
        N_(
            "How many H100 SXM GPUs (1, 2, 4 or 8) does Llama-3.1-70B in BF16 need at least, so "
            "that the weights leave room for any KV cache?"
        ),
        _gpus_for_70b,
        unit="GPUs",
        rel_tol=0.0,
        hint=N_("141 GB of weights; each GPU keeps 10 % back and a reserve (plan_memory)."),
    ),
    Exercise(
        "05.2",
        N_(
            "Section 3's workload (prompts and outputs uniform 1–1,024 tokens, 2,048 maximum) with "
            "256-token blocks: what share of the allocated KV slots is empty (0–1)?"
        ),
        _waste_256,
        unit="(share)",
        rel_tol=0.05,
        hint=N_("A request wastes on average half a block: 128 slots of a ~770-token sequence."),
    ),
    Exercise(
        "05.3",
        N_(
            "Section 4's workload at 0.2 requests/s on the V0-style continuous server: what does "
            "the GPU spend most of the wall time on — 'idle', 'prefill' or 'decode'?"
        ),
        _low_load_activity,
        hint=N_("Compare the sum of step durations with the length of the run."),
        accept=("waiting", "nothing"),
    ),
    Exercise(
        "05.4",
        N_(
            "How many prompt tokens does a 4,096-token prompt reuse from a 15-token shared prefix "
            "(16-token blocks)?"
        ),
        _reused_15,
        unit="tokens",
        rel_tol=0.0,
        hint=N_("Only whole blocks of the prefix are cached."),
    ),
    Exercise(
        "05.5",
        N_(
            "A draft costs c = 0.2 of the target per token. Below what acceptance rate α does no "
            "draft length γ pay off (the best γ is 0)?"
        ),
        _break_even_alpha,
        rel_tol=0.05,
        hint=N_("Compare γ = 1 with plain decoding: (1 + α) / (1 + c) > 1 ?"),
    ),
    Exercise(
        "05.6",
        N_(
            "Llama-3.1-70B, batch 1, 1,024-token context: what speed-up do 8 H100s over PCIe give "
            "its decode step compared with one GPU (as if the weights fitted)?"
        ),
        _pcie_speedup_batch1,
        unit="×",
        rel_tol=0.05,
        hint=N_("At batch 1 an all-reduce carries one token's activations: latency, not bytes."),
    ),
    Exercise(
        "05.7",
        N_(
            "A 512-token prompt of Llama-3.1-8B over 100 Gb/s Ethernet: how many milliseconds does "
            "the KV transfer add to TTFT with stock vLLM's NixlConnector, which pulls the cache "
            "after the prefill?"
        ),
        _exposed_ms_512,
        unit="ms",
        rel_tol=0.05,
        hint=N_(
            "Pulled after the prefill, none of the copy overlaps: 512 × 128 KiB at 12.5 GB/s "
            "(disaggregation.disaggregation_table(..., links=disaggregation.KV_LINKS), "
            "column exposed_s)."
        ),
    ),
    Exercise(
        "05.8",
        N_(
            "Section 8's workload (400 requests at 4/s, prompts LogNormal(2000, 1.0, high=16000), "
            "outputs LogNormal(250, 0.8, high=1000)): how many times longer is the V0-style "
            "engine's p99 ITL than V1's with a 2,048-token budget?"
        ),
        _v0_over_v1_itl,
        unit="×",
        rel_tol=0.05,
        hint=N_("compare_engines(...) gives itl_s_p99 for each engine."),
    ),
    Exercise(
        "05.9",
        N_(
            "Speculation with α = 0.6, γ = 4, c = 0.05 and 256-token contexts: from which batch "
            "size (a power of two up to 1,024) does it make decoding slower than not speculating?"
        ),
        _spec_losing_batch,
        unit="sequences",
        rel_tol=0.0,
        hint=N_("speculative.speculative_batch_table: find the first speedup below 1."),
    ),
)
