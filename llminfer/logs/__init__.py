"""Chapters 3 and 6: request logs, read from any tool and summarised by one set of definitions.

``schema`` (the columns, ``RequestLog``, the errors), ``reading`` (``read_requests``: the
article's CSV, a DataFrame, Parquet, a directory or glob of files, or another tool's export via
``importers``), ``logfile`` (how a CSV is decoded), ``validation`` (row checks, never a silent
drop; ``tokentimes`` for token times), ``timeunits`` (seconds, or a log's own unit), ``metrics``
(per-request TTFT/TPOT/ITL/E2E), ``summary`` (``summarize``: rates, goodput, percentiles),
``grouped`` (per source), ``definitions`` (each tool's definitions side by side), ``timeline``
(load over time), ``quantiles``, ``logstream`` (logs bigger than memory), ``sql`` (the same
metrics as SQL) and ``writing`` (the article's CSV written back). Depends on no model part
(``specs``, ``cost``, ``sim``, ``diagnose``): a log is read the same whatever made it. Used by
notebooks 03, 06, 07 and 08.
"""
