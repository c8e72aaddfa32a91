"""`hermes-proxy demo` works offline, as the README's first command promises."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests import http
from tests.servers import free_port


def test_demo_remembers_a_fact_with_no_network_and_no_key(tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "HERMES_"))}
    env["HERMES_HOME"] = str(tmp_path)
    log = tmp_path / "demo.log"
    with log.open("wb") as errors:
        proc = subprocess.Popen(
            [sys.executable, "-m", "proxy", "demo", "--port", str(port), "--budget", "400"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=errors,
        )
    try:
        base = f"http://127.0.0.1:{port}/v1"
        deadline = time.monotonic() + 30
        while True:
            try:
                http.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
                break
            except httpx.TransportError:
                assert proc.poll() is None, log.read_text()
                assert time.monotonic() < deadline, "demo did not start"
                time.sleep(0.1)

        def say(text: str) -> httpx.Response:
            return http.post(
                f"{base}/chat/completions",
                json={"model": "hermes", "messages": [{"role": "user", "content": text}]},
                headers={"X-Hermes-Session-Id": "demo"},
                timeout=30,
            )

        say("Our database is PostgreSQL 15 on RDS.")
        sizes = []
        for i in range(40):
            response = say(f"Filler message number {i} about nothing in particular, really.")
            sizes.append(int(response.headers["x-hermes-context-tokens"]))
        answer = say("Which database do we use?").json()["choices"][0]["message"]["content"]
        assert "PostgreSQL 15 on RDS" in answer
        assert max(sizes) <= 400
        assert (tmp_path / "state.db").exists()
    finally:
        proc.terminate()
        proc.wait(timeout=20)
