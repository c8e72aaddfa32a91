"""Recall cost on the turn path: the archive query and the prompt build, with and without.

    python -m bench.recall [--sessions 20] [--turns 1000] [--questions 200]

Fills one SQLite file with ``--sessions`` long conversations (bench.memory_data
wording, stored through the store's own ``commit_turn``, so the FTS5 triggers
index them as in production), marks all but the last 40 turns of each as
archived, then times, for questions about planted items and filler alike:

* the recall hook (``proxy.recall.ArchiveRecall``: terms, FTS5 BM25 query,
  excerpts) — what a turn pays when the session has an archive;
* ``build_context`` with the recalled excerpts and without any.

Medians and 90th percentiles from one run; the machine's other load shows in
the spread, so compare the columns side by side rather than across runs.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from pathlib import Path

from bench.memory_data import generate
from compaction import (
    Budget,
    ExtractiveSummarizer,
    Memory,
    MemoryRenderer,
    Message,
    TiktokenCounter,
    build_context,
    message_tokens,
)
from proxy.live import LiveSession
from proxy.recall import ArchiveRecall
from proxy.store import SqlStore, TurnCommit, database_for
from proxy.store.records import new_pending_id

WINDOW_TURNS = 40


def _percentiles(values: list[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[int(len(ordered) * 0.9)]
    return f"median {statistics.median(ordered):6.3f} ms   p90 {p90:6.3f} ms"


async def fill(store: SqlStore, sessions: int, turns: int, counter: TiktokenCounter) -> list[str]:
    """Store ``sessions`` conversations, interleaved turn by turn as live traffic would be."""
    conversations = [generate(1000 + i, turns=turns) for i in range(sessions)]
    ids = []
    for i in range(sessions):
        record = await store.create_session("default", f"bench-{i}")
        ids.append(record.id)
    now = time.time()
    for turn in range(turns):
        for i, conversation in enumerate(conversations):
            user, assistant = conversation.turns[turn]
            messages = [
                Message(
                    role,
                    text,
                    tokens=message_tokens({"role": role, "content": text}, counter),
                    seq=2 * turn + k + 1,
                    turn=turn + 1,
                    created_at=now,
                )
                for k, (role, text) in enumerate((("user", user), ("assistant", assistant)))
            ]
            pending = new_pending_id()  # no pending row: nothing waits on an upstream here
            await store.commit_turn(TurnCommit(ids[i], pending, messages, None, None, 0, 0, now))
    return ids


async def measure(args: argparse.Namespace) -> None:
    counter = TiktokenCounter()
    renderer = MemoryRenderer(counter)
    extractive = ExtractiveSummarizer(renderer)
    budget = Budget(args.budget)
    with tempfile.TemporaryDirectory() as tmp:
        store = SqlStore(database_for(str(Path(tmp) / "recall.db")))
        await store.open()
        try:
            started = time.perf_counter()
            ids = await fill(store, args.sessions, args.turns, counter)
            await store.index_pending()  # as the server's indexer does, every 250 ms
            print(
                f"stored {args.sessions} sessions x {args.turns} turns "
                f"({2 * args.sessions * args.turns} messages) in "
                f"{time.perf_counter() - started:.0f} s"
            )
            recall = ArchiveRecall(store, renderer)
            rng = random.Random(7)
            through = 2 * (args.turns - WINDOW_TURNS)
            hook: list[float] = []
            with_recall: list[float] = []
            without: list[float] = []
            hits = 0
            questions = [
                item.question for i in range(args.sessions) for item in generate(1000 + i).items
            ]
            for _ in range(args.questions):
                index = rng.randrange(args.sessions)
                session_id = ids[index]
                memory = Memory(through_seq=through, through_turn=through // 2)
                window = await store.load_messages(session_id, through)
                live = LiveSession(
                    session_id, "default", f"bench-{index}", 0, 0, 0, memory, (), window
                )
                text = rng.choice(questions)
                new = [
                    Message(
                        "user",
                        text,
                        tokens=message_tokens({"role": "user", "content": text}, counter),
                    )
                ]
                start = time.perf_counter()
                excerpts = await recall(live, new)
                hook.append((time.perf_counter() - start) * 1000)
                hits += bool(excerpts)
                for sink, recalled in ((with_recall, excerpts), (without, [])):
                    start = time.perf_counter()
                    build_context(
                        system=(),
                        memory=memory,
                        window=window[-16:],
                        new=new,
                        budget=budget,
                        renderer=renderer,
                        fold=extractive.fold,
                        recall=recalled,
                    )
                    sink.append((time.perf_counter() - start) * 1000)
            print(f"recall hook (query + excerpts)  {_percentiles(hook)}   ({hits} with excerpts)")
            print(f"build_context with excerpts     {_percentiles(with_recall)}")
            print(f"build_context without           {_percentiles(without)}")
        finally:
            await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.recall", description=__doc__)
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--budget", type=int, default=4000)
    asyncio.run(measure(parser.parse_args()))


if __name__ == "__main__":
    main()
