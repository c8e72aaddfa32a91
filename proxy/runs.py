"""Runs: the state machine of asynchronous work on a thread, and its events.

::

    POST messages ──> running ──(answer, nothing pending)──> completed
                      │  ▲  └──(tool calls)──> waiting_on_human ──(input)──┐
                      │  └─────────────────────────────────────────────────┘
                      ├──(upstream keeps failing, or refuses)──> error
                      └──(cancel, also while waiting)──> cancelled

A thread has at most one active (running or waiting) run. A message sent
while one is running is *steering* input: stored in order and taken by the
run's next upstream call. Every transition happens in one
:meth:`~proxy.store.runs.RunStore.change` transaction together with the
events that report it, then live readers are notified. Execution is the
:class:`~proxy.run_worker.RunWorker`'s; this module only changes state and
signals the worker through :attr:`Runs.signals`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson

from proxy.errors import Conflict, InvalidRequest, NotFound, ProxyError, UpstreamStatus
from proxy.events import EventHub
from proxy.store import SqlStore
from proxy.store.runs import RunInput, RunRecord, RunTx
from proxy.threads import Threads

__all__ = ["Attempt", "Posted", "Runs", "StepResult", "describe_error", "run_view"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Posted:
    run: RunRecord
    input_id: int
    steering: bool
    replayed: bool = False


@dataclass(frozen=True, slots=True)
class Attempt:
    """A step attempt that has begun: the run as it now is and the step's inputs."""

    run: RunRecord
    inputs: list[RunInput]


@dataclass(frozen=True, slots=True)
class StepResult:
    """A completed upstream call, as stored (and replayed after a crash)."""

    message: dict[str, Any]
    seq: int
    usage: dict[str, Any] | None

    def to_json(self) -> bytes:
        return orjson.dumps({"message": self.message, "seq": self.seq, "usage": self.usage})

    @classmethod
    def from_json(cls, raw: bytes) -> StepResult:
        data = orjson.loads(raw)
        return cls(message=data["message"], seq=int(data["seq"]), usage=data.get("usage"))


