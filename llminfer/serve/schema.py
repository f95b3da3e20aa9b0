"""What a request body to ``/v1/completions`` or ``/v1/chat/completions`` may hold: the OpenAI
schema as vLLM applies it (``vllm/entrypoints/openai/protocol.py``), checked in one place for
both endpoints before anything reaches the engine.

``parse_request(raw, content_type, chat, vocab_size)`` turns the body's bytes into a
``GenerationRequest`` or raises ``OpenAIError`` (HTTP 400, 404 or 413) naming the field. The
rules, field by field (``FIELDS``):

- JSON itself: UTF-8 (or UTF-16/32, as JSON allows), no ``NaN``/``Infinity``, no number too
  large for a float, nesting at most ``MAX_DEPTH`` deep (Python's parser would otherwise raise
  ``RecursionError``), every string valid Unicode (a lone surrogate such as ``"\\ud800"`` is
  refused: it cannot be encoded, so it would crash the tokenizer later). The body must be an
  object; ``Content-Type`` absent or ``application/json`` (``application/*+json``), as
  FastAPI, under vLLM, reads JSON only then.
- Types are JSON's, as OpenAI documents them, not coerced: ``"0.7"`` is not a temperature,
  ``true`` and ``5.0`` are not token counts (pydantic's lax mode in vLLM would coerce some of
  these; OpenAI's API refuses them, and a load generator sending them has a bug worth seeing).
- ``null`` means "not given" for every optional field, as vLLM's ``Optional[...] = default``.
- Unknown fields are accepted and ignored, as vLLM does (it logs a warning).
- ``max_completion_tokens or max_tokens`` is the output length (vLLM's rule), each an integer
  >= 1 when given; ``n`` and ``best_of`` must be 1; ``stream_options`` only with ``stream``.
- Sampling parameters (temperature, top_p, top_k, min_p, penalties, seed, logit_bias) are
  checked for type and range and then ignored: the toy decodes greedily.
- What would change the answer's shape and is not implemented (``logprobs``, ``echo``,
  ``suffix``) is refused with 400 rather than silently dropped.
- ``stop`` (a string or a list of strings) and ``stop_token_ids`` end the answer early with
  ``finish_reason="stop"`` (the stop text is not returned), after at least ``min_tokens``.
- ``ignore_eos`` (true or false) is accepted and kept, and changes nothing here: the toy model
  has no end-of-sequence token, so an answer already runs to ``max_tokens`` unless a stop
  string or stop token id ends it (and those still apply with ``ignore_eos``, as in vLLM).
- ``stream_options``: ``include_usage`` adds a last chunk with the request's usage;
  ``continuous_usage_stats`` as well puts the usage so far in every chunk (vLLM's rule: only
  with ``include_usage``, else it does nothing).
- Completions: ``prompt`` is a string, a list of token ids, or a list holding one of those
  (one prompt per request). Chat: ``messages`` is a non-empty list of objects with a ``role``
  (``system``, ``developer``, ``user``, ``assistant``, ``tool``, ``function``) and a
  ``content`` that is a string or a list of ``{"type": "text", "text": str}`` parts (``null``
  only for an assistant or tool message).
"""

from __future__ import annotations

import json
import math
import typing
from dataclasses import dataclass, field

#: Deepest JSON nesting accepted. The deepest real request (tools with JSON-schema parameters)
#: nests a few dozen levels; Python's parser raises RecursionError near 1,000.
MAX_DEPTH = 64
#: Roles a chat message may have (OpenAI's, plus vLLM's legacy ``function``).
ROLES = ("system", "developer", "user", "assistant", "tool", "function")
#: Largest ``seed`` (vLLM: a signed 64-bit integer).
MAX_SEED = 2**63 - 1


class OpenAIError(Exception):
    """A request the server refuses: HTTP ``status`` and an OpenAI-style error body
    ``{"error": {"message", "type", "param", "code"}}``.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """

    KINDS: typing.ClassVar[dict[int, str]] = {
        400: "BadRequestError",
        404: "NotFoundError",
        408: "RequestTimeoutError",
        413: "RequestTooLargeError",
        500: "InternalServerError",
        503: "ServiceUnavailableError",
    }

    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param = status, message, param
        self.close_connection = False  # the request's body is unreadable: close after this

    def body(self) -> dict:
        """The JSON error object, as OpenAI and vLLM send it."""
        kind = self.KINDS.get(self.status, "invalid_request_error")
        return {
            "error": {
                "message": self.message,
                "type": kind,
                "param": self.param,
                "code": self.status,
            }
        }

    def response(self):
        """The error as an aiohttp JSON response."""
        from aiohttp import web

        return web.json_response(self.body(), status=self.status)


