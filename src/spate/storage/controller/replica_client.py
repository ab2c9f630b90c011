"""Storage replica clients: one asyncio task per ``(replica, epoch)`` .

A :class:`StorageReplicaClient` is :class:`spate.protocol.replica_client.ReplicaClient` over
storage commands and responses (connect with backoff, queue, ordered sending, one failure
report), whose reports become the events of :mod:`spate.protocol.replica_events`
(``ReplicaConnected``, ``ReplicaResponse``, ``ReplicaFailed``) tagged with its instance, replica
and epoch. The controller rehydrates a failed replica with a new client and the next epoch.
Commands queued before the connection is up are kept, so the replayed history always arrives
first and whole.

How connections are opened is injected (:data:`OpenConnection`): the authenticated TCP
transport in production (:func:`tcp_opener`), an in-memory transport in tests.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final, TypeAlias

from spate.clock import Clock
from spate.ids import InstanceId, ReplicaId
from spate.protocol import replica_events
from spate.protocol.connection import Connection
from spate.protocol.replica_client import DEFAULT_BACKOFF, Backoff, ReplicaClient
from spate.protocol.replica_events import ReplicaConnected as ReplicaConnected
from spate.protocol.replica_events import ReplicaFailed as ReplicaFailed
from spate.protocol.replica_events import ReplicaResponse as ReplicaResponse
from spate.protocol.replica_events import Tagger
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


ReplicaEvent: TypeAlias = replica_events.ReplicaEvent[StorageResponse]
EventSink: TypeAlias = replica_events.EventSink[StorageResponse]
OpenConnection = Callable[[StorageReplicaLocation, int], Awaitable[Connection]]


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
            listener=Tagger(instance, replica, epoch, events),
            backoff=backoff,
            sleep=sleep,
            clock=clock,
        )
