"""Per-collection state of a compute instance.

A :class:`CollectionState` exists for every export (index, materialized view, subscribe) of every
dataflow installed on an instance, from ``create_dataflow`` until it has been dropped, every
read hold on it is gone and every replica reported all its frontiers as ``{}``.

Invariants (checked by the stateful property test):

* ``since() == frontier(read_capabilities)`` and the read capabilities count exactly the
  controller's own hold (at ``min(implied, warmup)``) and every outstanding :class:`ReadHold`
  issued on the collection (peeks, dependants, callers): **the since never passes an
  outstanding hold**;
* the since and the global ``write_frontier`` never regress;
* the dependency holds (``storage_dependencies``, ``compute_dependencies``) sit at the
  collection's since: a collection holds back its inputs at its own since;
* ``write_frontier`` is the maximum write frontier reported by any replica (the fastest
  replica wins), starting at ``as_of``.

A :class:`ReplicaCollectionState` is the view of one replica: its write/input/output frontiers,
starting at the replica's ``as_of``. The replica's *input holds* on storage collections live in
its :class:`~spate.compute.controller.replica.ReplicaState`.
"""

from __future__ import annotations

import enum

from spate.frontier.antichain import Antichain, Frontier
from spate.frontier.mutable import MutableAntichain
from spate.frontier.read_hold import ReadHold
from spate.frontier.read_policy import ReadPolicy
from spate.ids import GlobalId, ReplicaId
from spate.protocol.compute import DataflowStatistics


def frontier_le(a: Frontier, b: Frontier) -> bool:
    """``a <= b`` for totally ordered frontiers, ``{}`` being the top. Hot-path helper."""
    eb = b.elements
    if not eb:
        return True
    ea = a.elements
    if not ea:
        return False
    return ea[0] <= eb[0]


def frontier_lt(a: Frontier, b: Frontier) -> bool:
    """``a < b`` for totally ordered frontiers, ``{}`` being the top."""
    return frontier_le(a, b) and a.elements != b.elements


class CollectionKind(enum.Enum):
    INDEX = "index"
    MATERIALIZED_VIEW = "materialized view"
    SUBSCRIBE = "subscribe"


class CollectionState:
    """The authoritative state of one export on one instance.

    The controller's own capability on the collection is one hold, ``own_hold``, kept at
    ``min(implied, warmup)`` — counting the implied and the warmup capability as two holds
    would give the same since, but cost a read-capability update every time either moves.
    """

    __slots__ = (
        "as_of",
        "compute_dependencies",
        "dropped",
        "id",
        "implied",
        "kind",
        "own_hold",
        "read_capabilities",
        "read_only",
        "read_policy",
        "scheduled",
        "storage_dependencies",
        "target_replica",
        "warmup",
        "warmup_key",
        "write_frontier",
    )

    def __init__(
        self,
        id: GlobalId,
        kind: CollectionKind,
        *,
        as_of: Frontier,
        read_capabilities: MutableAntichain[int],
        own_hold: ReadHold,
        storage_dependencies: dict[GlobalId, ReadHold],
        compute_dependencies: dict[GlobalId, ReadHold],
        target_replica: ReplicaId | None,
    ) -> None:
        self.id = id
        self.kind = kind
        self.as_of = as_of
        self.read_capabilities = read_capabilities
        self.own_hold = own_hold
        # The implied capability: what the read policy asks for (sinks: upper - 1).
        self.implied: Frontier = as_of
        # The warmup capability: min over dependencies of (upper - 1), moved by maintenance.
        self.warmup: Frontier = as_of
        # Indexes are readable and follow a policy; sinks are write-only (no policy).
        self.read_policy: ReadPolicy | None = (
            ReadPolicy.valid_from(as_of) if kind is CollectionKind.INDEX else None
        )
        self.write_frontier: Frontier = as_of
        self.storage_dependencies = storage_dependencies
        self.compute_dependencies = compute_dependencies
        self.target_replica = target_replica
        # The dependencies the warmup capability follows: (id, is a storage collection).
        self.warmup_key: tuple[tuple[GlobalId, bool], ...] = tuple(
            [(d, True) for d in storage_dependencies]
            + [(d, False) for d in compute_dependencies if d != id]
        )
        self.dropped = False
        self.scheduled = False
        self.read_only = True

    def since(self) -> Frontier:
        return self.read_capabilities.frontier()

    def advance_implied(self, target: Frontier) -> None:
        """Move the implied capability to ``target`` unless that would regress it."""
        if frontier_lt(self.implied, target):
            self.implied = target
            self._refresh_own_hold()

    def advance_warmup(self, target: Frontier) -> None:
        if frontier_lt(self.warmup, target):
            self.warmup = target
            self._refresh_own_hold()

    def release_own_hold(self) -> None:
        """Give up the implied and warmup capabilities (on drop)."""
        self.implied = self.warmup = Antichain.empty()
        self.own_hold.release()

    def _refresh_own_hold(self) -> None:
        a, b = self.implied, self.warmup
        lower = b if frontier_le(b, a) else a
        if lower != self.own_hold.since:
            self.own_hold.try_downgrade(lower)

    def is_write_only(self) -> bool:
        """Sinks (materialized views, subscribes) are written, never read through compute."""
        return self.kind is not CollectionKind.INDEX

    def is_transient(self) -> bool:
        return self.id.is_transient()

    def dependency_ids(self) -> list[GlobalId]:
        return [*self.storage_dependencies, *self.compute_dependencies]

    def __repr__(self) -> str:
        return (
            f"CollectionState({self.id}, {self.kind.value}, since={self.since()}, "
            f"upper={self.write_frontier}, dropped={self.dropped})"
        )


class ReplicaCollectionState:
    """One replica's view of one collection."""

    __slots__ = (
        "as_of",
        "collection",
        "eval_error",
        "failure",
        "input_frontier",
        "input_reported",
        "last_subscribe_upper",
        "output_frontier",
        "statistics",
        "steps",
        "write_frontier",
    )

    def __init__(self, collection: CollectionState, as_of: Frontier) -> None:
        self.collection = collection
        self.as_of = as_of
        self.write_frontier = as_of
        self.input_frontier = as_of
        self.output_frontier = as_of
        # Whether the replica reported an input frontier yet (its input holds wait for it).
        self.input_reported = False
        # Upper of the last subscribe batch this replica sent (contiguity check).
        self.last_subscribe_upper: Frontier | None = None
        # How many times the replica reported an advanced write frontier (a step that
        # produced output), for introspection.
        self.steps = 0
        # The replica's latest cumulative statistics of the dataflow exporting it (None: none
        # reported yet), for introspection.
        self.statistics: DataflowStatistics | None = None
        # The replica reported its error collection not empty at its latest time: why.
        self.eval_error: str | None = None
        # The replica reported the dataflow computing the collection failed for good: why.
        self.failure: str | None = None

    def hydrated(self) -> bool:
        """``as_of == {}`` or the replica's output frontier passed the as_of."""
        return self.as_of.is_empty() or frontier_lt(self.as_of, self.output_frontier)

    def all_empty(self) -> bool:
        """The replica reported every frontier as ``{}``: it holds nothing of the collection."""
        return (
            self.write_frontier.is_empty()
            and self.input_frontier.is_empty()
            and self.output_frontier.is_empty()
        )
