"""Throughput and added latency: one proxy on SQLite, one and two replicas on PostgreSQL.

    python -m bench.replicas [--duration 8] [--rounds 3] [--concurrency 16]

Every configuration runs against the same lean upstream on loopback
(bench/lean_upstream.py, its own process); ``direct`` calls that upstream
without a proxy, so "added" latency is the proxy's own. Load comes from
``wrk`` (Debian's package: ``apt-get install wrk``), one thread and one
connection per client, each client a session of its own sending its turns
one after another. Two replicas split the clients between them, as a load
balancer with session affinity would (their p50 is the request-weighted mean
of the two wrk runs). The last row runs PostgreSQL with
``synchronous_commit=off`` (set in the database URL), which matches SQLite's
durability here: no fsync per commit. Rounds interleave the configurations so that noise on
a shared machine hits all of them alike; the table shows medians over rounds
and each configuration's ratio to SQLite. Each configuration gets a fresh
database (a new PostgreSQL database on ``--postgres``, dropped at the end).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import httpx

from proxy.cli import free_port

OUT = Path(__file__).parent / "out"

WRK_SCRIPT = r"""
local counter = 0
function setup(thread)
  counter = counter + 1
  thread:set("id", counter)
end
function init(args)
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["X-Hermes-Session-Id"] = args[1] .. "-" .. id
  n = 0
end
function request()
  n = n + 1
  local body = '{"model": "hermes", "messages": [{"role": "user", "content": "Turn ' .. n ..
    ' of our planning chat: we keep PostgreSQL 15, drop Redis, and ship on Friday."}]}'
  return wrk.format(nil, "/v1/chat/completions", nil, body)
end
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests": %d, "seconds": %f, "errors": %d, "p50": %d, "p99": %d}\n',
    summary.requests, summary.duration / 1e6,
    e.connect + e.read + e.write + e.status + e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
