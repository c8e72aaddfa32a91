"""``GET /metrics``: Prometheus metrics, read from the proxy's own counters at scrape time.

The request path only bumps plain integers (on :class:`HttpStats`,
``Conversations.stats``, ``Compactor.stats``); this module turns them into
Prometheus metric families when scraped, so metrics cost the hot path
nothing beyond an addition. Each app has its own registry: two apps in one
process (tests, embedding) never share counters.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from proxy.app_state import Services, services
from proxy.stats import HttpStats

__all__ = ["StatusCounter", "metrics_endpoint"]


class StatusCounter:
    """ASGI middleware counting responses by status code."""

    def __init__(self, app: ASGIApp, stats: HttpStats) -> None:
        self.app = app
        self.stats = stats

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        responses = self.stats.responses

        async def counting_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                responses[message["status"]] += 1
            await send(message)

        await self.app(scope, receive, counting_send)


class _ProxyCollector(Collector):
    def __init__(self, http: HttpStats, services: Services) -> None:
        self.http = http
        self.svc = services

    def collect(self) -> Iterator[Metric]:
        responses = CounterMetricFamily(
            "hermes_http_responses", "HTTP responses sent, by status code.", labels=["code"]
        )
        for code, count in sorted(self.http.responses.items()):
            responses.add_metric([str(code)], count)
        yield responses
        svc = self.svc
        turns = svc.conversations.stats
        outcomes = CounterMetricFamily(
            "hermes_turns", "Session turns, by outcome.", labels=["outcome"]
        )
        for outcome in ("started", "committed", "failed", "replayed"):
            outcomes.add_metric([outcome], getattr(turns, outcome))
        yield outcomes
        yield CounterMetricFamily(
            "hermes_context_tokens",
            "Prompt tokens sent upstream on session turns (the proxy's own count).",
            value=turns.context_tokens,
        )
        errors = CounterMetricFamily(
            "hermes_upstream_errors",
            "Upstream failures on session turns, by kind.",
            labels=["kind"],
        )
        for kind, count in sorted(turns.upstream_errors.items()):
            errors.add_metric([kind], count)
        yield errors
        compaction = svc.compactor.stats
        runs = CounterMetricFamily(
            "hermes_compactions", "Background compactions, by result.", labels=["result"]
        )
        runs.add_metric(["applied"], compaction.applied)
        runs.add_metric(["conflict"], compaction.conflicts)
        yield runs
        yield CounterMetricFamily(
            "hermes_summarizer_failures",
            "Summarizer errors (the extractive summarizer ran instead).",
            value=compaction.failures,
        )
        yield CounterMetricFamily(
            "hermes_compaction_tokens",
            "Tokens spent by the llm summarizer.",
            value=compaction.tokens,
        )
        yield GaugeMetricFamily(
            "hermes_live_sessions", "Sessions cached in memory.", value=len(svc.conversations.cache)
        )
        yield GaugeMetricFamily(
            "hermes_background_tasks",
            "Turns being stored and compactions running.",
            value=len(svc.tasks),
        )


def metrics_endpoint(http: HttpStats) -> Callable[[Request], Awaitable[Response]]:
    async def metrics(request: Request) -> Response:
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_ProxyCollector(http, services(request)))
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return metrics
