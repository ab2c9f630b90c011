"""Storage replica clients: one asyncio task per ``(replica, epoch)`` .

A :class:`StorageReplicaClient` is :class:`spate.protocol.replica_client.ReplicaClient` over
storage commands and responses (connect with backoff, queue, ordered sending, one failure
report), whose reports become :class:`ReplicaConnected`, :class:`ReplicaResponse` and
:class:`ReplicaFailed` tagged with its instance, replica and epoch. The controller rehydrates a
failed replica with a new client and the next epoch. Commands queued before the connection is
up are kept, so the replayed history always arrives first and whole.

How connections are opened is injected (:data:`OpenConnection`): the authenticated TCP
transport in production (:func:`tcp_opener`), an in-memory transport in tests.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final

from spate.clock import Clock
from spate.ids import InstanceId, ReplicaId
from spate.protocol.connection import Connection
from spate.protocol.replica_client import DEFAULT_BACKOFF, Backoff, ReplicaClient
from spate.protocol.secret import Secret
from spate.protocol.storage import (
    DroppedId,
    FrontierUpper,
    StatisticsUpdates,
    StatusUpdate,
    StorageCommand,
    StorageResponse,
)
from spate.protocol.transport import connect

_RESPONSES: Final = (FrontierUpper, DroppedId, StatisticsUpdates, StatusUpdate)


@dataclass(frozen=True, slots=True)
class StorageReplicaLocation:
    """Where a storage replica listens (``spate replica --role storage``) and its secret."""

    host: str
    port: int
    secret: Secret | None = field(default=None, repr=False)
    tls: ssl.SSLContext | None = field(default=None, repr=False, compare=False)
    """Client TLS context for a replica placed elsewhere that serves TLS (``None``: TCP)."""

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class ReplicaConnected:
    instance: InstanceId
    replica: ReplicaId
    epoch: int


@dataclass(frozen=True, slots=True)
class ReplicaResponse:
    instance: InstanceId
    replica: ReplicaId
    epoch: int
    response: StorageResponse


@dataclass(frozen=True, slots=True)
class ReplicaFailed:
    instance: InstanceId
    replica: ReplicaId
    epoch: int
    reason: str


ReplicaEvent = ReplicaConnected | ReplicaResponse | ReplicaFailed
OpenConnection = Callable[[StorageReplicaLocation, int], Awaitable[Connection]]
EventSink = Callable[[ReplicaEvent], None]


async def tcp_opener(location: StorageReplicaLocation, epoch: int) -> Connection:
    """Open an authenticated TCP connection to a storage replica."""
    return await connect(
        location.host,
        location.port,
        role="storage",
        epoch=epoch,
        secret=location.secret,
        tls=location.tls,
    )


class _Tagger:
    """Reports a generic client's events tagged with its instance, replica and epoch."""

    def __init__(
        self, instance: InstanceId, replica: ReplicaId, epoch: int, events: EventSink
    ) -> None:
        self._where = (instance, replica, epoch)
        self._events = events

    def connected(self) -> None:
        self._events(ReplicaConnected(*self._where))

    def response(self, response: StorageResponse) -> None:
        self._events(ReplicaResponse(*self._where, response))

    def failed(self, reason: str) -> None:
        self._events(ReplicaFailed(*self._where, reason))


class StorageReplicaClient(ReplicaClient[StorageCommand, StorageResponse]):
    """The client of one storage ``(replica, epoch)`` (module docs). Create inside the event
    loop."""

    def __init__(
        self,
        instance: InstanceId,
        replica: ReplicaId,
        epoch: int,
        location: StorageReplicaLocation,
        open: OpenConnection,
        events: EventSink,
        *,
        backoff: Backoff = DEFAULT_BACKOFF,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Clock | None = None,
    ) -> None:
        self.instance = instance
        self.replica = replica
        self.epoch = epoch
        self.location = location

        async def connect() -> Connection:
            return await open(location, epoch)

        super().__init__(
            name=f"storage instance={instance} replica={replica} epoch={epoch} at {location}",
            open=connect,
            responses=_RESPONSES,
            listener=_Tagger(instance, replica, epoch, events),
            backoff=backoff,
            sleep=sleep,
            clock=clock,
        )
