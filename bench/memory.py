"""Retention benchmark: what a long conversation still knows at the end, at a fixed budget.

    python -m bench.memory [--turns 1000] [--budget 4000] [--conversations 3] [--seed 1]
    python -m bench.memory --sweep         # proxy only, over a grid of budget shares

Each seeded conversation (:mod:`bench.memory_data`) is played through the real
pipeline: the app from ``create_app`` with the extractive summarizer, a real
SQLite file, ``Conversations.begin`` / ``Turn.commit`` per turn, background
compaction awaited after each turn, recall through the archive's FTS5 index.
Then each planted item is asked about, as a new message, and the prompt the
proxy would send upstream is scored (:mod:`bench.memory_score`); the probe
turn is abandoned so every question sees the same state.

Baselines at the same budget, over the same stored transcript: a sliding
window of the most recent messages; BM25 retrieval (the same FTS5 index,
whole messages in rank order until the budget is full); and full history
(the ceiling, at its token cost). Prints a table and writes
``bench/out/memory.{json,png}``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from bench.memory_data import Conversation, generate
from bench.memory_score import chunks_of, score
from compaction import Message, prompt_tokens, query_terms
from proxy.app import create_app
from proxy.app_state import Services
from proxy.config import Settings
from proxy.turns import TurnRequest

SYSTEMS = ("proxy", "window", "bm25", "full")
KINDS = ("fact", "decision", "event", "reversal")
KEY = "bench"


@dataclass(frozen=True)
class Probe:
    system: str
    kind: str
    ok: bool
    tokens: int


@dataclass
class Timings:
    turn_ms: list[float]
    recall_ms: list[float]


class TimedRecall:
    """Wraps the recall hook to time the archive query where it runs."""

    def __init__(self, inner: Any, sink: list[float]) -> None:
        self.inner, self.sink = inner, sink

    async def __call__(self, live: Any, new: Sequence[Message]) -> Sequence[Message]:
        start = time.perf_counter()
        out: Sequence[Message] = await self.inner(live, new)
        if live.memory.through_seq:
            self.sink.append((time.perf_counter() - start) * 1000)
        return out


async def _settle(svc: Services) -> None:
    await svc.compactor.idle()
    await svc.tasks.drain(60)


async def _ask(svc: Services, question: str) -> tuple[list[dict[str, Any]], int]:
    request = TurnRequest("default", KEY, {"model": "hermes", "messages": []})
    turn = await svc.conversations.begin(request, [Message("user", question)])
    assert not isinstance(turn, bytes)
    messages: list[dict[str, Any]] = turn.upstream_body["messages"]
    tokens = turn.context_tokens
    turn.fail()
    await _settle(svc)
    return messages, tokens


async def run(
    conversation: Conversation, settings: Settings, show_misses: bool = False
) -> tuple[list[Probe], Timings]:
    """Play one conversation through the proxy, then probe the proxy and the baselines."""
    app = create_app(settings)
    timings = Timings([], [])
    probes: list[Probe] = []
    async with app.router.lifespan_context(app):
        svc: Services = app.state.services
        conversations = svc.conversations
        if conversations.recall is not None:
            conversations.recall = TimedRecall(conversations.recall, timings.recall_ms)
        for user, assistant in conversation.turns:
            start = time.perf_counter()
            request = TurnRequest("default", KEY, {"model": "hermes", "messages": []})
            turn = await conversations.begin(request, [Message("user", user)])
            assert not isinstance(turn, bytes)
            timings.turn_ms.append((time.perf_counter() - start) * 1000)
            await turn.commit({"role": "assistant", "content": assistant}, None)
            await _settle(svc)

        record = await svc.store.live_session("default", KEY)
        assert record is not None
        transcript = await svc.store.load_messages(record.id)
        turn_of = {(m.role, m.content): m.turn for m in transcript}

        def when(message: Mapping[str, Any]) -> int:
            return turn_of.get((str(message.get("role")), message.get("content")), 0)

        budget = settings.budget
        for item in conversation.items:
            question = Message("user", item.question)
            asked = {"role": "user", "content": item.question}
            sent, tokens = await _ask(svc, item.question)
            ok = score(item, chunks_of(sent, when))
            probes.append(Probe("proxy", item.kind, ok, tokens))
            if not ok and show_misses:
                print(f"MISS {item.kind} turn {item.turn} (old {item.old_turn}): {item.statement}")
                print(f"     asked: {item.question}; answer {item.answer}, old {item.old}")
            for system, prompt in (
                ("window", window_baseline(transcript, asked, budget, conversations)),
                ("bm25", await bm25_baseline(svc, record.id, transcript, asked, budget)),
                ("full", [*(m.to_openai() for m in transcript), asked]),
            ):
                tokens = prompt_tokens(prompt, conversations.counter)
                ok = score(item, chunks_of(prompt, when))
                probes.append(Probe(system, item.kind, ok, tokens))
            del question
    return probes, timings


def window_baseline(
    transcript: Sequence[Message], asked: dict[str, Any], budget: int, conversations: Any
) -> list[dict[str, Any]]:
    """The most recent whole messages that fit beside the question."""
    room = budget - prompt_tokens([asked], conversations.counter)
    kept: list[Message] = []
    for message in reversed(transcript):
        if message.tokens > room:
            break
        room -= message.tokens
        kept.append(message)
    return [*(m.to_openai() for m in reversed(kept)), asked]


async def bm25_baseline(
    svc: Services,
    session_id: str,
    transcript: Sequence[Message],
    asked: dict[str, Any],
    budget: int,
) -> list[dict[str, Any]]:
    """Whole archived messages in BM25 order (the proxy's FTS5 index) until the budget is full."""
    conversations = svc.conversations
    terms = query_terms(str(asked["content"]))
    hits = await svc.store.recall_messages(session_id, transcript[-1].seq, terms, 80)
    room = budget - prompt_tokens([asked], conversations.counter)
    _, rendered = conversations.renderer.fit_recall(hits, room)
    return [rendered.message, asked] if rendered.message else [asked]


def summarize(probes: Sequence[Probe]) -> dict[str, dict[str, float]]:
    table: dict[str, dict[str, float]] = {}
    for system in SYSTEMS:
        mine = [p for p in probes if p.system == system]
        row = {}
        for kind in KINDS:
            of_kind = [p.ok for p in mine if p.kind == kind]
            row[kind] = sum(of_kind) / len(of_kind) if of_kind else float("nan")
        row["overall"] = sum(p.ok for p in mine) / len(mine)
        row["tokens"] = statistics.median(p.tokens for p in mine)
        table[system] = row
    return table


def print_table(table: Mapping[str, Mapping[str, float]], header: str) -> str:
    full = table["full"]["tokens"]
    lines = [
        header,
        f"{'system':<8} {'fact':>6} {'decision':>9} {'event':>6} {'reversal*':>10} "
        f"{'overall':>8} {'tokens/req':>11} {'vs full':>8}",
    ]
    for system, row in table.items():
        lines.append(
            f"{system:<8} {row['fact']:>6.0%} {row['decision']:>9.0%} {row['event']:>6.0%} "
            f"{row['reversal']:>10.0%} {row['overall']:>8.0%} {row['tokens']:>11.0f} "
            f"{row['tokens'] / full:>8.1%}"
        )
    lines.append("* reversal: the current value is present and marked current (newer than the old)")
    text = "\n".join(lines)
    print(text)
    return text


def settings_for(args: argparse.Namespace, db: Path, **shares: float) -> Settings:
    settings = Settings(
        db=str(db),
        budget=args.budget,
        summarizer="extractive",
        upstream="http://127.0.0.1:9/v1",
        recall=not args.no_recall,
        memory_share=shares.get("memory_share", args.memory_share),
        recall_share=shares.get("recall_share", args.recall_share),
        new_share=args.new_share,
        compaction_step=args.step,
    )
    settings.validate()
    return settings


async def evaluate(args: argparse.Namespace, **shares: float) -> tuple[list[Probe], Timings]:
    probes: list[Probe] = []
    timings = Timings([], [])
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.conversations):
            conversation = generate(args.seed + i, turns=args.turns)
            settings = settings_for(args, Path(tmp) / f"bench-{i}.db", **shares)
            found, spent = await run(conversation, settings, args.show_misses)
            probes.extend(found)
            timings.turn_ms.extend(spent.turn_ms)
            timings.recall_ms.extend(spent.recall_ms)
    return probes, timings


