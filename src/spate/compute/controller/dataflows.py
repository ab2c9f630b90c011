"""Installing and dropping dataflows on an instance, and read policies.

``create_dataflow`` validates, in this order, and raises before changing anything: the target
replica exists (``ReplicaMissing``); the as_of is set (``MissingAsOf``) and non-empty if there
is a subscribe (``EmptyAsOfForSubscribe``); the description is well formed
(``InvalidDataflow``); index imports are live indexes of this instance and storage imports and
materialized-view sinks are storage collections (``CollectionMissing``); every input is
readable at the as_of (``DataflowSinceViolation``).

It then installs one :class:`CollectionState` per export with ``since = upper = as_of``:

* the implied and the warmup capability, both at the as_of (one hold at their minimum);
* one *dependency hold* per input at the as_of, which follows the export's since — the dataflow
  holds its inputs back at its own since, never further;
* per replica, *input holds* on the storage inputs at their current since (so a replica that is
  slow to reconcile does not see its inputs compacted), moved only by that replica's reported
  input frontiers;
* a materialized view adopts its shard's upper if that is later than the as_of.

An empty as_of means there is nothing to compute (a materialized view past its last refresh): no
``CreateDataflow`` is sent and the exports count as hydrated. Otherwise ``CreateDataflow`` (with
shard ids and current input uppers filled in) goes to the history and every replica, and each
export is scheduled as soon as the scheduling gate allows.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from spate.compute.controller import maintenance
from spate.compute.controller.collection import (
    CollectionKind,
    CollectionState,
    ReplicaCollectionState,
    frontier_lt,
)
from spate.compute.controller.errors import (
    CollectionMissing,
    DataflowSinceViolation,
    EmptyAsOfForSubscribe,
    InvalidDataflow,
    MissingAsOf,
    ReplicaMissing,
    WriteOnlyCollection,
)
from spate.compute.controller.storage import StorageCollectionMetadata
from spate.compute.controller.validate import validate_dataflow
from spate.errors import InvalidReadPolicy
from spate.frontier.antichain import Frontier
from spate.frontier.mutable import MutableAntichain
from spate.frontier.read_hold import ReadHold
from spate.frontier.read_policy import ReadPolicy
from spate.ids import GlobalId, ReplicaId
from spate.plan.dataflow import DataflowDescription, MaterializedViewConnection
from spate.protocol.compute import CreateDataflow

if TYPE_CHECKING:
    from spate.compute.controller.instance_state import InstanceState


def _storage_metadata(inst: InstanceState, id: GlobalId) -> StorageCollectionMetadata:
    try:
        return inst.storage.collection_metadata(id)
    except KeyError:
        raise CollectionMissing(id) from None


def _acquire_storage_holds(inst: InstanceState, ids: Sequence[GlobalId]) -> list[ReadHold]:
    if not ids:
        return []
    try:
        return inst.storage.acquire_read_holds(ids)
    except KeyError as e:
        named = getattr(e, "id", None)
        missing = next((i for i in ids if i == named or i in e.args), ids[0])
        raise CollectionMissing(missing) from None


def create_dataflow(
    inst: InstanceState, df: DataflowDescription, target_replica: ReplicaId | None
) -> None:
    inst.check_live()
    if target_replica is not None and target_replica not in inst.replicas:
        raise ReplicaMissing(inst.id, target_replica)
    as_of = df.as_of
    if as_of is None:
        raise MissingAsOf(df.export_ids())
    subscribes = df.subscribe_ids()
    if as_of.is_empty() and subscribes:
        raise EmptyAsOfForSubscribe(subscribes[0])
    validate_dataflow(df, targeted=target_replica is not None)
    for id in df.export_ids():
        if id in inst.collections:
            raise InvalidDataflow(f"collection {id} exists already on instance {inst.id}")
    for imp in df.index_imports:
        dep = inst.collections.get(imp.id)
        if dep is None or dep.dropped:
            raise CollectionMissing(imp.id, inst.id)
        if dep.kind is not CollectionKind.INDEX:
            raise InvalidDataflow(f"index import {imp.id} is a {dep.kind.value}, not an index")
        if not dep.since().less_equal(as_of):
            raise DataflowSinceViolation(imp.id, since=dep.since(), as_of=as_of)
    metadata: dict[GlobalId, StorageCollectionMetadata] = {}
    for s in df.source_imports:
        meta = metadata[s.id] = _storage_metadata(inst, s.id)
        if meta.desc != s.desc:
            raise InvalidDataflow(
                f"source import {s.id} declares columns {s.desc.names}, but the storage "
                f"collection has {meta.desc.names}"
            )
    for sink in df.sink_exports:
        if sink.is_materialized_view():
            metadata[sink.id] = _storage_metadata(inst, sink.id)
    holds = _acquire_storage_holds(inst, [s.id for s in df.source_imports])
    for h in holds:
        if not h.since.less_equal(as_of):
            violation = DataflowSinceViolation(h.id, since=h.since, as_of=as_of)
            for other in holds:
                other.release()
            raise violation
    inst.begin()
    try:
        _install(inst, df, as_of, target_replica, {h.id: h for h in holds}, metadata)
    finally:
        inst.end()


def _filled(
    inst: InstanceState,
    df: DataflowDescription,
    metadata: dict[GlobalId, StorageCollectionMetadata],
) -> DataflowDescription:
    """``df`` with shard ids and the current uppers of its storage inputs filled in."""
    sources = tuple(
        dataclasses.replace(
            s,
            shard=metadata[s.id].shard,
            upper=inst.storage.collection_frontiers(s.id).upper,
        )
        for s in df.source_imports
    )
    sinks = tuple(
        dataclasses.replace(s, connection=MaterializedViewConnection(metadata[s.id].shard))
        if s.is_materialized_view()
        else s
        for s in df.sink_exports
    )
    return dataclasses.replace(df, source_imports=sources, sink_exports=sinks)


def _install(
    inst: InstanceState,
    df: DataflowDescription,
    as_of: Frontier,
    target_replica: ReplicaId | None,
    storage_holds: dict[GlobalId, ReadHold],
    metadata: dict[GlobalId, StorageCollectionMetadata],
) -> None:
    kinds: list[tuple[GlobalId, CollectionKind]] = [
        (e.id, CollectionKind.INDEX) for e in df.index_exports
    ]
    for s in df.sink_exports:
        kind = CollectionKind.SUBSCRIBE if s.is_subscribe() else CollectionKind.MATERIALIZED_VIEW
        kinds.append((s.id, kind))
    created: list[CollectionState] = []
    for id, kind in kinds:
        caps: MutableAntichain[int] = MutableAntichain()
        if not as_of.is_empty():
            caps.update_iter([(t, 1) for t in as_of])
        storage_deps = {sid: h.clone() for sid, h in storage_holds.items()}
        compute_deps = {
            imp.id: inst.issue_hold(inst.collections[imp.id], as_of) for imp in df.index_imports
        }
        c = CollectionState(
            id,
            kind,
            as_of=as_of,
            read_capabilities=caps,
            own_hold=ReadHold(id, as_of, inst.hold_changes),
            storage_dependencies=storage_deps,
            compute_dependencies=compute_deps,
            target_replica=target_replica,
        )
        inst.collections[id] = c
        for r in inst.replicas.values():
            r.collections[id] = ReplicaCollectionState(c, as_of)
            if not as_of.is_empty():
                for h in storage_holds.values():
                    r.add_input_hold(h.clone())
        if kind is CollectionKind.SUBSCRIBE:
            inst.subscribes.add(id, target_replica)
        created.append(c)
    for c in created:
        for h in c.storage_dependencies.values():
            h.try_downgrade(as_of)
    for h in storage_holds.values():
        h.release()
    for c in created:
        if c.kind is CollectionKind.MATERIALIZED_VIEW:
            upper = inst.storage.collection_frontiers(c.id).upper
            if frontier_lt(c.write_frontier, upper):
                inst.update_write_frontier(c, upper)
    if as_of.is_empty():
        return
    inst.broadcast(CreateDataflow(_filled(inst, df, metadata)))
    for c in created:
        inst.unscheduled[c.id] = None
        maintenance.maybe_schedule(inst, c)


def drop_collections(inst: InstanceState, ids: Iterable[GlobalId]) -> None:
    """Drop ``ids`` (all or nothing): release their implied and warmup holds and stop
    forwarding their output. Their state stays until no hold remains and every replica reported
    every frontier as ``{}`` (cleaned up by maintenance)."""
    inst.check_live()
    targets = list(dict.fromkeys(ids))
    collections = [inst.collection(id) for id in targets]
    inst.begin()
    try:
        for c in collections:
            inst.mark_dropped(c)
    finally:
        inst.end()


def set_read_policy(inst: InstanceState, policies: Sequence[tuple[GlobalId, ReadPolicy]]) -> None:
    """Set read policies (all or nothing). The implied hold moves to ``policy.frontier(upper)``
    unless that would regress it: a policy never recovers a capability already released. A
    policy that compacts a collection to ``{}`` drops it (as :func:`drop_collections`)."""
    inst.check_live()
    checked: list[tuple[CollectionState, ReadPolicy]] = []
    for id, policy in policies:
        c = inst.collection(id)
        if c.kind is not CollectionKind.INDEX:
            raise WriteOnlyCollection(id)
        if not isinstance(policy, ReadPolicy):
            raise InvalidReadPolicy(f"collection {id}: not a read policy: {policy!r}")
        checked.append((c, policy))
    inst.begin()
    try:
        for c, policy in checked:
            c.read_policy = policy
            c.advance_implied(policy.frontier(c.write_frontier))
            inst.drop_if_compacted_away(c)
    finally:
        inst.end()
