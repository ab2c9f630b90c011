"""A stateful model of the storage controller's state (sans-I/O ``StorageState``).

Hypothesis drives the state with random API calls (create tables, ingestions with an export,
collections written elsewhere; read holds, read policies, drops; prepare/create/drop sinks;
add, drop and fail replicas; maintenance and flushes) and random replica behaviour (frontier
reports from the current or a stale connection epoch). Model replicas see exactly the commands
the state sent on their current connection (:class:`tests.protocol.storage_model.StorageModel`),
and a failed connection sees nothing until it is rehydrated.

Invariants, checked after every step:

* the since of every collection is the frontier of its read capabilities, never passes an
  outstanding read hold, and never regresses; neither does a write frontier;
* a stale response never changes a frontier;
* after a flush, every ingestion and sink runs on exactly one connected replica — the owner,
  the lowest replica id — with the state's since of each of its collections, and on no other;
* every collection is forgotten at most once, only with since ``{}``, after a since downgrade
  to ``{}``; a forgotten shard is unfinalized until finalized;
* the reduced command history stays bounded by the live objects.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from spate.clock import ManualClock
from spate.frontier import Antichain, Frontier, ReadHold, ReadPolicy
from spate.ids import GlobalId, InstanceId, ReplicaId, SeededIdGen, ShardId
from spate.protocol.common import Hello
from spate.protocol.storage import (
    FrontierUpper,
    ObjectStatus,
    RunIngestion,
    RunSink,
    StatusUpdate,
)
from spate.protocol.storage_desc import ParquetSinkConnection
from spate.storage.controller.actions import (
    Action,
    ConnectReplica,
    DisconnectReplica,
    DowngradeSince,
    FinalizeShards,
    ForgetCollections,
    SendCommand,
)
from spate.storage.controller.replica_client import (
    ReplicaConnected,
    ReplicaFailed,
    ReplicaResponse,
    StorageReplicaLocation,
)
from spate.storage.controller.state import StorageState
from spate.storage.controller.types import (
    CollectionDescription,
    ExportDescription,
    OtherSource,
    TableSource,
)
from tests.protocol.storage_model import StorageModel
from tests.storage.controller._harness import TABLE_DESC, counter_ingestion

I1 = InstanceId(1)
REPLICAS = (ReplicaId(1), ReplicaId(2), ReplicaId(3))
LOCATION = StorageReplicaLocation("127.0.0.1", 1)
EXAMPLES = int(os.environ.get("SPATE_STATEFUL_EXAMPLES", "60"))


@dataclass
class ModelReplica:
    """What one replica saw on its current connection."""

    epoch: int
    model: StorageModel = field(default_factory=StorageModel)
    failed: bool = False


class StorageStateMachine(RuleBasedStateMachine):
    @initialize(seed=st.integers(0, 2**32 - 1))
    def setup(self, seed: int) -> None:
        print(f"storage state machine seed={seed}")
        self.clock = ManualClock(1_000)
        self.ids = SeededIdGen(seed)
        self.state = StorageState(epoch=3, clock=self.clock, ids=self.ids, read_only=False)
        self.state.create_instance(I1)
        self.state.initialization_complete()
        self.next_id = 1
        self.replicas: dict[ReplicaId, ModelReplica] = {}
        self.holds: list[ReadHold] = []
        self.sinces: dict[GlobalId, Frontier] = {}
        self.uppers: dict[GlobalId, Frontier] = {}
        self.downgraded_to_empty: set[GlobalId] = set()
        self.forgotten: set[GlobalId] = set()
        self.finalized: set[ShardId] = set()
        self.ingestions: list[GlobalId] = []  # ingestion ids (their export is id + 1)
        self.sinks: list[GlobalId] = []
        self.drain()

    # -- plumbing ---------------------------------------------------------------------------------

    def drain(self) -> None:
        for action in self.state.drain():
            self.perform(action)

    def perform(self, action: Action) -> None:
        if isinstance(action, ConnectReplica):
            self.replicas[action.replica] = ModelReplica(action.epoch)
        elif isinstance(action, SendCommand):
            r = self.replicas.get(action.replica)
            if r is not None and r.epoch == action.epoch and not r.failed:
                if isinstance(action.command, Hello):
                    assert action.command.epoch == action.epoch
                r.model.apply(action.command)
        elif isinstance(action, DisconnectReplica):
            r = self.replicas.get(action.replica)
            if r is not None and r.epoch == action.epoch:
                del self.replicas[action.replica]
        elif isinstance(action, DowngradeSince):
            if action.since.is_empty():
                self.downgraded_to_empty.add(action.id)
        elif isinstance(action, ForgetCollections):
            for id, shard in action.collections:
                assert id not in self.forgotten, f"{id} forgotten twice"
                assert id in self.downgraded_to_empty, f"{id} forgotten before since {{}}"
                assert shard in self.state.unfinalized
                self.forgotten.add(id)
        elif isinstance(action, FinalizeShards):
            assert all(s in self.state.unfinalized for s in action.shards)
            self.state.finalized(action.shards)
            self.finalized.update(action.shards)

    def new_id(self, n: int = 1) -> GlobalId:
        id = GlobalId.user(self.next_id)
        self.next_id += n
        return id

    def live(self) -> list[GlobalId]:
        return [id for id, _ in self.state.collections()]

    # -- collections ------------------------------------------------------------------------------

    @rule(kind=st.sampled_from(["table", "other"]), upper=st.integers(0, 5))
    def create_collection(self, kind: str, upper: int) -> None:
        id = self.new_id()
        source = TableSource() if kind == "table" else OtherSource()
        self.state.install(
            id,
            CollectionDescription(TABLE_DESC, source),
            ShardId.new(self.ids),
            since=Antichain.of(0),
            upper=Antichain.of(upper),
        )
        self.drain()

    @rule()
    def create_ingestion(self) -> None:
        first = self.new_id(2)
        pairs = counter_ingestion(I1, first.value)
        for id, description in pairs:
            self.state.install(
                id, description, ShardId.new(self.ids), since=Antichain.of(0), upper=Antichain.of(0)
            )
        self.state.start_ingestions([id for id, _ in pairs])
        self.ingestions.append(first)
        self.drain()

    @precondition(lambda self: self.live())
    @rule(data=st.data(), by=st.integers(1, 5))
    def advance_upper(self, data: st.DataObject, by: int) -> None:
        """A committed table append, or an upper observed elsewhere."""
        id = data.draw(st.sampled_from(self.live()))
        upper = self.state.caps.collections[id].write_frontier
        if not upper.is_empty():
            self.state.observe_uppers([(id, Antichain.of(upper.as_option() + by))])  # type: ignore[operator]
        self.drain()

    @precondition(lambda self: self.ingestions and self.replicas)
    @rule(data=st.data(), by=st.integers(-2, 5), stale=st.booleans())
    def replica_reports_upper(self, data: st.DataObject, by: int, stale: bool) -> None:
        ingestion = data.draw(st.sampled_from(self.ingestions))
        id = data.draw(st.sampled_from([ingestion, GlobalId.user(ingestion.value + 1)]))
        replica = data.draw(st.sampled_from(sorted(self.replicas)))
        state = self.state.caps.collections.get(id)
        if state is None or state.write_frontier.is_empty():
            return
        before = state.write_frontier
        upper = Antichain.of(max(0, before.as_option() + by))  # type: ignore[operator]
        epoch = self.replicas[replica].epoch - (1 if stale else 0)
        self.state.handle(ReplicaResponse(I1, replica, epoch, FrontierUpper(id, upper)))
        if stale:
            assert state.write_frontier == before, "a stale response changed a frontier"
        self.drain()

    @precondition(lambda self: self.live())
    @rule(data=st.data())
    def acquire_hold(self, data: st.DataObject) -> None:
        id = data.draw(st.sampled_from(self.live()))
        (hold,) = self.state.acquire_read_holds([id])
        self.holds.append(hold)

    @precondition(lambda self: self.holds)
    @rule(data=st.data(), release=st.booleans(), by=st.integers(0, 4))
    def change_hold(self, data: st.DataObject, release: bool, by: int) -> None:
        hold = data.draw(st.sampled_from(self.holds))
        if release:
            hold.release()
            self.holds.remove(hold)
        elif not hold.since.is_empty():
            hold.try_downgrade(Antichain.of(hold.since.as_option() + by))  # type: ignore[operator]
        self.drain()

    @precondition(lambda self: self.live())
    @rule(data=st.data(), lag=st.integers(0, 3))
    def set_policy(self, data: st.DataObject, lag: int) -> None:
        id = data.draw(st.sampled_from(self.live()))
        self.state.set_read_policy([(id, ReadPolicy.lag_writes_by(lag, 1))])
        self.drain()

    @precondition(lambda self: self.live())
    @rule(data=st.data())
    def drop(self, data: st.DataObject) -> None:
        id = data.draw(st.sampled_from(self.live()))
        self.state.drop_collections([id])
        self.drain()

    # -- sinks ------------------------------------------------------------------------------------

    @precondition(lambda self: self.live())
    @rule(data=st.data(), cancel=st.booleans())
    def create_sink(self, data: st.DataObject, cancel: bool) -> None:
        from_id = data.draw(st.sampled_from(self.live()))
        state = self.state.caps.collections[from_id]
        if state.implied_capability.join(state.since).is_empty():
            return
        id = self.new_id()
        token = self.state.exports.prepare(id, from_id)
        if cancel:
            self.state.exports.cancel_prepare(token)
            return
        description = ExportDescription(I1, ParquetSinkConnection(f"/tmp/{id}"))
        self.state.exports.validate_create([(token, description)])
        self.state.exports.install(token, description, as_of=token.acquired_since)
        self.sinks.append(id)
        self.drain()

    @precondition(lambda self: self.sinks)
    @rule(data=st.data(), by=st.integers(1, 4))
    def sink_progress_or_drop(self, data: st.DataObject, by: int) -> None:
        id = data.draw(st.sampled_from(self.sinks))
        export = self.state.caps.exports.get(id)
        if export is None or export.dropped:
            self.sinks.remove(id)
            return
        if by == 4:
            self.state.exports.drop([id])
            self.sinks.remove(id)
        elif not export.write_frontier.is_empty():
            upper = Antichain.of(export.write_frontier.as_option() + by)  # type: ignore[operator]
            self.state.update_write_frontiers([(id, upper)])
        self.drain()

    # -- replicas and maintenance -----------------------------------------------------------------

    @rule(replica=st.sampled_from(REPLICAS))
    def add_or_drop_replica(self, replica: ReplicaId) -> None:
        if replica in self.state.instances[I1].replicas:
            self.state.drop_replica(I1, replica)
        else:
            self.state.connect_replica(I1, replica, LOCATION)
        self.drain()

    @precondition(lambda self: self.replicas)
    @rule(data=st.data())
    def replica_connects_or_fails(self, data: st.DataObject) -> None:
        replica = data.draw(st.sampled_from(sorted(self.replicas)))
        r = self.replicas[replica]
        if data.draw(st.booleans()):
            self.state.handle(ReplicaConnected(I1, replica, r.epoch))
        else:
            r.failed = True
            self.state.handle(ReplicaFailed(I1, replica, r.epoch, "connection lost"))
        self.drain()

    @rule(millis=st.integers(0, 2000))
    def maintain_and_flush(self, millis: int) -> None:
        self.clock.advance(millis)
        self.state.maintain()
        self.state.flush()
        self.drain()

    # -- invariants -------------------------------------------------------------------------------

    @invariant()
    def sinces_and_uppers(self) -> None:
        if not hasattr(self, "state"):
            return
        for id, state in self.state.caps.collections.items():
            since = state.since
            assert since == state.read_capabilities.frontier()
            previous = self.sinces.get(id)
            assert previous is None or previous.less_equal(since), f"{id} since regressed"
            self.sinces[id] = since
            upper = self.uppers.get(id)
            assert upper is None or upper.less_equal(state.write_frontier), f"{id} upper regressed"
            self.uppers[id] = state.write_frontier
        for hold in self.holds:
            state = self.state.caps.collections.get(hold.id)
            assert state is not None, f"{hold.id} forgotten while held"
            assert state.since.less_equal(hold.since) or hold.since.is_empty(), (
                f"since {state.since} of {hold.id} passed a hold at {hold.since}"
            )

    @invariant()
    def objects_run_on_the_owner_only(self) -> None:
        if not hasattr(self, "state"):
            return
        # Compare against the state after a flush (flush only sends what is pending).
        self.state.flush()
        self.drain()
        inst = self.state.instances[I1]
        owner = inst.owner()
        running_ingestions = {
            id
            for id, i in self.state.object_instance.items()
            if id in self.state.caps.collections and not self._compacted(id)
        }
        running_sinks = {id for id, e in self.state.caps.exports.items() if not e.dropped}
        for replica, r in self.replicas.items():
            if r.failed or inst.replicas[replica].failed:
                continue
            if replica != owner:
                assert not r.model.ingestions and not r.model.sinks, (
                    f"{replica} is not the owner ({owner}) but runs "
                    f"{sorted(r.model.ingestions)} {sorted(r.model.sinks)}"
                )
                continue
            assert set(r.model.ingestions) == running_ingestions
            assert set(r.model.sinks) == running_sinks
            for _desc, sinces in r.model.ingestions.values():
                for cid, since in sinces.items():
                    state = self.state.caps.collections.get(cid)
                    if state is not None:
                        assert since == state.since, (
                            f"{cid}: replica since {since} != {state.since}"
                        )

    def _compacted(self, id: GlobalId) -> bool:
        return self.state.caps.collections[id].since.is_empty()

    @invariant()
    def history_is_bounded(self) -> None:
        if not hasattr(self, "state"):
            return
        inst = self.state.instances[I1]
        inst.history.reduce()
        objects = len(inst.objects)
        collections = len(self.state.caps.collections) + len(self.state.caps.exports)
        assert len(inst.history) <= 4 + 2 * objects + collections, (
            f"history of {len(inst.history)} commands for {objects} objects"
        )
        commands = inst.history.commands()
        runs = [c for c in commands if isinstance(c, (RunIngestion, RunSink))]
        assert len(runs) == len({c.id for c in runs})


StorageStateMachine.TestCase.settings = settings(
    max_examples=EXAMPLES,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestStorageState = StorageStateMachine.TestCase


def _installed(
    state: StorageState, pairs: list[tuple[GlobalId, CollectionDescription]]
) -> tuple[GlobalId, GlobalId]:
    """An ingestion and its export (``pairs``) installed in ``state`` at since = upper = 0."""
    for id, description in pairs:
        state.install(
            id,
            description,
            ShardId.new(SeededIdGen(id.value)),
            since=Antichain.of(0),
            upper=Antichain.of(0),
        )
    ingestion, export = (id for id, _ in pairs)
    return ingestion, export


def test_an_ingestion_is_dropped_after_its_export_was_dropped_and_forgotten() -> None:
    state = StorageState(epoch=1, clock=ManualClock(0), ids=SeededIdGen(1), read_only=False)
    state.create_instance(I1)
    ingestion, export = _installed(state, counter_ingestion(I1, 1))
    state.drop_collections([export])
    state.flush()  # the export's since is {}: forgotten
    assert export not in state.caps.collections
    state.drop_collections([ingestion])  # (this raised KeyError for the forgotten export)
    state.flush()
    forgotten = [a for a in state.drain() if isinstance(a, ForgetCollections)]
    assert [[id for id, _ in a.collections] for a in forgotten] == [[export], [ingestion]]


def test_an_ingestion_exports_own_status_is_recorded_and_a_strangers_is_not() -> None:
    state = StorageState(epoch=1, clock=ManualClock(5), ids=SeededIdGen(1), read_only=False)
    state.create_instance(I1)
    state.initialization_complete()
    ingestion, export = _installed(state, counter_ingestion(I1, 1))
    state.connect_replica(I1, REPLICAS[0], LOCATION)
    (epoch,) = [a.epoch for a in state.drain() if isinstance(a, ConnectReplica)]
    state.handle(ReplicaConnected(I1, REPLICAS[0], epoch))
    for id in (export, GlobalId.user(99)):
        update = StatusUpdate(id, ObjectStatus.CEASED, 5, error="table t changed upstream")
        state.handle(ReplicaResponse(I1, REPLICAS[0], epoch, update))
    recorded = state.statuses[export]
    assert recorded.status is ObjectStatus.CEASED and recorded.error == "table t changed upstream"
    assert GlobalId.user(99) not in state.statuses
    assert ingestion not in state.statuses or state.statuses[ingestion].error is None
