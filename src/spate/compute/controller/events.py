"""What replica clients report to the compute controller, tagged ``(instance, replica, epoch)``.

A client reports, in order: ``ReplicaConnected`` once its connection is up (and authenticated),
then each ``ReplicaResponse`` as it arrives, and at most one ``ReplicaFailed`` when the
connection is lost or broken — after which it reports nothing more. A client that the
controller closed reports nothing at all. The controller drops events whose epoch is not the
replica's current one (stale), so a client never has to know whether it is still wanted.
"""

from __future__ import annotations

from dataclasses import dataclass

from spate.ids import InstanceId, ReplicaId
from spate.protocol.compute import ComputeResponse


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
    response: ComputeResponse


@dataclass(frozen=True, slots=True)
class ReplicaFailed:
    instance: InstanceId
    replica: ReplicaId
    epoch: int
    reason: str


ReplicaEvent = ReplicaConnected | ReplicaResponse | ReplicaFailed