def describe_error(exc: ProxyError) -> dict[str, Any]:
    """What an ``error`` event and a failed run say about ``exc``."""
    message = exc.message
    if isinstance(exc, UpstreamStatus):
        try:
            detail = orjson.loads(exc.raw)["error"]["message"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            detail = exc.raw[:500].decode(errors="replace")
        message = f"The upstream answered {exc.status}: {detail}"
    return {"message": message, "type": exc.type, "code": exc.code, "status": exc.status}


def required_action(run: RunRecord) -> dict[str, Any] | None:
    if run.status != "waiting_on_human":
        return None
    return {"type": "submit_tool_outputs", "tool_calls": run.waiting or []}


def run_view(run: RunRecord) -> dict[str, Any]:
    """A run as the API shows it."""
    return {
        "run_id": run.id,
        "object": "thread.run",
        "thread_id": run.thread_id,
        "status": run.status,
        "step": run.step,
        "attempt": run.attempt,
        "created_at": run.created_at,
        "updated_at": run.updated_at,
        "ended_at": run.ended_at,
        "error": run.error,
        "required_action": required_action(run),
        "options": run.request,
    }


class Runs:
    """Start, steer, resume and cancel runs; report every step as events."""

    def __init__(self, store: SqlStore, threads: Threads, hub: EventHub) -> None:
        self.store = store
        self.threads = threads
        self.hub = hub
        self.signals: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        """``("run", id)``: execute it; ``("cancel", id)``: stop executing it."""

    async def change(self, tenant: str, thread_id: str, fn: Callable[[RunTx], Awaitable[T]]) -> T:
        result = await self.store.change(tenant, thread_id, fn)
        self.hub.notify(tenant, thread_id)
        return result

    def wake(self, run_id: str) -> None:
        self.signals.put_nowait(("run", run_id))

    # -- what clients do ---------------------------------------------------

    async def post_message(
        self,
        tenant: str,
        thread_id: str,
        message: Mapping[str, Any],
        options: Mapping[str, Any],
        client_key: str | None = None,
    ) -> Posted:
        """Start a run with ``message``, or give it to the thread's active run."""
        thread_id = await self.threads.resolve(tenant, thread_id)

        async def post(t: RunTx) -> Posted:
            if client_key is not None:
                earlier = await t.input_by_client_key(client_key)
                if earlier is not None:
                    run = await t.run(earlier.run_id)
                    assert run is not None
                    return Posted(run, earlier.id, steering=False, replayed=True)
            run = await t.active_run()
            steering = run is not None and run.status == "running"
            if run is None:
                run = await t.create_run(options)
                t.emit(run.id, "run_status", {"status": "running", "previous": None, "step": 0})
            input_id = await t.add_input(run.id, message, client_key)
            t.emit(
                run.id,
                "message.received",
                {"input_id": input_id, "message": message, "steering": steering},
            )
            if run.status == "waiting_on_human":
                run = await self._resume(t, run)
            return Posted(run, input_id, steering)

        posted = await self.change(tenant, thread_id, post)
        if not posted.replayed:
            self.wake(posted.run.id)
        return posted

    async def submit_input(
        self,
        tenant: str,
        thread_id: str,
        run_id: str,
        tool_outputs: Sequence[Mapping[str, Any]],
        message: Mapping[str, Any] | None,
    ) -> RunRecord:
        """Resume a waiting run with tool outputs and/or a message.

        Every tool call the run waits on needs an output, unless a message is
        sent: then calls left without one are answered "not run" when the run
        resumes (see :func:`proxy.run_step.dangling_results`).
        """
        thread_id = await self.threads.resolve(tenant, thread_id)

        async def give(t: RunTx) -> RunRecord:
            run = await t.run(run_id)
            if run is None:
                raise NotFound(f"No run {run_id!r} on thread {thread_id!r}.", param="run_id")
            if run.status != "waiting_on_human":
                raise Conflict(
                    f"Run {run_id} is {run.status}; input is accepted only while it is "
                    "waiting_on_human (to steer a running run, POST to the thread's messages)."
                )
            calls = [call["id"] for call in run.waiting or ()]
            given = [str(output["tool_call_id"]) for output in tool_outputs]
            unknown = sorted(set(given) - set(calls))
            if unknown:
                raise InvalidRequest(
                    f"Run {run_id} is not waiting on tool call(s) {', '.join(unknown)}; it waits "
                    f"on {', '.join(calls) or 'no tool call'}.",
                    param="tool_outputs",
                )
            if len(set(given)) != len(given):
                raise InvalidRequest("Each tool call takes one output.", param="tool_outputs")
            missing = [call for call in calls if call not in given]
            if missing and message is None:
                raise InvalidRequest(
                    f"Missing output for tool call(s) {', '.join(missing)}; send them, or send "
                    "a message instead.",
                    param="tool_outputs",
                )
            by_id = {str(output["tool_call_id"]): output for output in tool_outputs}
            inputs: list[Mapping[str, Any]] = [
                {"role": "tool", "tool_call_id": call, "content": by_id[call]["output"]}
                for call in calls
                if call in by_id
            ]
            if message is not None:
                inputs.append(message)
            for item in inputs:
                input_id = await t.add_input(run.id, item)
                t.emit(
                    run.id,
                    "message.received",
                    {"input_id": input_id, "message": item, "steering": False},
                )
            return await self._resume(t, run)

        run = await self.change(tenant, thread_id, give)
        self.wake(run.id)
        return run

    async def cancel(self, tenant: str, thread_id: str, run_id: str) -> RunRecord:
        thread_id = await self.threads.resolve(tenant, thread_id)

        async def stop(t: RunTx) -> RunRecord:
            run = await t.run(run_id)
            if run is None:
                raise NotFound(f"No run {run_id!r} on thread {thread_id!r}.", param="run_id")
            if not run.active:
                raise Conflict(f"Run {run_id} has already ended ({run.status}).")
            previous = run.status
            run = await t.update(
                run,
                status="cancelled",
                ended_at=t.now,
                waiting=None,
                lease_owner=None,
                lease_until=None,
            )
            t.emit(
                run.id,
                "run_status",
                {"status": "cancelled", "previous": previous, "step": run.step},
            )
            return run

        run = await self.change(tenant, thread_id, stop)
        self.signals.put_nowait(("cancel", run.id))
        return run

    async def _resume(self, t: RunTx, run: RunRecord) -> RunRecord:
        run = await t.update(
            run, status="running", waiting=None, lease_owner=None, lease_until=None
        )
        t.emit(
            run.id,
            "run_status",
            {"status": "running", "previous": "waiting_on_human", "step": run.step},
        )
        return run

    # -- what the worker does ----------------------------------------------

    async def begin_attempt(self, run: RunRecord, owner: str) -> Attempt | None:
        """Count an attempt at the run's next step and give it the pending inputs."""

        async def begin(t: RunTx) -> Attempt | None:
            current = await t.run(run.id)
            if current is None or current.status != "running" or current.lease_owner != owner:
                return None
            inputs = await t.take_inputs(current.id, current.step)
            current = await t.update(current, attempt=current.attempt + 1)
            return Attempt(current, inputs)

        return await self.change(run.tenant, run.thread_id, begin)

    async def delta(self, run: RunRecord, attempt: int, content: str) -> None:
        data = {"step": run.step, "attempt": attempt, "content": content}

        async def emit(t: RunTx) -> None:
            t.emit(run.id, "message.delta", data)

        await self.change(run.tenant, run.thread_id, emit)

    async def finish_step(
        self, run: RunRecord, result: StepResult, answer_key: str
    ) -> RunRecord | None:
        """Report a stored answer and move on: another step, waiting, or completed.

        ``answer_key`` is the idempotency key the answer was stored under, for
        a replay after a crash; once the step is reported it is not needed.
        """
        step = run.step

        async def finish(t: RunTx) -> RunRecord | None:
            current = await t.run(run.id)
            if current is None or current.step != step:
                return current  # reported before a crash
            await t.forget_answer(answer_key)
            t.emit(
                run.id,
                "message.completed",
                {"step": step, "message": result.message, "seq": result.seq, "usage": result.usage},
            )
            moved = {"step": step + 1, "attempt": 0}
            if current.status != "running":
                return await t.update(current, **moved)  # cancelled meanwhile
            released = {"lease_owner": None, "lease_until": None}
            tool_calls = result.message.get("tool_calls")
            if tool_calls:
                current = await t.update(
                    current, status="waiting_on_human", waiting=tool_calls, **moved, **released
                )
            elif await t.pending_inputs(run.id):
                return await t.update(current, **moved)  # steering input: one more step
            else:
                current = await t.update(
                    current, status="completed", ended_at=t.now, **moved, **released
                )
            t.emit(
                run.id,
                "run_status",
                {
                    "status": current.status,
                    "previous": "running",
                    "step": current.step,
                    "required_action": required_action(current),
                },
            )
            return current

        return await self.change(run.tenant, run.thread_id, finish)

    async def attempt_failed(
        self, run: RunRecord, attempt: int, error: dict[str, Any], *, retrying: bool
    ) -> RunRecord | None:
        """Report a failed attempt; without a retry left, the run ends in error."""
        step = run.step

        async def failed(t: RunTx) -> RunRecord | None:
            current = await t.run(run.id)
            if current is None or current.status != "running" or current.step != step:
                return current
            t.emit(
                run.id,
                "error",
                {"step": step, "attempt": attempt, "error": error, "retrying": retrying},
            )
            if retrying:
                return current
            current = await t.update(
                current,
                status="error",
                error=error,
                ended_at=t.now,
                lease_owner=None,
                lease_until=None,
            )
            t.emit(
                run.id,
                "run_status",
                {"status": "error", "previous": "running", "step": step, "error": error},
            )
            return current

        return await self.change(run.tenant, run.thread_id, failed)
