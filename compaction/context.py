"""Build the prompt sent upstream, within the token budget, always.

The prompt is, in this order (stable prefix first, for prompt caching)::

    system prompt | memory message | recent window | recalled excerpts | new messages

System prompt and new messages are sent whole or not at all: when they alone
exceed the budget, :class:`ContextTooLarge` is raised. So is the turn in
progress when the new messages continue it (tool results follow the call
they answer; a turn without a user message keeps its question in view);
recalled excerpts then go before it, never between a call and its results. The memory is bounded
by its share; the window is what is left. When the window does not fit —
background compaction is behind — its oldest units are folded into memory
right here, with a deterministic summarizer, instead of exceeding the budget.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from compaction.render import MemoryRenderer, fit_memory
from compaction.state import Memory, Message, units
from compaction.tokens import REPLY_PRIMING

__all__ = [
    "MIN_BUDGET",
    "Budget",
    "BuiltContext",
    "ContextTooLarge",
    "Fold",
    "build_context",
    "current_turn_start",
    "plan_eviction",
]

# Below this there is no room for framing, a memory message and a question.
MIN_BUDGET = 256

Fold = Callable[[Memory, Sequence[Message], int], Memory]
"""Folds evicted messages into memory and returns a memory costing ≤ the limit."""


class ContextTooLarge(ValueError):
    def __init__(self, required: int, budget: int) -> None:
        self.required = required
        self.budget = budget
        super().__init__(
            f"The system prompt and new messages (with the tool call they answer) alone need "
            f"{required} tokens, "
            f"more than the session budget of {budget} tokens."
        )


@dataclass(frozen=True, slots=True)
class Budget:
    """How one prompt's tokens are shared out.

    The memory message is capped at ``memory_share`` of the total; ``recall_share``
    is kept for recalled excerpts and ``new_share`` for the new messages; the
    recent window gets everything else. Compaction folds ``step`` of the total
    at a time, so the memory message (and the cached prompt prefix) changes
    once every several turns while the prompt size stays within ``step``.

    The defaults come from ``python -m bench.memory`` (see the README): the
    memory cap matters only when memory is full — the window is sized by what
    the memory actually costs — and at 0.40 retention held at tight budgets
    where 0.30 dropped facts; a larger recall share recalled nothing more.

    >>> Budget(4000).memory_tokens
    1600
    """

    total: int
    memory_share: float = 0.40
    recall_share: float = 0.10
    new_share: float = 0.10
    step: float = 0.05

    def __post_init__(self) -> None:
        if self.total < MIN_BUDGET:
            raise ValueError(f"budget must be at least {MIN_BUDGET} tokens, not {self.total}")
        shares = (self.memory_share, self.recall_share, self.new_share)
        if any(s < 0 for s in shares) or sum(shares) >= 0.9:
            raise ValueError("memory, recall and new-message shares must be ≥ 0 and sum below 0.9")
        if not 0 < self.step < 0.5:
            raise ValueError("step must be between 0 and 0.5")

    @property
    def memory_tokens(self) -> int:
        return int(self.total * self.memory_share)

    @property
    def recall_tokens(self) -> int:
        return int(self.total * self.recall_share)

    @property
    def step_tokens(self) -> int:
        return int(self.total * self.step)

    def window_tokens(self, system_tokens: int, memory_tokens: int) -> int:
        """What the recent window may hold beside this system prompt and memory."""
        usable = int(self.total * (1.0 - self.recall_share - self.new_share))
        return max(0, usable - system_tokens - memory_tokens)


@dataclass(frozen=True, slots=True)
class BuiltContext:
    messages: list[dict[str, Any]]
    tokens: int
    memory: Memory
    window: Sequence[Message]
    folded: bool
    """True when window messages were folded into ``memory`` to make room."""
    recalled: Sequence[Message] = ()
    """The recalled excerpts that fit and were sent."""


def current_turn_start(window: Sequence[Message]) -> int:
    """Index where the turn in progress starts: its user message (or the last unit)."""
    for i in range(len(window) - 1, -1, -1):
        if window[i].role == "user":
            return i
    pieces = units(window)
    return len(window) - len(pieces[-1]) if pieces else 0


def _pinned_start(window: Sequence[Message], new: Sequence[Message]) -> int:
    """Where the part of the window the new messages cannot be sent without begins.

    Tool results must follow the assistant message that called them, and a
    turn that carries no user message (tool results only) is answered with
    its question in view.
    """
    cut = len(window)
    if new and new[0].role == "tool":
        pieces = units(window)
        cut = len(window) - len(pieces[-1]) if pieces else 0
    if not any(m.role == "user" for m in new):
        cut = min(cut, current_turn_start(window))
    return cut


def build_context(
    *,
    system: Sequence[Message],
    memory: Memory,
    window: Sequence[Message],
    new: Sequence[Message],
    budget: Budget,
    renderer: MemoryRenderer,
    fold: Fold,
    recall: Sequence[Message] = (),
    extra_tokens: int = 0,
    window_tokens: int | None = None,
    window_wire: Sequence[dict[str, Any]] | None = None,
) -> BuiltContext:
    """Assemble the upstream prompt; its :func:`~compaction.tokens.prompt_tokens` ≤ budget.

    ``recall`` is in order of relevance: the most relevant excerpts that fit
    the recall share are sent, oldest first. ``extra_tokens`` charges what
    travels beside the messages (tool schemas). ``window_tokens`` and
    ``window_wire`` are the window's total and its messages in OpenAI form,
    for a caller that keeps them between turns: a long window is otherwise
    walked on every turn.
    """
    cut = _pinned_start(window, new)
    window, pinned = list(window[:cut]), list(window[cut:])
    fixed = (
        REPLY_PRIMING
        + sum(m.tokens for m in system)
        + sum(m.tokens for m in pinned)
        + sum(m.tokens for m in new)
        + extra_tokens
    )
    if fixed > budget.total:
        raise ContextTooLarge(fixed, budget.total)
    room = budget.total - fixed

    memory_limit = min(budget.memory_tokens, room)
    rendered = renderer.render(memory)
    window_cost = sum(m.tokens for m in window) if window_tokens is None else window_tokens
    folded = False
    if rendered.tokens + window_cost > room:
        # Compaction is behind: fold the oldest units until the rest fits
        # beside a memory at its full share.
        pieces = units(window)
        evicted: list[Message] = []
        while pieces and window_cost > room - memory_limit:
            piece = pieces.pop(0)
            evicted.extend(piece)
            window_cost -= sum(m.tokens for m in piece)
        window = [m for piece in pieces for m in piece]
        if evicted:
            memory = fold(memory, evicted, memory_limit).advanced(evicted)
            folded = True
        memory = fit_memory(memory, min(memory_limit, room - window_cost), renderer)
        rendered = renderer.render(memory)

    used = rendered.tokens + window_cost
    chosen, recalled = renderer.fit_recall(recall, min(budget.recall_tokens, room - used))

    messages = [m.to_openai() for m in system]
    if rendered.message is not None:
        messages.append(rendered.message)
    if window_wire is not None:
        # Folding keeps a suffix of the window; so does the wire form.
        messages.extend(window_wire[len(window_wire) - len(window) :] if window else ())
    else:
        messages.extend(map(Message.to_openai, window))
    if recalled.message is not None:
        messages.append(recalled.message)
    messages.extend(m.to_openai() for m in pinned)
    messages.extend(m.to_openai() for m in new)
    return BuiltContext(
        messages=messages,
        tokens=fixed + used + recalled.tokens,
        memory=memory,
        window=[*window, *pinned],
        folded=folded,
        recalled=chosen,
    )


def plan_eviction(
    window: Sequence[Message],
    budget: Budget,
    system_tokens: int,
    memory_tokens: int,
    window_tokens: int | None = None,
) -> list[Message]:
    """The oldest messages background compaction should fold, or ``[]`` if none.

    Compaction starts when the window outgrows what the budget leaves it and
    folds at least :attr:`Budget.step_tokens` beyond that. The turn in
    progress (from the last user message on) is never folded: the next
    message may be a tool result that answers it.
    """
    limit = budget.window_tokens(system_tokens, memory_tokens)
    total = sum(m.tokens for m in window) if window_tokens is None else window_tokens
    if total <= limit:
        return []
    target = limit - budget.step_tokens
    # Walk units from the oldest (a tool result never starts one) up to the
    # turn in progress, visiting only what is evicted.
    stop = current_turn_start(window)
    end = cut = 0
    while end < stop and total > target:
        start = end
        end += 1
        while end < stop and window[end].role == "tool":
            end += 1
        total -= sum(m.tokens for m in window[start:end])
        cut = end
    return list(window[:cut])
