"""What the handshake and the session statements need of a session: two small protocols.

:class:`~spate.pgwire.session.Session` implements both; :mod:`.startup` and :mod:`.commands`
are written against these instead of the class, so that they do not import the session that
calls them.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from spate.pgwire.auth import ScramVerifier
from spate.pgwire.binding import Prepared
from spate.pgwire.engine import Context, Described, Engine
from spate.pgwire.portal import Portal
from spate.sql.session_statements import Set, TransactionControl

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class SessionOptions:
    max_message_bytes: int = 16 * 1024 * 1024
    verifier: ScramVerifier | None = None
    ssl_context: ssl.SSLContext | None = None
    server_version: str = "15.0"
    """The PostgreSQL version spate reports: its pg_catalog has PostgreSQL 15's relations, so
    clients send the catalog queries they send PostgreSQL 15."""
    max_stream_stall: float = 300.0
    default_cluster: Callable[[], str] = lambda: "default"
    """What ``SHOW cluster`` says before a ``SET cluster`` (the engine's default cluster)."""
    statement_timeout_ms: int = 0
    """The sessions' ``statement_timeout`` until they SET it (0: none)."""
    startup_timeout: float = 60.0
    """Seconds a connection may take from its first byte to ReadyForQuery (SSL, the startup
    packet, authentication); PostgreSQL's ``authentication_timeout``."""
    admit: Callable[[], bool] | None = field(default=None, compare=False)
    """Asked once a startup packet has arrived: ``False`` if the server has no room for
    another session (the client is refused with 53300)."""


class Connection(Protocol):
    """A client connection before and during startup (:func:`.startup.handshake`)."""

    options: SessionOptions
    vars: dict[str, str]
    pid: int
    secret: int
    peer: str
    writer: asyncio.StreamWriter
    cancel_other: Callable[[int, int], None]

    def send(self, data: bytes) -> None: ...

    async def flush(self) -> None: ...

    async def read_exact(self, n: int) -> bytes: ...

    def buffered(self) -> int:
        """Bytes received from the client and not read yet."""
        ...

    async def read_message(self) -> tuple[bytes, bytes]: ...

    async def fatal(self, sqlstate: str, message: str) -> None: ...


class SessionHost(Connection, Protocol):
    """A started session, as the statements it answers itself (:mod:`.commands`) use it."""

    @property
    def status(self) -> str: ...

    @status.setter
    def status(self, value: str) -> None: ...

    @property
    def portals(self) -> dict[str, Portal]: ...

    async def engine_call(self, fn: Callable[[Engine, Context], T]) -> T: ...

    async def engine_set(self, stmt: Set) -> None: ...

    async def engine_transaction(self, stmt: TransactionControl) -> None: ...

    async def start_portal(self, portal: Portal) -> None: ...

    @property
    def prepared(self) -> dict[str, Prepared]:
        """The session's prepared statements (Parse and SQL PREPARE share the names)."""
        ...

    async def describe_prepared(self, prepared: Prepared) -> Described: ...

    async def run_portal(self, portal: Portal, *, describe: bool) -> None:
        """Run ``portal`` to its end as a statement of the current query."""
        ...

    async def stream_rows(
        self, portal: Portal, emit: Callable[[Any], None], max_rows: int
    ) -> int: ...

    async def wait_rows(self, portal: Portal, timeout: float | None) -> list[Any] | None: ...

    def set_var(self, name: str, value: str | None) -> None: ...
