"""Plain counters the request path bumps; ``proxy.metrics`` exposes them."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

__all__ = ["HttpStats", "TurnStats"]


@dataclass
class HttpStats:
    responses: Counter[int] = field(default_factory=Counter)
    """Responses sent, by status code."""


@dataclass
class TurnStats:
    started: int = 0
    committed: int = 0
    failed: int = 0
    replayed: int = 0
    context_tokens: int = 0
    """Prompt tokens the proxy sent upstream, by its own count."""
    upstream_errors: Counter[str] = field(default_factory=Counter)
    """Upstream failures on session turns, by kind."""
