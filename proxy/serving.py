"""Running the proxy: one process, or ``--workers N`` uvicorn processes on PostgreSQL.

With ``--workers N > 1`` uvicorn binds the socket once and spawns N worker
processes that import :func:`worker_app` by name. The settings the parent
resolved (flags, config file, environment) reach them, exactly, as JSON in
the ``HERMES_WORKER_SETTINGS`` environment variable. Each worker has its own
pool, locks and live-session cache; PostgreSQL's advisory locks and the
state version keep them consistent, as they do for replicas on several
machines. (``Settings.validate`` refuses more than one worker on SQLite.)
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import orjson
import uvicorn
from starlette.applications import Starlette

from proxy.app import create_app
from proxy.cli import configure_logging, uvicorn_config
from proxy.config import Settings

__all__ = ["SETTINGS_ENV", "decode_settings", "encode_settings", "run", "worker_app"]

SETTINGS_ENV = "HERMES_WORKER_SETTINGS"


def encode_settings(settings: Settings) -> str:
    values: dict[str, Any] = {}
    for f in dataclasses.fields(settings):
        value = getattr(settings, f.name)
        values[f.name] = str(value) if isinstance(value, Path) else value
    return orjson.dumps(values).decode()


def decode_settings(raw: str) -> Settings:
    values = orjson.loads(raw)
    values["home"] = Path(values["home"])
    # JSON has no tuples; every sequence setting is one.
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
    settings = Settings(**values)
    settings.validate()
    return settings


def worker_app() -> Starlette:
    """The app of one worker process (uvicorn calls this factory in each)."""
    settings = decode_settings(os.environ[SETTINGS_ENV])
    configure_logging(settings.log_level)
    return create_app(settings)


def run(settings: Settings) -> None:
    """Serve until interrupted."""
    if settings.workers == 1:
        app = create_app(settings)
        uvicorn.Server(uvicorn_config(app, settings.host, settings.port, settings.log_level)).run()
        return
    os.environ[SETTINGS_ENV] = encode_settings(settings)
    config = uvicorn_config(
        "proxy.serving:worker_app", settings.host, settings.port, settings.log_level
    )
    uvicorn.run(
        config.app,
        factory=True,
        workers=settings.workers,
        host=config.host,
        port=config.port,
        log_level=settings.log_level,
        access_log=config.access_log,
        loop=config.loop,
        http=config.http,
        lifespan=config.lifespan,
        timeout_graceful_shutdown=config.timeout_graceful_shutdown,
    )
