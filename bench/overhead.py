"""What the proxy adds: latency and throughput against the same lean upstream called directly.

    python -m bench.overhead [--rounds 3] [--seconds 5]

Direct and proxied runs alternate within one run of this script (the
machine is shared and noisy: compare side by side, not across runs). The
proxied requests carry ``X-Hermes-Session-Id`` spread over 100 sessions, so
every one is a full stateful turn: session lock, merge, prompt built within
budget, pending write, upstream call, stored answer, background compaction.
"""

from __future__ import annotations

import argparse
import http.client
import json
import time
from urllib.parse import urlsplit

from bench._common import OUT, lean_upstream, median, proxy, table, wrk

BODY = {"model": "hermes", "messages": [{"role": "user", "content": "How are you doing today?"}]}

SCRIPT = """
local body = '%(body)s'
local sessions = %(sessions)d
local counter = 0
request = function()
  counter = counter + 1
  local headers = {["Content-Type"] = "application/json"}
  if sessions > 0 then
    headers["X-Hermes-Session-Id"] = "bench-" .. (counter %% sessions)
  end
  return wrk.format("POST", "/v1/chat/completions", headers, body)
end
"""


def lua(stream: bool, sessions: int) -> str:
    body = json.dumps({**BODY, "stream": stream})
    return SCRIPT % {"body": body, "sessions": sessions}


def first_byte_ms(base: str, sessions: int, count: int) -> tuple[float, float]:
    """Median and p99 time to the first SSE event, one request at a time."""
    url = urlsplit(base)
    conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port)
    body = json.dumps({**BODY, "stream": True})
    samples = []
    for i in range(count):
        headers = {"Content-Type": "application/json"}
        if sessions:
            headers["X-Hermes-Session-Id"] = f"ttfb-{i % sessions}"
        start = time.perf_counter()
        conn.request("POST", f"{url.path}/chat/completions", body, headers)
        response = conn.getresponse()
        first = response.read1(65536)
        samples.append((time.perf_counter() - start) * 1000)
        assert b"data:" in first, first
        response.read()
    conn.close()
    samples.sort()
    return median(samples), samples[int(len(samples) * 0.99) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--budget", type=int, default=4000)
    args = parser.parse_args()

    runs: dict[str, list[float]] = {}

    def record(name: str, value: float) -> None:
        runs.setdefault(name, []).append(value)

    with lean_upstream() as upstream, proxy(upstream, "--budget", str(args.budget)) as proxied:
        # Warm both (tokenizer load, connection pools, first sessions).
        wrk(proxied + "/chat/completions", lua(False, 100), connections=4, seconds=2)
        for r in range(args.rounds):
            order = [("direct", upstream, 0), ("proxy", proxied, 100)]
            if r % 2:
                order.reverse()
            for name, base, sessions in order:
                for stream in (False, True):
                    kind = "stream" if stream else "json"
                    res = wrk(
                        base + "/chat/completions",
                        lua(stream, sessions),
                        connections=1,
                        seconds=args.seconds,
                    )
                    assert res.errors == 0, f"{name}: {res.errors} errors"
                    record(f"{name} c1 {kind} p50", res.p50_ms)
                    record(f"{name} c1 {kind} p99", res.p99_ms)
                ttfb50, ttfb99 = first_byte_ms(base, sessions, 400)
                record(f"{name} ttfb p50", ttfb50)
                record(f"{name} ttfb p99", ttfb99)
                res = wrk(
                    base + "/chat/completions",
                    lua(False, sessions),
                    connections=32,
                    seconds=args.seconds,
                )
                assert res.errors == 0, f"{name}: {res.errors} errors"
                record(f"{name} c32 rps", res.rps)
                record(f"{name} c32 p50", res.p50_ms)

    m = {k: median(v) for k, v in runs.items()}
    rows = []
    for label, key, unit, target in (
        ("c=1 JSON p50", "c1 json p50", "ms", "added ≤ 1.5 ms"),
        ("c=1 JSON p99", "c1 json p99", "ms", "added ≤ 5 ms"),
        ("c=1 stream p50 (whole)", "c1 stream p50", "ms", ""),
        ("c=1 stream first byte p50", "ttfb p50", "ms", "added ≤ 2 ms"),
        ("c=1 stream first byte p99", "ttfb p99", "ms", ""),
        ("c=32 JSON p50", "c32 p50", "ms", ""),
    ):
        direct, prox = m[f"direct {key}"], m[f"proxy {key}"]
        rows.append((label, direct, prox, prox - direct, unit, target))
    rows.append(
        (
            "c=32 throughput",
            m["direct c32 rps"],
            m["proxy c32 rps"],
            m["proxy c32 rps"] / m["direct c32 rps"],
            "req/s (ratio)",
            "proxy ≥ 1,000 req/s",
        )
    )
    report = table(("measure", "direct", "via proxy", "added", "unit", "target"), rows)
    print(
        f"\nmedians of {args.rounds} alternating rounds, {args.seconds:.0f} s each, "
        f"budget {args.budget}, 100 sessions\n"
    )
    print(report)
    OUT.mkdir(exist_ok=True)
    (OUT / "overhead.txt").write_text(report + "\n")
    (OUT / "overhead.json").write_text(json.dumps(runs, indent=1))


if __name__ == "__main__":
    main()
