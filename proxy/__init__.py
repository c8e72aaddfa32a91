"""hermes-proxy: an OpenAI-compatible proxy with bounded, persistent session memory."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from proxy.app import create_app
    from proxy.config import Settings

__all__ = ["Settings", "create_app"]


def __getattr__(name: str) -> Any:
    # Imported on first use: CLI commands that only read the database
    # (``sessions list``) start without loading the server's dependencies.
    if name == "create_app":
        from proxy.app import create_app

        return create_app
    if name == "Settings":
        from proxy.config import Settings

        return Settings
    raise AttributeError(f"module 'proxy' has no attribute {name!r}")
