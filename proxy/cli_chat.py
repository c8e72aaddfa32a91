"""``hermes-proxy chat``: an interactive terminal chat through the proxy.

It talks HTTP to a proxy — the one given with ``--url``, else the one
``serve`` would run (if it answers), else one it starts in-process on the
configured database — as source ``cli``, and prints the answer as it streams
in. ``-c`` continues the most recent cli session, ``-r ID`` a given one (any
id, key or unique prefix); on exit it prints the session id to resume with.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

import click

from proxy.config import OPTIONS, Settings, SettingsError

if TYPE_CHECKING:
    import httpx

__all__ = ["chat"]

F = TypeVar("F", bound=Callable[..., Any])

# Settings an in-process proxy takes from flags (the rest from env and config file).
IN_PROCESS = ("db", "upstream", "upstream_api_key", "model", "budget", "summarizer")
TYPES: dict[Any, Any] = {int: click.INT, float: click.FLOAT}
HELP = "Type a message and press Enter. /reset starts afresh (facts are kept), /exit quits."


def in_process_options(fn: F) -> F:
    for option in reversed([o for o in OPTIONS if o.name in IN_PROCESS]):
        fn = click.option(
            option.flag,
            option.name,
            type=TYPES.get(option.cast, click.STRING),
            default=None,
            help=f"In-process proxy: {option.help} [env: {option.env}]",
        )(fn)
    return fn


class ChatError(click.ClickException):
    exit_code = 2


@dataclass
class Conversation:
    """The chat's session: ``key`` is what is sent as ``X-Hermes-Session-Id``."""

    client: httpx.Client
    key: str

    def say(self, text: str, echo: Callable[[str], None]) -> None:
        """Send one message and echo the answer's text as it streams in."""
        body = {"model": "hermes", "stream": True, "messages": [{"role": "user", "content": text}]}
        headers = {"X-Hermes-Session-Id": self.key, "X-Hermes-Source": "cli"}
        with self.client.stream(
            "POST", "/v1/chat/completions", json=body, headers=headers
        ) as response:
            if response.status_code != 200:
                response.read()
                click.echo(f"error: {error_message(response)}", err=True)
                return
            for line in response.iter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                event = json.loads(data)
                if "error" in event:
                    click.echo(f"\nerror: {event['error'].get('message')}", err=True)
                    continue
                for choice in event.get("choices") or ():
                    piece = (choice.get("delta") or {}).get("content")
                    if piece:
                        echo(piece)
        echo("\n")

    def reset(self) -> str:
        response = self.client.post(f"/api/sessions/{quote(self.key, safe='')}/reset")
        if response.status_code != 200:
            raise ChatError(error_message(response))
        return str(response.json()["id"])


def error_message(response: httpx.Response) -> str:
    try:
        return str(response.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return f"HTTP {response.status_code}: {response.text[:200]}"


def pick_session(client: httpx.Client, continue_: bool, resume: str | None) -> tuple[str, str]:
    """The key to chat under and a line saying which session it is."""
    if resume:
        response = client.get(f"/api/sessions/{quote(resume, safe='')}")
        if response.status_code != 200:
            raise ChatError(error_message(response))
        found = response.json()
        if found["live"]:
            return found[
                "key"
            ], f"Resuming session {found['id']} ({found['message_count']} messages)."
        return found["key"], (
            f"Session {found['id']} has ended; continuing the live session under its key "
            f"{found['key']!r}."
        )
    if continue_:
        listing = client.get("/api/sessions", params={"source": "cli", "limit": 1})
        if listing.status_code != 200:
            raise ChatError(error_message(listing))
        latest = listing.json()["data"]
        if latest:
            s = latest[0]
            return s["key"], f"Continuing session {s['id']} ({s['message_count']} messages)."
    created = client.post("/api/sessions", json={"source": "cli"})
    if created.status_code != 201:
        raise ChatError(error_message(created))
    note = "No cli session to continue; " if continue_ else ""
    return created.json()["key"], f"{note}New session {created.json()['id']}."


@contextmanager
def proxy_url(settings: Settings, url: str | None, in_process: bool) -> Iterator[str]:
    """The base URL of a proxy to talk to, starting one in-process if need be."""
    if url:
        yield url.rstrip("/")
        return
    host = "127.0.0.1" if settings.host in ("0.0.0.0", "::") else settings.host
    running = f"http://{host}:{settings.port}"
    if not in_process:
        import httpx

        try:
            if httpx.get(f"{running}/healthz", timeout=0.5).status_code == 200:
                yield running
                return
        except httpx.HTTPError:
            pass
    # Imported here: a chat that talks to a running proxy never loads the server.
    import uvicorn

    from proxy.app import create_app

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        create_app(settings), log_level="warning", access_log=False, lifespan="on"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, daemon=True, name="in-process-proxy"
    )
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            sock.close()
            raise click.ClickException("the in-process proxy did not start; see the log above")
        time.sleep(0.02)
    click.echo(f"(in-process proxy on database {settings.db})", err=True)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=20)
        sock.close()


