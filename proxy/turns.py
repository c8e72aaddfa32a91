"""One session turn, from the lock to the stored answer (DESIGN §2, steps 3–8).

:meth:`Conversations.begin` takes the session's lock, loads the session,
merges the incoming messages, builds the prompt within budget and writes the
user's messages as a pending turn. The returned :class:`Turn` keeps the lock
until :meth:`Turn.finish` (store the answer, then maybe compact) or
:meth:`Turn.fail` (drop the pending turn) — exactly one of them, exactly once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, replace
from typing import Any

import orjson

from compaction import (
    Budget,
    ContextTooLarge,
    ExtractiveSummarizer,
    MemoryRenderer,
    Message,
    TokenCounter,
    build_context,
    message_tokens,
)
from compaction.tokens import REPLY_PRIMING
from proxy.compactor import Compactor
from proxy.errors import ContextLengthExceeded, InvalidRequest, StorageError
from proxy.live import TAIL, LiveSession, SessionCache
from proxy.merge import new_messages, split_system
from proxy.resets import AutoReset
from proxy.stats import TurnStats
from proxy.store import SessionRecord, SqlStore, TurnCommit
from proxy.tasks import TaskSet

__all__ = ["Conversations", "Recall", "Turn", "TurnRequest"]

logger = logging.getLogger("hermes.turns")

# Fields of an assistant message worth storing (``refusal``/``audio`` are not replayed).
ASSISTANT_KEYS = ("role", "content", "tool_calls", "name")


Recall = Callable[[LiveSession, Sequence[Message]], Awaitable[Sequence[Message]]]
"""Finds archived messages (older than the window) relevant to the new ones."""


@dataclass(frozen=True, slots=True)
class TurnRequest:
    tenant: str
    key: str
    body: Mapping[str, Any]
    source: str = "api"
    user_id: str | None = None
    idempotency_key: str | None = None


class Turn:
    """A turn in flight; holds its session's lock until it is finished or failed."""

    def __init__(
        self,
        conversations: Conversations,
        live: LiveSession,
        request: TurnRequest,
        new: list[Message],
        system: tuple[Message, ...] | None,
        upstream_body: dict[str, Any],
        context_tokens: int,
        pending_id: str,
        release: Callable[[], Awaitable[Any]],
        history_floor: int = 0,
    ) -> None:
        self.conversations = conversations
        self.live = live
        self.request = request
        self.new = new
        self.system = system
        self.upstream_body = upstream_body
        self.context_tokens = context_tokens
        self.pending_id = pending_id
        self._release = release
        self.history_floor = history_floor
        self.ended = False

    @property
    def session_id(self) -> str:
        return self.live.id

    def finish(
        self,
        assistant: Mapping[str, Any],
        usage: Mapping[str, Any] | None,
        response: bytes | None = None,
    ) -> None:
        """Store the answer in the background; the lock is released once it is stored."""
        if self.ended:
            return
        self.ended = True
        self.conversations.tasks.spawn(
            self._commit(assistant, usage, response), name=f"commit:{self.session_id}"
        )

    async def commit(
        self,
        assistant: Mapping[str, Any],
        usage: Mapping[str, Any] | None,
        response: bytes | None = None,
    ) -> Message:
        """Store the answer now and return it as stored (for jobs and runs)."""
        if self.ended:
            raise RuntimeError("this turn has already ended")
        self.ended = True
        answer = await self._commit(assistant, usage, response)
        if answer is None:
            raise StorageError("The answer could not be stored.")
        return answer

    def fail(self) -> None:
        """Forget the pending turn in the background, then release the lock."""
        if self.ended:
            return
        self.ended = True
        self.conversations.tasks.spawn(self._abort(), name=f"abort:{self.session_id}")

    async def _commit(
        self, assistant: Mapping[str, Any], usage: Mapping[str, Any] | None, response: bytes | None
    ) -> Message | None:
        conv = self.conversations
        try:
            now = time.time()
            last = self.new[-1]
            fields = {k: assistant[k] for k in ASSISTANT_KEYS if assistant.get(k) is not None}
            fields["role"] = "assistant"
            fields.setdefault("content", None)
            answer = Message.from_openai(
                fields,
                tokens=message_tokens(fields, conv.counter),
                seq=last.seq + 1,
                turn=last.turn,
                created_at=now,
            )
            messages = [*self.new, answer]
            usage = usage or {}
            idempotency = None
            if self.request.idempotency_key and response is not None:
                idempotency = (self.request.tenant, self.request.idempotency_key, response)
            await conv.store.commit_turn(
                TurnCommit(
                    session_id=self.session_id,
                    pending_id=self.pending_id,
                    messages=messages,
                    system=self.system,
                    model=str(self.upstream_body.get("model") or "") or None,
                    input_tokens=int(usage.get("prompt_tokens") or self.context_tokens),
                    output_tokens=int(usage.get("completion_tokens") or answer.tokens),
                    updated_at=now,
                    idempotency=idempotency,
                    sent_tokens=self.context_tokens,
                    history_floor=self.history_floor,
                )
            )
            self.live.append(messages)
            conv.stats.committed += 1
            conv.stats.context_tokens += self.context_tokens
            if self.system is not None:
                self.live.system = self.system
            # Cheap check only: the compactor works out what to fold.
            memory_tokens = conv.renderer.render(self.live.memory).tokens
            limit = conv.budget.window_tokens(self.live.system_tokens, memory_tokens)
            if self.live.window_tokens > limit:
                conv.compactor.request(self.live.tenant, self.live.key, self.live.id)
            return answer
        except Exception:
            # The answer reached the client but is not stored: the pending turn
            # keeps the question, and the session is reloaded next time.
            logger.exception("storing a turn of session %s failed", self.session_id)
            conv.cache.drop(self.live.tenant, self.live.key)
            return None
        finally:
            await self._release()

    async def _abort(self) -> None:
        self.conversations.stats.failed += 1
        try:
            await self.conversations.store.abort_turn(self.pending_id)
        except Exception:
            logger.exception("dropping a pending turn of session %s failed", self.session_id)
        finally:
            await self._release()