@dataclass(frozen=True)
class GenerationRequest:
    """A checked request: prompt token ids, output length (None: the endpoint's default),
    streaming, usage chunk, stop strings and ids, ``min_tokens`` before a stop may end it.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """

    prompt_ids: list[int]
    max_tokens: int | None
    stream: bool = False
    include_usage: bool = False
    stop: tuple[str, ...] = ()
    stop_token_ids: frozenset[int] = field(default_factory=frozenset)
    min_tokens: int = 0
    ignored: tuple[str, ...] = ()  # unknown fields, accepted as vLLM accepts them
    continuous_usage: bool = False  # usage so far in every streamed chunk
    ignore_eos: bool = False  # no effect: the toy model has no end-of-sequence token


def _bad(name: str, message: str) -> OpenAIError:
    return OpenAIError(400, f"{name}: {message}", name)


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return (_is_int(value) or isinstance(value, float)) and math.isfinite(value)


def _integer(low: int | None = None, high: int | None = None):
    def check(name: str, value) -> None:
        if not _is_int(value):
            raise _bad(name, f"{value!r} must be an integer")
        if (low is not None and value < low) or (high is not None and value > high):
            bounds = f">= {low}" if high is None else f"in [{low}, {high}]"
            raise _bad(name, f"{value!r} must be an integer {bounds}")

    return check


def _number(low: float, high: float = math.inf, open_low: bool = False):
    def check(name: str, value) -> None:
        if not _is_number(value):
            raise _bad(name, f"{value!r} must be a number")
        if value < low or value > high or (open_low and value == low):
            raise _bad(name, f"{value!r} must be a number in {'(' if open_low else '['}"
                       f"{low:g}, {high:g}]")  # fmt: skip

    return check


def _of(kind: type, what: str):
    def check(name: str, value) -> None:
        if not isinstance(value, kind):
            raise _bad(name, f"{value!r} must be {what}")

    return check


def _stop(name: str, value) -> None:
    if isinstance(value, str):
        return
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        raise _bad(name, f"{value!r} must be a string or a list of strings")


def _token_ids(name: str, value) -> None:
    if not isinstance(value, list) or not all(_is_int(t) and t >= 0 for t in value):
        raise _bad(name, f"{value!r} must be a list of token ids (integers >= 0)")


def _stream_options(name: str, value) -> None:
    if not isinstance(value, dict):
        raise _bad(name, f"{value!r} must be an object")
    for key in ("include_usage", "continuous_usage_stats"):
        if value.get(key) is not None and not isinstance(value[key], bool):
            raise _bad(f"{name}.{key}", f"{value[key]!r} must be true or false")


def _logit_bias(name: str, value) -> None:
    if not isinstance(value, dict):
        raise _bad(name, f"{value!r} must be an object of token id -> bias")
    for key, bias in value.items():
        if not key.lstrip("-").isdigit() or not _is_number(bias) or not -100 <= bias <= 100:
            raise _bad(name, f"{key!r}: {bias!r} must map a token id to a number in [-100, 100]")


def _unsupported(check_type, used=lambda value: True):
    """A field this server does not implement: its type is checked, then it is refused when
    ``used(value)`` (a value that would change the answer's shape)."""

    def check(name: str, value) -> None:
        check_type(name, value)
        if used(value):
            raise _bad(name, f"{value!r} is not supported by this toy server")

    return check


def _logprobs(chat: bool):
    # chat: a flag (top_logprobs says how many); completions: how many, 0 included
    if chat:
        return _unsupported(_of(bool, "true or false"), lambda v: v)
    return _unsupported(_integer(0, 20))


#: Every known field: (check, endpoints: "both", "chat" or "completions"). Each check gets the
#: field's name and a value that is not null; null is "not given".
FIELDS = {
    "model": (_of(str, "a string"), "both"),
    "max_tokens": (_integer(1), "both"),
    "max_completion_tokens": (_integer(1), "both"),
    "n": (_integer(1, 1), "both"),
    "best_of": (_integer(1, 1), "both"),
    "stream": (_of(bool, "true or false"), "both"),
    "stream_options": (_stream_options, "both"),
    "temperature": (_number(0.0), "both"),
    "top_p": (_number(0.0, 1.0, open_low=True), "both"),
    "top_k": (_integer(-1), "both"),
    "min_p": (_number(0.0, 1.0), "both"),
    "presence_penalty": (_number(-2.0, 2.0), "both"),
    "frequency_penalty": (_number(-2.0, 2.0), "both"),
    "repetition_penalty": (_number(0.0, open_low=True), "both"),
    "seed": (_integer(-MAX_SEED - 1, MAX_SEED), "both"),
    "stop": (_stop, "both"),
    "stop_token_ids": (_token_ids, "both"),
    "ignore_eos": (_of(bool, "true or false"), "both"),
    "min_tokens": (_integer(0), "both"),
    "user": (_of(str, "a string"), "both"),
    "logit_bias": (_logit_bias, "both"),
    "echo": (_unsupported(_of(bool, "true or false"), lambda v: v), "completions"),
    "suffix": (_unsupported(_of(str, "a string"), lambda v: v != ""), "completions"),
    "logprobs": (None, "both"),  # its type depends on the endpoint: _logprobs(chat)
    "top_logprobs": (_unsupported(_integer(0, 20), lambda v: v > 0), "chat"),
    "prompt": (None, "completions"),
    "messages": (None, "chat"),
}


