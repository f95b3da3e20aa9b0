"""Checks of user input shared by every module, so a bad value always gets the same kind of
message: ``name=value must be …``, naming the parameter, the value and what is allowed."""

from __future__ import annotations

import numpy as np


def check_int(name: str, value: object, minimum: int = 0) -> int:
    """Return ``value`` as an int if it is an integer (Python or numpy, not bool) ≥ ``minimum``;
    otherwise raise ValueError naming ``name`` and the value.

    Introduced in: notebooks/04_memory_budget.ipynb
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name}={value!r} must be an integer >= {minimum}")
    return int(value)


def check_number(name: str, value: object, minimum: float = 0.0, inclusive: bool = True) -> float:
    """Return ``value`` as a float if it is a finite real number (not bool, NaN or ±inf) at
    least ``minimum`` (more than it when ``inclusive`` is False); otherwise raise ValueError
    naming ``name`` and the value. NaN and infinity would pass a plain ``> 0`` test or turn
    into NaN, inf or OverflowError several calls later.

    Introduced in: notebooks/04_memory_budget.ipynb
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name}={value!r} must be a number, not {type(value).__name__}")
    bound = f">= {minimum:g}" if inclusive else f"> {minimum:g}"
    if not np.isfinite(value):
        raise ValueError(f"{name}={value!r} must be a finite number {bound}")
    if value < minimum or (not inclusive and value == minimum):
        raise ValueError(f"{name}={value!r} must be {bound}")
    return float(value)
