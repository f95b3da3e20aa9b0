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
