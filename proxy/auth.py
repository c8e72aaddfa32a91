"""Client keys → tenants."""

from __future__ import annotations

from collections.abc import Mapping

from starlette.requests import HTTPConnection

from proxy.errors import AuthenticationFailed

__all__ = ["DEFAULT_TENANT", "tenant_of"]

DEFAULT_TENANT = "default"


def tenant_of(request: HTTPConnection, tenants: Mapping[str, str]) -> str:
    """The tenant a request's ``Authorization: Bearer`` key belongs to.

    With no keys configured every request is the default tenant (the proxy
    then only listens on loopback).
    """
    if not tenants:
        return DEFAULT_TENANT
    header = request.headers.get("authorization", "")
    scheme, _, key = header.partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        raise AuthenticationFailed(
            "Missing API key: send 'Authorization: Bearer <key>' with a key this proxy knows."
        )
    tenant = tenants.get(key.strip())
    if tenant is None:
        raise AuthenticationFailed("Incorrect API key provided.")
    return tenant
