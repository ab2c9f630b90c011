"""What replica clients report to the compute controller: the events of
:mod:`spate.protocol.replica_events` over compute responses, tagged ``(instance, replica,
epoch)`` (ordering and staleness are described there)."""

from __future__ import annotations

from typing import TypeAlias

from spate.protocol import replica_events
from spate.protocol.compute import ComputeResponse
from spate.protocol.replica_events import ReplicaConnected, ReplicaFailed, ReplicaResponse

__all__ = ["EventSink", "ReplicaConnected", "ReplicaEvent", "ReplicaFailed", "ReplicaResponse"]

ReplicaEvent: TypeAlias = replica_events.ReplicaEvent[ComputeResponse]
EventSink: TypeAlias = replica_events.EventSink[ComputeResponse]
