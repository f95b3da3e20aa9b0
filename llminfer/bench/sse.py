"""Server-sent events as OpenAI-compatible servers stream them, and what each chunk carries.

The wire format is the WHATWG HTML standard's ("Server-sent events", "Parsing an event
stream"), followed to the letter by ``SSEDecoder``: the stream is UTF-8 (invalid bytes become
U+FFFD, and a leading BOM is dropped); lines end in CRLF, LF or CR alone (also when a CRLF is
split between two network reads); a line starting with ``:`` is a comment (servers send
``: ping`` to keep a connection alive); otherwise the text before the first ``:`` is the field
name and the rest its value, less one leading space (a line without ``:`` is a field with an
empty value); ``data`` values accumulate, joined by LF, until a blank line dispatches the
event; a blank line with no data dispatches nothing; ``event`` names the event's type,
``id`` and ``retry`` do not matter to a load generator; an event still open when the stream
ends is discarded. OpenAI-style streams end with ``data: [DONE]``.

What real servers put in the events, each handled by ``read_chunk``: a chat stream's first
chunk often carries only ``{"role": "assistant"}`` (no token); some chunks have empty content
(``""``, no token) or empty data; with ``stream_options.include_usage`` the last chunk has
``"choices": []`` and the ``usage`` counts; an ``{"error": …}`` object, vLLM's unwrapped
``{"object": "error", "message": …}`` or an ``event: error`` means the request failed.
"""

from __future__ import annotations

import codecs
import json
import re
from dataclasses import dataclass

#: Longest line accepted, characters: a stream whose line grows past this is not an event
#: stream a load generator can use (and would otherwise hold all of it in memory).
MAX_LINE_CHARS = 16 << 20
_LINE_END = re.compile(r"\r\n|\r|\n")


class SSEDecoder:
    """Turns an SSE stream into complete event payloads (the joined ``data`` text), by the
    WHATWG standard's rules (see the module docstring).

    ``feed(line)`` takes one line (its line ending, if any, is dropped) and returns the
    finished event's data when the line is blank and an event had data, else None;
    ``event_type`` is then the event's ``event:`` name (``"message"`` by default).
    ``feed_text(text)`` takes any piece of the decoded stream and returns the events it
    completed, as (event type, data) pairs; ``flush()`` dispatches what is open as a blank
    line would.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """

    def __init__(self) -> None:
        self._data: list[str] = []
        self._event = ""
        self.event_type = "message"
        self.comments = 0
        self._rest: list[str] = []  # the current line's text so far (no line end seen yet)
        self._rest_chars = 0
        self._after_cr = False  # the last piece ended in CR: an LF starting the next is its pair

    def feed(self, line: bytes | str) -> str | None:
        if isinstance(line, bytes):
            line = line.decode("utf-8", errors="replace")
        if line.endswith("\n"):
            line = line[:-2] if line.endswith("\r\n") else line[:-1]
        elif line.endswith("\r"):
            line = line[:-1]
        if not line:
            return self.flush()
        if line.startswith(":"):
            self.comments += 1  # a keep-alive comment: no event, no token
            return None
        field, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value
        return None  # id:, retry: and unknown fields change nothing here, as the spec says

    def feed_text(self, text: str) -> list[tuple[str, str]]:
        """Events completed by ``text``, a piece of the decoded stream (any length, lines may
        run across pieces). ValueError past ``MAX_LINE_CHARS`` on one line."""
        if self._after_cr and text.startswith("\n"):
            text = text[1:]
        self._after_cr = False
        if not text:
            return []
        if "\n" not in text and "\r" not in text:  # mid-line: no copying of a growing line
            self._rest.append(text)
            self._rest_chars += len(text)
            self._check_length()
            return []
        # LF alone is what nearly every server sends: str.split, the regex only for CR
        lines = _LINE_END.split(text) if "\r" in text else text.split("\n")
        tail = lines.pop()
        if self._rest:
            lines[0] = "".join(self._rest) + lines[0]
        self._rest, self._rest_chars = ([tail], len(tail)) if tail else ([], 0)
        self._after_cr = text.endswith("\r")
        self._check_length(max(len(line) for line in lines))
        events = []
        for line in lines:
            data = self.feed(line)
            if data is not None:
                events.append((self.event_type, data))
        return events

    def _check_length(self, longest: int = 0) -> None:
        if max(longest, self._rest_chars) > MAX_LINE_CHARS:
            raise ValueError(f"a stream line longer than {MAX_LINE_CHARS >> 20} MiB")

    def flush(self) -> str | None:
        """Dispatch the open event (a blank line): its data, or None when it has none."""
        self.event_type, self._event = self._event or "message", ""
        if not self._data:
            return None
        data, self._data = "\n".join(self._data), []
        return data

    def pending(self) -> bool:
        """Whether an event or a line is open (the stream ended mid-event if so)."""
        return bool(self._data or self._rest)

    def discard(self) -> None:
        """The stream ended: an event not closed by a blank line is dropped, as the spec says."""
        self._data, self._event, self._rest, self._rest_chars = [], "", [], 0


@dataclass(frozen=True)
class Chunk:
    """What one event carried: ``text`` (None when no token), ``usage`` (dict or None),
    ``finish_reason``, ``done`` (the ``[DONE]`` marker), ``error`` (text or None) and
    ``timings`` (llama.cpp's per-request ``timings`` object — ``prompt_n``, ``cache_n``, … —
    on its last event; dict or None).

    Introduced in: notebooks/08_measure_a_server.ipynb
    """

    text: str | None = None
    usage: dict | None = None
    finish_reason: str | None = None
    done: bool = False
    error: str | None = None
    timings: dict | None = None


