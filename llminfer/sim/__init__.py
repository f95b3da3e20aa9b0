"""Chapters 3 and 5: a simulated serving engine, to see load, batching and each optimisation.

Workloads (``workload``), the continuous-batching scheduler with paged KV blocks (``scheduler``,
``kvblocks``, ``arrivals`` for how a request reaches it, ``decodestretch`` for its fast
decode-only stretches, and ``ubatches`` for llama.cpp's slots and forward passes), the
simulation that times every step with the cost model (``simulate``, its last runs kept by
``runcache``) for an engine's knobs (``engines``), load sweeps and goodput (``loadsweep``), and
the techniques of chapter 5 (``techniques``, ``speculative``, ``disaggregation``). Builds on
``llminfer.cost`` and ``llminfer.specs``; writes its results as request logs
(``llminfer.logs``). Used by notebooks 01, 03, 05, 07 and 08.
"""
