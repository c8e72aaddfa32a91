"""Helpers for the session management tests: turns over HTTP, the API, the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any
from urllib.parse import quote

import httpx
from click.testing import CliRunner, Result

from proxy.cli import main
from tests import http
from tests.conftest import Proxy

__all__ = ["api", "cli", "cli_process", "say", "session_path"]


def say(
    proxy: Proxy,
    key: str,
    text: str,
    *,
    api_key: str | None = None,
    source: str | None = None,
    user_id: str | None = None,
    stream: bool = False,
) -> httpx.Response:
    """One session turn; the answer is stored before this returns."""
    headers = {"X-Hermes-Session-Id": key}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    if source:
        headers["X-Hermes-Source"] = source
    if user_id:
        headers["X-Hermes-User-Id"] = user_id
    response = http.post(
        f"{proxy.v1}/chat/completions",
        json={"model": "hermes", "stream": stream, "messages": [{"role": "user", "content": text}]},
        headers=headers,
        timeout=30,
    )
    assert response.status_code == 200, response.text
    proxy.settle()
    return response


def api(proxy: Proxy, api_key: str | None = None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return httpx.Client(base_url=proxy.url, headers=headers, timeout=30)


def session_path(ident: str, suffix: str = "") -> str:
    return f"/api/sessions/{quote(ident, safe='')}{suffix}"


def cli(*args: str, input: str | None = None, env: dict[str, str] | None = None) -> Result:
    """``hermes-proxy ARGS`` through click's runner, in this process."""
    return CliRunner(env=env).invoke(main, list(args), input=input, catch_exceptions=False)


def cli_process(
    *args: str, input: str | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    """``hermes-proxy ARGS`` as a separate process (its own store on the same database)."""
    return subprocess.run(
        [sys.executable, "-m", "proxy", *args],
        input=input,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
    )


def rows(proxy: Proxy, sql: str, *args: Any) -> list[Any]:
    with proxy.db() as conn:
        return conn.execute(sql, args).fetchall()
