"""Every session endpoint is scoped by tenant: one key never sees another tenant's sessions."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import Proxy, ProxyFactory
from tests.session_helpers import api, rows, say, session_path

A, B = "key-a", "key-b"


@pytest.fixture
def tenants(make_proxy: ProxyFactory) -> Iterator[tuple[Proxy, str]]:
    """acme (key-a) has 'secret-plan' and 'shared'; globex (key-b) has 'shared' only."""
    with make_proxy(api_key=(f"{A}:acme", f"{B}:globex")) as proxy:
        say(proxy, "secret-plan", "acme launches the aardvark project", api_key=A)
        say(proxy, "shared", "acme notes about quokkas", api_key=A)
        say(proxy, "shared", "globex notes about wombats", api_key=B)
        with api(proxy, A) as client:
            acme_id = client.get(session_path("secret-plan")).json()["id"]
        yield proxy, acme_id


def test_list_and_search_show_only_the_callers_sessions(tenants: tuple[Proxy, str]) -> None:
    proxy, _ = tenants
    with api(proxy, B) as b:
        assert [s["key"] for s in b.get("/api/sessions").json()["data"]] == ["shared"]
        assert b.get("/api/search", params={"q": "aardvark OR quokkas"}).json()["data"] == []
        found = b.get("/api/search", params={"q": "wombats OR quokkas"}).json()["data"]
        assert [hit["session"]["key"] for hit in found] == ["shared"]
        assert "globex" in found[0]["excerpts"][0]["text"]
    with api(proxy, A) as a:
        assert sorted(s["key"] for s in a.get("/api/sessions").json()["data"]) == [
            "secret-plan",
            "shared",
        ]


@pytest.mark.parametrize(
    ("method", "suffix", "body"),
    [
        ("GET", "", None),
        ("PATCH", "", {"title": "mine now"}),
        ("DELETE", "", None),
        ("GET", "/messages", None),
        ("GET", "/export", None),
        ("POST", "/reset", None),
    ],
)
def test_another_tenants_session_is_not_found_by_key_id_or_prefix(
    tenants: tuple[Proxy, str], method: str, suffix: str, body: dict[str, str] | None
) -> None:
    proxy, acme_id = tenants
    with api(proxy, B) as b:
        for ident in ("secret-plan", acme_id, acme_id[:-2], "secret"):
            response = b.request(method, session_path(ident, suffix), json=body)
            assert response.status_code == 404, (ident, response.text)
            assert "aardvark" not in response.text
        # 'shared' is globex's own session under the same key.
        own = b.request(method, session_path("shared", suffix), json=body)
        assert own.status_code == 200, own.text
        if method == "GET" and suffix == "/messages":
            assert [m["content"] for m in own.json()["data"]][0] == "globex notes about wombats"
    # Nothing of acme's changed.
    (row,) = rows(proxy, "SELECT title, ended_at FROM sessions WHERE id = ?", acme_id)
    assert tuple(row) == (None, None)
    acme_shared = rows(
        proxy,
        "SELECT COUNT(*) FROM sessions WHERE tenant = 'acme' AND key = 'shared' "
        "AND ended_at IS NULL AND title IS NULL",
    )
    assert acme_shared[0][0] == 1


def test_created_sessions_belong_to_the_caller(tenants: tuple[Proxy, str]) -> None:
    proxy, _ = tenants
    with api(proxy, B) as b:
        created = b.post("/api/sessions", json={"source": "cli", "title": "globex chat"})
        assert created.status_code == 201
        session_id = created.json()["id"]
        assert created.json()["key"] == session_id and created.json()["source"] == "cli"
    with api(proxy, A) as a:
        assert a.get(session_path(session_id)).status_code == 404
    assert rows(proxy, "SELECT tenant FROM sessions WHERE id = ?", session_id)[0][0] == "globex"


# Refused before the store is asked anything: a PostgreSQL twin would prove nothing more.
@pytest.mark.parametrize("backend", ["sqlite"])
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/api/sessions"),
        ("POST", "/api/sessions"),
        ("GET", "/api/sessions/shared"),
        ("PATCH", "/api/sessions/shared"),
        ("DELETE", "/api/sessions/shared"),
        ("GET", "/api/sessions/shared/messages"),
        ("GET", "/api/sessions/shared/export"),
        ("POST", "/api/sessions/shared/reset"),
        ("GET", "/api/search?q=wombats"),
    ],
)
def test_every_endpoint_needs_a_key(tenants: tuple[Proxy, str], method: str, path: str) -> None:
    proxy, _ = tenants
    for client in (api(proxy), api(proxy, "wrong-key")):
        with client:
            response = client.request(method, path, json={"title": "x"})
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "invalid_api_key"
