"""The ``hermes-proxy`` command line."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from proxy.cli_chat import chat
from proxy.cli_jobs import jobs
from proxy.cli_sessions import sessions
from proxy.config import OPTIONS, Option, Settings, SettingsError

if TYPE_CHECKING:
    import uvicorn

__all__ = ["main"]

F = TypeVar("F", bound=Callable[..., Any])

_CLICK_TYPES: dict[Any, Any] = {int: click.INT, float: click.FLOAT, str: click.STRING}


def settings_options(fn: F) -> F:
    """Add one flag per setting, all defaulting to "not given" so lower layers show through."""
    for option in reversed(OPTIONS):
        fn = _flag(option)(fn)
    return click.option(
        "--config",
        "config_file",
        type=click.Path(exists=True, dir_okay=False),
        help="TOML config file (overrides the environment, overridden by flags).",
    )(fn)


def _flag(option: Option) -> Callable[[F], F]:
    help_text = f"{option.help} [env: {option.env}]"
    if option.cast.__name__ == "_bool":
        # --x/--no-x: a setting that defaults to on can be turned off from the command line.
        flags = f"{option.flag}/--no-{option.flag[2:]}"
        return click.option(flags, option.name, default=None, help=help_text)
    if option.cast.__name__ == "_list":
        return click.option(option.flag, option.name, multiple=True, help=help_text)
    kind = _CLICK_TYPES.get(option.cast, click.STRING)
    return click.option(option.flag, option.name, type=kind, default=None, help=help_text)


def load_settings(config_file: str | None, flags: dict[str, Any]) -> Settings:
    try:
        return Settings.load(config_file=config_file, flags=flags)
    except SettingsError as exc:
        raise click.UsageError(str(exc)) from exc


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_exposure(settings: Settings) -> None:
    if not settings.api_key and not is_loopback(settings.host) and not settings.insecure_no_auth:
        raise click.UsageError(
            f"refusing to listen on {settings.host} without client API keys: anyone who can "
            "reach it could read every session. Add --api-key KEY[:TENANT] (or HERMES_API_KEY), "
            "or pass --insecure-no-auth if something in front of the proxy authenticates."
        )


def configure_logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def uvicorn_config(app: Any, host: str, port: int, log_level: str) -> uvicorn.Config:
    # Imported here: commands that only use the database start faster without it.
    import uvicorn

    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,
        loop="auto",
        http="auto",
        lifespan="on",
        timeout_graceful_shutdown=15,
    )


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="hermes-proxy")
def main() -> None:
    """An OpenAI-compatible proxy that gives every session bounded, persistent memory."""


@main.command()
@settings_options
def serve(config_file: str | None, **flags: Any) -> None:
    """Run the proxy."""
    from proxy import serving
    from proxy.store.postgres import redact

    settings = load_settings(config_file, flags)
    check_exposure(settings)
    configure_logging(settings.log_level)
    workers = f", {settings.workers} workers" if settings.workers > 1 else ""
    click.echo(
        f"hermes-proxy on http://{settings.host}:{settings.port}/v1 -> {settings.upstream} "
        f"(budget {settings.budget} tokens, {settings.summarizer} summarizer, "
        f"db {redact(settings.db)}{workers})",
        err=True,
    )
    serving.run(settings)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


DEMO_HELP = """\
hermes-proxy demo: proxy on http://{host}:{port}/v1, offline demo model behind it.
Budget {budget} tokens; database {db}.

Try it (every request sends only the new message):

  curl -s http://{host}:{port}/v1/chat/completions -H 'X-Hermes-Session-Id: demo' \\
    -H 'Content-Type: application/json' \\
    -d '{{"model": "hermes", "messages": [{{"role": "user",
          "content": "Our database is PostgreSQL 15 on RDS."}}]}}'

  curl -s http://{host}:{port}/v1/chat/completions -H 'X-Hermes-Session-Id: demo' \\
    -H 'Content-Type: application/json' \\
    -d '{{"model": "hermes", "messages": [{{"role": "user",
          "content": "Which database do we use?"}}]}}'

Send many more turns and the X-Hermes-Context-Tokens response header stays flat
while the fact is still recalled. Ctrl-C to stop.
"""


@main.command()
@settings_options
def demo(config_file: str | None, **flags: Any) -> None:
    """Run the proxy in front of a built-in offline demo model (no network, no API key)."""
    import uvicorn

    from proxy.app import create_app
    from proxy.demo import DEMO_MODEL, demo_upstream

    flags.setdefault("summarizer", None)
    upstream_port = free_port()
    flags["upstream"] = f"http://127.0.0.1:{upstream_port}/v1"
    flags["upstream_api_key"] = None
    flags["summarizer"] = flags["summarizer"] or "extractive"
    flags["model"] = DEMO_MODEL
    if flags.get("budget") is None:
        flags["budget"] = 1000
    settings = load_settings(config_file, flags)
    check_exposure(settings)
    configure_logging(settings.log_level)
    click.echo(
        DEMO_HELP.format(
            host=settings.host, port=settings.port, budget=settings.budget, db=settings.db
        ),
        err=True,
    )
    proxy_server = uvicorn.Server(
        uvicorn_config(create_app(settings), settings.host, settings.port, settings.log_level)
    )
    model_server = uvicorn.Server(
        uvicorn_config(demo_upstream(), "127.0.0.1", upstream_port, "warning")
    )

    async def run_both() -> None:
        model = asyncio.create_task(model_server.serve())
        try:
            await proxy_server.serve()
        finally:
            model_server.should_exit = True
            await model

    asyncio.run(run_both())


main.add_command(jobs)
main.add_command(sessions)
main.add_command(chat)

if __name__ == "__main__":
    main()
