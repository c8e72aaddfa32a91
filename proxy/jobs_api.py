"""``/api/jobs``: scheduled prompts, per tenant.

Every route is scoped by the caller's tenant: another tenant's job is a 404,
never a 403, so job names and ids do not leak across keys. A job is named by
its id (``job_…``) or by its name.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from proxy.app_state import Services, services
from proxy.auth import tenant_of
from proxy.chat import read_body
from proxy.errors import InvalidRequest
from proxy.jobs import JobRunner, Jobs, job_json, run_json
from proxy.store.jobs import JobRecord

__all__ = ["job_routes"]

MAX_RUNS_PAGE = 100


def _json(data: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(data), status_code=status, media_type="application/json")


async def _body(request: Request, svc: Services) -> dict[str, Any]:
    raw = await read_body(request, svc.settings.max_body_bytes)
    try:
        data = orjson.loads(raw or b"{}")
    except orjson.JSONDecodeError as exc:
        raise InvalidRequest(f"The request body is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise InvalidRequest("The request body must be a JSON object.")
    return data


async def _job(request: Request) -> tuple[Services, Jobs, JobRecord]:
    svc = services(request)
    jobs = Jobs(svc.store, svc.clock)
    job = await jobs.get(tenant_of(request, svc.tenants), request.path_params["id"])
    return svc, jobs, job


def _int_param(request: Request, name: str, default: int | None) -> int | None:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise InvalidRequest(f"'{name}' must be an integer.", param=name) from None


async def create_job(request: Request) -> Response:
    svc = services(request)
    tenant = tenant_of(request, svc.tenants)
    job = await Jobs(svc.store, svc.clock).create(tenant, await _body(request, svc))
    return _json(job_json(job), 201)


async def list_jobs(request: Request) -> Response:
    svc = services(request)
    jobs = await svc.store.list_jobs(tenant_of(request, svc.tenants))
    return _json({"object": "list", "data": [job_json(job) for job in jobs]})


async def get_job(request: Request) -> Response:
    _, _, job = await _job(request)
    return _json(job_json(job))


async def update_job(request: Request) -> Response:
    svc, jobs, job = await _job(request)
    return _json(job_json(await jobs.update(job, await _body(request, svc))))


async def delete_job(request: Request) -> Response:
    svc, _, job = await _job(request)
    await svc.store.delete_job(job.id)
    return _json({"id": job.id, "object": "job.deleted", "deleted": True})


async def pause_job(request: Request) -> Response:
    _, jobs, job = await _job(request)
    return _json(job_json(await jobs.pause(job)))


async def resume_job(request: Request) -> Response:
    _, jobs, job = await _job(request)
    return _json(job_json(await jobs.resume(job)))


async def run_job(request: Request) -> Response:
    """Run the job now, off its schedule: 202 with the run, or with ``?wait=true`` 200 once done."""
    svc, _, job = await _job(request)
    wait = request.query_params.get("wait", "").lower() in ("1", "true", "yes")
    run = await svc.store.start_run(job, svc.clock())
    runner = JobRunner(svc.store, svc.conversations, svc.upstream, svc.clock)
    # Owned by the app's task set: the run finishes even if this client goes away.
    task = svc.tasks.spawn(runner.execute(job, run), name=f"job:{job.id}:{run.id}")
    if not wait:
        return _json(run_json(run), 202)
    return _json(run_json(await asyncio.shield(task)))


async def list_runs(request: Request) -> Response:
    svc, _, job = await _job(request)
    limit = _int_param(request, "limit", 20)
    if limit is None or not 1 <= limit <= MAX_RUNS_PAGE:
        raise InvalidRequest(f"'limit' must be between 1 and {MAX_RUNS_PAGE}.", param="limit")
    runs = await svc.store.list_job_runs(job.id, limit + 1, _int_param(request, "before", None))
    return _json(
        {
            "object": "list",
            "data": [run_json(run) for run in runs[:limit]],
            "has_more": len(runs) > limit,
        }
    )


job_routes = [
    Route("/api/jobs", create_job, methods=["POST"]),
    Route("/api/jobs", list_jobs, methods=["GET"]),
    Route("/api/jobs/{id}", get_job, methods=["GET"]),
    Route("/api/jobs/{id}", update_job, methods=["PATCH"]),
    Route("/api/jobs/{id}", delete_job, methods=["DELETE"]),
    Route("/api/jobs/{id}/pause", pause_job, methods=["POST"]),
    Route("/api/jobs/{id}/resume", resume_job, methods=["POST"]),
    Route("/api/jobs/{id}/run", run_job, methods=["POST"]),
    Route("/api/jobs/{id}/runs", list_runs, methods=["GET"]),
]
