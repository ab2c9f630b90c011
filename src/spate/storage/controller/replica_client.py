"""Storage replica clients: one asyncio task per ``(replica, epoch)`` (spec §6.4).

A :class:`StorageReplicaClient` connects to its replica (retrying with exponential backoff up to
one second), then sends the queued commands in order and reports each response as a
:class:`ReplicaResponse` tagged with its epoch. The first error ends the client with one
:class:`ReplicaFailed`; the controller then rehydrates the replica with a new client and the
next epoch. Closing a client ends it silently. Commands queued before the connection is up are
kept, so the replayed history always arrives first and whole.

How connections are opened is injected (:data:`OpenConnection`): the authenticated TCP
transport in production (:func:`tcp_opener`), an in-memory transport in tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final

from spate.errors import ProtocolError
from spate.ids import InstanceId, ReplicaId
from spate.protocol.connection import Connection
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
from spate.tasks import cancel_and_wait

_log: Final = logging.getLogger("spate.storage.controller.replica_client")

BACKOFF_INITIAL_S: Final = 0.05
BACKOFF_MAX_S: Final = 1.0
_RESPONSES: Final = (FrontierUpper, DroppedId, StatisticsUpdates, StatusUpdate)


@dataclass(frozen=True, slots=True)
class StorageReplicaLocation:
    """Where a storage replica listens (``spate replica --role storage``) and its secret."""

    host: str
    port: int
    secret: Secret | None = field(default=None, repr=False)

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
        location.host, location.port, role="storage", epoch=epoch, secret=location.secret
    )


class StorageReplicaClient:
    """The client of one ``(replica, epoch)`` (module docs). Create inside the event loop."""

    def __init__(
        self,
        instance: InstanceId,
        replica: ReplicaId,
        epoch: int,
        location: StorageReplicaLocation,
        open: OpenConnection,
        events: EventSink,
        *,
        backoff_initial_s: float = BACKOFF_INITIAL_S,
        backoff_max_s: float = BACKOFF_MAX_S,
    ) -> None:
        self.instance = instance
        self.replica = replica
        self.epoch = epoch
        self.location = location
        self._open = open
        self._events = events
        self._backoff = (backoff_initial_s, backoff_max_s)
        self._queue: asyncio.Queue[StorageCommand] = asyncio.Queue()
        self._closed = False
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"storage replica {instance}/{replica} epoch {epoch}"
        )

    def send(self, command: StorageCommand) -> None:
        """Queue ``command``; never blocks, never raises."""
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
            f"instance={self.instance} replica={self.replica} epoch={self.epoch} at {self.location}"
        )

    async def _run(self) -> None:
        conn = await self._connect()
        if self._closed:
            with contextlib.suppress(Exception):
                await conn.close()
            return
        self._events(ReplicaConnected(self.instance, self.replica, self.epoch))
        reason = await self._serve(conn)
        if not self._closed:
            _log.warning("storage replica connection lost: %s: %s", self._where(), reason)
            self._events(ReplicaFailed(self.instance, self.replica, self.epoch, reason))

    async def _connect(self) -> Connection:
        delay, limit = self._backoff
        while True:
            try:
                return await self._open(self.location, self.epoch)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # retried: the replica may still be starting
                _log.info("connecting to %s failed (retry in %.2fs): %s", self._where(), delay, e)
            await asyncio.sleep(delay)
            delay = min(delay * 2, limit)

    async def _serve(self, conn: Connection) -> str:
        sender = asyncio.create_task(self._send_loop(conn))
        receiver = asyncio.create_task(self._recv_loop(conn))
        try:
            done, _ = await asyncio.wait({sender, receiver}, return_when=asyncio.FIRST_COMPLETED)
            error = next(iter(done)).exception()
            return f"{type(error).__name__}: {error}" if error is not None else "stopped"
        finally:
            await cancel_and_wait([sender, receiver])
            with contextlib.suppress(Exception):
                await conn.close()

    async def _send_loop(self, conn: Connection) -> None:
        while True:
            await conn.send(await self._queue.get())

    async def _recv_loop(self, conn: Connection) -> None:
        while True:
            message = await conn.recv()
            if not isinstance(message, _RESPONSES):
                raise ProtocolError(f"not a storage response: {type(message).__name__}")
            if self._closed:
                return
            self._events(ReplicaResponse(self.instance, self.replica, self.epoch, message))
