"""Issuing a peek on an instance: validate the request against the instance's state, then hold
its target at the timestamp and send it to the replicas (:mod:`spate.compute.controller.peek`
tracks it from there)."""

from __future__ import annotations

from spate.compute.controller.collection import CollectionKind
from spate.compute.controller.errors import (
    CollectionMissing,
    InvalidPeek,
    PeekExists,
    PeekSinceViolation,
    PeekTargetInvalid,
    ReplicaMissing,
)
from spate.compute.controller.instance_state import InstanceState
from spate.compute.controller.peek import PendingPeek
from spate.frontier.antichain import TIMESTAMP_MAX, TIMESTAMP_MIN, Antichain
from spate.ids import PeekId, ReplicaId
from spate.plan.finishing import RowSetFinishing
from spate.protocol.compute import (
    IndexTarget,
    Peek,
    PersistTarget,
)
from spate.repr.desc import RelationDesc
from spate.repr.types import Row


def issue_peek(
    inst: InstanceState,
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
    """Validate and issue a peek; raises before changing anything."""
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