class Conversations:
    """The session side of ``/v1/chat/completions``."""

    def __init__(
        self,
        *,
        store: SqlStore,
        counter: TokenCounter,
        renderer: MemoryRenderer,
        extractive: ExtractiveSummarizer,
        compactor: Compactor,
        budget: Budget,
        tasks: TaskSet,
        cache: SessionCache,
        model_alias: str,
    ) -> None:
        self.store = store
        self.counter = counter
        self.renderer = renderer
        self.extractive = extractive
        self.compactor = compactor
        self.budget = budget
        self.tasks = tasks
        self.cache = cache
        self.model_alias = model_alias
        self.recall: Recall | None = None
        self.stats = TurnStats()
        self.auto_reset: AutoReset | None = None
        self._tool_tokens: dict[bytes, int] = {}

    async def begin(self, request: TurnRequest, incoming: Sequence[Message]) -> Turn | bytes:
        """Start a turn; or, for a retried ``Idempotency-Key``, the stored answer."""
        stack = AsyncExitStack()
        await stack.enter_async_context(self.store.session_lock(request.tenant, request.key))
        try:
            # An auto-reset happens first, before this turn writes anything:
            # a reset refuses to end a session with a pending turn.
            if self.auto_reset is not None:
                await self.auto_reset.before_turn(request.tenant, request.key)
            opened = await self.store.open_turn(
                request.tenant,
                request.key,
                [m.to_openai() for m in incoming],
                source=request.source,
                user_id=request.user_id,
                idempotency_key=request.idempotency_key,
                known=self.cache.get(request.tenant, request.key) is not None,
            )
            if opened.replay is not None:
                await stack.aclose()
                self.stats.replayed += 1
                return opened.replay
            assert opened.pending_id is not None
            self.stats.started += 1
            try:
                live = await self._live(opened.record)
                return await self._prepare(request, live, incoming, opened.pending_id, stack.aclose)
            except BaseException:
                await self.store.abort_turn(opened.pending_id)
                raise
        except BaseException:
            await stack.aclose()
            raise

    async def _live(self, record: SessionRecord) -> LiveSession:
        """The session as a turn needs it: from the cache when still current."""
        cached = self.cache.get(record.tenant, record.key)
        if (
            cached is not None
            and cached.id == record.id
            and cached.last_seq == record.last_seq
            and cached.version == record.state_version
        ):
            return cached
        store = self.store
        version, memory = await store.load_memory(record.id)
        window = await store.load_messages(record.id, memory.through_seq)
        tail = window[-TAIL:] if len(window) >= TAIL else await store.load_tail(record.id, TAIL)
        live = LiveSession(
            id=record.id,
            tenant=record.tenant,
            key=record.key,
            last_seq=record.last_seq,
            last_turn=record.last_turn,
            version=version,
            memory=memory,
            system=record.system,
            window=window,
            tail=tail,
        )
        self.cache.put(live)
        return live

    def _counted(self, messages: Sequence[Message], **bookkeeping: Any) -> list[Message]:
        return [
            replace(m, tokens=message_tokens(m.to_openai(), self.counter), **bookkeeping)
            for m in messages
        ]

    def _extra_tokens(self, body: Mapping[str, Any]) -> int:
        """Tokens of tool/function schemas, which the upstream bills as prompt."""
        schemas = [body[k] for k in ("tools", "functions") if body.get(k)]
        if not schemas:
            return 0
        raw = orjson.dumps(schemas)
        tokens = self._tool_tokens.get(raw)
        if tokens is None:
            if len(self._tool_tokens) > 256:
                self._tool_tokens.clear()
            tokens = self._tool_tokens[raw] = self.counter.count(raw.decode())
        return tokens

    async def _prepare(
        self,
        request: TurnRequest,
        live: LiveSession,
        incoming: Sequence[Message],
        pending_id: str,
        release: Callable[[], Awaitable[Any]],
    ) -> Turn:
        system_in, rest = split_system(incoming)
        new = new_messages(live.tail, rest)
        if not new:
            raise InvalidRequest(
                "Every message in the request is already stored in this session; "
                "send the new message.",
                param="messages",
            )
        system: tuple[Message, ...] | None = None
        if system_in and (
            len(system_in) != len(live.system)
            or not all(a.same_as(b) for a, b in zip(system_in, live.system, strict=True))
        ):
            system = tuple(self._counted(system_in))
        now = time.time()
        turn_number = live.last_turn + (1 if any(m.role == "user" for m in new) else 0)
        counted = [
            replace(
                m,
                tokens=message_tokens(m.to_openai(), self.counter),
                turn=max(turn_number, 1),
                created_at=now,
                seq=live.last_seq + i + 1,
            )
            for i, m in enumerate(new)
        ]
        recalled: Sequence[Message] = ()
        if self.recall is not None:
            try:
                recalled = await self.recall(live, counted)
            except Exception as exc:  # recall is best effort: the turn goes on without it
                logger.warning("recall for session %s failed: %s", live.id, exc)
        extra_tokens = self._extra_tokens(request.body)
        system_now = system if system is not None else live.system
        try:
            built = build_context(
                system=system_now,
                memory=live.memory,
                window=live.window,
                window_tokens=live.window_tokens,
                window_wire=live.window_wire,
                new=counted,
                budget=self.budget,
                renderer=self.renderer,
                fold=self.extractive.fold,
                recall=recalled,
                extra_tokens=extra_tokens,
            )
            if built.folded and await self.store.save_memory(live.id, live.version, built.memory):
                live.folded(built.memory)
        except BaseException as exc:
            # No half turn: the pending record goes with the turn that failed.
            await self.store.abort_turn(pending_id)
            if isinstance(exc, ContextTooLarge):
                raise ContextLengthExceeded(str(exc), param="messages") from exc
            raise

        body = dict(request.body)
        body["messages"] = built.messages
        if body.get("model") in (None, "hermes"):
            body["model"] = self.model_alias
        # What this turn would cost beside the transcript if the client replayed it all.
        floor = REPLY_PRIMING + extra_tokens + sum(m.tokens for m in (*system_now, *counted))
        return Turn(
            self, live, request, counted, system, body, built.tokens, pending_id, release, floor
        )
