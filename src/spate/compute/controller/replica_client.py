"""Replica clients: one asyncio task per ``(replica, epoch)`` (spec §5.1 "ReplicaTask").

A :class:`ReplicaClient` connects to its replica, retrying forever with exponential backoff
capped at one second; then sends the commands queued by the controller in order and reports
every response as a :class:`ReplicaResponse` tagged with its epoch. The first error — the
connection closing, a send failing, a message that is not a compute response — ends the client
with one :class:`ReplicaFailed`; the controller then rehydrates the replica with a new client
and the next epoch. The controller closing the client ends it silently.

Commands sent before the connection is up are queued, never lost: the controller's
``ConnectReplica`` action is followed by the whole replayed history.

The connection itself is anything with ``async send(message)``, ``async recv()`` and
``async close()`` (:class:`ReplicaConnection`): the TCP transport of
:mod:`spate.protocol.transport` in production, an in-memory pair in tests. How to open one is
injected (:data:`OpenConnection`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Awaitable, Callable
from typing import Final, Protocol

from spate.compute.controller.events import (
    ReplicaConnected,
    ReplicaEvent,
    ReplicaFailed,
    ReplicaResponse,
)
from spate.compute.controller.replica import ReplicaConfig
from spate.errors import ProtocolError
from spate.ids import InstanceId, ReplicaId
from spate.protocol.compute import (
    ComputeCommand,
    Frontiers,
    PeekResponse,
    Status,
    SubscribeResponse,
)
from spate.protocol.connection import DEFAULT_OPTIONS, TransportOptions
from spate.protocol.errors import AuthenticationFailed, EpochRefused
from spate.protocol.transport import TcpTransport, Transport
from spate.tasks import cancel_and_wait

_log: Final = logging.getLogger("spate.compute.controller.replica_client")

BACKOFF_INITIAL_S: Final = 0.05
BACKOFF_MAX_S: Final = 1.0
_RESPONSE_TYPES: Final = (Frontiers, PeekResponse, SubscribeResponse, Status)


class ReplicaConnection(Protocol):
    """An established, authenticated, ordered connection to a replica."""

    async def send(self, message: ComputeCommand) -> None: ...

    async def recv(self) -> object: ...

    async def close(self) -> None: ...


OpenConnection = Callable[[ReplicaConfig, int], Awaitable[ReplicaConnection]]
"""Open a connection to the replica described by the config, for the given epoch."""

EventSink = Callable[[ReplicaEvent], None]


class ReplicaHandle(Protocol):
    """What the controller holds for each ``(replica, epoch)``."""

    def send(self, command: ComputeCommand) -> None:
        """Queue ``command``; never blocks, never raises."""
        ...

    def close(self) -> None:
        """Stop: no more events will be reported."""
        ...


class ReplicaConnector(Protocol):
    """Makes replica clients; the controller calls it for each ``ConnectReplica``."""

    def connect(
        self,
        instance: InstanceId,
        replica: ReplicaId,
        epoch: int,
        config: ReplicaConfig,
        events: EventSink,
    ) -> ReplicaHandle: ...


class ReplicaClient:
    """The asyncio client of one ``(replica, epoch)`` (module docs). Create it inside the
    running event loop."""

    def __init__(
        self,
        instance: InstanceId,
        replica: ReplicaId,
        epoch: int,
        config: ReplicaConfig,
        open: OpenConnection,
        events: EventSink,
        *,
        backoff_initial_s: float = BACKOFF_INITIAL_S,
        backoff_max_s: float = BACKOFF_MAX_S,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.instance = instance
        self._sleep = sleep
        self.replica = replica
        self.epoch = epoch
        self._config = config
        self._open = open
        self._events = events
        self._backoff_initial = backoff_initial_s
        self._backoff_max = backoff_max_s
        self._queue: asyncio.Queue[ComputeCommand] = asyncio.Queue()
        self._closed = False
        self.connect_attempts = 0
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"replica {instance}/{replica} epoch {epoch}"
        )

    def send(self, command: ComputeCommand) -> None:
        if not self._closed:
            self._queue.put_nowait(command)

    def close(self) -> None:
        self._closed = True
        self._task.cancel()

    async def wait_closed(self) -> None:
        # The client task is cancelled by close(); wait for it without swallowing our own
        # cancellation (spate.tasks).
        await asyncio.wait([self._task])

    def _where(self) -> str:
        return (
            f"instance={self.instance} replica={self.replica} epoch={self.epoch} "
            f"at {self._config.location}"
        )

    async def _run(self) -> None:
        conn = await self._connect()
        if self._closed:
            await _close_quietly(conn)
            return
        self._events(ReplicaConnected(self.instance, self.replica, self.epoch))
        reason = await self._serve(conn)
        if not self._closed:
            _log.warning("replica connection lost: %s: %s", self._where(), reason)
            self._events(ReplicaFailed(self.instance, self.replica, self.epoch, reason))

    async def _connect(self) -> ReplicaConnection:
        delay = self._backoff_initial
        while True:
            self.connect_attempts += 1
            try:
                return await self._open(self._config, self.epoch)
            except asyncio.CancelledError:
                raise
            except (AuthenticationFailed, EpochRefused) as e:
                # Not transient, but retried: an operator may fix the secret, and a replica
                # that follows a newer controller must not be stolen by bumping our epoch.
                _log.error("replica refused us (retry in %.2fs): %s: %s", delay, self._where(), e)
            except Exception as e:  # retried forever: the replica may still be starting
                _log.info(
                    "connecting to replica failed (attempt %d, retry in %.2fs): %s: %s",
                    self.connect_attempts,
                    delay,
                    self._where(),
                    e,
                )
            await self._sleep(delay)
            delay = min(delay * 2, self._backoff_max)

    async def _serve(self, conn: ReplicaConnection) -> str:
        sender = asyncio.create_task(self._send_loop(conn))
        receiver = asyncio.create_task(self._recv_loop(conn))
        try:
            done, _ = await asyncio.wait({sender, receiver}, return_when=asyncio.FIRST_COMPLETED)
            error = next(iter(done)).exception()
            return f"{type(error).__name__}: {error}" if error is not None else "stopped"
        finally:
            await cancel_and_wait([sender, receiver])
            await _close_quietly(conn)

    async def _send_loop(self, conn: ReplicaConnection) -> None:
        while True:
            command = await self._queue.get()
            await conn.send(command)

    async def _recv_loop(self, conn: ReplicaConnection) -> None:
        while True:
            message = await conn.recv()
            if not isinstance(message, _RESPONSE_TYPES):
                raise ProtocolError(f"not a compute response: {type(message).__name__}")
            if self._closed:
                return
            self._events(ReplicaResponse(self.instance, self.replica, self.epoch, message))


async def _close_quietly(conn: ReplicaConnection) -> None:
    with contextlib.suppress(Exception):
        await conn.close()


class ClientConnector:
    """A :class:`ReplicaConnector` that starts a :class:`ReplicaClient` per epoch, opening
    connections with ``open``."""

    def __init__(
        self,
        open: OpenConnection,
        *,
        backoff_initial_s: float = BACKOFF_INITIAL_S,
        backoff_max_s: float = BACKOFF_MAX_S,
    ) -> None:
        self._open = open
        self._backoff = (backoff_initial_s, backoff_max_s)
        self.clients: list[ReplicaClient] = []

    def connect(
        self,
        instance: InstanceId,
        replica: ReplicaId,
        epoch: int,
        config: ReplicaConfig,
        events: EventSink,
    ) -> ReplicaClient:
        self.clients = [c for c in self.clients if not c._task.done()]
        client = ReplicaClient(
            instance,
            replica,
            epoch,
            config,
            self._open,
            events,
            backoff_initial_s=self._backoff[0],
            backoff_max_s=self._backoff[1],
        )
        self.clients.append(client)
        return client

    async def close(self) -> None:
        """Close every client and wait for them to end."""
        for c in self.clients:
            c.close()
        for c in self.clients:
            await c.wait_closed()
        self.clients = []


def transport_opener(
    transport: Transport | None = None,
    *,
    secret: object = None,
    tls: ssl.SSLContext | None = None,
    options: TransportOptions = DEFAULT_OPTIONS,
) -> OpenConnection:
    """Open compute connections with ``transport`` (TCP by default), authenticating with
    ``secret`` (and TLS if given), at the client's epoch."""
    via: Transport = transport if transport is not None else TcpTransport()

    async def open(config: ReplicaConfig, epoch: int) -> ReplicaConnection:
        loc = config.location
        conn = await via.connect(
            loc.host, loc.port, role="compute", epoch=epoch, secret=secret, tls=tls, options=options
        )
        return conn

    return open
