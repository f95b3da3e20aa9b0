"""``python -m llminfer serve``: a real, small inference server for ``ToyModel`` (chapter 8).

Two modes: real compute (the numpy ``ToyModel`` runs every step on this CPU; timings depend on
the machine and its load) and paced (``--paced MODEL:GPU[:PROFILE]``: the same scheduler, each
step lasting what the step model predicts for that model on that GPU; reproducible anywhere).

``config`` holds what the server runs with (model presets, ``ServeConfig``, the paced mode),
``engine`` the iteration-level engine (waiting queue, continuous batching, chunked
prefill, paged KV accounting, preemption), ``app`` the OpenAI-compatible HTTP routes and the
Prometheus metrics, ``run`` the command and ``ServerProcess``, ``tokenizer`` the word-level toy
tokenizer both server and load generator count with.
"""

from llminfer.serve.config import PRESETS, ServeConfig, build_model, parse_paced
from llminfer.serve.engine import ToyEngine, decode_batch, paced_token
from llminfer.serve.run import ServerProcess, register_serve
from llminfer.serve.tokenizer import ToyTokenizer

__all__ = [
    "PRESETS",
    "ServeConfig",
    "ServerProcess",
    "ToyEngine",
    "ToyTokenizer",
    "build_model",
    "decode_batch",
    "paced_token",
    "parse_paced",
    "register_serve",
]