"""


@dataclass
class Sample:
    rps: float
    p50_ms: float
    p99_ms: float
    errors: int


@dataclass
class Config:
    name: str
    urls: list[str]
    samples: dict[int, list[Sample]] = field(default_factory=dict)


@contextmanager
def process(args: list[str], url: str, health: str) -> Iterator[None]:
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{args} exited: {proc.stderr.read().decode()}")  # type: ignore[union-attr]
            try:
                httpx.get(url + health, timeout=2)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{args} did not start") from None
                time.sleep(0.1)
        yield
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def proxy(db: str, upstream: str) -> tuple[list[str], str]:
    port = free_port()
    args = [sys.executable, "-m", "proxy", "serve", "--port", str(port), "--db", db]
    args += ["--upstream", upstream, "--summarizer", "extractive", "--log-level", "warning"]
    return args, f"http://127.0.0.1:{port}"


def wrk(urls: list[str], clients: int, seconds: int, script: Path, tag: str) -> Sample:
    """``clients`` sessions split over ``urls``, one wrk process per URL, run at once."""
    shares = [clients // len(urls) + (i < clients % len(urls)) for i in range(len(urls))]
    runs = [
        subprocess.Popen(
            ["wrk", f"-t{n}", f"-c{n}", f"-d{seconds}s", "--timeout", "30s", "-s", str(script)]
            + [url, "--", f"{tag}-{i}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for i, (url, n) in enumerate(zip(urls, shares, strict=True))
        if n
    ]
    results = []
    for run in runs:
        out, _ = run.communicate()
        lines = [line for line in out.decode().splitlines() if line.startswith("{")]
        if run.returncode or not lines:
            raise RuntimeError(f"wrk failed: {out.decode()}")
        results.append(json.loads(lines[-1]))
    requests = sum(r["requests"] for r in results)
    return Sample(
        rps=sum(r["requests"] / r["seconds"] for r in results),
        p50_ms=sum(r["p50"] * r["requests"] for r in results) / max(requests, 1) / 1000,
        p99_ms=max(r["p99"] for r in results) / 1000,
        errors=sum(r["errors"] for r in results),
    )


async def admin(server: str, sql: str) -> None:
    conn = await asyncpg.connect(server)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def median(samples: list[Sample], attr: str) -> float:
    return statistics.median(float(getattr(s, attr)) for s in samples)


def table(configs: list[Config], low: int, high: int, rounds: int, seconds: int) -> str:
    direct = configs[0]
    base = next(c for c in configs if c.name.startswith("SQLite"))
    lines = [
        f"medians over {rounds} rounds of {seconds:g} s; {os.cpu_count()} cores shared by "
        "wrk, the upstream, the proxies and PostgreSQL",
        "",
        f"| configuration | p50 ms, {low} client | added p50 ms | req/s, {high} clients "
        f"| × SQLite | p50 ms, {high} | p99 ms, {high} | errors |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    direct_p50 = median(direct.samples[low], "p50_ms")
    for c in configs:
        p50 = median(c.samples[low], "p50_ms")
        rps = median(c.samples[high], "rps")
        added = "—" if c is direct else f"{p50 - direct_p50:.2f}"
        ratio = "—" if c is direct else f"{rps / median(base.samples[high], 'rps'):.2f}"
        errors = sum(s.errors for samples in c.samples.values() for s in samples)
        lines.append(
            f"| {c.name} | {p50:.2f} | {added} | {rps:.0f} | {ratio} "
            f"| {median(c.samples[high], 'p50_ms'):.2f} "
            f"| {median(c.samples[high], 'p99_ms'):.1f} | {errors} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=int, default=8, help="seconds per run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=16, help="clients for throughput")
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/test")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("wrk is not installed: apt-get install -y wrk")
    low, high = 1, args.concurrency
    name = f"hermes_bench_{secrets.token_hex(4)}"
    pg_url = urlunsplit(urlsplit(args.postgres)._replace(path=f"/{name}"))
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        asyncio.run(admin(args.postgres, f"CREATE DATABASE {name} TEMPLATE template0"))
        stack.callback(
            lambda: asyncio.run(admin(args.postgres, f"DROP DATABASE {name} WITH (FORCE)"))
        )
        up_port = free_port()
        upstream = f"http://127.0.0.1:{up_port}"
        stack.enter_context(
            process(
                [sys.executable, "-m", "uvicorn", "bench.lean_upstream:app", "--port", str(up_port)]
                + ["--log-level", "warning", "--no-access-log", "--lifespan", "off"],
                upstream,
                "/v1/models",
            )
        )
        script = Path(tmp) / "chat.lua"
        script.write_text(WRK_SCRIPT)
        configs = [Config("direct to upstream", [upstream])]
        # SQLite commits without an fsync (WAL, synchronous=NORMAL); PostgreSQL by
        # default waits for one per commit. The last row shows what that costs.
        relaxed = pg_url + ("&" if "?" in pg_url else "?") + "synchronous_commit=off"
        servers = [
            ("SQLite, 1 proxy", [str(Path(tmp) / "state.db")]),
            ("PostgreSQL, 1 proxy", [pg_url]),
            ("PostgreSQL, 2 replicas", [pg_url, pg_url]),
            ("PostgreSQL, 2 replicas, synchronous_commit=off", [relaxed, relaxed]),
        ]
        for label, dbs in servers:
            urls = []
            for db in dbs:
                command, url = proxy(db, upstream + "/v1")
                stack.enter_context(process(command, url, "/healthz"))
                urls.append(url)
            configs.append(Config(label, urls))
        for config in configs:  # warm up: imports, pools, caches, JIT-free but page-cache-full
            wrk(config.urls, high, 2, script, f"warm-{secrets.token_hex(3)}")
        for r in range(args.rounds):
            for config in configs:
                for clients in (low, high):
                    tag = f"r{r}-{clients}-{secrets.token_hex(3)}"
                    sample = wrk(config.urls, clients, args.duration, script, tag)
                    config.samples.setdefault(clients, []).append(sample)
                    print(
                        f"round {r + 1}: {config.name}, {clients} clients: "
                        f"{sample.rps:.0f} req/s, p50 {sample.p50_ms:.2f} ms",
                        file=sys.stderr,
                    )
    result = table(configs, low, high, args.rounds, args.duration)
    OUT.mkdir(exist_ok=True)
    (OUT / "replicas.md").write_text(result + "\n")
    print(result)


if __name__ == "__main__":
    main()
