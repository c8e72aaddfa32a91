"""Prompt tokens per turn: through the proxy vs. replaying the full history.

    python -m bench.context_cost [--turns 1000] [--budget 4000]

Drives ``hermes-proxy demo`` (the offline demo model, so no network) with a
seeded synthetic conversation, one new message per turn, and records the
prompt size the upstream reports for each turn. A stateless client would
instead send the whole history every time; its cost is computed with the
same tokenizer. Prints a table and writes ``bench/out/context_cost.png``.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile

import httpx

from bench._common import OUT, free_port, server, table
from compaction import TiktokenCounter, message_tokens
from compaction.tokens import REPLY_PRIMING

SUBJECTS = [
    "the billing service", "our deploy pipeline", "the search index", "mobile login",
    "the data warehouse", "rate limiting", "the onboarding flow", "cache invalidation",
]  # fmt: skip
VERBS = ["review", "simplify", "speed up", "document", "test", "monitor", "migrate", "refactor"]
DETAILS = [
    "We saw latency climb to {n} ms at peak.",
    "The team estimates {n} story points for it.",
    "Version {n}.{m} shipped last sprint.",
    "About {n} customers reported issues.",
    "It costs roughly {n} dollars a month.",
]


def message(rng: random.Random, turn: int) -> str:
    parts = [f"Turn {turn}: let's {rng.choice(VERBS)} {rng.choice(SUBJECTS)}."]
    for _ in range(rng.randint(0, 3)):
        parts.append(rng.choice(DETAILS).format(n=rng.randint(2, 900), m=rng.randint(0, 9)))
    if rng.random() < 0.3:
        parts.append("Can you summarise what we decided about it so far?")
    return " ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--budget", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    rng = random.Random(args.seed)
    counter = TiktokenCounter()
    port = free_port()
    proxied: list[int] = []
    replay: list[int] = []
    history_tokens = 0
    with tempfile.TemporaryDirectory() as home:
        cmd = [
            sys.executable, "-m", "proxy", "demo", "--port", str(port),
            "--budget", str(args.budget), "--db", f"{home}/state.db", "--log-level", "warning",
        ]  # fmt: skip
        with server(cmd, port, env={"HERMES_HOME": home}), httpx.Client(timeout=60) as client:
            for turn in range(1, args.turns + 1):
                user = {"role": "user", "content": message(rng, turn)}
                response = client.post(
                    f"http://127.0.0.1:{port}/v1/chat/completions",
                    json={"model": "hermes", "messages": [user]},
                    headers={"X-Hermes-Session-Id": "context-cost"},
                )
                response.raise_for_status()
                data = response.json()
                # The upstream's own count of what it received, and the proxy's.
                assert data["usage"]["prompt_tokens"] == int(
                    response.headers["x-hermes-context-tokens"]
                )
                proxied.append(data["usage"]["prompt_tokens"])
                history_tokens += message_tokens(user, counter)
                replay.append(history_tokens + REPLY_PRIMING)
                history_tokens += message_tokens(data["choices"][0]["message"], counter)
                if turn % 100 == 0:
                    print(
                        f"  turn {turn}: proxy {proxied[-1]}, full replay {replay[-1]}",
                        file=sys.stderr,
                    )

    marks = [t for t in (1, 10, 50, 100, 200, 500, 1000, args.turns) if t <= args.turns]
    rows = [
        (t, proxied[t - 1], replay[t - 1], f"{replay[t - 1] / proxied[t - 1]:.1f}x")
        for t in sorted(set(marks))
    ]
    steady = proxied[min(49, args.turns - 1) :]
    report = table(("turn", "proxy prompt tokens", "full replay tokens", "replay / proxy"), rows)
    summary = (
        f"budget {args.budget}; proxy max {max(proxied)} "
        f"(never above budget: {max(proxied) <= args.budget}); "
        f"turns 50-{args.turns}: min {min(steady)}, max {max(steady)}; "
        f"total tokens: proxy {sum(proxied):,}, full replay {sum(replay):,} "
        f"({sum(replay) / sum(proxied):.1f}x)"
    )
    print(f"\n{report}\n\n{summary}")
    OUT.mkdir(exist_ok=True)
    (OUT / "context_cost.txt").write_text(f"{report}\n\n{summary}\n")
    draw(proxied, replay, args.budget)


def draw(proxied: list[int], replay: list[int], budget: int) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(pip install '.[bench]' for the PNG)", file=sys.stderr)
        return
    turns = range(1, len(proxied) + 1)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.plot(turns, replay, label="full history replayed (stateless client)")
    ax.plot(turns, proxied, label="through hermes-proxy")
    ax.axhline(budget, linestyle="--", linewidth=0.8, color="grey", label=f"budget ({budget})")
    ax.set_xlabel("turn")
    ax.set_ylabel("prompt tokens sent upstream")
    ax.set_title("Prompt tokens per turn")
    ax.legend()
    fig.tight_layout()
    fig.savefig(OUT / "context_cost.png", dpi=120)
    print(f"wrote {OUT / 'context_cost.png'}", file=sys.stderr)


if __name__ == "__main__":
    main()
