"""Accelerators: memory size, memory bandwidth, dense peak FLOP/s and links between GPUs.

A ``GPU`` is a frozen description from a vendor data sheet. Presets live in
``llminfer/specs/presets/gpus.csv`` (see ``llminfer.specs.presets``); ``GPU(...)`` by keyword
describes
another chip. Peak FLOP/s are always **dense** (data sheets often print the 2x "with sparsity"
figure; llminfer halves those).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field

import numpy as np

from llminfer.specs.stepmodel import StepModel
from llminfer.units import GiB, MiB, check_dtype

#: The compute formats a GPU may list a dense peak for; fp32 is the non-tensor rate.
COMPUTE_DTYPES = ("bf16", "fp16", "fp8", "int8", "fp4", "fp32")


@dataclass(frozen=True)
class GPU:
    """One accelerator.

    - ``memory_bytes``: device memory in bytes as the driver reports it (``nvidia-smi``'s
      total): an "80 GB" H100 has 81,559 MiB = 85.5·10^9 bytes ≈ 79.6 GiB.
    - ``marketed_memory_bytes``: the data sheet's label in bytes ("80 GB" = 80·10^9; vendors
      mean GiB-ish sizes by it), None when unknown. Only for display; every plan uses
      ``memory_bytes``.
    - ``memory_bandwidth``: peak memory bandwidth in bytes/s.
    - ``<dtype>_flops``: dense peak FLOP/s (OP/s for int8) for that format, None when the chip
      has no fast path for it.
    - ``interconnect_bandwidth``: GPU-to-GPU link (NVLink, Infinity Fabric) in bytes/s **per
      direction**, None without one. ``pcie_bandwidth``: host link, bytes/s per direction.
    - ``sm_count``: streaming multiprocessors (AMD: compute units); ``shared_memory_per_sm``:
      the on-chip SRAM one SM can give a kernel as shared memory, bytes. Both None when unknown.
    - ``step_model``: the realistic step-time constants measured on this chip
      (``llminfer.specs.stepmodel.StepModel``, e.g. from ``llminfer.cost.calibration``); None uses
      ``DEFAULT_STEP_MODEL``.

    Introduced in: notebooks/04_memory_budget.ipynb
    """

    name: str
    memory_bytes: float
    memory_bandwidth: float
    bf16_flops: float | None = None
    fp16_flops: float | None = None
    fp8_flops: float | None = None
    int8_flops: float | None = None
    fp4_flops: float | None = None
    fp32_flops: float | None = None
    interconnect_bandwidth: float | None = None
    pcie_bandwidth: float | None = None
    sm_count: int | None = None
    shared_memory_per_sm: float | None = None
    marketed_memory_bytes: float | None = field(default=None, compare=False)
    source: str = field(default="custom", compare=False)
    step_model: StepModel | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name={self.name!r} must be a non-empty string")
        for name in ("memory_bytes", "memory_bandwidth"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"{name}={value!r} must be a positive number")
        for dtype in COMPUTE_DTYPES:
            self._check_optional_positive(f"{dtype}_flops")
        self._check_optional_positive("interconnect_bandwidth")
        self._check_optional_positive("pcie_bandwidth")
        self._check_optional_positive("sm_count")
        self._check_optional_positive("shared_memory_per_sm")
        self._check_optional_positive("marketed_memory_bytes")
        if self.step_model is not None and not isinstance(self.step_model, StepModel):
            raise ValueError(f"step_model={self.step_model!r} must be a StepModel or None")

    def _check_optional_positive(self, name: str) -> None:
        value = getattr(self, name)
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise ValueError(f"{name}={value!r} must be a positive number or None")

    def peak_flops(self, dtype: str = "bf16") -> float:
        """Dense peak FLOP/s for matrix multiplies in ``dtype``.

        Raises ValueError when the data sheet lists no such rate for this chip.

        Introduced in: notebooks/02_prefill_and_decode.ipynb
        """
        dtype = check_dtype(dtype)
        if dtype not in COMPUTE_DTYPES:
            raise ValueError(
                f"dtype={dtype!r} is a storage format, not a compute format; "
                f"use one of {', '.join(COMPUTE_DTYPES)}"
            )
        value = getattr(self, f"{dtype}_flops")
        if value is None:
            listed = [d for d in COMPUTE_DTYPES if getattr(self, f"{d}_flops") is not None]
            raise ValueError(
                f"dtype={dtype!r}: {self.name} has no published dense {dtype} rate; "
                f"it lists {', '.join(listed) or 'none'}"
            )
        return float(value)

    @property
    def on_chip_sram_bytes(self) -> float | None:
        """Shared memory over all SMs, bytes (``sm_count × shared_memory_per_sm``), or None.

        Introduced in: notebooks/02_prefill_and_decode.ipynb
        """
        if self.sm_count is None or self.shared_memory_per_sm is None:
            return None
        return float(self.sm_count * self.shared_memory_per_sm)

    @property
    def supported_dtypes(self) -> tuple[str, ...]:
        """Compute formats with a published dense peak on this chip."""
        return tuple(d for d in COMPUTE_DTYPES if getattr(self, f"{d}_flops") is not None)


def _physical_memory_bytes() -> float:
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):  # Windows has no sysconf
        return float(GiB)


def measure_bandwidth(n_bytes: int = 256 * MiB, repeats: int = 3) -> float:
    """This computer's achievable memory bandwidth in bytes/s, measured with numpy.

    Copies an array of ``n_bytes`` (far larger than any CPU cache) ``repeats`` times and keeps
    the fastest copy; a copy reads and writes every byte once, so it moves ``2 × n_bytes``
    (the STREAM "copy" convention).

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    if isinstance(n_bytes, bool) or not isinstance(n_bytes, int) or n_bytes < MiB:
        raise ValueError(f"n_bytes={n_bytes!r} must be an integer of at least {MiB} bytes")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats={repeats!r} must be a positive integer")
    src = np.ones(n_bytes // 8, dtype=np.float64)
    dst = np.empty_like(src)
    np.copyto(dst, src)  # touch the pages first: the first write faults them in
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - start)
    return 2 * src.nbytes / best


def measure_matmul_flops(n: int = 1024, repeats: int = 5) -> float:
    """This computer's achievable float32 matrix-multiply rate in FLOP/s, measured with numpy.

    Multiplies two ``n × n`` float32 matrices ``repeats`` times (``2·n³`` FLOP each, numpy's
    BLAS using every core) and keeps the fastest run.

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 16:
        raise ValueError(f"n={n!r} must be an integer >= 16")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats={repeats!r} must be a positive integer")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    a @ b  # warm up the BLAS threads
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best


def measure_machine(n_bytes: int = 256 * MiB, n: int = 1024, repeats: int = 3) -> GPU:
    """Measure this computer with numpy and describe it as a ``GPU`` (its CPU, really).

    ``memory_bandwidth`` comes from ``measure_bandwidth`` and ``fp32_flops`` from
    ``measure_matmul_flops``; ``memory_bytes`` is the physical RAM. Takes about a second; the
    figures are achievable rates (not data-sheet peaks) and vary from run to run, so the
    roofline drawn from them is this machine's real one.

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    bandwidth = measure_bandwidth(n_bytes, repeats)
    flops = measure_matmul_flops(n, repeats)
    return GPU(
        name="this computer (numpy)",
        memory_bytes=_physical_memory_bytes(),
        memory_bandwidth=bandwidth,
        fp32_flops=flops,
        source=f"measured with numpy: {repeats} copies of {n_bytes} bytes, {n}x{n} float32 matmul",
    )
