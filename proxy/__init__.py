"""hermes-proxy: an OpenAI-compatible proxy with bounded, persistent session memory."""

from proxy.app import create_app
from proxy.config import Settings

__all__ = ["Settings", "create_app"]
