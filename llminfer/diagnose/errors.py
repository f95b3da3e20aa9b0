"""What a failed request's error says, in one line (chapter 7's failures step).

Tools store an error as they caught it: vLLM's ``bench serve`` a whole Python traceback,
AIPerf the exception's repr, llminfer's own client ``Class: message``. ``error_line`` keeps the
line a reader needs (a traceback's last line, the exception it ended in), and
``stale_connection`` tells the failures a client causes by sending on a connection the server
had already closed: against llama.cpp's ``llama-server``, which closes the connection after each
streamed reply while its headers say ``Keep-Alive``, AIPerf 0.13 lost 4 of 40 requests and
vLLM 0.33's ``bench serve`` 2 of 40 that way (2026-12-03, ``tests/fixtures/``).
"""

from __future__ import annotations

import pandas as pd

#: At most this many characters of an error are shown.
MAX_ERROR_CHARS = 200
#: What aiohttp says when a request goes out on a connection the server had closed, before its
#: body is written. Not "Server disconnected": aiohttp says that for every request in flight
#: when a server crashes or is killed, which is the server's failure.
_STALE = ("can not write request body", "cannot write to closing transport")


def error_line(text) -> str:
    """One line of a request's error: a traceback's last non-empty line (the exception it
    ended in), else the first line, at most ``MAX_ERROR_CHARS`` characters; "" for none.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    if text is None or (not isinstance(text, str) and pd.isna(text)):
        return ""
    lines = [line.strip() for line in str(text).strip().splitlines() if line.strip()]
    if not lines:
        return ""
    line = lines[-1] if lines[0].startswith("Traceback") else lines[0]
    if len(line) > MAX_ERROR_CHARS:
        line = line[: MAX_ERROR_CHARS - 1] + "…"
    return line


def stale_connection(text) -> bool:
    """Whether an error is the client's send on a connection the server had closed (aiohttp's
    messages for it), not a failure of the server's.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    return any(words in str(text).lower() for words in _STALE)
