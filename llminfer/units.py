"""Units, byte sizes of number formats, and human-readable figures.

Inside llminfer every quantity is in base SI-like units: bytes, seconds, FLOP, FLOP/s and
bytes/s. Decimal prefixes (kB, MB, GB = 10^9) and binary ones (KiB, MiB, GiB = 2^30) are both
in use in the article and in vendor data sheets, so every printed figure names which it is.
"""

from __future__ import annotations

import math

KB = 10**3
MB = 10**6
GB = 10**9
TB = 10**12
KiB = 2**10
MiB = 2**20
GiB = 2**30
TiB = 2**40

#: Block-scaled 4-bit formats, whose scales are part of the format: elements per block and
#: bytes of the block's scale. MXFP4 (OCP Microscaling spec v1.0): an FP4 (E2M1) element
#: and one E8M0 scale per 32 elements, 4.25 bits per element; gpt-oss ships its MoE weights
#: so. NVFP4 (NVIDIA Blackwell): an FP4 element and one FP8 (E4M3) scale per 16 elements,
#: 4.5 bits, plus one FP32 scale per tensor (4 bytes per matrix, left out: < 10^-6 of it).
BLOCK_SCALES: dict[str, tuple[int, float]] = {"mxfp4": (32, 1.0), "nvfp4": (16, 1.0)}

#: Bytes per stored element of each number format llminfer knows. int4/fp4 pack two
#: elements into one byte; the group scales of plain quantised formats (fp8, int8, int4,
#: fp4) are counted separately (see ``llminfer.cost.memory.weight_bytes``), while the
#: block-scaled formats of ``BLOCK_SCALES`` include theirs: mxfp4 0.53125, nvfp4 0.5625.
DTYPE_BYTES: dict[str, float] = {
    "fp32": 4,
    "bf16": 2,
    "fp16": 2,
    "fp8": 1,
    "int8": 1,
    "int4": 0.5,
    "fp4": 0.5,
    **{name: 0.5 + scale / block for name, (block, scale) in BLOCK_SCALES.items()},
}

_DECIMAL_UNITS = ("B", "kB", "MB", "GB", "TB", "PB")
_BINARY_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def check_dtype(dtype: str, parameter: str = "dtype") -> str:
    """Return ``dtype`` normalised to lower case, or raise ValueError naming ``parameter``.

    Introduced in: notebooks/04_memory_budget.ipynb
    """
    if not isinstance(dtype, str) or dtype.lower() not in DTYPE_BYTES:
        allowed = ", ".join(DTYPE_BYTES)
        raise ValueError(
            f"{parameter}={dtype!r} is not a known number format; use one of {allowed}"
        )
    return dtype.lower()


def bytes_per_element(dtype: str) -> float:
    """Bytes one element occupies in ``dtype``: fp32 4, bf16/fp16 2, fp8/int8 1, int4/fp4 0.5;
    the block-scaled mxfp4 0.53125 (4.25 bits) and nvfp4 0.5625 (4.5 bits), scales included.

    Introduced in: notebooks/04_memory_budget.ipynb
    """
    return DTYPE_BYTES[check_dtype(dtype)]


def bits_per_element(dtype: str) -> float:
    """Bits one element occupies in ``dtype``, scales of block-scaled formats included:
    bf16 16, fp8 8, fp4 4, mxfp4 4.25 (E8M0 scale per 32), nvfp4 4.5 (E4M3 scale per 16).

    Introduced in: notebooks/09_mixture_of_experts.ipynb
    """
    return 8 * bytes_per_element(dtype)


def is_block_scaled(dtype: str) -> bool:
    """Whether ``dtype`` carries its own block scales (mxfp4, nvfp4; see ``BLOCK_SCALES``).

    Introduced in: notebooks/09_mixture_of_experts.ipynb
    """
    return check_dtype(dtype) in BLOCK_SCALES


def format_bytes(n: float, binary: bool = True, decimals: int | None = None) -> str:
    """Format a byte count with its unit always named: ``"1.00 GiB"``, ``"140.0 GB"``.

    ``binary=True`` uses powers of 2^10 (KiB, MiB, GiB), ``binary=False`` powers of 10^3
    (kB, MB, GB). By default values below 100 get two decimals and larger ones one.

    Introduced in: notebooks/04_memory_budget.ipynb
    """
    if not isinstance(n, (int, float)) or math.isnan(n):
        raise ValueError(f"n={n!r} must be a number of bytes")
    base, units = (1024, _BINARY_UNITS) if binary else (1000, _DECIMAL_UNITS)
    value, unit = float(abs(n)), units[0]
    for candidate in units[1:]:
        if value < base:
            break
        value /= base
        unit = candidate
    if unit == "B" and decimals is None:
        return f"{'-' if n < 0 else ''}{value:.0f} B"
    places = decimals if decimals is not None else (2 if value < 100 else 1)
    return f"{'-' if n < 0 else ''}{value:.{places}f} {unit}"


def format_duration(seconds: float) -> str:
    """Format a duration in seconds as µs, ms or s with three significant figures.

    From 1,000 s up the value is a whole number of seconds with thousands separators
    (``"10,900 s"``), never exponent notation.

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    if not isinstance(seconds, (int, float)) or math.isnan(seconds):
        raise ValueError(f"seconds={seconds!r} must be a number")
    magnitude = abs(seconds)
    if magnitude >= 1000:  # "10,900 s", never "1.09e+04 s"
        return f"{seconds:,.0f} s"
    if magnitude >= 1:
        return f"{seconds:.3g} s"
    if magnitude >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} µs"


#: Display units for durations: name and how many of them make one second.
DURATION_UNITS: dict[str, float] = {"µs": 1e6, "ms": 1e3, "s": 1.0}


def duration_unit(values_s) -> tuple[str, float]:
    """The one unit to show a set of durations in, and the factor from seconds to it.

    Chosen by the median's magnitude, so a whole quantity (every TTFT of a log, every TPOT)
    gets one unit: median ≥ 1 s → ``("s", 1.0)``, ≥ 1 ms → ``("ms", 1e3)``, else
    ``("µs", 1e6)``. NaN values are ignored; an empty set or all-NaN gives seconds.
    ``values_s``: a number or an array-like of durations in seconds.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    import numpy as np

    try:
        array = np.asarray(values_s, dtype=float).ravel()
    except (TypeError, ValueError):
        raise ValueError(f"values_s={values_s!r} must be durations in seconds (numbers)") from None
    array = array[~np.isnan(array)]
    if array.size == 0:
        return "s", 1.0
    typical = abs(float(np.median(array)))
    if typical >= 1:
        return "s", 1.0
    if typical >= 1e-3:
        return "ms", 1e3
    return "µs", 1e6
