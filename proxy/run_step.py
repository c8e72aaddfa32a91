"""One step of a run: one upstream call through the session turn pipeline.

A step takes the run's pending inputs, begins a turn with them
(:meth:`~proxy.turns.Conversations.begin`: lock, merge, context within budget,
pending turn), streams the upstream's answer — reporting text as
``message.delta`` events, coalesced every :data:`FLUSH_SECONDS` — and commits
the turn. The commit stores, in the same transaction, an idempotency record
under the step's key (``hermes-run:<run>:<step>``) holding the answer. That is
what makes a crash harmless at any point:

* before the commit, the step is simply redone: its inputs are still the
  run's (marked with the step number), and the pending turn the dead process
  left is dropped first, so the user's message is neither lost nor doubled;
* after the commit, :meth:`Conversations.begin` (and the check before it)
  finds the stored answer, so the completed upstream call is never repeated.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from contextlib import suppress
from typing import Any

import orjson

from compaction import Message
from proxy.errors import ProxyError, StorageError, UpstreamError, UpstreamStatus
from proxy.runs import Runs, StepResult, describe_error
from proxy.sse import StreamAccumulator
from proxy.store.runs import RunInput, RunRecord
from proxy.turns import Conversations, TurnRequest
from proxy.upstream import Upstream, UpstreamResponse

__all__ = ["FLUSH_SECONDS", "StepRunner", "dangling_results", "step_key", "step_messages"]

logger = logging.getLogger("hermes.runs")

FLUSH_SECONDS = 0.05
# Upstream calls that runs may have in flight at once (more wait their turn).
MAX_CONCURRENT_STEPS = 32
NOT_RUN = "No output: this tool call was not run."
# Stored messages searched for unanswered tool calls.
TAIL = 16
STORED_KEYS = ("role", "content", "tool_calls")


def step_key(run: RunRecord) -> str:
    return f"hermes-run:{run.id}:{run.step}"


def dangling_results(
    tail: Sequence[Message], outputs: Mapping[str, Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Tool results for the last assistant message's calls, in call order.

    ``outputs`` are the results the run was given, by call id; a call with
    none (the human answered with a message instead, or the run waiting on
    it was cancelled) is answered :data:`NOT_RUN`, since the upstream refuses
    a conversation with unanswered tool calls.
    """
    for i in range(len(tail) - 1, -1, -1):
        message = tail[i]
        if message.role == "user":
            return []  # the conversation went on: nothing dangles
        if message.role != "assistant":
            continue
        answered = {m.tool_call_id for m in tail[i + 1 :] if m.role == "tool"}
        return [
            dict(
                outputs.get(call["id"])
                or {"role": "tool", "tool_call_id": call["id"], "content": NOT_RUN}
            )
            for call in message.tool_calls or ()
            if call.get("id") not in answered
        ]
    return []


def step_messages(
    tail: Sequence[Message], inputs: Sequence[RunInput], instructions: str | None
) -> list[Message]:
    """What a step sends: instructions, tool results (first, as the API requires), the rest."""
    outputs = {i.message["tool_call_id"]: i.message for i in inputs if i.message["role"] == "tool"}
    results = dangling_results(tail, outputs)
    stale = set(outputs) - {r["tool_call_id"] for r in results}
    if stale:
        logger.warning("dropping outputs for tool calls nobody waits on: %s", sorted(stale))
    messages = [{"role": "system", "content": instructions}] if instructions else []
    messages += results
    messages += [i.message for i in inputs if i.message["role"] != "tool"]
    return [Message.from_openai(m) for m in messages]


def upstream_body(options: Mapping[str, Any]) -> dict[str, Any]:
    body = {k: v for k, v in options.items() if k != "instructions"}
    body.setdefault("model", "hermes")
    body["stream"] = True
    body["stream_options"] = {"include_usage": True}
    return body


def retryable(exc: ProxyError) -> bool:
    if isinstance(exc, UpstreamStatus):
        return exc.status in (408, 409, 425, 429) or exc.status >= 500
    return isinstance(exc, UpstreamError | StorageError)


