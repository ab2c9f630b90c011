"""Active subscribes of an instance, deduplicated across replicas.

Every replica runs every subscribe dataflow and streams contiguous batches ``[lower, upper)``.
The controller tracks one frontier per subscribe, starting at the minimum. A batch from an
eligible replica (any replica, or only the subscribe's target replica) whose ``upper`` is
beyond the tracked frontier is forwarded as ``[tracked, upper)`` with the updates at times
``< tracked`` removed — the first replica to cover a time slice wins and no slice is emitted
twice. Batches that do not advance the frontier are swallowed.

Guarantee to the caller: the batches of one subscribe are contiguous and non-overlapping,
``lower`` of the first is the minimum, and after a batch with ``upper == {}`` or an ``error``
nothing more is emitted. A subscribe that is dropped stops silently. When the target replica
of a targeted subscribe fails or is dropped, one final batch ``[f, f)`` with
``error = "target replica failed or was dropped"`` ends it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

from spate.compute.controller.actions import Effects
from spate.compute.controller.collection import frontier_lt
from spate.compute.controller.errors import ERROR_TARGET_REPLICA_FAILED
from spate.compute.controller.responses import SubscribeResponse
from spate.frontier.antichain import TIMESTAMP_MIN, Antichain, Frontier
from spate.ids import GlobalId, InstanceId, ReplicaId
from spate.protocol.compute import SubscribeBatch
from spate.repr.desc import TIME_COLUMN

_log: Final = logging.getLogger("spate.compute.controller.subscribe")

ERROR_SUBSCRIBE_DROPPED: Final = "subscribe was dropped by the replica before it completed"


@dataclass(slots=True)
class ActiveSubscribe:
    target_replica: ReplicaId | None
    frontier: Frontier = field(default_factory=Antichain.minimum)


def updates_from(updates: pa.Table, lower: Frontier) -> pa.Table:
    """``updates`` without the rows at times not beyond ``lower``."""
    bound = lower.as_option()
    if bound is None:
        return updates.slice(0, 0)
    if bound == TIMESTAMP_MIN or updates.num_rows == 0:
        return updates
    times = updates.column(TIME_COLUMN)
    if pc.min(times).as_py() >= bound:
        return updates
    return updates.filter(pc.greater_equal(times, pa.scalar(bound, pa.int64())))


class SubscribeTracker:
    """The subscribes of one instance whose output is still being forwarded."""

    __slots__ = ("_active", "_effects", "_instance")

    def __init__(self, instance: InstanceId, effects: Effects) -> None:
        self._instance = instance
        self._effects = effects
        self._active: dict[GlobalId, ActiveSubscribe] = {}

    def __contains__(self, id: GlobalId) -> bool:
        return id in self._active

    def frontier(self, id: GlobalId) -> Frontier | None:
        s = self._active.get(id)
        return None if s is None else s.frontier

    def add(self, id: GlobalId, target_replica: ReplicaId | None) -> None:
        self._active[id] = ActiveSubscribe(target_replica)

    def remove(self, id: GlobalId) -> None:
        """Stop forwarding ``id`` (it was dropped): no further responses for it."""
        self._active.pop(id, None)

    def on_batch(self, replica: ReplicaId, id: GlobalId, batch: SubscribeBatch) -> None:
        s = self._active.get(id)
        if s is None or (s.target_replica is not None and s.target_replica != replica):
            return
        if not frontier_lt(s.frontier, batch.upper):
            return
        lower = s.frontier
        s.frontier = batch.upper
        if batch.error is not None or batch.updates is None:
            error = batch.error if batch.error is not None else "subscribe batch without updates"
            coded = (batch.error_sqlstate, batch.error_pg_message)
            self._emit(id, lower, batch.upper, None, error, *coded)
            return
        self._emit(id, lower, batch.upper, updates_from(batch.updates, lower), None)

    def on_dropped_at(self, replica: ReplicaId, id: GlobalId) -> None:
        s = self._active.get(id)
        if s is None or (s.target_replica is not None and s.target_replica != replica):
            return
        _log.error(
            "subscribe %s still tracked at %s was dropped by replica=%s instance=%s",
            id,
            s.frontier,
            replica,
            self._instance,
        )
        self._emit(id, s.frontier, s.frontier, None, ERROR_SUBSCRIBE_DROPPED)

    def fail_targeting(self, replica: ReplicaId) -> None:
        for id, s in list(self._active.items()):
            if s.target_replica == replica:
                self._emit(id, s.frontier, s.frontier, None, ERROR_TARGET_REPLICA_FAILED)

    def _emit(
        self,
        id: GlobalId,
        lower: Frontier,
        upper: Frontier,
        updates: pa.Table | None,
        error: str | None,
        error_sqlstate: str | None = None,
        error_pg_message: str | None = None,
    ) -> None:
        if upper.is_empty() or error is not None:
            del self._active[id]
        self._effects.deliver(
            SubscribeResponse(
                self._instance, id, lower, upper, updates, error, error_sqlstate, error_pg_message
            )
        )