def decode_json(raw: bytes, content_type: str | None = None) -> dict:
    """The JSON object in a request body's bytes, or OpenAIError 400 saying what is wrong with
    it (content type, encoding, syntax, NaN, nesting, lone surrogates, not an object).

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    kind = (content_type or "").split(";")[0].strip().lower()
    if (
        kind
        and kind != "application/json"
        and not (kind.startswith("application/") and kind.endswith("+json"))
    ):
        raise OpenAIError(400, f"Content-Type {kind!r} is not JSON: send application/json")

    def constant(name: str):
        raise ValueError(f"{name} is not a JSON number")

    try:
        body = json.loads(raw, parse_constant=constant)
    except RecursionError:
        raise OpenAIError(400, f"request body nests deeper than {MAX_DEPTH} levels") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise OpenAIError(400, f"request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise OpenAIError(400, "request body must be a JSON object")
    _check_tree(body)
    return body


def _check_tree(body: dict) -> None:
    """Depth, finite numbers and encodable strings everywhere, without recursion."""
    stack = [(body, 1, "body")]
    while stack:
        value, depth, where = stack.pop()
        if depth > MAX_DEPTH:
            raise OpenAIError(400, f"request body nests deeper than {MAX_DEPTH} levels")
        if isinstance(value, dict):
            for key, item in value.items():
                _check_string(key, where)
                stack.append((item, depth + 1, key))
        elif isinstance(value, list):
            stack.extend((item, depth + 1, where) for item in value)
        elif isinstance(value, str):
            _check_string(value, where)
        elif isinstance(value, float) and not math.isfinite(value):
            raise _bad(where, "a number too large for a float (JSON has no infinity)")


def _check_string(text: str, where: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = text[exc.start : exc.end].encode("utf-8", "backslashreplace").decode()
        raise _bad(where, f"holds {bad}, a lone surrogate: not valid Unicode") from None


def _content_text(content, role: str, where: str) -> str:
    if content is None:
        if role in ("assistant", "tool", "function"):
            return ""  # an assistant turn that only called tools
        raise _bad(where, f"a {role} message needs content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise _bad(where, f"{content!r} must be a string or a list of content parts")
    texts = []
    for j, part in enumerate(content):
        here = f"{where}[{j}]"
        if not isinstance(part, dict):
            raise _bad(here, f"{part!r} must be an object like {{'type': 'text', 'text': ...}}")
        if part.get("type") != "text":
            raise _bad(f"{here}.type", f"{part.get('type')!r}: only 'text' parts are supported")
        if not isinstance(part.get("text"), str):
            raise _bad(f"{here}.text", f"{part.get('text')!r} must be a string")
        texts.append(part["text"])
    return " ".join(texts)


def _chat_text(messages) -> str:
    if not isinstance(messages, list) or not messages:
        raise _bad("messages", "must be a non-empty list of messages")
    texts = []
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise _bad(where, f"{message!r} must be an object with role and content")
        role = message.get("role")
        if role is None:
            raise _bad(f"{where}.role", "missing: every message needs a role")
        if role not in ROLES:
            raise _bad(f"{where}.role", f"{role!r} is not one of {', '.join(ROLES)}")
        if message.get("name") is not None and not isinstance(message["name"], str):
            raise _bad(f"{where}.name", f"{message['name']!r} must be a string")
        texts.append(_content_text(message.get("content"), role, f"{where}.content"))
    return " ".join(texts)


def _prompt(prompt, tokenizer) -> list[int]:
    if prompt is None:
        raise _bad("prompt", "missing: a completion request needs a prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]  # a batch of one prompt is that prompt
    if isinstance(prompt, str):
        return tokenizer.encode(prompt)
    if isinstance(prompt, list) and prompt and all(_is_int(t) for t in prompt):
        vocab = tokenizer.vocab_size
        if any(not 0 <= t < vocab for t in prompt):
            raise _bad("prompt", f"token ids must be in [0, {vocab})")
        return list(prompt)
    if (
        isinstance(prompt, list)
        and len(prompt) > 1
        and all(isinstance(p, (str, list)) for p in prompt)
    ):
        raise _bad("prompt", f"{len(prompt)} prompts: this server takes one prompt per request")
    raise _bad("prompt", "must be a string, a list of token ids, or a list of one of those")


def parse_request(body: dict, chat: bool, tokenizer) -> GenerationRequest:
    """Check a decoded body (``decode_json``) against ``FIELDS`` for the chat or completions
    endpoint and tokenize its prompt with ``tokenizer`` (a ``ToyTokenizer``); OpenAIError 400
    naming the field otherwise. Token counts are the toy tokenizer's (one per word).

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    endpoint = "chat" if chat else "completions"
    ignored = []
    for name, value in body.items():
        if name not in FIELDS or FIELDS[name][1] not in ("both", endpoint):
            ignored.append(name)
            continue
        check = FIELDS[name][0] or (_logprobs(chat) if name == "logprobs" else None)
        if value is not None and check is not None:
            check(name, value)
    given = {name: value for name, value in body.items() if value is not None}
    stream = given.get("stream", False)
    if "stream_options" in given and not stream:
        raise _bad("stream_options", "may only be given with stream=true (as vLLM requires)")
    max_tokens = given.get("max_completion_tokens") or given.get("max_tokens")
    min_tokens = given.get("min_tokens", 0)
    if max_tokens is not None and min_tokens > max_tokens:
        raise _bad("min_tokens", f"{min_tokens} is more than max_tokens={max_tokens}")
    if chat:
        ids = tokenizer.encode(_chat_text(body.get("messages")))
    else:
        ids = _prompt(body.get("prompt"), tokenizer)
    if not ids:
        raise _bad("messages" if chat else "prompt", "the prompt is empty (no token)")
    stop = given.get("stop", ())
    stop = (stop,) if isinstance(stop, str) else tuple(stop)
    options = given.get("stream_options") or {}
    include_usage = bool(options.get("include_usage"))
    return GenerationRequest(
        prompt_ids=ids,
        max_tokens=max_tokens,
        stream=stream,
        include_usage=include_usage,
        # vLLM (serving_chat.py, serving_completion.py): continuous only with include_usage
        continuous_usage=include_usage and bool(options.get("continuous_usage_stats")),
        ignore_eos=given.get("ignore_eos", False),
        stop=tuple(s for s in stop if s),
        stop_token_ids=frozenset(given.get("stop_token_ids", ())),
        min_tokens=min_tokens,
        ignored=tuple(ignored),
    )


