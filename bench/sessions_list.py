"""``sessions list`` on a database of 100,000 sessions: in-process and end to end.

    python -m bench.sessions_list [--sessions 100000] [--runs 7] [--rebuild]

Builds (once, then reuses) ``bench/out/sessions_<N>.db``: N sessions over five
sources and two tenants, each with a question and an answer (so the
messages table and its search index have realistic size), a tenth of them
ended. Then it times

* in-process: the store queries behind ``sessions list`` (first page, a
  source filter, a page 50 deep through the cursor) and id-prefix resolution,
  on an open store (median of 50 runs each);
* end to end: ``hermes-proxy sessions list`` as a new process each time —
  interpreter start, imports, opening the database, the query, printing —
  beside a bare ``python -c pass`` for scale (median of ``--runs``).

The target is under 0.5 s end to end for ``sessions list``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import resource
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from proxy.store import SqlStore, database_for

OUT = Path(__file__).parent / "out"
SOURCES = ("cli", "telegram", "discord", "whatsapp", "slack")
TARGET = 0.5


def build(path: Path, sessions: int) -> None:
    """Create the schema with the store's migrations, then bulk-insert rows."""
    if path.exists():
        path.unlink()
    store = SqlStore(database_for(str(path)))
    asyncio.run(_open_close(store))
    rng = random.Random(5)
    start = time.time() - 400 * 86400
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA synchronous=OFF")
    with conn:
        for first in range(0, sessions, 10_000):
            batch, messages = [], []
            for i in range(first, min(first + 10_000, sessions)):
                started = start + i * (400 * 86400 / sessions)
                stamp = time.strftime("%Y%m%d_%H%M%S", time.gmtime(started))
                session_id = f"{stamp}_{i:08x}"
                ended = started + 600 if rng.random() < 0.1 else None
                tenant = "default" if rng.random() < 0.9 else "other"
                batch.append(
                    (
                        session_id,
                        tenant,
                        f"user:{i}",
                        rng.choice(SOURCES),
                        "gpt-4o-mini",
                        started,
                        started + 60,
                        ended,
                        2,
                        2,
                        1,
                    )
                )
                messages.append((session_id, 1, "user", f"question {i} about topic {i % 97}"))
                messages.append((session_id, 2, "assistant", f"answer {i} on topic {i % 97}"))
            conn.executemany(
                "INSERT INTO sessions (id, tenant, key, source, model, started_at, updated_at, "
                "ended_at, message_count, last_seq, last_turn) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                batch,
            )
            conn.executemany(
                "INSERT INTO messages (session_id, seq, turn, role, content, token_count, "
                "created_at) VALUES (?, ?, 1, ?, ?, 10, 0)",
                messages,
            )
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("ANALYZE")
    conn.close()


async def _open_close(store: SqlStore) -> None:
    await store.open()
    await store.close()


def in_process(path: Path, runs: int = 50) -> list[tuple[str, float, float]]:
    async def measure() -> list[tuple[str, float, float]]:
        store = SqlStore(database_for(str(path)))
        await store.open()
        try:
            deep = None
            for _ in range(50):
                page = await store.list_sessions("default", limit=20, cursor=deep)
                deep = page.next_cursor
            first_id = (await store.list_sessions("default", limit=1)).items[0].id
            cases: list[tuple[str, Callable[[], Awaitable[object]]]] = [
                ("list (first page of 20)", lambda: store.list_sessions("default")),
                (
                    "list --source telegram",
                    lambda: store.list_sessions("default", source="telegram"),
                ),
                ("list --limit 100", lambda: store.list_sessions("default", limit=100)),
                ("list, page 51 by cursor", lambda: store.list_sessions("default", cursor=deep)),
                ("resolve an id prefix", lambda: store.find_sessions("default", first_id[:-3])),
            ]
            out = []
            for name, call in cases:
                walls, cpus = [], []
                for _ in range(runs):
                    started, cpu = time.perf_counter(), time.process_time()
                    await call()
                    walls.append(time.perf_counter() - started)
                    cpus.append(time.process_time() - cpu)
                out.append(
                    (f"in-process: {name}", statistics.median(walls), statistics.median(cpus))
                )
            return out
        finally:
            await store.close()

    return asyncio.run(measure())


def end_to_end(path: Path, runs: int) -> list[tuple[str, float, float]]:
    """Median wall time and median CPU time (user + system) of each command.

    CPU time is what the command costs; wall time is what a user waits, which
    on a machine shared with other work includes waiting for a core.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HERMES_", "OPENAI_"))}
    # An installed package has its modules compiled to .pyc; without this, a
    # PYTHONDONTWRITEBYTECODE environment recompiles every module on each run.
    cached = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    python = [sys.executable]
    list_command = [*python, "-m", "proxy", "sessions", "list"]
    cases: list[tuple[str, list[str], dict[str, str]]] = [
        ("python -c pass (interpreter only)", [*python, "-c", "pass"], cached),
        ("python -c 'import proxy.cli' (+ imports)", [*python, "-c", "import proxy.cli"], cached),
        ("sessions list", [*list_command, "--db", str(path)], cached),
        (
            "sessions list --source telegram --limit 50",
            [*list_command, "--db", str(path), "--source", "telegram", "--limit", "50"],
            cached,
        ),
        (
            "sessions list, no .pyc (compiles every module)",
            [*list_command, "--db", str(path)],
            {
                **cached,
                "PYTHONDONTWRITEBYTECODE": "1",
                "PYTHONPYCACHEPREFIX": str(OUT / "no-pycache"),
            },
        ),
    ]
    # Warm up: write the .pyc files and bring the database into the page cache.
    subprocess.run([*list_command, "--db", str(path)], capture_output=True, env=cached, check=True)
    out = []
    for name, command, environ in cases:
        walls, cpus = [], []
        for _ in range(runs):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.perf_counter()
            done = subprocess.run(command, capture_output=True, env=environ, check=False)
            walls.append(time.perf_counter() - started)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
            if done.returncode != 0:
                raise SystemExit(f"{name} failed: {done.stderr.decode()}")
        out.append((f"end to end: {name}", statistics.median(walls), statistics.median(cpus)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--rebuild", action="store_true")
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    path = OUT / f"sessions_{args.sessions}.db"
    if args.rebuild or not path.exists():
        started = time.perf_counter()
        print(f"building {path} ({args.sessions:,} sessions) ...", file=sys.stderr)
        build(path, args.sessions)
        print(f"built in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    results = in_process(path) + end_to_end(path, args.runs)
    size = path.stat().st_size / 1e6
    lines = [
        f"sessions list on {args.sessions:,} sessions ({size:.0f} MB database), "
        f"medians, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}",
        "",
        f"{'case':<56} {'wall':>10} {'CPU':>10}  target {TARGET} s (wall)",
        "-" * 96,
    ]
    for name, wall, cpu in results:
        verdict = ""
        if name.startswith("end to end: sessions list"):
            verdict = "ok" if wall < TARGET else "MISSED"
        lines.append(f"{name:<56} {wall * 1000:>7.1f} ms {cpu * 1000:>7.1f} ms  {verdict}")
    report = "\n".join(lines)
    print(report)
    (OUT / "sessions_list.txt").write_text(report + "\n")


if __name__ == "__main__":
    main()
