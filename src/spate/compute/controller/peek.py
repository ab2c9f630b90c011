"""Pending peeks of an instance.

A peek holds a read hold on its target at ``{timestamp}`` from the moment it is issued until it
is finished, so no replica can be asked to read compacted data. Finishing a peek — by the first
eligible response, by ``cancel_peek``, or by the failure of its target replica — always does,
in this order:

1. deliver the :class:`PeekNotification` and the peek's result to the caller (exactly once);
2. send ``CancelPeek(uuid)`` to every replica (so replicas that have not answered stop, and the
   history can forget the peek);
3. release the read hold — after the ``CancelPeek``, so on every connection the replica sees
   the cancellation before any ``AllowCompaction`` the release may cause.

A response is *eligible* if the peek is still pending and either has no target replica or came
from it; every other response is ignored (the peek was already answered elsewhere).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from spate.compute.controller.actions import Effects
from spate.compute.controller.collection import CollectionKind
from spate.compute.controller.errors import (
    ERROR_TARGET_REPLICA_FAILED,
    CollectionMissing,
    InvalidPeek,
    PeekExists,
    PeekSinceViolation,
    PeekTargetInvalid,
    ReplicaMissing,
)
from spate.compute.controller.responses import (
    PeekNotification,
    PeekOutcome,
    PeekResult,
    PeekWasCanceled,
    outcome_of,
)
from spate.frontier.antichain import TIMESTAMP_MAX, TIMESTAMP_MIN, Antichain
from spate.frontier.read_hold import ReadHold
from spate.ids import GlobalId, InstanceId, PeekId, ReplicaId
from spate.plan.finishing import RowSetFinishing
from spate.protocol.compute import (
    CancelPeek,
    IndexTarget,
    Peek,
    PeekError,
    PersistTarget,
)
from spate.repr.desc import RelationDesc
from spate.repr.types import Row

if TYPE_CHECKING:
    from spate.compute.controller.instance import Instance

_log: Final = logging.getLogger("spate.compute.controller.peek")


@dataclass(slots=True, eq=False)
class PendingPeek:
    uuid: PeekId
    target: GlobalId
    timestamp: int
    target_replica: ReplicaId | None
    read_hold: ReadHold
    requested_at_ms: int


class PeekTracker:
    """The pending peeks of one instance."""

    __slots__ = ("_effects", "_instance", "_pending")

    def __init__(self, instance: InstanceId, effects: Effects) -> None:
        self._instance = instance
        self._effects = effects
        self._pending: dict[PeekId, PendingPeek] = {}

    def __contains__(self, uuid: PeekId) -> bool:
        return uuid in self._pending

    def __len__(self) -> int:
        return len(self._pending)

    def __iter__(self) -> Iterator[PendingPeek]:
        return iter(list(self._pending.values()))

    def get(self, uuid: PeekId) -> PendingPeek | None:
        return self._pending.get(uuid)

    def add(self, peek: PendingPeek) -> None:
        self._pending[peek.uuid] = peek

    def on_response(self, replica: ReplicaId, uuid: PeekId, result: PeekResult) -> None:
        """A replica answered ``uuid``; the first eligible answer finishes the peek."""
        peek = self._pending.get(uuid)
        if peek is None:
            return
        if peek.target_replica is not None and peek.target_replica != replica:
            return
        self.finish(uuid, result, outcome_of(result))

    def cancel(self, uuid: PeekId, reason: PeekResult) -> None:
        """Cancel ``uuid`` on the caller's behalf: ``reason`` is what the caller receives."""
        if uuid not in self._pending:
            _log.warning("cancel of unknown peek %s on instance %s ignored", uuid, self._instance)
            return
        self.finish(uuid, reason, PeekWasCanceled())

    def fail_targeting(self, replica: ReplicaId) -> None:
        """Finish every peek that only ``replica`` may answer: it failed or was dropped."""
        for peek in list(self._pending.values()):
            if peek.target_replica == replica:
                result = PeekError(ERROR_TARGET_REPLICA_FAILED)
                self.finish(peek.uuid, result, outcome_of(result))

    def cancel_all(self, message: str) -> None:
        for peek in list(self._pending.values()):
            result = PeekError(message)
            self.finish(peek.uuid, result, outcome_of(result))

    def finish(self, uuid: PeekId, result: PeekResult, outcome: PeekOutcome) -> None:
        peek = self._pending.pop(uuid)
        self._effects.deliver(PeekNotification(self._instance, uuid, outcome))
        self._effects.deliver_peek(uuid, result)
        self._effects.broadcast(CancelPeek(uuid))
        peek.read_hold.release()


def issue_peek(
    inst: Instance,
    *,
    target: IndexTarget | PersistTarget,
    uuid: PeekId,
    timestamp: int,
    finishing: RowSetFinishing,
    result_desc: RelationDesc,
    literal_constraints: tuple[Row, ...] | None,
    target_replica: ReplicaId | None,
    requested_at_ms: int,
) -> None:
    """Validate and issue a peek ; raises before changing anything."""
    inst.check_live()
    if isinstance(timestamp, bool) or not isinstance(timestamp, int):
        raise InvalidPeek(f"peek {uuid}: timestamp must be an int, got {timestamp!r}")
    if not TIMESTAMP_MIN <= timestamp <= TIMESTAMP_MAX:
        raise InvalidPeek(f"peek {uuid}: timestamp {timestamp} outside [0, 2**64)")
    if literal_constraints is not None and not literal_constraints:
        raise InvalidPeek(f"peek {uuid}: literal_constraints, when given, must not be empty")
    if target_replica is not None and target_replica not in inst.replicas:
        raise ReplicaMissing(inst.id, target_replica)
    if uuid in inst.peeks:
        raise PeekExists(uuid, inst.id)
    at = Antichain.of(timestamp)
    if isinstance(target, IndexTarget):
        c = inst.collection(target.id)
        if c.kind is not CollectionKind.INDEX:
            raise PeekTargetInvalid(target.id, f"it is a {c.kind.value}")
        since = c.since()
        if not since.less_equal(timestamp):
            raise PeekSinceViolation(target.id, since=since, timestamp=timestamp)
        inst.begin()
        hold = inst.issue_hold(c, at)  # at the timestamp: no downgrade needed
    else:
        try:
            meta = inst.storage.collection_metadata(target.id)
            (hold,) = inst.storage.acquire_read_holds([target.id])
        except KeyError:
            raise CollectionMissing(target.id) from None
        if not hold.since.less_equal(timestamp):
            since = hold.since
            hold.release()
            raise PeekSinceViolation(target.id, since=since, timestamp=timestamp)
        target = PersistTarget(target.id, meta.shard, meta.desc)
        inst.begin()
        hold.try_downgrade(at)
    # Validated: from here on nothing raises, and end() always runs.
    try:
        inst.peeks.add(
            PendingPeek(uuid, target.id, timestamp, target_replica, hold, requested_at_ms)
        )
        inst.broadcast(
            Peek(
                target=target,
                uuid=uuid,
                timestamp=timestamp,
                finishing=finishing,
                result_desc=result_desc,
                literal_constraints=literal_constraints,
            )
        )
    finally:
        inst.end()