def draw(table: Mapping[str, Mapping[str, float]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5), width_ratios=(3, 1))
    columns = (*KINDS, "overall")
    width = 0.8 / len(table)
    for i, (system, row) in enumerate(table.items()):
        xs = [c + i * width for c in range(len(columns))]
        left.bar(xs, [row[c] * 100 for c in columns], width, label=system)
    left.set_xticks([c + 0.4 - width / 2 for c in range(len(columns))], list(columns))
    left.set_ylabel("retained (%)")
    left.set_ylim(0, 105)
    left.axhline(90, color="grey", linestyle=":", linewidth=1)
    left.legend(loc="upper center", bbox_to_anchor=(0.5, -0.08), ncol=len(table), frameon=False)
    left.set_title(title)
    colors = [f"C{i}" for i in range(len(table))]
    right.bar(list(table), [row["tokens"] for row in table.values()], color=colors)
    right.set_yscale("log")
    right.set_ylabel("prompt tokens per request (median)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


async def sweep(args: argparse.Namespace) -> None:
    print(f"{'memory':>7} {'recall':>7} {'overall':>8} {'reversal':>9} {'tokens':>7}")
    for memory_share in (0.25, 0.30, 0.40, 0.50):
        for recall_share in (0.05, 0.10, 0.15, 0.20):
            if memory_share + recall_share + args.new_share >= 0.9:
                continue
            probes, _ = await evaluate(args, memory_share=memory_share, recall_share=recall_share)
            table = summarize(probes)["proxy"]
            print(
                f"{memory_share:>7.2f} {recall_share:>7.2f} {table['overall']:>8.0%} "
                f"{table['reversal']:>9.0%} {table['tokens']:>7.0f}",
                flush=True,
            )


def main() -> None:
    defaults = Settings()
    parser = argparse.ArgumentParser(prog="python -m bench.memory", description=__doc__)
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--budget", type=int, default=4000)
    parser.add_argument("--conversations", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--memory-share", type=float, default=defaults.memory_share)
    parser.add_argument("--recall-share", type=float, default=defaults.recall_share)
    parser.add_argument("--new-share", type=float, default=defaults.new_share)
    parser.add_argument("--step", type=float, default=defaults.compaction_step)
    parser.add_argument("--no-recall", action="store_true", help="turn archive recall off")
    parser.add_argument("--sweep", action="store_true", help="proxy only, over budget shares")
    parser.add_argument("--show-misses", action="store_true", help="print what the proxy missed")
    parser.add_argument("--out", type=Path, default=Path("bench/out"))
    args = parser.parse_args()
    if args.sweep:
        asyncio.run(sweep(args))
        return
    started = time.perf_counter()
    probes, timings = asyncio.run(evaluate(args))
    table = summarize(probes)
    header = (
        f"bench.memory: {args.conversations} conversations x {args.turns} turns, seed {args.seed}, "
        f"budget {args.budget}; shares memory {args.memory_share} recall {args.recall_share} "
        f"new {args.new_share} step {args.step}; recall {'off' if args.no_recall else 'on'}; "
        f"{len(probes) // len(SYSTEMS)} probes"
    )
    text = print_table(table, header)
    recall = statistics.median(timings.recall_ms) if timings.recall_ms else 0.0
    line = (
        f"proxy turn path (begin: load, merge, recall, build, pending write): median "
        f"{statistics.median(timings.turn_ms):.2f} ms; recall hook median {recall:.2f} ms "
        f"over {len(timings.recall_ms)} turns; total run {time.perf_counter() - started:.0f} s"
    )
    print(line)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "memory.txt").write_text(text + "\n" + line + "\n")
    (args.out / "memory.json").write_bytes(
        orjson.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "table": table})
    )
    draw(table, args.out / "memory.png", f"retention at budget {args.budget}, {args.turns} turns")
    print(f"wrote {args.out / 'memory.png'}")


if __name__ == "__main__":
    main()
