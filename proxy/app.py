"""The application factory."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Protocol

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from compaction import (
    Budget,
    Extractive,
    ExtractiveSummarizer,
    LLMSummarizer,
    MemoryRenderer,
    Summarizer,
    TiktokenCounter,
)
from compaction.summarizer import Completion
from proxy.app_state import Services, services
from proxy.chat import create_chat_completion, list_models, passthrough
from proxy.compactor import Compactor
from proxy.config import Settings
from proxy.errors import NotFound, ProxyError, error_response
from proxy.events import EventHub
from proxy.indexer import FtsIndexer
from proxy.jobs_api import job_routes
from proxy.live import SessionCache
from proxy.metrics import StatusCounter, metrics_endpoint
from proxy.recall import ArchiveRecall
from proxy.resets import AutoReset, Resetter
from proxy.run_worker import RunWorker
from proxy.runs import Runs
from proxy.scheduler import Scheduler
from proxy.sessions_api import SESSION_ROUTES
from proxy.state_api import get_session_state
from proxy.stats import HttpStats
from proxy.store import SqlStore, database_for
from proxy.tasks import TaskSet
from proxy.threads import Threads
from proxy.threads_api import thread_routes
from proxy.turns import Conversations
from proxy.upstream import Upstream

__all__ = ["Worker", "create_app"]

logger = logging.getLogger("hermes")

# How long shutdown waits for turns still being stored.
DRAIN_SECONDS = 10.0


class Worker(Protocol):
    """A long-lived background service owned by the app (a scheduler, a run executor)."""

    async def start(self, services: Services) -> None: ...

    async def stop(self) -> None: ...


def workers_for(settings: Settings) -> list[Worker]:
    """The background services this configuration runs, started in order."""
    workers: list[Worker] = [FtsIndexer(), RunWorker(settings)]
    if settings.jobs_tick > 0:
        workers.append(Scheduler(settings.jobs_tick))
    return workers


def budget_of(settings: Settings) -> Budget:
    return Budget(
        settings.budget,
        memory_share=settings.memory_share,
        recall_share=settings.recall_share,
        new_share=settings.new_share,
        step=settings.compaction_step,
    )


def summarizer_for(
    settings: Settings,
    upstream: Upstream,
    renderer: MemoryRenderer,
    extractive: ExtractiveSummarizer,
) -> Summarizer:
    if settings.summarizer == "extractive":
        return Extractive(extractive)
    model = settings.summary_model or settings.model

    async def complete(messages: list[dict[str, object]]) -> Completion:
        data = await upstream.post_json(
            "chat/completions",
            {"model": model, "messages": messages, "temperature": 0},
            {**upstream.auth_headers(None), "X-Hermes-Purpose": "compaction"},
        )
        usage = data.get("usage") or {}
        return Completion(
            text=str(data["choices"][0]["message"].get("content") or ""),
            tokens=int(usage.get("total_tokens") or 0),
        )

    return LLMSummarizer(complete, renderer, extractive)


def create_app(
    settings: Settings,
    *,
    store: SqlStore | None = None,
    clock: Callable[[], float] = time.time,
) -> Starlette:
    """Build the proxy. The lifespan opens the store and upstream client and owns the workers.

    ``clock`` is the time schedules run by; tests pass a fake one.
    """

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[dict[str, Services]]:
        own_store = store or SqlStore(database_for(settings.db, pool_size=settings.db_pool_size))
        upstream = Upstream(
            settings.upstream,
            api_key=settings.upstream_api_key,
            timeout=settings.upstream_timeout,
        )
        tasks = TaskSet()
        counter = TiktokenCounter()
        renderer = MemoryRenderer(counter)
        extractive = ExtractiveSummarizer(renderer)
        budget = budget_of(settings)
        cache = SessionCache()
        await own_store.open()
        await upstream.open()
        compactor = Compactor(
            store=own_store,
            summarizer=summarizer_for(settings, upstream, renderer, extractive),
            renderer=renderer,
            budget=budget,
            cache=cache,
            tasks=tasks,
        )
        conversations = Conversations(
            store=own_store,
            counter=counter,
            renderer=renderer,
            extractive=extractive,
            compactor=compactor,
            budget=budget,
            tasks=tasks,
            cache=cache,
            model_alias=settings.model,
        )
        # With a shared database other replicas' events arrive by polling (see proxy.events).
        hub = EventHub(poll_interval=None if own_store.db.dialect == "sqlite" else 1.0)
        runs = Runs(own_store, Threads(own_store, conversations, hub), hub)
        conversations.auto_reset = AutoReset(
            Resetter(own_store, compactor.summarizer, budget, cache=cache),
            settings.reset_policies,
        )
        if settings.recall:
            conversations.recall = ArchiveRecall(own_store, renderer)
        bundle = Services(
            settings=settings,
            store=own_store,
            upstream=upstream,
            conversations=conversations,
            compactor=compactor,
            tasks=tasks,
            tenants=settings.tenants,
            runs=runs,
            clock=clock,
        )
        # Also on the app, for whoever embeds it (and for tests to observe).
        app.state.services = bundle
        started: list[Worker] = []
        app.state.workers = started
        try:
            for worker in workers_for(settings):
                await worker.start(bundle)
                started.append(worker)
            yield {"services": bundle}
        finally:
            for worker in reversed(started):
                await worker.stop()
            await tasks.drain(DRAIN_SECONDS)
            await upstream.close()
            await own_store.close()

    http_stats = HttpStats()
    routes = [
        Route("/v1/chat/completions", create_chat_completion, methods=["POST"]),
        Route("/v1/models", list_models, methods=["GET"]),
        *thread_routes(),
        Route(
            "/v1/{path:path}",
            passthrough,
            methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
        ),
        *job_routes,
        Route("/api/sessions/{key:path}/state", get_session_state, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/metrics", metrics_endpoint(http_stats), methods=["GET"]),
        *SESSION_ROUTES,
    ]
    return Starlette(
        routes=routes,
        middleware=[Middleware(StatusCounter, stats=http_stats)],
        lifespan=lifespan,
        exception_handlers={
            Exception: error_response,
            ProxyError: error_response,
            404: not_found,
            405: method_not_allowed,
        },
    )


async def healthz(request: Request) -> Response:
    svc = services(request)
    await svc.store.db.fetchone("SELECT 1")
    return JSONResponse({"status": "ok"})


async def not_found(request: Request, exc: Exception) -> Response:
    return NotFound(f"No route for {request.method} {request.url.path}.").response()


async def method_not_allowed(request: Request, exc: Exception) -> Response:
    error = ProxyError(f"Method {request.method} is not allowed on {request.url.path}.")
    error.status = 405
    error.type = "invalid_request_error"
    return error.response()
