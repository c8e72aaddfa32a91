"""``GET /metrics`` reports what the proxy did, in Prometheus' text format."""

from __future__ import annotations

from tests import http
from tests.conftest import Proxy
from tests.fake_upstream import FakeUpstream, Reply


def sample(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " ") or line == name:
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in metrics:\n{text}")


def test_metrics_count_turns_tokens_errors_and_responses(
    proxy: Proxy, upstream: FakeUpstream
) -> None:
    client = proxy.client()
    for text in ("one", "two"):
        client.chat.completions.create(
            model="hermes",
            messages=[{"role": "user", "content": text}],
            extra_headers={"X-Hermes-Session-Id": "m"},
        )
    upstream.script.append(Reply(status=500))
    failed = http.post(
        f"{proxy.v1}/chat/completions",
        json={"model": "hermes", "messages": [{"role": "user", "content": "three"}]},
        headers={"X-Hermes-Session-Id": "m"},
    )
    assert failed.status_code == 500
    proxy.settle()

    response = http.get(f"{proxy.url}/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    assert sample(text, 'hermes_turns_total{outcome="committed"}') == 2
    assert sample(text, 'hermes_turns_total{outcome="failed"}') == 1
    assert sample(text, 'hermes_upstream_errors_total{kind="UpstreamStatus"}') == 1
    assert sample(text, 'hermes_http_responses_total{code="200"}') == 2
    assert sample(text, 'hermes_http_responses_total{code="500"}') == 1
    # 3 + "user" + "one" + 3 = 8 for the first turn; the second carries the first.
    assert sample(text, "hermes_context_tokens_total") > 16
    assert sample(text, "hermes_live_sessions") == 1
