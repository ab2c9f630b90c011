"""One replica of a compute instance, as the instance's state machine sees it.

A replica is identified by ``(replica id, epoch)``: every (re)connection is a new *epoch*, and
responses tagged with another epoch are stale and dropped. The state kept per replica:

* its configuration (where to connect, an optional replica-specific ``InstanceConfig``);
* its health: ``connecting`` until the driver reports the connection up, ``connected``, or
  ``failed`` (connection lost, or a replica bug detected); a failed replica is rehydrated by
  the next maintenance pass with ``epoch + 1``;
* per collection, a :class:`ReplicaCollectionState` (its reported frontiers);
* per storage input, one *input hold* at the least input frontier the replica reported for the
  collections reading it — moved by maintenance, released when the replica goes;
* the peeks it still owes an answer (each replica answers each peek it received exactly once,
  so a response for any other uuid is unsolicited or duplicate: a replica bug);
* its :class:`HydrationGate`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from spate.compute.controller.collection import ReplicaCollectionState, frontier_lt
from spate.compute.controller.hydration import HydrationGate
from spate.frontier.antichain import Antichain, Frontier
from spate.frontier.read_hold import ReadHold
from spate.ids import GlobalId, PeekId, ReplicaId
from spate.protocol.compute import InstanceConfig
from spate.protocol.tls import PeerAuth


@dataclass(frozen=True, slots=True)
class ReplicaLocation:
    """Where a replica process listens (``spate replica --role compute``), and how to
    authenticate to it when not with the connector's defaults (``auth``)."""

    host: str
    port: int
    auth: PeerAuth | None = field(default=None, compare=False, repr=False)

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class ReplicaConfig:
    """How to reach a replica, and an optional replica-specific ``CreateInstance`` config
    (``None``: the instance's)."""

    location: ReplicaLocation
    instance_config: InstanceConfig | None = None


class ReplicaHealth(enum.Enum):
    CONNECTING = "connecting"
    CONNECTED = "connected"
    FAILED = "failed"


class ReplicaState:
    __slots__ = (
        "collections",
        "config",
        "epoch",
        "failures",
        "gate",
        "health",
        "id",
        "input_holds",
        "inputs_dirty",
        "last_error",
        "outstanding_peeks",
    )

    def __init__(
        self, id: ReplicaId, epoch: int, config: ReplicaConfig, gate: HydrationGate
    ) -> None:
        self.id = id
        self.epoch = epoch
        self.config = config
        self.gate = gate
        self.health = ReplicaHealth.CONNECTING
        self.collections: dict[GlobalId, ReplicaCollectionState] = {}
        self.outstanding_peeks: set[PeekId] = set()
        # One hold per storage input of this replica's dataflows, at the least input frontier
        # the replica reported for any collection reading it (at most at the input's since
        # when the first such dataflow was installed): a slow replica keeps its inputs.
        self.input_holds: dict[GlobalId, ReadHold] = {}
        # Input frontiers or collections changed since the holds were last moved.
        self.inputs_dirty = False
        self.failures = 0
        self.last_error: str | None = None

    def add_input_hold(self, hold: ReadHold) -> None:
        """Hold ``hold.id`` for this replica at least as far back as ``hold`` (absorbed)."""
        mine = self.input_holds.get(hold.id)
        if mine is None:
            self.input_holds[hold.id] = hold
        else:
            mine.merge_assign(hold)
        self.inputs_dirty = True

    def move_input_holds(self) -> None:
        """Move each input hold to the least input frontier reported for the collections
        reading it — not at all while one of them has reported none yet (the hold stays at the
        least time available) — and release the holds nobody reads any more.
        O(collections of this replica)."""
        if not self.inputs_dirty:
            return
        least: dict[GlobalId, Frontier] = {}
        stuck: set[GlobalId] = set()  # read by a collection that has not reported yet
        for rc in self.collections.values():
            frontier = rc.input_frontier
            if frontier.is_empty():
                continue
            deps = rc.collection.storage_dependencies
            if not rc.input_reported:
                stuck.update(deps)
                continue
            for dep in deps:
                have = least.get(dep)
                if have is None or frontier_lt(frontier, have):
                    least[dep] = frontier
        for dep, hold in list(self.input_holds.items()):
            if dep in stuck:
                continue
            target = least.get(dep, Antichain.empty())
            if target.is_empty():
                hold.release()
                del self.input_holds[dep]
            elif frontier_lt(hold.since, target):
                hold.try_downgrade(target)
        self.inputs_dirty = False

    def release_input_holds(self) -> None:
        for hold in self.input_holds.values():
            hold.release()
        self.input_holds.clear()

    def is_failed(self) -> bool:
        return self.health is ReplicaHealth.FAILED

    def __repr__(self) -> str:
        return f"ReplicaState({self.id}, epoch={self.epoch}, {self.health.value})"