class StepRunner:
    """Executes runs step by step; see the module docstring for the crash story."""

    def __init__(
        self,
        runs: Runs,
        conversations: Conversations,
        upstream: Upstream,
        *,
        max_attempts: int,
        retry_delay: float,
    ) -> None:
        self.runs = runs
        self.store = runs.store
        self.conversations = conversations
        self.upstream = upstream
        self.max_attempts = max_attempts
        self.retry_delay = retry_delay
        self._slots = asyncio.Semaphore(MAX_CONCURRENT_STEPS)

    async def run_step(self, run: RunRecord, owner: str) -> RunRecord | None:
        """Execute the run's next step; return the run as it is afterwards."""
        stored = await self.store.idempotent_response(run.tenant, step_key(run))
        if stored is None:
            attempt = await self.runs.begin_attempt(run, owner)
            if attempt is None:
                return await self.store.get_run(run.id)
            run = attempt.run
            if run.attempt > self.max_attempts or not attempt.inputs:
                reason = (
                    f"Step {run.step} was interrupted {run.attempt - 1} times; giving up."
                    if attempt.inputs
                    else "The run has no input left to answer."
                )
                error = {"message": reason, "type": "server_error", "code": "run_interrupted"}
                return await self.runs.attempt_failed(run, run.attempt, error, retrying=False)
            try:
                async with self._slots:
                    stored = await self._call(run, attempt.inputs)
            except ProxyError as exc:
                retrying = retryable(exc) and run.attempt < self.max_attempts
                logger.warning(
                    "run %s step %d attempt %d failed: %s", run.id, run.step, run.attempt, exc
                )
                after = await self.runs.attempt_failed(
                    run, run.attempt, describe_error(exc), retrying=retrying
                )
                if retrying:
                    await asyncio.sleep(min(60.0, self.retry_delay * 2 ** (run.attempt - 1)))
                return after
        return await self.runs.finish_step(run, StepResult.from_json(stored), step_key(run))

    async def _call(self, run: RunRecord, inputs: Sequence[RunInput]) -> bytes:
        key = step_key(run)
        # A pending turn under this key was left by a process that died mid-step.
        await self.store.drop_pending_turns(key)
        record = await self.store.live_session(run.tenant, run.thread_id)
        tail = await self.store.load_tail(record.id, TAIL) if record else []
        request = TurnRequest(
            tenant=run.tenant,
            key=run.thread_id,
            body=upstream_body(run.request),
            source="thread",
            idempotency_key=key,
        )
        incoming = step_messages(tail, inputs, run.request.get("instructions"))
        turn = await self.conversations.begin(request, incoming)
        if isinstance(turn, bytes):
            return turn
        try:
            response = await self.upstream.request(
                "POST",
                "chat/completions",
                body=orjson.dumps(turn.upstream_body),
                headers={"Content-Type": "application/json", **self.upstream.auth_headers(None)},
            )
            await response.raise_for_status()
            acc = await self._stream(run, response)
            if acc.error is not None:
                detail = acc.error.get("message") if isinstance(acc.error, dict) else acc.error
                raise UpstreamError(f"The upstream failed mid-stream: {detail}")
            if not acc.done:
                raise UpstreamError("The upstream ended the stream before [DONE].")
            answer = acc.message()
            message = {k: answer[k] for k in STORED_KEYS if k in answer}
            result = StepResult(message, seq=turn.new[-1].seq + 1, usage=acc.usage)
            raw = result.to_json()
            await turn.commit(message, acc.usage, raw)
            return raw
        finally:
            turn.fail()  # a no-op once committed

    async def _stream(self, run: RunRecord, response: UpstreamResponse) -> StreamAccumulator:
        """Read the answer, reporting its text as coalesced ``message.delta`` events."""
        acc = StreamAccumulator()
        buffered: list[str] = []
        since = 0.0
        chunks = response.chunks()
        reading: asyncio.Future[bytes | None] | None = None
        try:
            while True:
                if reading is None:
                    reading = asyncio.ensure_future(anext(chunks, None))
                timeout = max(0.0, since + FLUSH_SECONDS - time.monotonic()) if buffered else None
                done, _ = await asyncio.wait({reading}, timeout=timeout)
                if done:
                    finished, reading = reading, None
                    chunk = finished.result()
                    if chunk is None:
                        break
                    before = len(acc.content)
                    acc.feed(chunk)
                    if len(acc.content) > before:
                        since = since if buffered else time.monotonic()
                        buffered += acc.content[before:]
                if buffered and time.monotonic() - since >= FLUSH_SECONDS:
                    await self.runs.delta(run, run.attempt, "".join(buffered))
                    buffered.clear()
        finally:
            if reading is not None:
                reading.cancel()
                with suppress(asyncio.CancelledError, ProxyError):
                    await reading
            response.close()
        if buffered:
            await self.runs.delta(run, run.attempt, "".join(buffered))
        return acc
