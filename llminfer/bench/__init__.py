"""``python -m llminfer bench``: a streaming load generator for OpenAI-compatible servers.

``client`` sends a ``Workload`` over aiohttp and records every chunk's arrival; ``sse`` reads
server-sent events and the chunks real servers send; ``results`` turns the records into chapter
6's request log; ``stub`` is a scripted server for tests and the client benchmark; ``run`` is
the command line.
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
