"""A deterministic toy tokenizer: one token per whitespace-separated word.

Both sides of a measurement must agree on token counts. A real tokenizer (BPE) would need a
vocabulary file; this one needs nothing: ``encode`` splits on whitespace and maps each word to
an id (``t17`` is id 17, any other word a CRC-32 hash of it modulo the vocabulary), and
``decode`` turns id 17 back into the word ``" t17"``. So ``len(encode(text))`` is simply the
number of words, and a generated text of N tokens re-encodes to exactly N tokens.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass

_TOKEN_WORD = re.compile(r"^t(\d+)$")


@dataclass(frozen=True)
class ToyTokenizer:
    """Word-level tokenizer with ``vocab_size`` ids; ``encode``/``decode``/``count``.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """

    vocab_size: int = 1024

    def __post_init__(self) -> None:
        if isinstance(self.vocab_size, bool) or not isinstance(self.vocab_size, int):
            raise ValueError(f"vocab_size={self.vocab_size!r} must be an int >= 2")
        if self.vocab_size < 2:
            raise ValueError(f"vocab_size={self.vocab_size!r} must be an int >= 2")

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``: one per whitespace-separated word."""
        if not isinstance(text, str):
            raise ValueError(f"text={text!r} must be a str")
        ids = []
        for word in text.split():
            match = _TOKEN_WORD.match(word)
            if match and int(match.group(1)) < self.vocab_size:
                ids.append(int(match.group(1)))
            else:
                ids.append(zlib.crc32(word.encode("utf-8")) % self.vocab_size)
        return ids

    def decode(self, token_id: int) -> str:
        """The text of one generated token, with its leading space: id 17 → ``" t17"``."""
        return f" t{int(token_id)}"

    def count(self, text: str) -> int:
        """Number of tokens in ``text`` (its number of words)."""
        return len(text.split())