def read_chunk(data: str, event_type: str = "message") -> Chunk:
    """Interpret one event's data from ``/v1/completions`` or ``/v1/chat/completions``.

    Text comes from ``choices[0].text`` (completions) or ``choices[0].delta.content`` (chat);
    an empty string, a role-only delta or an event with empty data is not a token. An error —
    ``{"error": …}``, vLLM's ``{"object": "error", "message": …}``, an ``event: error`` —
    gives ``error``. Fields of the wrong type are read as absent, never raised on.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    if data.strip() == "[DONE]":
        return Chunk(done=True)
    if not data.strip():
        return Chunk()  # an event without data: a keep-alive of another kind
    try:
        payload = json.loads(data)
    except ValueError:
        if event_type == "error":
            return Chunk(error=f"server error in stream: {data[:300]}")
        return Chunk(error=f"unparseable stream event: {data[:80]!r}")
    if not isinstance(payload, dict):
        return Chunk(error=f"stream event is not a JSON object: {data[:80]!r}")
    if payload.get("error") or payload.get("object") == "error" or event_type == "error":
        error = payload.get("error") or payload
        message = error.get("message", error) if isinstance(error, dict) else error
        return Chunk(error=f"server error in stream: {message}")
    usage = payload.get("usage") if isinstance(payload.get("usage"), dict) else None
    timings = payload.get("timings") if isinstance(payload.get("timings"), dict) else None
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return Chunk(usage=usage, timings=timings)
    choice = choices[0]
    text = choice.get("text")
    if text is None and isinstance(choice.get("delta"), dict):
        text = choice["delta"].get("content")
    if text is None and isinstance(choice.get("message"), dict):
        text = choice["message"].get("content")
    finish = choice.get("finish_reason")
    return Chunk(
        text=text if isinstance(text, str) and text != "" else None,
        usage=usage,
        finish_reason=finish if isinstance(finish, str) and finish else None,
        timings=timings,
    )


class StreamParser:
    """An OpenAI-style SSE response body, fed as raw byte pieces the moment they are read.

    ``feed(piece, now)`` takes the bytes of one network read and its arrival time ``now``
    (the caller reads the clock before anything else, so parsing never delays a timestamp);
    every token-carrying event in the piece gets that time in ``token_ts``. It returns True once
    the stream is over (``[DONE]`` or an error event). ``close(now)`` is for the end of the
    connection: an event left open is discarded (the standard's rule) and ``cut_mid_event``
    says there was one. ``invalid_utf8`` says the stream held bytes that are not UTF-8 (they
    were read as U+FFFD). The HTTP library is the caller's: the client uses aiohttp, the client
    benchmark also httpx, with this same parser.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """

    __slots__ = (
        "_decode",
        "_started",
        "chars",
        "cut_mid_event",
        "decoder",
        "done",
        "error",
        "finish_reason",
        "invalid_utf8",
        "timings",
        "token_ts",
        "usage",
    )

    def __init__(self) -> None:
        self.decoder = SSEDecoder()
        self.token_ts: list[float] = []
        self.chars = 0
        self.usage: dict | None = None
        self.timings: dict | None = None
        self.finish_reason: str | None = None
        self.done = False
        self.error: str | None = None
        self.invalid_utf8 = False
        self.cut_mid_event = False
        self._decode = codecs.getincrementaldecoder("utf-8")("strict").decode
        self._started = False

    def _text(self, piece: bytes, final: bool = False) -> str:
        try:
            text = self._decode(piece, final)
        except UnicodeDecodeError:
            # The standard decodes with replacement; note it once and go on that way. (The
            # bytes of the failing piece are decoded again from its start: a character split
            # over the previous piece is replaced too.)
            self.invalid_utf8 = True
            self._decode = codecs.getincrementaldecoder("utf-8")("replace").decode
            text = self._decode(piece, final)
        if not self._started and text:
            self._started = True
            text = text.removeprefix("\ufeff")  # one BOM at the stream's start
        return text

    def feed(self, piece: bytes, now: float) -> bool:
        try:
            events = self.decoder.feed_text(self._text(piece))
        except ValueError as exc:
            self.error = f"not an event stream: {exc}"
            return True
        return any(self._event(data, kind, now) for kind, data in events)

    def close(self, now: float) -> None:
        """The connection ended: what is still open is discarded (no event without its blank
        line), and ``cut_mid_event`` records that it was there."""
        try:
            events = self.decoder.feed_text(self._text(b"", final=True))
        except ValueError as exc:
            self.error = f"not an event stream: {exc}"
            return
        if any(self._event(data, kind, now) for kind, data in events):
            return
        self.cut_mid_event = self.decoder.pending()
        self.decoder.discard()

    def _event(self, data: str, event_type: str, now: float) -> bool:
        chunk = read_chunk(data, event_type)
        if chunk.error:
            self.error = chunk.error
            return True
        if chunk.done:
            self.done = True
            return True
        if chunk.text is not None:
            self.token_ts.append(now)
            self.chars += len(chunk.text)
        if chunk.usage:
            self.usage = chunk.usage
        if chunk.timings:
            self.timings = chunk.timings
        self.finish_reason = chunk.finish_reason or self.finish_reason
        return False
