"""Shared pieces for benchmarks: servers in subprocesses, wrk, tables."""

from __future__ import annotations

import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

OUT = Path(__file__).parent / "out"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_for_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port}")


@contextmanager
def server(args: Sequence[str], port: int, env: dict[str, str] | None = None) -> Iterator[None]:
    """Run a server command until the block ends."""
    proc = subprocess.Popen(
        list(args),
        env={**os.environ, **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for_port(port, proc)
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def uvicorn_cmd(app: str, port: int) -> list[str]:
    return [
        sys.executable, "-m", "uvicorn", app, "--port", str(port), "--log-level", "warning",
        "--no-access-log", "--loop", "uvloop", "--http", "httptools",
    ]  # fmt: skip


@contextmanager
def lean_upstream() -> Iterator[str]:
    port = free_port()
    with server(uvicorn_cmd("bench.lean_upstream:app", port), port):
        yield f"http://127.0.0.1:{port}/v1"


@contextmanager
def proxy(upstream: str, *extra: str, db: str | None = None) -> Iterator[str]:
    """``hermes-proxy serve`` in front of ``upstream``, on a fresh SQLite file."""
    port = free_port()
    with tempfile.TemporaryDirectory() as home:
        cmd = [
            sys.executable, "-m", "proxy", "serve", "--port", str(port), "--upstream", upstream,
            "--db", db or f"{home}/state.db", "--summarizer", "extractive",
            "--log-level", "warning", *extra,
        ]  # fmt: skip
        with server(cmd, port, env={"HERMES_HOME": home}):
            yield f"http://127.0.0.1:{port}/v1"


@dataclass(frozen=True)
class WrkResult:
    p50_ms: float
    p99_ms: float
    rps: float
    errors: int
    requests: int


_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def _ms(text: str) -> float:
    match = re.fullmatch(r"([\d.]+)(us|ms|s)", text)
    if not match:
        raise ValueError(text)
    return float(match.group(1)) * _UNITS[match.group(2)]


def wrk(url: str, script: str, *, connections: int, seconds: float, threads: int = 1) -> WrkResult:
    if shutil.which("wrk") is None:
        sys.exit("wrk is needed: apt-get install -y wrk")
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(script)
    args = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{round(seconds)}s", "--latency"]
    out = subprocess.run(
        [*args, "-s", f.name, url], capture_output=True, text=True, check=True
    ).stdout
    os.unlink(f.name)
    p50 = re.search(r"^\s+50%\s+(\S+)", out, re.M)
    p99 = re.search(r"^\s+99%\s+(\S+)", out, re.M)
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    total = re.search(r"(\d+) requests in", out)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if not (p50 and p99 and rps and total):
        raise RuntimeError(f"cannot read wrk's output:\n{out}")
    errors = int(non2xx.group(1)) if non2xx else 0
    if sock:
        errors += sum(int(g) for g in sock.groups())
    return WrkResult(
        _ms(p50.group(1)), _ms(p99.group(1)), float(rps.group(1)), errors, int(total.group(1))
    )


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(h) for h in headers]] + [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = [
        "  ".join(
            c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in cells
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)
