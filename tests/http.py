"""One shared HTTP client for tests: making an ``httpx.Client`` loads the CA bundle (~50 ms)."""

from __future__ import annotations

import httpx

client = httpx.Client(timeout=60)

get = client.get
post = client.post
patch = client.patch
delete = client.delete
stream = client.stream
