"""What a session remembers: messages, the facts ledger, the running summary.

Everything here is an immutable value with a lossless JSON form, so the proxy
can cache it, store it and hand it to a summarizer without defensive copies.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

__all__ = ["Fact", "Memory", "Message", "Reversal", "units"]

# Keys of an OpenAI chat message that hermes-proxy stores and replays.
MESSAGE_KEYS = ("role", "content", "name", "tool_calls", "tool_call_id")


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message as stored: its OpenAI fields plus bookkeeping.

    ``tokens`` is counted once, when the message first arrives, and stored
    with it; ``seq`` orders messages within a session and ``turn`` numbers
    the user turns (the turn a fact "came from").
    """

    role: str
    content: Any = None
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    tokens: int = 0
    seq: int = 0
    turn: int = 0
    created_at: float = 0.0
    _wire: dict[str, Any] | None = field(
        default=None, init=False, repr=False, compare=False, hash=False
    )

    @classmethod
    def from_openai(cls, data: Mapping[str, Any], **bookkeeping: Any) -> Message:
        return cls(
            role=str(data["role"]),
            content=data.get("content"),
            name=data.get("name"),
            tool_calls=data.get("tool_calls") or None,
            tool_call_id=data.get("tool_call_id"),
            **bookkeeping,
        )

    def to_openai(self) -> dict[str, Any]:
        """The message as the OpenAI API takes it. Built once; treat it as read-only."""
        if self._wire is not None:
            return self._wire
        message: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.name is not None:
            message["name"] = self.name
        if self.tool_calls:
            message["tool_calls"] = self.tool_calls
        if self.tool_call_id is not None:
            message["tool_call_id"] = self.tool_call_id
        object.__setattr__(self, "_wire", message)
        return message

    def same_as(self, other: Message) -> bool:
        """Whether two messages say the same thing (bookkeeping aside)."""
        return (
            self.role == other.role
            and _normal(self.content) == _normal(other.content)
            and (self.name or None) == (other.name or None)
            and _calls(self.tool_calls) == _calls(other.tool_calls)
            and (self.tool_call_id or None) == (other.tool_call_id or None)
        )


def _normal(content: Any) -> Any:
    if isinstance(content, str):
        return content.strip()
    if content in (None, [], ""):
        return ""
    return content


def _calls(tool_calls: Sequence[Mapping[str, Any]] | None) -> list[tuple[Any, ...]]:
    out = []
    for call in tool_calls or ():
        function = call.get("function") or {}
        out.append((call.get("id"), function.get("name"), function.get("arguments")))
    return out


def units(messages: Sequence[Message]) -> list[list[Message]]:
    """Split messages into the smallest pieces that may be evicted or dropped.

    A ``tool`` result never starts a unit, so an assistant message that calls
    tools always travels with the results of those calls.
    """
    out: list[list[Message]] = []
    for message in messages:
        if message.role == "tool" and out:
            out[-1].append(message)
        else:
            out.append([message])
    return out


@dataclass(frozen=True, slots=True)
class Fact:
    """An explicit fact, kept verbatim, keyed by what it is about."""

    subject: str
    text: str
    turn: int
    at: float


@dataclass(frozen=True, slots=True)
class Reversal:
    """A fact that replaced an earlier one about the same subject."""

    subject: str
    before: str
    after: str
    turn: int
    at: float
    before_turn: int = 0
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Memory:
    """The compressed part of a session: everything older than the window.

    ``through_seq`` is the last message folded in; messages after it are the
    recent window and are sent verbatim.
    """

    facts: tuple[Fact, ...] = ()
    reversals: tuple[Reversal, ...] = ()
    summary: tuple[str, ...] = ()
    through_seq: int = 0
    through_turn: int = 0
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def is_empty(self) -> bool:
        return not (self.facts or self.reversals or self.summary)

    def advanced(self, through: Sequence[Message]) -> Memory:
        """This memory, marked as having folded in ``through`` as well."""
        if not through:
            return self
        return replace(
            self,
            through_seq=max(self.through_seq, through[-1].seq),
            through_turn=max(self.through_turn, through[-1].turn),
        )

    def to_json(self) -> bytes:
        return orjson.dumps(
            {
                "facts": [
                    {"subject": f.subject, "text": f.text, "turn": f.turn, "at": f.at}
                    for f in self.facts
                ],
                "reversals": [
                    {
                        "subject": r.subject,
                        "before": r.before,
                        "after": r.after,
                        "turn": r.turn,
                        "at": r.at,
                        "before_turn": r.before_turn,
                        "reason": r.reason,
                    }
                    for r in self.reversals
                ],
                "summary": list(self.summary),
                "through_seq": self.through_seq,
                "through_turn": self.through_turn,
                "extra": dict(self.extra),
            }
        )

    @classmethod
    def from_json(cls, raw: bytes | str | None) -> Memory:
        if not raw:
            return cls()
        data = orjson.loads(raw)
        return cls(
            facts=tuple(Fact(**f) for f in data.get("facts", ())),
            reversals=tuple(Reversal(**r) for r in data.get("reversals", ())),
            summary=tuple(data.get("summary", ())),
            through_seq=int(data.get("through_seq", 0)),
            through_turn=int(data.get("through_turn", 0)),
            extra=data.get("extra") or {},
        )
