"""Accelerators: memory size, memory bandwidth, dense peak FLOP/s and links between GPUs.

A ``GPU`` is a frozen description from a vendor data sheet. Presets live in
``llminfer/presets/gpus.csv`` (see ``llminfer.presets``); ``GPU(...)`` by keyword describes
another chip. Peak FLOP/s are always **dense** (data sheets often print the 2x "with sparsity"
figure; llminfer halves those).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from llminfer.units import check_dtype

#: The compute formats a GPU may list a dense peak for; fp32 is the non-tensor rate.
COMPUTE_DTYPES = ("bf16", "fp16", "fp8", "int8", "fp4", "fp32")


@dataclass(frozen=True)
class GPU:
    """One accelerator.

    - ``memory_bytes``: device memory in bytes (as marketed: "80 GB" = 80·10^9).
    - ``memory_bandwidth``: peak memory bandwidth in bytes/s.
    - ``<dtype>_flops``: dense peak FLOP/s (OP/s for int8) for that format, None when the chip
      has no fast path for it.
    - ``interconnect_bandwidth``: GPU-to-GPU link (NVLink, Infinity Fabric) in bytes/s **per
      direction**, None without one. ``pcie_bandwidth``: host link, bytes/s per direction.

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
    source: str = field(default="custom", compare=False)

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
    def supported_dtypes(self) -> tuple[str, ...]:
        """Compute formats with a published dense peak on this chip."""
        return tuple(d for d in COMPUTE_DTYPES if getattr(self, f"{d}_flops") is not None)
