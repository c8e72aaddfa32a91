"""Threads: sessions driven through ``/v1/threads``.

A thread *is* a session: its id is the session key, so its conversation,
memory and compaction are the session's, and a chat completion sent with
``X-Hermes-Session-Id: <thread id>`` continues the same conversation.

* Ids are generated (``20250305_091523_a1b2c3d4``); any unique prefix resolves.
* Every tenant has a **default thread**, id ``default``, that exists without
  being created: its row is written the first time it is used, and it is
  listed first.
* A new thread starts with an empty conversation and **inherits the tenant's
  long-term facts**: the facts ledger merged from the live sessions of the
  tenant's :data:`CARRYOVER_THREADS` most recently active threads (the
  default one included), facts still in their verbatim windows too; for a
  subject the most recently stated fact holds (see
  :func:`compaction.carryover.long_term_memory`). Only threads count: other
  sessions of the tenant (other ``X-Hermes-Session-Id`` values) may be other
  end users' conversations.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from compaction.carryover import long_term_memory
from compaction.state import Memory, Message
from proxy.errors import InvalidRequest, NotFound
from proxy.events import EventHub
from proxy.store import SqlStore, new_session_id
from proxy.store.threads import ThreadRecord
from proxy.turns import Conversations

__all__ = ["CARRYOVER_THREADS", "DEFAULT_THREAD", "Threads", "valid_metadata", "valid_title"]

DEFAULT_THREAD = "default"
CARRYOVER_THREADS = 8
MAX_METADATA_KEYS = 16


def valid_title(value: Any) -> str | None:
    if value is not None and (not isinstance(value, str) or len(value) > 256):
        raise InvalidRequest("'title' must be a string of at most 256 characters.", param="title")
    return value


def valid_metadata(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if (
        not isinstance(value, dict)
        or len(value) > MAX_METADATA_KEYS
        or not all(
            isinstance(k, str) and len(k) <= 64 and isinstance(v, str) and len(v) <= 512
            for k, v in value.items()
        )
    ):
        raise InvalidRequest(
            f"'metadata' must be an object of at most {MAX_METADATA_KEYS} string values "
            "(keys up to 64 characters, values up to 512).",
            param="metadata",
        )
    return dict(value)


class Threads:
    """Create, find, list, rename and delete a tenant's threads."""

    def __init__(self, store: SqlStore, conversations: Conversations, hub: EventHub) -> None:
        self.store = store
        self.conversations = conversations
        self.hub = hub

    async def create(
        self, tenant: str, title: str | None, metadata: dict[str, str]
    ) -> ThreadRecord:
        now = time.time()
        thread_id = new_session_id(now)
        memory = await self.long_term_memory(tenant)
        await self.store.create_session(tenant, thread_id, source="thread", memory=memory, now=now)
        await self.store.insert_thread(tenant, thread_id, title, metadata, now)
        return await self.get(tenant, thread_id)

    async def long_term_memory(self, tenant: str) -> Memory:
        sources: list[tuple[Memory, list[Message]]] = []
        for session_id in await self.store.carryover_sessions(tenant, CARRYOVER_THREADS):
            _, memory = await self.store.load_memory(session_id)
            window = await self.store.load_messages(session_id, memory.through_seq)
            sources.append((memory, window))
        conv = self.conversations
        return long_term_memory(sources, conv.extractive, conv.budget.memory_tokens)

    async def resolve(self, tenant: str, thread_id: str) -> str:
        """The id of the tenant's thread ``thread_id`` names (exactly or by a unique prefix)."""
        if thread_id == DEFAULT_THREAD:
            if await self.store.get_thread(tenant, DEFAULT_THREAD) is None:
                await self.store.insert_thread(tenant, DEFAULT_THREAD, None, {}, time.time())
            return thread_id
        matches = await self.store.threads_with_prefix(tenant, thread_id)
        if thread_id in matches or len(matches) == 1:
            return thread_id if thread_id in matches else matches[0]
        if matches:
            raise InvalidRequest(
                f"Thread id prefix {thread_id!r} matches several threads; give more of it.",
                param="thread_id",
                code="ambiguous_thread_id",
            )
        raise NotFound(f"No thread {thread_id!r}.", param="thread_id")

    async def get(self, tenant: str, thread_id: str) -> ThreadRecord:
        record = await self.store.get_thread(tenant, await self.resolve(tenant, thread_id))
        if record is None:
            raise NotFound(f"No thread {thread_id!r}.", param="thread_id")
        return record

    async def page(self, tenant: str, limit: int, after: str | None) -> list[ThreadRecord]:
        await self.resolve(tenant, DEFAULT_THREAD)
        cursor = await self.get(tenant, after) if after else None
        return await self.store.list_threads(tenant, limit, cursor, pinned=DEFAULT_THREAD)

    async def update(self, tenant: str, thread_id: str, changes: Mapping[str, Any]) -> ThreadRecord:
        unknown = set(changes) - {"title", "metadata"}
        if unknown:
            raise InvalidRequest(
                f"Unknown field(s) {', '.join(sorted(unknown))}: a thread has 'title' and "
                "'metadata'.",
                param=sorted(unknown)[0],
            )
        thread_id = await self.resolve(tenant, thread_id)
        await self.store.update_thread(
            tenant,
            thread_id,
            title=valid_title(changes.get("title")),
            set_title="title" in changes,
            metadata=valid_metadata(changes["metadata"]) if "metadata" in changes else None,
        )
        return await self.get(tenant, thread_id)

    async def delete(self, tenant: str, thread_id: str) -> str:
        thread_id = await self.resolve(tenant, thread_id)
        # Under the session lock: no chat turn of this thread is half-stored meanwhile.
        async with self.store.session_lock(tenant, thread_id):
            deleted = await self.store.delete_thread(tenant, thread_id)
            self.conversations.cache.drop(tenant, thread_id)
        if not deleted:
            raise NotFound(f"No thread {thread_id!r}.", param="thread_id")
        self.hub.notify(tenant, thread_id)
        return thread_id
