"""Which incoming messages are new.

Clients normally send only the new message, but some keep sending (part of)
the conversation. Incoming messages that repeat the stored transcript are
dropped, so nothing is stored twice: the longest prefix of the incoming
messages that ends with the stored tail (it must end on an assistant message,
the way every stored turn ends) is cut off.
"""

from __future__ import annotations

from collections.abc import Sequence

from compaction import Message

__all__ = ["SYSTEM_ROLES", "new_messages", "split_system"]

SYSTEM_ROLES = frozenset({"system", "developer"})
MAX_ANCHORS = 4


def split_system(incoming: Sequence[Message]) -> tuple[list[Message], list[Message]]:
    """Leading system/developer messages (the system prompt) and the rest."""
    i = 0
    while i < len(incoming) and incoming[i].role in SYSTEM_ROLES:
        i += 1
    return list(incoming[:i]), list(incoming[i:])


def new_messages(tail: Sequence[Message], incoming: Sequence[Message]) -> list[Message]:
    """``incoming`` without the prefix that repeats the stored ``tail``.

    >>> u, a = Message("user", "hi"), Message("assistant", "hello")
    >>> [m.content for m in new_messages([u, a], [u, a, Message("user", "more")])]
    ['more']
    """
    if not tail or not any(m.role == "assistant" for m in incoming):
        return list(incoming)
    # Anchor on the stored tail's end first; failing that, on an earlier
    # assistant message (a client retrying its last question with history).
    anchors = [p for p in range(len(tail), 0, -1) if tail[p - 1].role == "assistant"]
    for p in anchors[:MAX_ANCHORS]:
        for j in range(len(incoming), 0, -1):
            if not incoming[j - 1].same_as(tail[p - 1]):
                continue
            overlap = min(j, p)
            if all(incoming[j - k].same_as(tail[p - k]) for k in range(1, overlap + 1)):
                return list(incoming[j:])
    return list(incoming)
