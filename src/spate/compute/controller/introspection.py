"""Introspection values the compute controller returns through its API.

Snapshots, not live views: each call builds new frozen values from the instance's state.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from spate.compute.controller.collection import CollectionKind, ReplicaCollectionState
from spate.compute.controller.errors import HydrationCheckBadTarget, ReplicaMissing
from spate.frontier.antichain import Frontier
from spate.frontier.read_policy import ReadPolicy
from spate.ids import GlobalId, PeekId, ReplicaId
from spate.protocol.compute import DataflowStatistics

if TYPE_CHECKING:
    from spate.compute.controller.instance import Instance


@dataclass(frozen=True, slots=True)
class CollectionFrontiers:
    """A collection's read frontier (since) and global write frontier (upper)."""

    read_frontier: Frontier
    write_frontier: Frontier


@dataclass(frozen=True, slots=True)
class ReplicaFrontiers:
    """What one replica reported for one collection, and its per-replica as_of."""

    as_of: Frontier
    write_frontier: Frontier
    input_frontier: Frontier
    output_frontier: Frontier
    hydrated: bool
    steps: int = 0
    """How many times the replica reported an advanced write frontier."""
    statistics: DataflowStatistics | None = None
    """The replica's latest report of the dataflow's cumulative statistics (``None``: none
    yet)."""
    eval_error: str | None = None
    """Why reads fail at the replica's latest time (its error collection is not empty
    there), as the replica last reported; ``None``: no error."""


@dataclass(frozen=True, slots=True)
class CollectionInfo:
    """Everything the controller knows about one collection of an instance."""

    id: GlobalId
    kind: str
    as_of: Frontier
    since: Frontier
    upper: Frontier
    read_policy: ReadPolicy | None
    scheduled: bool
    hydrated: bool
    read_only: bool
    dependencies: tuple[GlobalId, ...]
    replicas: dict[ReplicaId, ReplicaFrontiers]


@dataclass(frozen=True, slots=True)
class ReplicaInfo:
    """Health of one replica: epoch, connection state, failures, hydration progress."""

    id: ReplicaId
    epoch: int
    health: str
    failures: int
    last_error: str | None
    location: str
    collections: int
    hydrated_collections: int
    hydrating: tuple[GlobalId, ...]
    queued_for_hydration: tuple[GlobalId, ...]
    outstanding_peeks: int


def _frontiers(rc: ReplicaCollectionState) -> ReplicaFrontiers:
    return ReplicaFrontiers(
        as_of=rc.as_of,
        write_frontier=rc.write_frontier,
        input_frontier=rc.input_frontier,
        output_frontier=rc.output_frontier,
        hydrated=rc.hydrated(),
        steps=rc.steps,
        statistics=rc.statistics,
        eval_error=rc.eval_error,
    )


def collection_frontiers(inst: Instance, id: GlobalId) -> CollectionFrontiers:
    c = inst.collection(id)
    return CollectionFrontiers(read_frontier=c.since(), write_frontier=c.write_frontier)


def collection_error(inst: Instance, id: GlobalId) -> str | None:
    """Why reads of ``id`` fail at its latest time (its error collection is not empty there,
    as a live replica last reported), or ``None``."""
    inst.collection(id)
    for r in inst.replicas.values():
        rc = r.collections.get(id)
        if rc is not None and rc.eval_error is not None:
            return rc.eval_error
    return None


def collection_failure(inst: Instance, id: GlobalId) -> str | None:
    """Why ``id`` is computed by none of the instance's replicas any more (each reported its
    dataflow failed for good; a rehydrated replica tries again), or ``None``."""
    inst.collection(id)
    found = [rc.failure for r in inst.replicas.values() if (rc := r.collections.get(id))]
    if not inst.replicas or len(found) < len(inst.replicas) or None in found:
        return None
    return found[0]


def collection_hydrated(inst: Instance, id: GlobalId) -> bool:
    """Hydrated on some replica; trivially true without replicas."""
    inst.collection(id)
    if not inst.replicas:
        return True
    return any(
        rc is not None and rc.hydrated()
        for rc in (r.collections.get(id) for r in inst.replicas.values())
    )


def collections_hydrated_for_replicas(
    inst: Instance, replicas: Iterable[ReplicaId], exclude: Iterable[GlobalId]
) -> bool:
    """Every live, non-transient collection outside ``exclude`` is hydrated on at least one of
    ``replicas``. Raises ``HydrationCheckBadTarget`` when none of them exists."""
    asked = list(replicas)
    targets = [inst.replicas[r] for r in asked if r in inst.replicas]
    if not targets:
        raise HydrationCheckBadTarget(inst.id, asked)
    excluded = set(exclude)
    for c in inst.live_collections():
        if c.is_transient() or c.id in excluded:
            continue
        if not any(
            rc is not None and rc.hydrated() for rc in (r.collections.get(c.id) for r in targets)
        ):
            return False
    return True


def collection_info(inst: Instance, id: GlobalId) -> CollectionInfo:
    c = inst.collection(id)
    replicas = {
        r.id: _frontiers(rc)
        for r in inst.replicas.values()
        if (rc := r.collections.get(id)) is not None
    }
    return CollectionInfo(
        id=id,
        kind=c.kind.value,
        as_of=c.as_of,
        since=c.since(),
        upper=c.write_frontier,
        read_policy=c.read_policy,
        scheduled=c.scheduled,
        hydrated=collection_hydrated(inst, id),
        read_only=c.read_only,
        dependencies=tuple(c.dependency_ids()),
        replicas=replicas,
    )


def replica_info(inst: Instance, replica: ReplicaId) -> ReplicaInfo:
    r = inst.replicas.get(replica)
    if r is None:
        raise ReplicaMissing(inst.id, replica)
    return ReplicaInfo(
        id=r.id,
        epoch=r.epoch,
        health=r.health.value,
        failures=r.failures,
        last_error=r.last_error,
        location=str(r.config.location),
        collections=len(r.collections),
        hydrated_collections=sum(1 for rc in r.collections.values() if rc.hydrated()),
        hydrating=tuple(sorted(r.gate.hydrating)),
        queued_for_hydration=r.gate.queued,
        outstanding_peeks=len(r.outstanding_peeks),
    )


def replica_frontiers(inst: Instance, replica: ReplicaId) -> dict[GlobalId, ReplicaFrontiers]:
    """Per collection, what ``replica`` reported (live collections only)."""
    r = inst.replicas.get(replica)
    if r is None:
        raise ReplicaMissing(inst.id, replica)
    return {
        id: _frontiers(rc) for id, rc in r.collections.items() if not inst.collections[id].dropped
    }


@dataclass(frozen=True, slots=True)
class PeekInfo:
    """A peek waiting for its answer."""

    uuid: PeekId
    target: GlobalId
    timestamp: int
    replica: ReplicaId | None
    requested_at_ms: int


def peeks(inst: Instance) -> list[PeekInfo]:
    return [
        PeekInfo(p.uuid, p.target, p.timestamp, p.target_replica, p.requested_at_ms)
        for p in inst.peeks
    ]


def subscribes(inst: Instance) -> dict[GlobalId, Frontier]:
    """The running subscribes of the instance and their uppers."""
    return {
        c.id: c.write_frontier
        for c in inst.live_collections()
        if c.kind is CollectionKind.SUBSCRIBE
    }
