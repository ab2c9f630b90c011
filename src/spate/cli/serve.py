"""``spate serve``: the PostgreSQL wire protocol server over an environment."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import ssl
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Final

import typer

from spate.cli.app import app
from spate.errors import SpateError, UsageError

if TYPE_CHECKING:
    from spate.environment.api import Environment

_log: Final = logging.getLogger("spate.cli.serve")


class BadListenAddress(UsageError, ValueError):
    """A --listen value that is not host:port."""


class BadStatementTimeout(UsageError, ValueError):
    """A --statement-timeout value PostgreSQL would not accept."""


def parse_listen(text: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port`` for IPv6) as (host, port)."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise BadListenAddress(f"--listen {text!r}: expected host:port, such as 127.0.0.1:6875")
    host = host.strip("[]") or "127.0.0.1"
    return host, int(port)


@app.command()
def serve(
    data_dir: Annotated[Path, typer.Argument(help="the environment's data directory")],
    listen: Annotated[str, typer.Option(help="host:port to listen on")] = "127.0.0.1:6875",
    password_file: Annotated[
        Path | None, typer.Option(help="a file whose first line is the password (SCRAM-SHA-256)")
    ] = None,
    password_env: Annotated[
        str | None, typer.Option(help="an environment variable holding the password")
    ] = None,
    tls_cert: Annotated[Path | None, typer.Option(help="TLS certificate chain (PEM)")] = None,
    tls_key: Annotated[Path | None, typer.Option(help="TLS private key (PEM)")] = None,
    max_connections: Annotated[int, typer.Option(help="concurrent client connections")] = 256,
    keep_replicas: Annotated[
        bool,
        typer.Option(
            "--keep-replicas",
            help="on Ctrl-C or SIGTERM, leave the replicas running for the next open to adopt",
        ),
    ] = False,
    statement_timeout: Annotated[
        str,
        typer.Option(
            help="the sessions' default statement_timeout, as PostgreSQL reads it ('30s', "
            "'5min', an integer in ms; 0: none); a session may SET its own"
        ),
    ] = "0",
    startup_timeout: Annotated[
        float,
        typer.Option(help="seconds a client may take to connect and authenticate, then closed"),
    ] = 60.0,
    max_message_bytes: Annotated[
        int, typer.Option(help="the longest message (statement, Bind) a client may send")
    ] = 16 * 1024 * 1024,
    warm: Annotated[
        bool,
        typer.Option(
            "--warm/--no-warm",
            help="start the default cluster's replicas at once (creating the cluster in a new "
            "environment) and report their progress",
        ),
    ] = True,
) -> None:
    """Serve the environment over the PostgreSQL wire protocol (psql, psycopg, JDBC…).

    Without a password, only loopback clients are served (trust); listening on any other
    address needs --password-file or --password-env. Ctrl-C (or SIGTERM) stops the server
    and the environment's replicas, unless --keep-replicas.
    """
    from spate.environment.api import Environment
    from spate.pgwire import eventloop
    from spate.pgwire.auth import read_password
    from spate.pgwire.environment import EnvironmentEngine
    from spate.pgwire.errors import PgError
    from spate.pgwire.guc import parse_ms
    from spate.pgwire.server import Server, ServerConfig, check_config

    host, port = parse_listen(listen)
    try:
        timeout_ms = parse_ms("statement_timeout", statement_timeout)
    except PgError as e:
        raise BadStatementTimeout(f"--statement-timeout: {e}") from None
    password = read_password(file=password_file, env=password_env)
    ctx = None
    if tls_cert is not None:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(tls_cert, tls_key)
    config = ServerConfig(
        host=host,
        port=port,
        password=password,
        ssl_context=ctx,
        max_connections=max_connections,
        statement_timeout_ms=timeout_ms,
        startup_timeout=startup_timeout,
        max_message_bytes=max_message_bytes,
    )
    check_config(config)  # before opening anything
    env = Environment.open(data_dir)
    stop = threading.Event()
    try:
        if warm:
            echo = lambda line: typer.echo(line, err=True)  # noqa: E731
            threading.Thread(
                target=warm_start, args=(env, echo, stop), name="spate-warm-start", daemon=True
            ).start()
        server = Server(EnvironmentEngine(env), config)
        eventloop.run(_serve(server, data_dir, host, password is not None))
    finally:
        stop.set()
        replicas = sum(len(c.replicas) for c in env.runtime.catalog.clusters)
        typer.echo(stopping_message(replicas, keep_replicas), err=True)
        env.close(stop_replicas=not keep_replicas)


def warm_start(
    env: Environment, echo: Callable[[str], None], stop: threading.Event, poll: float = 0.5
) -> None:
    """Start the default cluster's replicas now — in a new environment, create the default
    cluster (``Settings.default_cluster``), which every read that needs a replica would create
    anyway — and say how they come up, one line per change, until every replica is connected
    and every index and materialized view hydrated (or ``stop`` is set). Reads do not wait
    for this: small reads and serializable reads of persisted views need no replica."""
    started = time.monotonic()
    try:
        rt = env.runtime
        default = rt.settings.default_cluster
        if default and not rt.catalog.clusters:
            from spate.environment.clusters import replica_names

            names = replica_names(rt.settings.default_cluster_replicas)
            echo(f"spate: starting cluster {default} (replicas {', '.join(names)})")
            env.create_cluster(default, replicas=names)
        last = None
        while not stop.is_set():
            status = env.status()
            connected = sum(r.health == "connected" for r in status.replicas)
            views = [c for c in status.collections if c.hydrated is not None]
            done = sum(bool(c.hydrated) for c in views)
            line = (
                f"{connected}/{len(status.replicas)} replicas connected, {done}/{len(views)} "
                "indexes and materialized views hydrated"
            )
            elapsed = time.monotonic() - started
            if line != last:
                echo(f"spate: {line} ({elapsed:.1f} s)")
                last = line
            if connected == len(status.replicas) and done == len(views):
                echo(f"spate: replicas ready after {elapsed:.1f} s")
                return
            stop.wait(poll)
    except SpateError as e:  # the environment closed or failed: serve says so itself
        _log.info("warm start stopped: %s", e)
    except Exception:  # a report, never a reason to stop serving
        _log.warning("warm start failed", exc_info=True)


def stopping_message(replicas: int, keep_replicas: bool) -> str:
    """What ``spate serve`` says as it stops, about the environment's ``replicas``."""
    if not replicas:
        return "spate: stopping"
    some = f"{replicas} replica{'s' if replicas != 1 else ''}"
    if keep_replicas:
        return (
            f"spate: stopping; leaving {some} running (--keep-replicas): the next open of "
            "the environment adopts them, else they exit after their grace period"
        )
    return f"spate: stopping the server and {some} (--keep-replicas would leave them running)"


async def _serve(server: object, data_dir: Path, host: str, password: bool) -> None:
    import os

    from spate.cli.served import Served, announce
    from spate.pgwire.server import Server

    assert isinstance(server, Server)
    await server.start()
    typer.echo(f"spate serving PostgreSQL clients on port {server.port}", err=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    # `spate sql` on the same data directory connects here instead of opening it again
    served = Served(os.getpid(), host, server.port, password)
    with announce(data_dir, served):
        await stop.wait()
    await server.close()
