from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import openai
import pytest

from proxy.app import create_app
from proxy.app_state import Services
from proxy.config import Settings
from proxy.store import is_postgres_url
from proxy.store.fts_file import index_path
from tests.databases import DEFAULT_SERVER, DbConnection, PostgresServer
from tests.fake_upstream import FakeUpstream, FakeUpstreams
from tests.servers import running

BACKENDS = [pytest.param("sqlite"), pytest.param("postgresql", marks=pytest.mark.postgres)]


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No test sees the developer's OpenAI or hermes settings."""
    for name in list(os.environ):
        if name.startswith(("OPENAI_", "HERMES_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "home"))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """The PostgreSQL server (``TEST_POSTGRES_URL``); its tests skip without it, except in CI."""
    server = PostgresServer(os.environ.get("TEST_POSTGRES_URL") or DEFAULT_SERVER)
    try:
        problem = server.problem()
        if problem is not None:
            reason = f"PostgreSQL at {server.url} is not reachable ({problem})"
            if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
                pytest.fail(f"{reason}; CI must run the PostgreSQL tests", pytrace=False)
            pytest.skip(f"{reason}; start it or set TEST_POSTGRES_URL")
        yield server
    finally:
        server.close()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Every test that uses the proxy or a database runs on both backends.

    Pin one with ``@pytest.mark.parametrize("backend", ["postgresql"])``.
    """
    name: str = request.param
    return name


@pytest.fixture
def pg(backend: str, request: pytest.FixtureRequest) -> PostgresServer | None:
    """The PostgreSQL server when the test runs on it (``Proxy.db()`` needs it), else None."""
    return request.getfixturevalue("postgres") if backend == "postgresql" else None


@pytest.fixture
def db_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh, empty database of ``backend``, dropped after the test (on PostgreSQL,
    a schema of its own in the test session's database: see tests/databases.py)."""
    if backend == "sqlite":
        yield str(tmp_path / "state.db")
        return
    server: PostgresServer = request.getfixturevalue("postgres")
    url = server.create_schema()
    try:
        yield url
    finally:
        server.drop_schema(url)


@pytest.fixture(scope="session")
def upstreams() -> Iterator[FakeUpstreams]:
    """The server every test's fake upstream is served by."""
    fakes = FakeUpstreams()
    with running(fakes) as url:
        fakes.url = url
        yield fakes


@pytest.fixture
def upstream(upstreams: FakeUpstreams) -> Iterator[FakeUpstream]:
    """A fake upstream of the test's own (on the shared server, under its own path)."""
    fake = FakeUpstream()
    fake.url = f"{upstreams.add(fake)}/v1"
    try:
        yield fake
    finally:
        upstreams.remove(fake)


@dataclass
class Proxy:
    url: str
    settings: Settings
    app: Any
    postgres: PostgresServer | None = None
    _clients: dict[Any, openai.OpenAI] = field(default_factory=dict, repr=False)

    @property
    def backend(self) -> str:
        return "postgresql" if is_postgres_url(self.settings.db) else "sqlite"

    @property
    def v1(self) -> str:
        return f"{self.url}/v1"

    @property
    def services(self) -> Services:
        svc: Services = self.app.state.services
        return svc

    def client(self, api_key: str = "none", **kwargs: Any) -> openai.OpenAI:
        # One client per key: making one loads the CA bundle (~50 ms here).
        key = (api_key, tuple(sorted(kwargs.items())))
        client = self._clients.get(key)
        if client is None:
            client = self._clients[key] = openai.OpenAI(
                base_url=self.v1, api_key=api_key, max_retries=0, **kwargs
            )
        return client

    def async_client(self, api_key: str = "none", **kwargs: Any) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(base_url=self.v1, api_key=api_key, max_retries=0, **kwargs)

    def settle(self, timeout: float = 10.0) -> None:
        """Wait until every turn is stored and every compaction has finished."""
        deadline = time.monotonic() + timeout
        while len(self.services.tasks):
            if time.monotonic() > deadline:
                raise TimeoutError("proxy background work did not finish")
            time.sleep(0.005)

    def db(self) -> DbConnection:
        """The proxy's database, whichever backend (see tests/databases.py)."""
        if self.backend == "postgresql":
            assert self.postgres is not None, "a PostgreSQL proxy needs the postgres fixture"
            return self.postgres.connect(self.settings.db)
        conn = sqlite3.connect(self.settings.db)
        conn.row_factory = sqlite3.Row
        # The full-text indexes, as the proxy's readers see them.
        conn.execute("ATTACH DATABASE ? AS fts", (index_path(self.settings.db),))
        return conn

    def transcript(self, key: str, tenant: str = "default") -> list[Any]:
        self.settle()
        with self.db() as conn:
            return conn.execute(
                "SELECT m.* FROM messages m JOIN sessions s ON s.id = m.session_id "
                "WHERE s.tenant = ? AND s.key = ? AND s.ended_at IS NULL ORDER BY m.seq",
                (tenant, key),
            ).fetchall()

    def pending(self) -> list[Any]:
        self.settle()
        with self.db() as conn:
            return conn.execute("SELECT * FROM pending_turns").fetchall()


ProxyFactory = Callable[..., AbstractContextManager[Proxy]]


@pytest.fixture
def make_proxy(db_url: str, upstream: FakeUpstream, pg: PostgresServer | None) -> ProxyFactory:

    @contextmanager
    def start(**flags: Any) -> Iterator[Proxy]:
        flags.setdefault("upstream", upstream.url)
        flags.setdefault("db", db_url)
        flags.setdefault("summarizer", "extractive")
        settings = Settings.load(flags=flags)
        app = create_app(settings)
        with running(app) as url:
            yield Proxy(url, settings, app, pg)

    return start


@pytest.fixture
def proxy(make_proxy: ProxyFactory) -> Iterator[Proxy]:
    with make_proxy() as handle:
        yield handle
