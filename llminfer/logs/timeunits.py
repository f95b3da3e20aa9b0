"""Chapter 6: the time unit of a request log. Times are seconds unless ``time_unit`` says
otherwise (``TIME_UNITS``); a file's times read as seconds are refused when no real server's log
in seconds could look like them (``TIME_UNIT_RULE``: what a log in ms, µs or ns looks like), and
typed times (datetimes, durations, Arrow timestamps) are converted by their own unit
(``typed_times``, ``seconds_of``). ``llminfer.logs.validation`` applies it row by row,
``llminfer.logs.logstream`` file by file.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from llminfer.logs.schema import BLOCK_ROWS, LogError

#: The article's three timestamps of a request (seconds).
TIME_COLUMNS = ("start_ts", "first_token_ts", "end_ts")

TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
#: Times read as seconds are refused when any of these holds (each is impossible, or all but,
#: for a real LLM server's log in seconds, and what a log in ms/µs/ns looks like):
#: a timestamp above 1e11 s (year 5138: epoch or monotonic clocks in ms, µs or ns are), a
#: median TPOT above 2 s per token, or a median E2E latency above one hour.
MAX_TIMESTAMP_S = 1e11
MAX_MEDIAN_TPOT_S = 2.0
MAX_MEDIAN_E2E_S = 3600.0
TIME_UNIT_RULE = (
    f"times read as seconds must have every timestamp below {MAX_TIMESTAMP_S:.0e} s, "
    f"a median TPOT of at most {MAX_MEDIAN_TPOT_S:g} s per token and a median E2E of at most "
    f"{MAX_MEDIAN_E2E_S:g} s"
)


#: Formats whose times are checked by ``TIME_UNIT_RULE`` when no ``time_unit`` is given: the
#: request-log tables in files (tool exports state their units; a DataFrame is the program's
#: own data and is not second-guessed).
CHECKED_FORMATS = ("csv", "parquet")


def time_scale(time_unit: str | None) -> float:
    """Seconds per tick of ``time_unit`` (``TIME_UNITS``: ``"ms"`` → 0.001; None: 1, seconds);
    ValueError names the units there are.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    if time_unit is None:
        return 1.0
    if not isinstance(time_unit, str) or time_unit not in TIME_UNITS:
        raise ValueError(
            f"time_unit={time_unit!r} is not known; use one of {', '.join(TIME_UNITS)} "
            "(or None: seconds, checked for plausibility)"
        )
    return TIME_UNITS[time_unit]


def check_seconds(numbers: dict[str, np.ndarray], tokens: np.ndarray, keep, ok, source) -> None:
    """Refuse times that are implausible as seconds (``TIME_UNIT_RULE``).

    A median is above a limit exactly when more than half of the values are, so the rule is
    decided by counting — one pass, no sort — and a median is computed only for the message.
    The counting runs in blocks of ``BLOCK_ROWS`` rows: small temporaries are reused by the
    allocator, where whole-log ones (80 MB at 10 M rows) would each be fresh memory to fault in.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    every = bool(keep.all())
    start, first, end = (numbers[name] if every else numbers[name][keep] for name in TIME_COLUMNS)
    good = ok if every else ok[keep]
    counts = tokens if every else tokens[keep]
    evidence = None
    for name, values in zip(TIME_COLUMNS, (start, first, end), strict=True):
        largest = max(np.nanmax(values, initial=-np.inf), -np.nanmin(values, initial=np.inf))
        if largest > MAX_TIMESTAMP_S:
            too_big = np.abs(np.nan_to_num(values)) > MAX_TIMESTAMP_S
            i = int(np.argmax(too_big))
            row = int(np.flatnonzero(keep)[i])
            evidence = f"row {row}, column {name}, value {values[i]:.6g} s"
            break
    if evidence is None:
        tpot_n = tpot_above = e2e_n = e2e_above = 0
        for lo in range(0, len(start), BLOCK_ROWS):
            part = slice(lo, lo + BLOCK_ROWS)
            with np.errstate(invalid="ignore", divide="ignore"):
                tpot = (end[part] - first[part]) / (counts[part] - 1)
                e2e = end[part] - start[part]
                tpot_ok = good[part] & (counts[part] > 1) & np.isfinite(tpot)
                e2e_ok = good[part] & np.isfinite(e2e)
                tpot_n += int(np.count_nonzero(tpot_ok))
                tpot_above += int(np.count_nonzero(tpot_ok & (tpot > MAX_MEDIAN_TPOT_S)))
                e2e_n += int(np.count_nonzero(e2e_ok))
                e2e_above += int(np.count_nonzero(e2e_ok & (e2e > MAX_MEDIAN_E2E_S)))
        if tpot_above * 2 > tpot_n:
            with np.errstate(invalid="ignore", divide="ignore"):
                tpot = (end - first) / (counts - 1)
            median = np.median(tpot[good & (counts > 1) & np.isfinite(tpot)])
            evidence = f"the median TPOT would be {median:.4g} s per token"
        elif e2e_above * 2 > e2e_n:
            e2e = end - start
            evidence = (
                f"the median E2E latency would be {np.median(e2e[good & np.isfinite(e2e)]):.4g} s"
            )
    if evidence is None:
        return
    raise unit_error(source.path, evidence)


def unit_error(path: str | None, evidence: str) -> LogError:
    """The ``LogError`` for times implausible as seconds (``TIME_UNIT_RULE``), ``evidence``
    saying which value or median broke it.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    where = f"source={path!r}: the times" if path else "the log's times"
    return LogError(
        f"{where} do not look like seconds — {evidence} (rule: {TIME_UNIT_RULE}). "
        "Are they milliseconds, microseconds or nanoseconds?",
        " Pass time_unit='ms', 'us' or 'ns' to convert them, or time_unit='s' if they really "
        "are seconds.",
        " Run again with --time-unit ms, us or ns to convert them, or --time-unit s if they "
        "really are seconds.",
    )


