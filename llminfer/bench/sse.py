"""Server-sent events as OpenAI-compatible servers stream them, and what each chunk carries.

The wire format (WHATWG HTML, "Server-sent events"): lines ending in ``\\n`` (or ``\\r\\n``);
``data: …`` lines accumulate into one event until a blank line ends it; a line starting with
``:`` is a comment (servers send ``: ping`` to keep a connection alive); ``event:``, ``id:``,
``retry:`` lines are fields a load generator can ignore. OpenAI-style streams end with
``data: [DONE]``.

What real servers put in the events, each handled by ``read_chunk``: a chat stream's first
chunk often carries only ``{"role": "assistant"}`` (no token); some chunks have empty content
(``""``, no token); with ``stream_options.include_usage`` the last chunk has ``"choices": []``
and the ``usage`` counts; an ``{"error": …}`` object in the stream means the request failed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass


class SSEDecoder:
    """Turns lines of an SSE stream into complete event payloads (the joined ``data`` text).

    ``feed(line)`` returns the finished event's data when ``line`` ends an event (a blank
    line), else None; ``flush()`` returns an event left open when the stream ends.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """

    def __init__(self) -> None:
        self._data: list[str] = []
        self.comments = 0

    def feed(self, line: bytes | str) -> str | None:
        if isinstance(line, bytes):
            line = line.decode("utf-8", errors="replace")
        line = line.rstrip("\r\n")
        if not line:
            return self.flush()
        if line.startswith(":"):
            self.comments += 1  # a keep-alive comment: no event, no token
            return None
        field, _, value = line.partition(":")
        if field == "data":
            self._data.append(value[1:] if value.startswith(" ") else value)
        return None  # event:, id:, retry: and unknown fields are ignored, as the spec says

    def flush(self) -> str | None:
        if not self._data:
            return None
        data, self._data = "\n".join(self._data), []
        return data


@dataclass(frozen=True)
class Chunk:
    """What one event carried: ``text`` (None when no token), ``usage`` (dict or None),
    ``finish_reason``, ``done`` (the ``[DONE]`` marker) and ``error`` (text or None).

    Introduced in: notebooks/08_measure_a_server.ipynb
    """

    text: str | None = None
    usage: dict | None = None
    finish_reason: str | None = None
    done: bool = False
    error: str | None = None


def read_chunk(data: str) -> Chunk:
    """Interpret one event's data from ``/v1/completions`` or ``/v1/chat/completions``.

    Text comes from ``choices[0].text`` (completions) or ``choices[0].delta.content`` (chat);
    an empty string or a role-only delta is not a token.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    if data.strip() == "[DONE]":
        return Chunk(done=True)
    try:
        payload = json.loads(data)
    except ValueError:
        return Chunk(error=f"unparseable stream event: {data[:80]!r}")
    if not isinstance(payload, dict):
        return Chunk(error=f"stream event is not a JSON object: {data[:80]!r}")
    if payload.get("error"):
        error = payload["error"]
        message = error.get("message", error) if isinstance(error, dict) else error
        return Chunk(error=f"server error in stream: {message}")
    usage = payload.get("usage") if isinstance(payload.get("usage"), dict) else None
    choices = payload.get("choices") or []
    if not choices or not isinstance(choices[0], dict):
        return Chunk(usage=usage)
    choice = choices[0]
    text = choice.get("text")
    if text is None and isinstance(choice.get("delta"), dict):
        text = choice["delta"].get("content")
    if text is None and isinstance(choice.get("message"), dict):
        text = choice["message"].get("content")
    return Chunk(
        text=text if isinstance(text, str) and text != "" else None,
        usage=usage,
        finish_reason=choice.get("finish_reason"),
    )
