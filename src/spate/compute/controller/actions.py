"""What an instance's state machine asks its driver to do (the "out" side of sans-I/O).

An :class:`~spate.compute.controller.instance.Instance` never touches a socket, a clock or a
future: each of its entry points appends actions, which the driver drains and carries out in
order. Order matters: commands to one replica MUST be sent in the order they were emitted
(the protocol is ordered per connection), and a ``ConnectReplica`` precedes every
``SendCommand`` for that ``(replica, epoch)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from spate.compute.controller.replica import ReplicaConfig
from spate.compute.controller.responses import ComputeControllerResponse, PeekResult
from spate.ids import InstanceId, PeekId, ReplicaId
from spate.protocol.compute import ComputeCommand


@dataclass(frozen=True, slots=True)
class SendCommand:
    """Send ``command`` on the connection of ``(replica, epoch)`` (drop it if that epoch is
    gone: the replica will be rehydrated from the history)."""

    instance: InstanceId
    replica: ReplicaId
    epoch: int
    command: ComputeCommand


@dataclass(frozen=True, slots=True)
class ConnectReplica:
    """Start a replica client for ``(replica, epoch)``: connect (retrying with backoff), then
    send the commands that follow, and report its responses tagged with ``epoch``."""

    instance: InstanceId
    replica: ReplicaId
    epoch: int
    config: ReplicaConfig


@dataclass(frozen=True, slots=True)
class DisconnectReplica:
    """Stop the client of ``(replica, epoch)`` and close its connection."""

    instance: InstanceId
    replica: ReplicaId
    epoch: int
    reason: str


@dataclass(frozen=True, slots=True)
class DeliverResponse:
    """Queue ``response`` for the controller's caller (``process()``)."""

    response: ComputeControllerResponse


@dataclass(frozen=True, slots=True)
class DeliverPeekResult:
    """Hand the answer of peek ``uuid`` to whoever issued it."""

    instance: InstanceId
    uuid: PeekId
    result: PeekResult


Action = SendCommand | ConnectReplica | DisconnectReplica | DeliverResponse | DeliverPeekResult


class Effects(Protocol):
    """What the peek and subscribe trackers may do through their instance."""

    def broadcast(self, command: ComputeCommand) -> None:
        """Record ``command`` in the history and send it to every live replica."""
        ...

    def deliver(self, response: ComputeControllerResponse) -> None: ...

    def deliver_peek(self, uuid: PeekId, result: PeekResult) -> None: ...
