"""Chapter 5: prefill/decode disaggregation — what shipping the KV cache costs, and what a
separate decode pool buys compared with a colocated engine that chunks its prefills.

A colocated vLLM-V0-style engine stalls every decoding stream for a whole prefill; vLLM V1's
chunked prefill shrinks the stall to a share of one token budget per step; a disaggregated
deployment (DistServe, Splitwise; vLLM's and SGLang's P/D modes) removes prefills from the
decode GPUs altogether, at the price of moving each prompt's KV cache over a link and of sizing
two pools of GPUs.

When the KV cache travels decides how much of the copy TTFT sees (``TRANSFER_MODES``):

- ``"pull"`` (the default here, because it is what stock vLLM does with its usual connector):
  vLLM's ``NixlConnector`` (an alias of ``NixlPullConnector`` in vLLM 0.33.0,
  ``vllm/distributed/kv_transfer/kv_connector/v1/nixl/connector.py``) keeps the prefilled
  request's blocks alive when it *finishes* on the prefill instance ("It will be read from D
  upon completion", ``pull_scheduler.py``); the decode instance then issues NIXL READs for the
  whole prompt's blocks (``start_load_kv``). Request-level, after the prefill: the whole copy
  adds to TTFT. (``NixlPushConnector`` and ``MooncakeConnector`` write instead, but also only
  after the request finished, so they expose the whole copy too.)
- ``"layerwise"``: layer k's cache leaves while layer k + 1 is still being prefilled, so with
  a fast link only the last layer's share adds to TTFT. A non-default option: vLLM's connector
  API has the per-layer hooks (``save_kv_layer``, "useful for layer-by-layer pipelining",
  ``kv_connector/v1/base.py``), used by ``P2pNcclConnector`` (vLLM 0.11.0), ``MoRIIOConnector``
  in WRITE mode (0.33.0) and LMCache with ``use_layerwise``.
- SGLang (0.5.23 ``srt/disaggregation/prefill.py``) sends a chunk's KV after that chunk's
  forward pass: chunk-granular, between the two modes; not modelled separately.

vLLM itself has no default connector (``KVTransferConfig.kv_connector = None``, 0.33.0
``vllm/config/kv_transfer.py``): disaggregation is opt-in.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pandas as pd

from llminfer.cost.memory import kv_cache_bytes
from llminfer.cost.roofline import attended_pairs
from llminfer.cost.steptime import step_timer
from llminfer.logs.summary import summarize
from llminfer.sim.engines import V0_ENGINE, EngineConfig
from llminfer.sim.simulate import simulate
from llminfer.specs.checks import check_int, check_number
from llminfer.specs.hardware import GPU
from llminfer.specs.models import Model
from llminfer.specs.stepmodel import StepModel

#: Per-GPU link speeds (bytes/s per direction) a KV transfer may use, with sources:
#: NVLink 4 of an H100/H200 SXM (900 GB/s bidirectional); PCIe Gen5 x16 (64 GB/s per
#: direction); one 400 Gb/s InfiniBand NDR / ConnectX-7 port per GPU, as in a DGX H100 (50 GB/s);
#: 100 Gb/s Ethernet (12.5 GB/s), a common cloud instance's network.
KV_LINKS = {
    "NVLink 4 (same node)": 450e9,
    "PCIe Gen5 x16": 64e9,
    "400 Gb/s InfiniBand": 50e9,
    "100 Gb/s Ethernet": 12.5e9,
}


def _check_bandwidth(link_bandwidth: object) -> float:
    ok = isinstance(link_bandwidth, (int, float, np.floating)) and not isinstance(
        link_bandwidth, bool
    )
    if not ok or not 0 < link_bandwidth < math.inf:
        raise ValueError(
            f"link_bandwidth={link_bandwidth!r} must be a finite number of bytes/s > 0"
        )
    return float(link_bandwidth)


def kv_transfer_seconds(
    model: Model,
    prompt_tokens: int,
    link_bandwidth: float,
    kv_dtype: str = "bf16",
    n_gpus: int = 1,
) -> float:
    """Seconds to move one request's KV cache from a prefill GPU to a decode GPU.

    ``kv_cache_bytes(model, prompt_tokens, tp=n_gpus)`` per GPU over a link of
    ``link_bandwidth`` bytes/s per direction per GPU (each tensor-parallel shard moves over its
    own link, in parallel). Ignores latency and protocol overhead, so it is a lower bound.

    Introduced in: notebooks/05_optimizations.ipynb
    """
    link_bandwidth = _check_bandwidth(link_bandwidth)
    return kv_cache_bytes(model, prompt_tokens, kv_dtype, tp=n_gpus) / link_bandwidth


#: How a KV transfer is scheduled against the prefill (see the module docstring): ``"pull"``,
#: the decode side reads the whole cache after the prefill finished (vLLM's NixlConnector,
#: the default here); ``"layerwise"``, each layer's cache is pushed as soon as that layer is
#: prefilled (P2pNccl, MoRIIO WRITE, LMCache layer-wise).
TRANSFER_MODES = ("pull", "layerwise")


#: The row ``compare_with_disaggregation`` gives the disaggregated deployment, per mode.
DISAGGREGATED_LABELS = {
    "pull": "disaggregated, KV pulled after prefill",
    "layerwise": "disaggregated, KV pushed per layer",
}


def _check_transfer(transfer: object) -> str:
    if transfer not in TRANSFER_MODES:
        raise ValueError(f"transfer={transfer!r} must be one of {', '.join(TRANSFER_MODES)}")
    return str(transfer)


def exposed_transfer_seconds(
    transfer_s: float, prefill_s: float, n_layers: int, transfer: str = "pull"
) -> float:
    """Seconds of a KV transfer that TTFT sees, for a transfer of ``transfer_s`` seconds after
    (or during) a prefill of ``prefill_s`` seconds over ``n_layers`` layers.

    - ``transfer="pull"`` (vLLM's NixlConnector: the decode instance reads the blocks once the
      prefill request has finished): nothing overlaps, the whole ``transfer_s`` is exposed.
    - ``transfer="layerwise"`` (push each layer when it is done): layer k's cache (1/L of it)
      can leave once layer k is prefilled, after k/L of the prefill. With the link faster than
      the prefill (transfer ≤ prefill) the copy trails the compute and only the last layer's
      share shows, ``transfer / L``; with a slow link the copy is the bottleneck from the first
      layer on, ``transfer − prefill + prefill / L``. Both are
      ``max(transfer / L, transfer − prefill × (L − 1) / L)`` seconds.

    Example: a 32,768-token Llama-3.1-8B prompt (4 GiB) over 100 Gb/s Ethernet (12.5 GB/s)
    takes 0.344 s: pull exposes 0.344 s, layer-wise over 32 layers 0.344 / 32 = 10.7 ms.

    Introduced in: notebooks/05_optimizations.ipynb
    """
    transfer = _check_transfer(transfer)
    n_layers = check_int("n_layers", n_layers, 1)
    transfer_s = check_number("transfer_s", transfer_s)
    prefill_s = check_number("prefill_s", prefill_s)
    if transfer == "pull":
        return float(transfer_s)
    return max(transfer_s / n_layers, transfer_s - prefill_s * (n_layers - 1) / n_layers)


def disaggregation_table(
    model: Model,
    gpu: GPU,
    prompt_tokens: Sequence[int],
    links: dict[str, float] | None = None,
    n_gpus: int = 1,
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
    transfer: str = "pull",
    profile: str | StepModel | None = None,
) -> pd.DataFrame:
    """KV transfer time against prefill time, per prompt length and link.

    Separating prefill and decode onto different GPUs removes prefill's interference with
    decoding (a colocated V0-style step that prefills a prompt stalls every decoding sequence
    for ``prefill_s``), at the price of shipping the prompt's KV cache before the first decode.
    ``links`` maps a name to bytes/s per direction: by default the GPU's own NVLink and PCIe,
    which only reach a decode GPU in the same node; ``KV_LINKS`` adds the network links a
    prefill node and a decode node are joined by. Columns:
    prompt_tokens, link, link_bytes_per_s, kv_bytes, transfer_s (whole copy), transfer (the
    mode), exposed_s (what TTFT sees in that mode, ``exposed_transfer_seconds``: all of
    transfer_s for ``"pull"``, vLLM's NixlConnector; about 1/L of it for ``"layerwise"``),
    prefill_s (one prefill-only step of the whole prompt, ``step_timer``'s realistic step model
    of the engine ``profile``, default ``"vllm"``), transfer_over_prefill (below 1: the copy is
    quicker than the prefill stall it removes).

    Introduced in: notebooks/05_optimizations.ipynb
    """
    if links is None:
        links = {
            name: bw
            for name, bw in (("NVLink", gpu.interconnect_bandwidth), ("PCIe", gpu.pcie_bandwidth))
            if bw
        }
    if not links:
        raise ValueError(f"links: {gpu.name} lists no link; pass links={{'name': bytes_per_s}}")
    transfer = _check_transfer(transfer)
    timer = step_timer(model, gpu, n_gpus, weight_dtype, kv_dtype, profile=profile)
    rows = []
    for prompt in prompt_tokens:
        prefill = timer(prompt, attended_pairs(prompt, 0), 0, 0)
        kv = kv_cache_bytes(model, prompt, kv_dtype, tp=n_gpus)
        for name, bandwidth in links.items():
            copy = kv_transfer_seconds(model, prompt, bandwidth, kv_dtype, n_gpus)
            rows.append(
                {
                    "prompt_tokens": prompt,
                    "link": name,
                    "link_bytes_per_s": float(bandwidth),
                    "kv_bytes": kv,
                    "transfer_s": copy,
                    "transfer": transfer,
                    "exposed_s": exposed_transfer_seconds(copy, prefill, model.n_layers, transfer),
                    "prefill_s": prefill,
                    "transfer_over_prefill": copy / prefill,
                }
            )
    return pd.DataFrame(rows)


def compare_with_disaggregation(
    workload,
    model: Model,
    gpu: GPU,
    link_bandwidth: float = KV_LINKS["400 Gb/s InfiniBand"],
    colocated: dict | None = None,
    percentiles: Sequence[float] = (50, 99),
    transfer: str = "pull",
    profile: str | StepModel | None = None,
) -> pd.DataFrame:
    """Two GPUs serving ``workload``: colocated engines versus one prefill + one decode GPU.

    Colocated rows (``colocated`` maps labels to ``EngineConfig``; default vLLM V1 with chunked
    prefill and a V0-style engine) run two independent replicas, each simulated at half the
    request rate. The disaggregated row simulates a prefill GPU (every request with one output
    token, V0-style prefill-only steps: its TTFT) and a decode GPU that receives every request
    and pays nothing for prompts (decode steps only: its TPOT and ITL); TTFT adds the exposed
    KV transfer over ``link_bandwidth`` in mode ``transfer`` (``exposed_transfer_seconds``:
    the whole copy for ``"pull"``, vLLM's NixlConnector, the default). A model, not a
    measurement: the decode GPU's arrivals are not delayed by the prefill pool, and routing,
    the transfer's protocol cost and the decode GPU's own first step are ignored. Percentiles
    are over every request of the run (the whole run, drain included). Columns:
    ttft/tpot/itl at ``percentiles`` (s), output_tps (both GPUs), gpus. Every GPU's steps are
    timed as the engine ``profile`` runs them (default ``"vllm"``).

    Introduced in: notebooks/05_optimizations.ipynb
    """
    link_bandwidth = _check_bandwidth(link_bandwidth)
    transfer = _check_transfer(transfer)
    if workload.rate is None:
        raise ValueError("workload must be open loop (rate=...) to split it over two GPUs")
    # Without chunking every prompt must fit one step (vLLM V0 sets the budget to the context).
    whole = max(8192, int(workload.requests()["prompt_tokens"].max()))
    if colocated is None:
        colocated = {
            "colocated, V1 chunked prefill": EngineConfig(),
            "colocated, V0": replace(V0_ENGINE, max_num_batched_tokens=whole),
        }
    half = replace(workload, rate=workload.rate / 2)
    stats = [f"p{q:g}" for q in percentiles]
    rows = {}
    for label, engine in colocated.items():
        result = simulate(half, model, gpu, engine, profile=profile)
        summary = summarize(result.log, percentiles=percentiles).to_dict()
        itl = _itl_percentiles(result, percentiles)
        rows[label] = {
            **{f"ttft_s_{s}": summary[f"ttft_s_{s}"] for s in stats},
            **{f"tpot_s_{s}": summary[f"tpot_s_{s}"] for s in stats},
            **itl,
            "output_tps": 2 * summary["output_tps"],
            "gpus": 2,
        }
    # The prefill GPU: whole prompts, one output token each.
    prefill_engine = EngineConfig(
        chunked_prefill=False,
        prefix_caching=False,
        max_num_seqs=256,
        max_num_batched_tokens=whole,
    )
    prefill_run = simulate(
        replace(workload, output_tokens=1), model, gpu, prefill_engine, profile=profile
    )
    # The decode GPU: prompts arrive with their KV cache, so a prompt costs (almost) nothing.
    timer = step_timer(model, gpu, profile=profile)

    def decode_only(prefill, attended, seqs, context, cached=0):
        return timer(0, 0, seqs, context) if seqs else 1e-6

    decode_run = simulate(workload, model, gpu, EngineConfig(), step_time=decode_only)
    req = prefill_run.requests
    exposed = np.array(
        [
            exposed_transfer_seconds(
                kv_transfer_seconds(model, int(p), link_bandwidth),
                float(f - s),
                model.n_layers,
                transfer,
            )
            for p, f, s in zip(req.input_tokens, req.first_token_ts, req.scheduled_ts, strict=True)
        ]
    )
    ttft = (req.first_token_ts - req.start_ts).to_numpy() + exposed
    decode_summary = summarize(decode_run.log, percentiles=percentiles).to_dict()
    rows[DISAGGREGATED_LABELS[transfer]] = {
        **{
            f"ttft_s_{s}": float(np.percentile(ttft, q))
            for s, q in zip(stats, percentiles, strict=True)
        },
        **{f"tpot_s_{s}": decode_summary[f"tpot_s_{s}"] for s in stats},
        **_itl_percentiles(decode_run, percentiles),
        "output_tps": decode_summary["output_tps"],
        "gpus": 2,
    }
    return pd.DataFrame.from_dict(rows, orient="index")


def _itl_percentiles(result, percentiles: Sequence[float]) -> dict[str, float]:
    gaps = np.concatenate([np.diff(ts) for ts in result.requests.token_ts] + [np.empty(0)])
    if gaps.size == 0:
        return {f"itl_s_p{q:g}": math.nan for q in percentiles}
    return {f"itl_s_p{q:g}": float(np.percentile(gaps, q)) for q in percentiles}


__all__ = [
    "DISAGGREGATED_LABELS",
    "KV_LINKS",
    "TRANSFER_MODES",
    "compare_with_disaggregation",
    "disaggregation_table",
    "exposed_transfer_seconds",
    "kv_transfer_seconds",
]
