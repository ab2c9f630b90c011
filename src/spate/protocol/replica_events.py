"""What a replica client reports to its controller, tagged ``(instance, replica, epoch)``.

Generic over the protocol's response type: the compute controller receives
``ReplicaEvent[ComputeResponse]``, the storage controller ``ReplicaEvent[StorageResponse]``.

A client reports, in order: ``ReplicaConnected`` once its connection is up (and authenticated),
then each ``ReplicaResponse`` as it arrives, and at most one ``ReplicaFailed`` when the
connection is lost or broken — after which it reports nothing more. A client that the
controller closed reports nothing at all. A controller drops events whose epoch is not the
replica's current one (stale), so a client never has to know whether it is still wanted.

:class:`Tagger` is the :class:`~spate.protocol.replica_client.ClientListener` that turns a
:class:`~spate.protocol.replica_client.ReplicaClient`'s reports into these events.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeAlias, TypeVar

from spate.ids import InstanceId, ReplicaId

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class ReplicaConnected:
    """The client of ``(replica, epoch)`` is connected and authenticated."""

    instance: InstanceId
    replica: ReplicaId
    epoch: int


@dataclass(frozen=True, slots=True)
class ReplicaResponse(Generic[R]):
    """``response`` arrived from ``(replica, epoch)``."""

    instance: InstanceId
    replica: ReplicaId
    epoch: int
    response: R


@dataclass(frozen=True, slots=True)
class ReplicaFailed:
    """The connection of ``(replica, epoch)`` was lost or broken; nothing more will come."""

    instance: InstanceId
    replica: ReplicaId
    epoch: int
    reason: str


ReplicaEvent: TypeAlias = ReplicaConnected | ReplicaResponse[R] | ReplicaFailed
EventSink: TypeAlias = Callable[[ReplicaEvent[R]], None]


class Tagger(Generic[R]):
    """Reports a client's events to ``events``, tagged with its instance, replica and epoch."""

    def __init__(
        self, instance: InstanceId, replica: ReplicaId, epoch: int, events: EventSink[R]
    ) -> None:
        self._where = (instance, replica, epoch)
        self._events = events

    def connected(self) -> None:
        self._events(ReplicaConnected(*self._where))

    def response(self, response: R) -> None:
        self._events(ReplicaResponse(*self._where, response))

    def failed(self, reason: str) -> None:
        self._events(ReplicaFailed(*self._where, reason))
