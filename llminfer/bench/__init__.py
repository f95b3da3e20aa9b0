"""``python -m llminfer bench``: a streaming load generator for OpenAI-compatible servers.

``client`` sends a ``Workload`` over aiohttp and records every chunk's arrival; ``sse`` reads
server-sent events and the chunks real servers send; ``results`` turns the records into chapter
6's request log; ``stub`` is a scripted server for tests and the client benchmark; ``run`` is
the command line.

Why aiohttp (measured, ``python benchmarks/bench_client.py``: 64 concurrent streams × 50 chunks
every 20 ms from a stub in its own process, aiohttp and httpx interleaved in one run, the same
SSE parser, the clock read right after each network read): on the shared 2-core development
machine at load average 6.4–9.0 (two runs of the benchmark), aiohttp cost 51–133 µs
of client CPU per chunk and httpx (``AsyncClient.stream``/``aiter_raw``) 91–184 µs; aiohttp's
timestamps were within 0.2–28 ms of the stub's writes at the median, httpx's 43–588 ms late
(its streams fall behind when 64 share one loop). aiohttp met the 2 ms p99 target in one of
eight runs (p99 1.39 ms, max 1.70 ms); in the others the machine itself was the limit: the
stub's own writes were 55–276 ms late (p99) against their schedule, and client stalls hit
every stream at the same instants — the OS not running the process, not the client's work.
Rerun the benchmark on an idle machine before quoting a p99.
"""

from llminfer.bench.client import BenchRun, RequestRecord, bench, plan_requests, run_bench
from llminfer.bench.results import (
    accounting,
    decode_tps,
    records_frame,
    sweep_server,
    write_log,
)
from llminfer.bench.run import register_bench
from llminfer.bench.sse import Chunk, SSEDecoder, read_chunk

__all__ = [
    "BenchRun",
    "Chunk",
    "RequestRecord",
    "SSEDecoder",
    "accounting",
    "bench",
    "decode_tps",
    "plan_requests",
    "read_chunk",
    "records_frame",
    "register_bench",
    "run_bench",
    "sweep_server",
    "write_log",
]