@click.command()
@click.option("-c", "--continue", "continue_", is_flag=True, help="Resume the latest cli session.")
@click.option("-r", "--resume", metavar="ID", help="Resume a session (id, key or unique prefix).")
@click.option("--url", envvar="HERMES_URL", help="A running proxy, e.g. http://127.0.0.1:8080.")
@click.option("--in-process", is_flag=True, help="Start a proxy in this process, on --db.")
@click.option(
    "--key", "client_key", envvar="HERMES_CLIENT_KEY", help="API key for the proxy (if it has any)."
)
@click.option(
    "--config", "config_file", type=click.Path(exists=True, dir_okay=False), help="Config file."
)
@in_process_options
def chat(
    continue_: bool,
    resume: str | None,
    url: str | None,
    in_process: bool,
    client_key: str | None,
    config_file: str | None,
    **flags: Any,
) -> None:
    """Chat in the terminal through the proxy, with the session's memory."""
    # Imported here, not at the top: every other command starts faster without it.
    import httpx

    if continue_ and resume:
        raise click.UsageError("give either --continue or --resume, not both")
    try:
        settings = Settings.load(config_file=config_file, flags=flags)
    except SettingsError as exc:
        raise click.UsageError(str(exc)) from exc
    key = client_key or next(iter(settings.tenants), None)
    headers = {"Authorization": f"Bearer {key}"} if key else {}

    def echo(text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    with (
        proxy_url(settings, url, in_process) as base,
        httpx.Client(base_url=base, headers=headers, timeout=httpx.Timeout(30, read=600)) as client,
    ):
        try:
            session_key, note = pick_session(client, continue_, resume)
        except httpx.HTTPError as exc:
            raise click.ClickException(f"cannot reach the proxy at {base}: {exc}") from exc
        click.echo(f"{note} {HELP}", err=True)
        conversation = Conversation(client, session_key)
        try:
            while True:
                echo("you> ")
                line = sys.stdin.readline()
                if not line:
                    echo("\n")
                    break
                text = line.strip()
                if text in ("/exit", "/quit"):
                    if not sys.stdin.isatty():  # the typed newline was not echoed
                        echo("\n")
                    break
                if text == "/reset":
                    click.echo(
                        f"(new session {conversation.reset()}; facts carried over)", err=True
                    )
                elif text == "/help":
                    click.echo(HELP, err=True)
                elif text:
                    conversation.say(text, echo)
        except KeyboardInterrupt:
            echo("\n")
        except httpx.HTTPError as exc:
            click.echo(f"error: the proxy at {base} failed: {exc}", err=True)
    click.echo(f"Session: {session_key}")
    click.echo(f"Resume with: hermes-proxy chat --resume {session_key}")
