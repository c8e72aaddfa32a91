"""Runs: what the event log costs, and what a run adds over a streamed chat turn.

    python -m bench.runs [--runs 16] [--chunks 200] [--gap-ms 5] [--repeat 3]

A local upstream streams ``--chunks`` content deltas ``--gap-ms`` apart. With
``--runs`` conversations at once, each answered once, it measures:

* **chat** — the baseline: a streamed ``/v1/chat/completions`` session turn;
  time to the first byte of the answer and to its end;
* **runs** — ``POST /v1/threads/{id}/messages`` with the thread's SSE stream
  open: time to the first ``message.delta`` event and to the ``completed``
  status; events stored and store transactions (group commits) per run —
  once with text deltas coalesced every 50 ms (the default), once with one
  event per upstream chunk (``FLUSH_SECONDS = 0``).

Every number is a median over all conversations of all repeats.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sqlite3
import statistics
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

import proxy.run_step
from proxy.app import create_app
from proxy.app_state import Services
from proxy.config import Settings
from proxy.store.sqlite import SqliteDatabase


def upstream_app(chunks: int, gap: float) -> Starlette:
    async def complete(request: Request) -> StreamingResponse:
        await request.body()

        async def frames() -> AsyncIterator[bytes]:
            base = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}
            for i in range(chunks):
                delta = {"content": f"word{i} "}
                chunk = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
                yield b"data: " + orjson.dumps(chunk) + b"\n\n"
                await asyncio.sleep(gap)
            end = {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
            yield b"data: " + orjson.dumps(end) + b"\n\ndata: [DONE]\n\n"

        return StreamingResponse(frames(), media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/chat/completions", complete, methods=["POST"])])


@contextmanager
def serve(app: Any) -> Iterator[str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, log_level="error", lifespan="on", timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join()
        sock.close()


async def chat_turn(client: httpx.AsyncClient, key: str) -> tuple[float, float]:
    start = time.perf_counter()
    first = 0.0
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "Go"}]}
    headers = {"X-Hermes-Session-Id": key}
    async with client.stream("POST", "/chat/completions", json=body, headers=headers) as response:
        async for _ in response.aiter_bytes():
            first = first or time.perf_counter() - start
    return first, time.perf_counter() - start


async def run_once(client: httpx.AsyncClient) -> tuple[float, float]:
    thread = (await client.post("/threads")).json()["thread_id"]
    async with client.stream("GET", f"/threads/{thread}/events") as events:
        lines = events.aiter_lines()
        await anext(lines)  # the stream is open
        start = time.perf_counter()
        first = 0.0
        posted = await client.post(f"/threads/{thread}/messages", json={"content": "Go"})
        assert posted.status_code == 202, posted.text
        async for line in lines:
            if line == "event: message.delta" and not first:
                first = time.perf_counter() - start
            if line.startswith("data: ") and '"status":"completed"' in line:
                return first, time.perf_counter() - start
    raise RuntimeError("the event stream ended early")


def measure(mode: str, args: argparse.Namespace, upstream: str) -> dict[str, list[float]]:
    results: dict[str, list[float]] = {"first": [], "done": [], "events": [], "writes": []}
    proxy.run_step.FLUSH_SECONDS = 0.0 if mode == "runs, per chunk" else 0.05
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as home:
            settings = Settings.load(
                environ={"HERMES_HOME": home},
                flags={"upstream": upstream, "summarizer": "extractive", "budget": 100_000},
            )
            app = create_app(settings)
            with serve(app) as url:
                svc: Services = app.state.services
                db = svc.store.db
                assert isinstance(db, SqliteDatabase)
                writes_before = db.transactions

                async def main() -> list[tuple[float, float]]:
                    limits = httpx.Limits(max_connections=4 * args.runs)
                    async with httpx.AsyncClient(
                        base_url=f"{url}/v1", timeout=60, limits=limits
                    ) as client:
                        if mode == "chat":
                            turns = [chat_turn(client, f"s{i}") for i in range(args.runs)]
                            return list(await asyncio.gather(*turns))
                        return list(
                            await asyncio.gather(*(run_once(client) for _ in range(args.runs)))
                        )

                timings = asyncio.run(main())
                writes = db.transactions - writes_before
            with sqlite3.connect(Path(home) / "state.db") as conn:
                events = conn.execute("SELECT COUNT(*) FROM thread_events").fetchone()[0]
        results["first"] += [t[0] for t in timings]
        results["done"] += [t[1] for t in timings]
        results["events"].append(events / args.runs)
        results["writes"].append(writes / args.runs)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=16, help="conversations at once")
    parser.add_argument("--chunks", type=int, default=200, help="content deltas per answer")
    parser.add_argument("--gap-ms", type=float, default=5.0, help="between upstream deltas")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    stream_seconds = args.chunks * args.gap_ms / 1000
    print(
        f"{args.runs} conversations at once; the upstream streams {args.chunks} deltas "
        f"{args.gap_ms:g} ms apart (~{stream_seconds:.2f} s); medians of {args.repeat} repeats\n"
    )
    header = (
        f"{'mode':<24}{'first text (ms)':>17}{'end (ms)':>10}{'events/run':>12}{'writes/run':>12}"
    )
    print(header)
    print("-" * len(header))
    with serve(upstream_app(args.chunks, args.gap_ms / 1000)) as upstream:
        for mode in ("chat", "runs, 50 ms coalescing", "runs, per chunk"):
            r = measure(mode, args, f"{upstream}/v1")
            events = "-" if mode == "chat" else f"{statistics.median(r['events']):.0f}"
            print(
                f"{mode:<24}{statistics.median(r['first']) * 1000:>17.0f}"
                f"{statistics.median(r['done']) * 1000:>10.0f}{events:>12}"
                f"{statistics.median(r['writes']):>12.1f}"
            )


if __name__ == "__main__":
    main()
