"""What a step of llama-server costs with its sequences on scattered slots (issue 22): each slot
its own KV stream (an explicit ``--parallel 8``, llama.cpp 0.3.36's default then) against one
unified KV cache (``--kv-unified``), on a GGUF heavy enough that a decode step is a pass over
the weights (4 layers of hidden 1,024, FFN 4,096, F32: 270 MB; one CPU thread).

    python benchmarks/measure_llama_slots.py [--out data/measurements/llama_server_slot_passes.csv]

Part 1 sends requests of 32 prompt words and 48 generated tokens (``ignore_eos``) to chosen
slots together (``id_slot`` of ``/completion``) and reads each one's ``predicted_per_token_ms``
from the server's ``timings``: slots 0-3 share one forward pass a step, slots 0, 2, 4, 6 need
four (``llminfer.sim.ubatches.split_equal``). Part 2 is a closed-loop sweep of 1-8 users (3
requests each, 32-token prompts, 32 output tokens), the slots given by the server (least
recently used), twice on the same server: how often the users' slots are scattered is what
the difference shows, and it depends on which slots the earlier loads left least recently used.
About 3 minutes. Needs ``make llama-server``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import urllib.request
from pathlib import Path

import pandas as pd

from llminfer.bench.llamacpp import LlamaServer, find_llama_server, tiny_vocab, write_tiny_gguf
from llminfer.bench.results import sweep_server
from llminfer.sim.workload import Workload

ROOT = Path(__file__).resolve().parents[1]
SHAPE = {"n_layers": 4, "hidden": 1024, "n_heads": 8, "n_kv_heads": 8, "intermediate": 4096}
SLOT_SETS = [(0,), (0, 1), (0, 4), (0, 1, 2, 3), (0, 2, 4, 6)]
KV = {"per_slot": [], "unified": ["--kv-unified"]}


def _prompt(i: int, words: list[str]) -> str:
    return " ".join(words[(i * 7 + k * 13) % len(words)] for k in range(32))


def _post(base: str, slot: int, prompt: str, out: dict) -> None:
    body = {"prompt": prompt, "n_predict": 48, "ignore_eos": True, "id_slot": slot}
    body["cache_prompt"] = False
    request = urllib.request.Request(
        base + "/completion", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=300) as reply:
        out[slot] = json.loads(reply.read())["timings"]["predicted_per_token_ms"]


def chosen_slots(server: LlamaServer, kv: str, words: list[str], rounds: int) -> list[dict]:
    rows, n = [], 0
    for rep in range(rounds):
        for slots in SLOT_SETS:
            out: dict = {}
            threads = []
            for s in slots:
                threads.append(
                    threading.Thread(target=_post, args=(server.base, s, _prompt(n, words), out))
                )
                n += 1
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            for s in slots:
                rows.append({"part": "chosen_slots", "kv": kv, "round": rep,
                             "slots": "-".join(map(str, slots)), "slot": s,
                             "ms_per_token": round(out[s], 3)})  # fmt: skip
    return rows


def closed_loop(server: LlamaServer, kv: str, rep: int) -> list[dict]:
    workload = Workload(8, concurrency=1, prompt_tokens=32, output_tokens=32, seed=0)
    loads = [1, 2, 3, 4, 8]
    body = {"ignore_eos": True}
    table, _ = sweep_server(
        server.url, workload, "tiny", concurrencies=loads, requests_per_user=3, warmup=2,
        extra_body=body, prompt_salt=100 * rep,
    )  # fmt: skip
    rows = []
    for r in table.itertuples():
        row = {"part": "closed_loop", "kv": kv, "round": rep, "concurrency": int(r.concurrency)}
        row["failed"] = int(r.failed)
        row["ttft_ms_p50"] = round(1e3 * r.ttft_s_p50, 2)
        row["tpot_ms_p50"] = round(1e3 * r.tpot_s_p50, 2)
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="write the table here (CSV)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of each part (2)")
    args = parser.parse_args(argv)
    if find_llama_server() is None:
        print("llama-server is not built: make llama-server")
        return 1
    words = [t.lstrip("\u2581") for t in tiny_vocab()[0] if t.startswith("\u2581")][5:200]
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        gguf = write_tiny_gguf(Path(tmp) / "heavy.gguf", **SHAPE)
        for kv, flags in KV.items():
            with LlamaServer(gguf, args=flags, parallel=8, context=4096, threads=1) as server:
                rows += chosen_slots(server, kv, words, args.rounds)
                for rep in range(args.rounds):
                    rows += closed_loop(server, kv, rep)
    table = pd.DataFrame(rows)
    part1 = table[table.part == "chosen_slots"]
    print(part1.groupby(["kv", "slots"], sort=False)["ms_per_token"].agg(["min", "median", "max"]))
    part2 = table[table.part == "closed_loop"]
    print(part2.pivot(index="concurrency", columns=["kv", "round"], values="tpot_ms_p50"))
    if args.out:
        table.to_csv(args.out, index=False)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
