"""Compute replica clients: the generic replica client tagged for one compute ``(replica, epoch)``.

A :class:`ReplicaClient` is :class:`spate.protocol.replica_client.ReplicaClient` over compute
commands and responses (connect with backoff, queue, ordered sending, one failure report), whose
reports become the events of :mod:`spate.protocol.replica_events` (``ReplicaConnected``,
``ReplicaResponse``, ``ReplicaFailed``) tagged with its instance, replica and epoch. The
controller rehydrates a failed replica with a new client and the next epoch; commands sent
before the connection is up are queued, so the controller's ``ConnectReplica`` action is
followed by the whole replayed history.

How to open a connection is injected (:data:`OpenConnection`): the TCP transport of
:mod:`spate.protocol.transport` in production (:func:`transport_opener`), an in-memory pair in
tests.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable
from typing import Final, Protocol

from spate.clock import Clock
from spate.compute.controller.events import EventSink as EventSink
from spate.compute.controller.replica import ReplicaConfig
from spate.ids import InstanceId, ReplicaId
from spate.protocol.compute import (
    ComputeCommand,
    ComputeResponse,
    Frontiers,
    PeekResponse,
    StatisticsUpdates,
    Status,
    SubscribeResponse,
)
from spate.protocol.connection import DEFAULT_OPTIONS, TransportOptions
from spate.protocol.replica_client import Backoff
from spate.protocol.replica_client import ReplicaClient as GenericClient
from spate.protocol.replica_events import Tagger
from spate.protocol.transport import TcpTransport, Transport

BACKOFF_INITIAL_S: Final = 0.05
BACKOFF_MAX_S: Final = 1.0
_RESPONSE_TYPES: Final = (Frontiers, PeekResponse, SubscribeResponse, Status, StatisticsUpdates)


class ReplicaConnection(Protocol):
    """An established, authenticated, ordered connection to a replica."""

    async def send(self, message: ComputeCommand) -> None: ...

    async def recv(self) -> object: ...

    async def close(self) -> None: ...


OpenConnection = Callable[[ReplicaConfig, int], Awaitable[ReplicaConnection]]
"""Open a connection to the replica described by the config, for the given epoch."""


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


class ReplicaClient(GenericClient[ComputeCommand, ComputeResponse]):
    """The client of one compute ``(replica, epoch)`` (module docs). Create it inside the
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
        clock: Clock | None = None,
    ) -> None:
        self.instance = instance
        self.replica = replica
        self.epoch = epoch

        async def connect() -> ReplicaConnection:
            return await open(config, epoch)

        super().__init__(
            name=f"instance={instance} replica={replica} epoch={epoch} at {config.location}",
            open=connect,
            responses=_RESPONSE_TYPES,
            listener=Tagger(instance, replica, epoch, events),
            backoff=Backoff(backoff_initial_s, backoff_max_s),
            sleep=sleep,
            clock=clock,
        )


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
        self.clients = [c for c in self.clients if not c.done()]
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
    ``secret`` (and TLS if given), or with the location's own ``auth`` where it has one, at the
    client's epoch."""
    via: Transport = transport if transport is not None else TcpTransport()

    async def open(config: ReplicaConfig, epoch: int) -> ReplicaConnection:
        loc = config.location
        key, ctx = (secret, tls) if loc.auth is None else (loc.auth.secret, loc.auth.tls)
        conn = await via.connect(
            loc.host, loc.port, role="compute", epoch=epoch, secret=key, tls=ctx, options=options
        )
        return conn

    return open