#: Seconds per tick of numpy's datetime64/timedelta64 units (Arrow's timestamp/duration ones).
_TICK_S = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9, "m": 60.0, "h": 3600.0, "D": 86400.0}


def seconds_of(values) -> np.ndarray | None:
    """Float seconds of a datetime64 (since 1970-01-01 UTC) or timedelta64 array, by the unit
    its type declares; NaT → NaN. None when ``values`` holds no such type.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    values = np.asarray(values)
    if values.dtype.kind not in "mM":
        return None
    unit, count = np.datetime_data(values.dtype)
    if unit not in _TICK_S:
        raise ValueError(
            f"a time stored with unit {unit!r} is not supported; store s, ms, us or ns"
        )
    seconds = values.view(np.int64).astype(float) * (_TICK_S[unit] * count)
    seconds[np.isnat(values)] = np.nan
    return seconds


def typed_times(frame: pd.DataFrame, time_unit: str | None, declared: dict[str, str] | None = None):
    """Time columns stored as timestamps or durations (Arrow ``timestamp``/``duration``, numpy
    ``datetime64``/``timedelta64``) converted to float seconds by the unit their type declares:
    (frame, the converted column names, assumptions). ``time_unit`` does not apply to them.
    ``declared``: each column's type as the file declares it (``timestamp[s]``; pandas may hold
    it in a finer unit), for the assumption's wording.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    declared = declared or {}
    typed: dict[str, tuple[np.ndarray, str]] = {}
    for name in (*TIME_COLUMNS, "scheduled_ts"):
        if name not in frame.columns:
            continue
        column = frame[name]
        dtype = column.dtype
        if isinstance(dtype, pd.ArrowDtype) and dtype.kind in "mM":  # pandas' Arrow-backed
            import pyarrow as pa

            kind = dtype.pyarrow_dtype  # ticks since the epoch (UTC) or ticks of duration
            ticks = pa.array(column.array).cast(pa.int64()).to_numpy(zero_copy_only=False)
            seconds = ticks.astype(float) * _TICK_S[kind.unit]
            if dtype.kind == "M":
                what = declared.get(name, str(kind)) + ", read as seconds since 1970-01-01 UTC"
            else:
                what = declared.get(name, str(kind)) + ", read as seconds"
            typed[name] = (seconds, what)
        elif pd.api.types.is_datetime64_any_dtype(column.dtype):
            zone = getattr(column.dtype, "tz", None)
            if zone is not None:
                column = column.dt.tz_convert("UTC").dt.tz_localize(None)
            array = column.to_numpy()
            unit = np.datetime_data(array.dtype)[0]
            what = f"timestamp[{unit}{', ' + str(zone) if zone is not None else ''}]"
            what = declared.get(name, what)
            typed[name] = (seconds_of(array), f"{what}, read as seconds since 1970-01-01 UTC")
        elif pd.api.types.is_timedelta64_dtype(column.dtype):
            array = column.to_numpy()
            unit = np.datetime_data(array.dtype)[0]
            what = declared.get(name, f"duration[{unit}]")
            typed[name] = (seconds_of(array), f"{what}, read as seconds")
    if not typed:
        return frame, set(), []
    if time_unit not in (None, "s"):
        raise ValueError(
            f"time_unit={time_unit!r} does not apply: {', '.join(typed)} are stored as "
            "timestamps or durations, whose type declares their unit (leave time_unit out)"
        )
    kinds: dict[str, list[str]] = {}
    for name, (_, what) in typed.items():
        kinds.setdefault(what, []).append(name)
    said = [
        f"{', '.join(names)} stored as {what} (the unit its type declares)"
        for what, names in kinds.items()
    ]
    frame = frame.assign(**{name: values for name, (values, _) in typed.items()})
    return frame, set(typed), said


# --- validation -----------------------------------------------------------------------------
