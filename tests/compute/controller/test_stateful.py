"""A stateful model of one compute instance.

Hypothesis drives the sans-I/O ``Instance`` with random API calls (create/drop dataflows, read
policies, read holds, peeks and cancellations, add/drop/fail replicas, maintenance) and random
replica behaviour (frontier reports, peek answers, subscribe batches) — including replica bugs
(frontier regressions, duplicate or unsolicited peek answers) and responses with stale epochs.
Model replicas see exactly the commands the instance sent them and answer within the protocol
unless a rule injects a bug on purpose.

Invariants, checked after every step:

* the since of every collection never passes an outstanding read hold, is the frontier of its
  read capabilities, and the dependency holds sit at it;
* the since and the upper of a collection never regress;
* every peek gets at most one result, and exactly one once it is no longer pending;
* subscribe output is contiguous and stops after ``{}`` or an error;
* the command history stays bounded by the live objects;
* a replica bug or stale response never changes the collections' frontiers.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from spate.compute.controller import (
    CollectionMissing,
    DataflowSinceViolation,
    Instance,
    PeekSinceViolation,
    ReplicaHealth,
    SubscribeResponse,
)
from spate.compute.controller.actions import (
    ConnectReplica,
    DeliverPeekResult,
    DeliverResponse,
    DisconnectReplica,
    SendCommand,
)
from spate.frontier import Antichain, Frontier, ReadHold, ReadPolicy
from spate.ids import GlobalId, InstanceId, PeekId, ReplicaId, SeededIdGen
from spate.plan.finishing import RowSetFinishing
from spate.protocol.compute import (
    AllowCompaction,
    CreateDataflow,
    Frontiers,
    IndexTarget,
    InstanceConfig,
    Peek,
    PeekCanceled,
    PeekError,
    PeekResponse,
    SubscribeBatch,
    SubscribeDroppedAt,
)
from spate.protocol.compute import SubscribeResponse as ProtoSubscribe

from .harness import CONFIG, D, f, index_dataflow, index_on_index, peek_rows, subscribe_dataflow
from .storage_double import FakeStorage

SOURCES = (GlobalId.user(1), GlobalId.user(2))
REPLICAS = (ReplicaId(1), ReplicaId(2), ReplicaId(3))
EMPTY_UPDATES = pa.table(
    {
        "k": pa.array([], pa.int64()),
        "v": pa.array([], pa.string()),
        "_time": pa.array([], pa.int64()),
        "_diff": pa.array([], pa.int64()),
    }
)


def le(a: Frontier, b: Frontier) -> bool:
    return a.less_equal(b)


@dataclass
class ModelCollection:
    as_of: Frontier
    write: Frontier
    input: Frontier
    output: Frontier
    subscribe: bool
    dropped: bool = False


@dataclass
class ModelReplica:
    """What one ``(replica, epoch)`` was told, and what it reported."""

    epoch: int
    collections: dict[GlobalId, ModelCollection] = field(default_factory=dict)
    outstanding: list[PeekId] = field(default_factory=list)
    answered: list[PeekId] = field(default_factory=list)

    def command(self, c: object) -> None:
        if isinstance(c, CreateDataflow):
            df = c.dataflow
            assert df.as_of is not None and not df.as_of.is_empty()
            subs = set(df.subscribe_ids())
            for id in df.export_ids():
                a = df.as_of
                self.collections[id] = ModelCollection(a, a, a, a, id in subs)
        elif isinstance(c, Peek):
            self.outstanding.append(c.uuid)
        elif isinstance(c, AllowCompaction) and c.frontier.is_empty() and c.id in self.collections:
            self.collections[c.id].dropped = True


class InstanceMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.storage = FakeStorage()
        for s in SOURCES:
            self.storage.add_collection(s, D, since=0, upper=1)
        self.ids = SeededIdGen(11)
        self.inst = Instance(
            InstanceId(1),
            storage=self.storage,
            ids=self.ids,
            config=InstanceConfig(),
            initialized=True,
            hydration_concurrency=2,
        )
        self.replicas: dict[ReplicaId, ModelReplica] = {}
        self.next_id = 10
        self.holds: list[ReadHold] = []
        self.results: dict[PeekId, int] = {}
        self.issued: list[PeekId] = []
        self.last_since: dict[GlobalId, Frontier] = {}
        self.last_upper: dict[GlobalId, Frontier] = {}
        self.subscribe_out: dict[GlobalId, Frontier] = {}
        self.subscribe_done: set[GlobalId] = set()

    # -- plumbing ------------------------------------------------------------------------------

    def pump(self) -> None:
        for a in self.inst.drain():
            if isinstance(a, ConnectReplica):
                self.replicas[a.replica] = ModelReplica(a.epoch)
            elif isinstance(a, SendCommand):
                m = self.replicas.get(a.replica)
                if m is not None and m.epoch == a.epoch:
                    m.command(a.command)
            elif isinstance(a, DisconnectReplica):
                m = self.replicas.get(a.replica)
                if m is not None and m.epoch == a.epoch:
                    del self.replicas[a.replica]
            elif isinstance(a, DeliverPeekResult):
                self.results[a.uuid] = self.results.get(a.uuid, 0) + 1
            elif isinstance(a, DeliverResponse) and isinstance(a.response, SubscribeResponse):
                r = a.response
                assert r.id not in self.subscribe_done, f"output after the end of {r.id}"
                expected = self.subscribe_out.get(r.id, Antichain.minimum())
                assert r.lower == expected, f"{r.id}: batch starts at {r.lower}, not {expected}"
                assert le(r.lower, r.upper)
                self.subscribe_out[r.id] = r.upper
                if r.upper.is_empty() or r.error is not None:
                    self.subscribe_done.add(r.id)

    def new_id(self, transient: bool = False) -> GlobalId:
        self.next_id += 1
        return GlobalId.transient(self.next_id) if transient else GlobalId.user(self.next_id)

    def live(self, kind: str | None = None) -> list[GlobalId]:
        return sorted(
            c.id
            for c in self.inst.collections.values()
            if not c.dropped and (kind is None or c.kind.value == kind)
        )

    def frontiers_snapshot(self) -> dict[GlobalId, tuple[Frontier, Frontier]]:
        return {id: (c.since(), c.write_frontier) for id, c in self.inst.collections.items()}

    def respond(self, replica: ReplicaId, response: object, *, epoch: int | None = None) -> None:
        m = self.replicas[replica]
        self.inst.handle_response(replica, m.epoch if epoch is None else epoch, response)  # type: ignore[arg-type]
        self.pump()

    def alive(self, replica: ReplicaId) -> bool:
        r = self.inst.replicas.get(replica)
        return r is not None and r.health is not ReplicaHealth.FAILED and replica in self.replicas

    @initialize(replicas=st.integers(0, 2), indexes=st.integers(0, 2))
    def start(self, replicas: int, indexes: int) -> None:
        for r in REPLICAS[:replicas]:
            self.add_replica(r)
        for i in range(indexes):
            self.create_index(SOURCES[i % 2], 0, False)
        self.pump()

    # -- API rules -------------------------------------------------------------------------------

    @rule(source=st.sampled_from(SOURCES), offset=st.integers(-2, 5), transient=st.booleans())
    def create_index(self, source: GlobalId, offset: int, transient: bool) -> None:
        since = self.storage.since(source).as_option()
        assert since is not None
        as_of = max(0, since + offset)
        id = self.new_id(transient)
        before = self.frontiers_snapshot()
        try:
            self.inst.create_dataflow(index_dataflow(source, id, as_of))
        except DataflowSinceViolation:
            assert as_of < since
            assert self.frontiers_snapshot() == before and id not in self.inst.collections
        self.pump()

    @precondition(lambda self: bool(self.live("index")))
    @rule(data=st.data(), offset=st.integers(-2, 5))
    def create_index_on_index(self, data: st.DataObject, offset: int) -> None:
        imported = data.draw(st.sampled_from(self.live("index")))
        since = self.inst.collections[imported].since().as_option()
        if since is None:
            return
        as_of = max(0, since + offset)
        on = next(iter(self.inst.collections[imported].storage_dependencies), SOURCES[0])
        try:
            self.inst.create_dataflow(index_on_index(imported, on, self.new_id(), as_of))
        except DataflowSinceViolation:
            assert as_of < since
        self.pump()

    @rule(source=st.sampled_from(SOURCES), to=st.sampled_from((None, *REPLICAS)))
    def create_subscribe(self, source: GlobalId, to: ReplicaId | None) -> None:
        target = to
        if target is not None and target not in self.inst.replicas:
            return
        as_of = self.storage.since(source).as_option()
        assert as_of is not None
        id = self.new_id(transient=True)
        self.inst.create_dataflow(subscribe_dataflow(source, id, f(as_of)), target)
        self.pump()

    @precondition(lambda self: bool(self.live()))
    @rule(data=st.data())
    def drop(self, data: st.DataObject) -> None:
        id = data.draw(st.sampled_from(self.live()))
        self.inst.drop_collections([id])
        self.subscribe_done.add(id)
        self.pump()
        with pytest.raises(CollectionMissing):
            self.inst.acquire_read_hold(id)
        with pytest.raises(CollectionMissing):
            self.inst.drop_collections([id])

    @precondition(lambda self: bool(self.live("index")))
    @rule(
        data=st.data(), lag=st.integers(0, 5), valid_from=st.integers(0, 30), lagging=st.booleans()
    )
    def set_policy(self, data: st.DataObject, lag: int, valid_from: int, lagging: bool) -> None:
        id = data.draw(st.sampled_from(self.live("index")))
        policy = (
            ReadPolicy.lag_writes_by(lag, 2) if lagging else ReadPolicy.valid_from(f(valid_from))
        )
        self.inst.set_read_policy([(id, policy)])
        self.pump()

    @precondition(lambda self: bool(self.live()))
    @rule(data=st.data())
    def acquire_hold(self, data: st.DataObject) -> None:
        id = data.draw(st.sampled_from(self.live()))
        hold = self.inst.acquire_read_hold(id)
        assert hold.since == self.inst.collections[id].since()
        self.holds.append(hold)
        self.pump()

    @precondition(lambda self: bool(self.holds))
    @rule(data=st.data(), step=st.integers(0, 6), release=st.booleans())
    def move_hold(self, data: st.DataObject, step: int, release: bool) -> None:
        i = data.draw(st.integers(0, len(self.holds) - 1))
        hold = self.holds[i]
        if release or hold.since.is_empty():
            hold.release()
            self.holds.pop(i)
        else:
            t = hold.since.as_option()
            assert t is not None
            hold.try_downgrade(f(t + step))
        self.pump()

    @precondition(lambda self: bool(self.live("index")))
    @rule(
        data=st.data(),
        offsets=st.lists(st.integers(-2, 6), min_size=1, max_size=4),
        to=st.sampled_from((None, *REPLICAS)),
    )
    def peek(self, data: st.DataObject, offsets: list[int], to: ReplicaId | None) -> None:
        id = data.draw(st.sampled_from(self.live("index")))
        target = to if to in self.inst.replicas else None
        since = self.inst.collections[id].since().as_option()
        if since is None:
            return
        for offset in offsets:
            ts = max(0, since + offset)
            uuid = PeekId.new(self.ids)
            try:
                self.inst.peek(
                    IndexTarget(id),
                    uuid,
                    ts,
                    finishing=RowSetFinishing(),
                    result_desc=D,
                    target_replica=target,
                )
                self.issued.append(uuid)
            except PeekSinceViolation:
                assert ts < since
                event("peek below since refused")
        self.pump()

    @precondition(lambda self: len(self.inst.peeks) > 0)
    @rule(data=st.data())
    def cancel_peek(self, data: st.DataObject) -> None:
        uuid = data.draw(st.sampled_from(sorted(p.uuid for p in self.inst.peeks)))
        self.inst.cancel_peek(uuid)
        self.pump()

    @rule(replica=st.sampled_from(REPLICAS))
    def add_replica(self, replica: ReplicaId) -> None:
        if replica in self.inst.replicas:
            return
        self.inst.add_replica(replica, CONFIG)
        self.pump()
        self.inst.replica_connected(replica, self.replicas[replica].epoch)

    @rule(replica=st.sampled_from(REPLICAS), fail=st.booleans())
    def remove_replica(self, replica: ReplicaId, fail: bool) -> None:
        if replica not in self.inst.replicas:
            return
        if fail:
            self.inst.replica_failed(replica, self.inst.replicas[replica].epoch, "killed")
        else:
            self.inst.drop_replica(replica)
        self.pump()

    @rule()
    def maintain(self) -> None:
        self.inst.maintain()
        self.pump()

    @rule(source=st.sampled_from(SOURCES), step=st.integers(1, 5), compact=st.booleans())
    def storage_progress(self, source: GlobalId, step: int, compact: bool) -> None:
        upper = self.storage.collection_frontiers(source).upper.as_option()
        assert upper is not None
        self.storage.advance_upper(source, upper + step)
        if compact:
            self.storage.allow_compaction(source, upper)

    # -- replica rules ---------------------------------------------------------------------------

    def pick_replica(self, data: st.DataObject) -> ReplicaId | None:
        live = [r for r in REPLICAS if self.alive(r)]
        return data.draw(st.sampled_from(live)) if live else None

    @rule(data=st.data(), w=st.integers(0, 4), i=st.integers(0, 4), o=st.integers(0, 4))
    def report_frontiers(self, data: st.DataObject, w: int, i: int, o: int) -> None:
        replica = self.pick_replica(data)
        if replica is None:
            return
        m = self.replicas[replica]
        ids = sorted(id for id, c in m.collections.items() if not c.subscribe)
        if not ids:
            return
        id = data.draw(st.sampled_from(ids))
        c = m.collections[id]
        if c.dropped:
            new = (Antichain.empty(),) * 3
        else:
            new = tuple(
                x if x.is_empty() else f(x.as_option() + d)  # type: ignore[operator]
                for x, d in ((c.write, w), (c.input, i), (c.output, o))
            )
        c.write, c.input, c.output = new
        self.respond(replica, Frontiers(id, *new))
        event("frontier report")
        assert self.alive(replica), "a valid frontier report failed the replica"

    @rule(data=st.data(), step=st.integers(1, 4), finish=st.booleans(), error=st.booleans())
    def subscribe_batch(self, data: st.DataObject, step: int, finish: bool, error: bool) -> None:
        replica = self.pick_replica(data)
        if replica is None:
            return
        m = self.replicas[replica]
        ids = sorted(
            id for id, c in m.collections.items() if c.subscribe and not c.write.is_empty()
        )
        if not ids:
            return
        id = data.draw(st.sampled_from(ids))
        c = m.collections[id]
        lower = c.write
        upper = Antichain.empty() if finish or c.dropped else f(lower.as_option() + step)  # type: ignore[operator]
        batch = SubscribeBatch(
            lower, upper, None if error else EMPTY_UPDATES, "boom" if error else None
        )
        c.write = c.input = c.output = upper
        self.respond(replica, ProtoSubscribe(id, batch))
        event("subscribe batch")
        assert self.alive(replica), "a valid subscribe batch failed the replica"

    @rule(
        data=st.data(),
        kinds=st.lists(st.sampled_from(["rows", "error", "canceled"]), min_size=1, max_size=3),
    )
    def answer_peeks(self, data: st.DataObject, kinds: list[str]) -> None:
        replica = self.pick_replica(data)
        if replica is None:
            return
        m = self.replicas[replica]
        answers = {"rows": peek_rows(2), "error": PeekError("nope"), "canceled": PeekCanceled()}
        for kind in kinds:
            if not m.outstanding:
                return
            uuid = m.outstanding.pop(data.draw(st.integers(0, len(m.outstanding) - 1)))
            m.answered.append(uuid)
            self.respond(replica, PeekResponse(uuid, answers[kind]))  # type: ignore[arg-type]
            assert self.alive(replica), "a valid peek answer failed the replica"
            event("peek answered")

    @rule(data=st.data(), unsolicited=st.booleans())
    def bad_peek_answer(self, data: st.DataObject, unsolicited: bool) -> None:
        replica = self.pick_replica(data)
        if replica is None:
            return
        m = self.replicas[replica]
        if unsolicited or not m.answered:
            uuid = PeekId.new(self.ids)
        else:
            uuid = data.draw(st.sampled_from(m.answered))
        before = self.frontiers_snapshot()
        self.respond(replica, PeekResponse(uuid, peek_rows(1)))
        assert not self.alive(replica), "a duplicate/unsolicited peek answer was accepted"
        event("bad peek answer caught")
        assert self.frontiers_snapshot() == before

    @rule(data=st.data())
    def regression(self, data: st.DataObject) -> None:
        replica = self.pick_replica(data)
        if replica is None:
            return
        m = self.replicas[replica]
        ids = sorted(
            id
            for id, c in m.collections.items()
            if not c.subscribe and not c.write.is_empty() and c.write != c.as_of
        )
        if not ids:
            return
        id = data.draw(st.sampled_from(ids))
        t = m.collections[id].write.as_option()
        assert t is not None
        before = self.frontiers_snapshot()
        self.respond(replica, Frontiers(id, write_frontier=f(t - 1)))
        assert not self.alive(replica), "a frontier regression was accepted"
        event("regression caught")
        assert self.frontiers_snapshot() == before

    @rule(data=st.data(), t=st.integers(0, 100))
    def stale_epoch(self, data: st.DataObject, t: int) -> None:
        replica = self.pick_replica(data)
        if replica is None or self.replicas[replica].epoch == 1:
            return
        ids = sorted(self.inst.collections)
        if not ids:
            return
        before = self.frontiers_snapshot()
        stale = self.replicas[replica].epoch - 1
        self.respond(replica, Frontiers(data.draw(st.sampled_from(ids)), f(t)), epoch=stale)
        self.respond(replica, PeekResponse(PeekId.new(self.ids), peek_rows(1)), epoch=stale)
        assert self.frontiers_snapshot() == before
        assert self.alive(replica)
        event("stale epoch ignored")

    # -- invariants ------------------------------------------------------------------------------

    @invariant()
    def since_respects_holds(self) -> None:
        for hold in self.holds:
            if hold.since.is_empty():
                # A hold at the empty frontier holds no time (one acquired on a collection
                # already complete and compacted, such as a finished subscribe): dropping the
                # collection may remove it, and releasing the hold afterwards changes nothing.
                continue
            c = self.inst.collections.get(hold.id)
            assert c is not None, f"collection {hold.id} removed while a hold is outstanding"
            assert le(c.since(), hold.since), f"{hold.id}: since {c.since()} passed {hold}"
        for p in self.inst.peeks:
            c = self.inst.collections[p.target]
            assert le(c.since(), f(p.timestamp))
        for c in self.inst.collections.values():
            since = c.since()
            for h in (*c.storage_dependencies.values(), *c.compute_dependencies.values()):
                assert h.since == since, f"{c.id}: dependency hold {h} is not at since {since}"

    @invariant()
    def frontiers_never_regress(self) -> None:
        for id, c in self.inst.collections.items():
            since, upper = c.since(), c.write_frontier
            assert le(self.last_since.get(id, since), since), f"since of {id} regressed"
            assert le(self.last_upper.get(id, upper), upper), f"upper of {id} regressed"
            self.last_since[id], self.last_upper[id] = since, upper

    @invariant()
    def each_peek_answered_once(self) -> None:
        for uuid in self.issued:
            n = self.results.get(uuid, 0)
            assert n == (0 if uuid in self.inst.peeks else 1), f"peek {uuid} got {n} results"

    @invariant()
    def history_bounded(self) -> None:
        live = len(self.inst.collections) + len(self.inst.peeks)
        bound = 2 * (8 + 4 * len(self.inst.collections) + len(self.inst.peeks)) + 2
        assert len(self.inst.history) <= bound, (
            f"history of {len(self.inst.history)} commands for {live} live objects"
        )

    def teardown(self) -> None:
        event(f"peeks issued: {min(len(self.issued), 10)}+")
        event(f"max epoch >= {max((m.epoch for m in self.replicas.values()), default=0)}")
        # Everything can still be wound down: cancel every peek, release every hold, drop every
        # collection, let the replicas report them gone — and then no state and no storage
        # hold may be left behind.
        for p in list(self.inst.peeks):
            self.inst.cancel_peek(p.uuid)
        for h in self.holds:
            h.release()
        self.inst.drop_collections(self.live())
        self.inst.maintain()  # rehydrates failed replicas
        self.pump()
        self.each_peek_answered_once()
        for replica, m in list(self.replicas.items()):
            for id, c in m.collections.items():
                if c.write.is_empty():
                    continue
                assert c.dropped, f"{replica} was not told to drop {id}"
                if c.subscribe:
                    self.respond(replica, ProtoSubscribe(id, SubscribeDroppedAt(c.write)))
                else:
                    self.respond(replica, Frontiers(id, *(Antichain.empty(),) * 3))
        self.inst.maintain()
        assert self.inst.collections == {}, f"left behind: {list(self.inst.collections)}"
        for id in self.storage.collections:
            assert self.storage.hold_counts(id) == [], f"storage holds leaked on {id}"


_NIGHTLY = os.environ.get("SPATE_HYPOTHESIS_PROFILE") == "nightly"

TestInstanceModel = InstanceMachine.TestCase
# CI: 300 runs of up to 50 steps (~30 s on the 2-core machine); nightly: 5,000 runs of 200.
TestInstanceModel.settings = settings(
    max_examples=5_000 if _NIGHTLY else 300,
    stateful_step_count=200 if _NIGHTLY else 50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def test_history_is_bounded_by_live_objects_after_every_collection_is_dropped() -> None:
    """The machine's shrunk counterexample: six indexes made and dropped on an instance without
    replicas; after maintenance the history holds no more than its live objects justify (it
    kept 21 commands: the history reduces itself only when it doubles, which bounds it by the
    most objects ever live)."""

    class First:
        def draw(self, strategy: Any) -> Any:
            return next(iter(strategy.elements))

    m = InstanceMachine()
    m.start(replicas=0, indexes=0)
    for _ in range(6):
        m.create_index(source=SOURCES[0], offset=0, transient=False)
    for _ in range(6):
        m.drop(data=First())  # type: ignore[arg-type]
    m.maintain()
    m.history_bounded()