#: Fields of a ``/tokenize`` body (vLLM's ``TokenizeCompletionRequest`` and
#: ``TokenizeChatRequest``) that are flags; none changes the toy tokenizer's ids (it has no
#: special tokens and no chat template), each must be true or false when given.
TOKENIZE_FLAGS = (
    "add_special_tokens",
    "return_token_strs",
    "add_generation_prompt",
    "continue_final_message",
)


def _model(body: dict) -> None:
    if body.get("model") is not None and not isinstance(body["model"], str):
        raise _bad("model", f"{body['model']!r} must be a string")


def parse_tokenize(body: dict, tokenizer) -> tuple[list[int], bool]:
    """(token ids, return_token_strs) of a decoded ``/tokenize`` body: a ``prompt`` string or a
    ``messages`` list (checked as for chat, joined as chat prompts are), not both; the flags
    in ``TOKENIZE_FLAGS`` true or false; OpenAIError 400 naming the field otherwise. An empty
    prompt is zero tokens, as vLLM counts it.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    _model(body)
    for name in TOKENIZE_FLAGS:
        if body.get(name) is not None and not isinstance(body[name], bool):
            raise _bad(name, f"{body[name]!r} must be true or false")
    prompt, messages = body.get("prompt"), body.get("messages")
    if prompt is not None and messages is not None:
        raise _bad("prompt", "give either prompt or messages, not both")
    if messages is not None:
        ids = tokenizer.encode(_chat_text(messages))
    elif isinstance(prompt, str):
        ids = tokenizer.encode(prompt)
    elif prompt is None:
        raise _bad("prompt", "missing: /tokenize needs a prompt (a string) or messages")
    else:
        raise _bad("prompt", f"{prompt!r} must be a string")
    return ids, bool(body.get("return_token_strs"))


def parse_detokenize(body: dict, vocab_size: int) -> list[int]:
    """The token ids of a decoded ``/detokenize`` body (``{"tokens": [ids]}``, vLLM's
    ``DetokenizeRequest``), each an integer in ``[0, vocab_size)``; OpenAIError 400 otherwise.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    _model(body)
    tokens = body.get("tokens")
    if tokens is None:
        raise _bad("tokens", "missing: /detokenize needs a list of token ids")
    if not isinstance(tokens, list) or not all(_is_int(t) for t in tokens):
        raise _bad("tokens", f"{tokens!r} must be a list of token ids (integers)")
    if any(not 0 <= t < vocab_size for t in tokens):
        raise _bad("tokens", f"token ids must be in [0, {vocab_size})")
    return tokens
