"""Chapters 2 and 4: what a step and a request cost on given hardware.

The memory budget and the KV cache (``memory``; its side-by-side tables in ``memory_tables``),
FLOPs and bytes of one step and the roofline (``roofline``), FlashAttention's HBM traffic
(``flash``), the realistic step time above the floor (``steptime``, vectorised by
``stepkernel``), latency estimates for one request (``latency``), fitting the step model to
measured steps (``calibration``) and the numpy toy transformer whose two phases chapter 2 times
(``toy``). Pure functions of ``llminfer.specs``. Used by notebooks 01, 02, 04 and 05 (and by the
simulator of 03 and 05).
"""
