"""The compute controller's acceptance scenarios, without sockets or Spark.

Each test drives a real ``ComputeController`` whose replicas are recorded (``RecordingConnector``)
and answered by the test, over a ``FakeStorage`` test double of the storage side.
"""

from __future__ import annotations

import pytest

from spate.compute.controller import (
    ERROR_TARGET_REPLICA_FAILED,
    CollectionMissing,
    DataflowSinceViolation,
    EmptyAsOfForSubscribe,
    FrontierUpper,
    MissingAsOf,
    PeekFailed,
    PeekNotification,
    PeekSinceViolation,
    PeekSuccess,
    SubscribeResponse,
    WriteOnlyCollection,
)
from spate.frontier import Antichain, ReadPolicy
from spate.ids import GlobalId
from spate.protocol.common import Hello
from spate.protocol.compute import (
    AllowCompaction,
    CancelPeek,
    ComputeParameters,
    CreateDataflow,
    CreateInstance,
    Frontiers,
    IndexTarget,
    InitializationComplete,
    Peek,
    PeekError,
    PeekResponse,
    Schedule,
    SubscribeBatch,
    UpdateConfiguration,
)
from spate.repr.arrow import table_to_updates

from .harness import (
    I1,
    R1,
    R2,
    R3,
    D,
    Harness,
    f,
    index_dataflow,
    mv_dataflow,
    peek_rows,
    rows,
    subscribe_dataflow,
)

S = GlobalId.user(1)
I = GlobalId.user(2)  # noqa: E741
MV = GlobalId.user(3)
SUB = GlobalId.transient(1)


def setup(*, as_of: int = 0, since: int = 0, upper: int = 0, replicas: int = 1) -> Harness:
    h = Harness()
    h.storage.add_collection(S, D, since=since, upper=upper)
    for r in (R1, R2, R3)[:replicas]:
        h.add_replica(r)
    h.controller.create_dataflow(I1, index_dataflow(S, I, as_of))
    return h


def notifications(h: Harness) -> list[PeekNotification]:
    return [r for r in h.responses() if isinstance(r, PeekNotification)]


async def test_scenario_01_peek_below_since() -> None:
    h = setup(as_of=10)
    h.controller.set_read_policy(I1, [(I, ReadPolicy.valid_from(f(10)))])
    assert h.controller.collection_frontiers(I).read_frontier == f(10)
    before = len(h.replica(R1).commands)
    counts = h.inst.collections[I].read_capabilities.counts()
    uuid = h.peek_id()
    with pytest.raises(PeekSinceViolation) as err:
        h.controller.peek(I1, IndexTarget(I), uuid, 5, result_desc=D)
    assert "read of u2 at 5 is before its since {10}" in str(err.value)
    assert h.replica(R1).of(Peek) == [] and len(h.replica(R1).commands) == before
    assert uuid not in h.inst.peeks
    assert h.inst.collections[I].read_capabilities.counts() == counts


async def test_scenario_04_first_response_wins() -> None:
    h = setup(as_of=10, upper=100, replicas=2)
    h.maintain()  # warmup hold -> 99
    uuid = h.peek_id()
    future = h.controller.peek(I1, IndexTarget(I), uuid, 10, result_desc=D)
    # The peek's hold keeps the since at 10 even though the policy asks for 30.
    h.controller.set_read_policy(I1, [(I, ReadPolicy.valid_from(f(30)))])
    assert h.controller.collection_frontiers(I).read_frontier == f(10)
    assert all(len(h.replica(r).of(Peek)) == 1 for r in (R1, R2))

    h.respond(R2, PeekResponse(uuid, peek_rows(3)))
    assert future.done() and future.result() == peek_rows(3)
    notes = notifications(h)
    assert len(notes) == 1
    assert isinstance(notes[0].outcome, PeekSuccess) and notes[0].outcome.rows == 3
    assert notes[0].outcome.result_size == peek_rows(3).rows.nbytes
    for r in (R1, R2):
        cmds = h.replica(r).commands
        cancel = cmds.index(CancelPeek(uuid))
        release = cmds.index(AllowCompaction(I, f(30)))
        assert cancel < release, "CancelPeek must reach the replica before the hold is released"
    assert h.controller.collection_frontiers(I).read_frontier == f(30)

    # The slower replica answers too: ignored, no second notification, no replica failure.
    h.respond(R1, PeekResponse(uuid, peek_rows(5)))
    assert notifications(h) == []
    assert future.result() == peek_rows(3)
    assert not h.inst.replicas[R1].is_failed()


async def test_scenario_05_targeted_peek_and_replica_drop() -> None:
    h = setup(as_of=10, replicas=2)
    uuid = h.peek_id()
    future = h.controller.peek(I1, IndexTarget(I), uuid, 10, result_desc=D, target_replica=R1)
    # An answer from a replica that is not the target does not count.
    h.respond(R2, PeekResponse(uuid, peek_rows(1)))
    assert not future.done()
    h.controller.drop_replica(I1, R1)
    assert future.result() == PeekError(ERROR_TARGET_REPLICA_FAILED)
    notes = notifications(h)
    assert [n.outcome for n in notes] == [PeekFailed(ERROR_TARGET_REPLICA_FAILED)]
    assert h.replica(R2).commands[-1] == CancelPeek(uuid)
    assert uuid not in h.inst.peeks


async def test_scenario_05_targeted_peek_and_replica_failure() -> None:
    h = setup(as_of=10, replicas=2)
    uuid = h.peek_id()
    future = h.controller.peek(I1, IndexTarget(I), uuid, 10, result_desc=D, target_replica=R1)
    h.fail(R1)
    assert not future.done()  # failure is noticed; the replica is replaced at maintenance
    h.maintain()
    assert future.result() == PeekError(ERROR_TARGET_REPLICA_FAILED)
    assert h.epoch(R1) == 2


async def test_scenario_06_dataflow_as_of_below_input_since() -> None:
    h = Harness()
    h.storage.add_collection(S, D, since=7)
    h.add_replica(R1)
    sent = len(h.replica(R1).commands)
    history = len(h.inst.history)
    with pytest.raises(DataflowSinceViolation) as err:
        h.controller.create_dataflow(I1, index_dataflow(S, I, 5))
    assert "dataflow has an as_of not beyond the since of collection: u1" in str(err.value)
    assert err.value.id == S
    assert h.controller.collection_ids(I1) == []
    assert h.inst.collections == {} and h.inst.replicas[R1].collections == {}
    assert h.storage.hold_counts(S) == [] and h.storage.since(S) == f(7)
    assert len(h.replica(R1).commands) == sent and len(h.inst.history) == history


async def test_scenario_07_missing_or_empty_as_of() -> None:
    h = Harness()
    h.storage.add_collection(S, D)
    h.storage.add_collection(MV, D)
    h.add_replica(R1)
    with pytest.raises(MissingAsOf, match="dataflow definition lacks an as_of value"):
        h.controller.create_dataflow(I1, index_dataflow(S, I, None))
    with pytest.raises(EmptyAsOfForSubscribe):
        h.controller.create_dataflow(I1, subscribe_dataflow(S, SUB, Antichain.empty()))
    assert h.inst.collections == {}
    h.controller.create_dataflow(I1, mv_dataflow(S, MV, Antichain.empty()))
    assert h.replica(R1).of(CreateDataflow) == []
    assert h.controller.collection_hydrated(I1, MV)
    assert h.controller.collections_hydrated_for_replicas(I1, [R1])
    assert h.storage.hold_counts(S) == []  # nothing to compute, nothing held


async def test_scenario_08_initial_frontiers() -> None:
    h = Harness()
    h.storage.add_collection(S, D, since=0, upper=0)
    h.add_replica(R1)
    h.controller.create_dataflow(I1, index_dataflow(S, I, 100))
    fr = h.controller.collection_frontiers(I)
    assert fr.read_frontier == f(100) and fr.write_frontier == f(100)
    # Storage wants to compact S far ahead; the dataflow holds it at <= 100.
    h.storage.allow_compaction(S, 500)
    assert h.storage.since(S).less_equal(f(100))
    assert (100, 1) in h.storage.hold_counts(S)  # the dependency hold at the as_of


async def test_scenario_09_compaction_propagation() -> None:
    h = setup(as_of=100, upper=100)
    h.storage.allow_compaction(S, 1000)
    h.controller.set_read_policy(I1, [(I, ReadPolicy.lag_writes_by(10, 1))])
    h.respond(R1, Frontiers(I, write_frontier=f(150)))
    h.storage.advance_upper(S, 151)
    assert h.controller.collection_frontiers(I).read_frontier == f(100)  # warmup hold
    h.maintain()
    assert h.controller.collection_frontiers(I).read_frontier == f(140)
    assert AllowCompaction(I, f(140)) in h.replica(R1).commands
    assert (140, 1) in h.storage.hold_counts(S)  # dependency hold follows I's since
    # ... but S only compacts as far as the per-replica input hold allows.
    assert h.storage.since(S) == f(0)
    h.respond(R1, Frontiers(I, input_frontier=f(150)))
    h.maintain()  # per-replica input holds follow reported input frontiers at maintenance
    assert h.storage.since(S) == f(140)


async def test_scenario_10_read_hold_pins_since() -> None:
    h = setup(as_of=100, upper=100)
    h.controller.set_read_policy(I1, [(I, ReadPolicy.lag_writes_by(10, 1))])
    h.respond(R1, Frontiers(I, write_frontier=f(150)))
    h.storage.advance_upper(S, 151)
    h.maintain()
    hold = h.controller.acquire_read_hold(I1, I)
    assert hold.since == f(140)
    h.respond(R1, Frontiers(I, write_frontier=f(300)))
    h.storage.advance_upper(S, 301)
    h.maintain()
    assert h.controller.collection_frontiers(I).read_frontier == f(140)
    hold.release()
    assert h.controller.collection_frontiers(I).read_frontier == f(290)
    assert h.replica(R1).commands[-1] == AllowCompaction(I, f(290))


async def test_scenario_11_write_only_collections() -> None:
    h = Harness()
    h.storage.add_collection(S, D, upper=60)
    h.storage.add_collection(MV, D)
    h.add_replica(R1)
    h.controller.create_dataflow(I1, mv_dataflow(S, MV, f(0)))
    with pytest.raises(WriteOnlyCollection, match="collection is write-only: u3"):
        h.controller.set_read_policy(I1, [(MV, ReadPolicy.valid_from(f(10)))])
    assert h.inst.collections[MV].read_policy is None
    h.respond(R1, Frontiers(MV, write_frontier=f(50)))
    h.maintain()  # warmup -> 59
    assert h.inst.collections[MV].implied == f(49)
    assert h.controller.collection_frontiers(MV).read_frontier == f(49)


async def test_scenario_12_scheduling_gate() -> None:
    h = Harness()
    h.storage.add_collection(S, D, upper=100)
    h.add_replica(R1)
    h.controller.create_dataflow(I1, index_dataflow(S, I, 100))
    h.maintain()
    assert Schedule(I) not in h.replica(R1).commands
    h.storage.advance_upper(S, 101)
    h.maintain()
    assert h.replica(R1).of(Schedule) == [Schedule(I)]
    # A transient dataflow is scheduled at once, whatever its inputs' uppers.
    t = GlobalId.transient(5)
    h.controller.create_dataflow(I1, index_dataflow(S, t, 200))
    assert h.replica(R1).commands[-1] == Schedule(t)


async def test_scenario_13_global_write_frontier_is_the_fastest_replica() -> None:
    h = setup(as_of=0, replicas=2)
    h.responses()
    h.respond(R1, Frontiers(I, write_frontier=f(50)))
    h.respond(R2, Frontiers(I, write_frontier=f(30)))
    assert h.controller.collection_frontiers(I).write_frontier == f(50)
    assert h.responses() == [FrontierUpper(I1, I, f(50))]
    h.respond(R2, Frontiers(I, write_frontier=f(40)))
    assert h.responses() == []
    assert h.controller.collection_frontiers(I).write_frontier == f(50)
    # A regression is a replica bug: ignored, the replica is cut off and later rehydrated.
    h.respond(R2, Frontiers(I, write_frontier=f(35)))
    assert h.controller.collection_frontiers(I).write_frontier == f(50)
    assert h.inst.replicas[R2].is_failed() and h.replica(R2, 1).closed
    assert h.controller.collection_info(I1, I).replicas[R2].write_frontier == f(40)
    h.maintain()
    assert h.epoch(R2) == 2 and not h.inst.replicas[R2].is_failed()


async def test_scenario_14_new_replica_gets_reduced_history() -> None:
    h = Harness()
    h.storage.add_collection(S, D, upper=300)
    h.add_replica(R1)
    h.controller.update_configuration(ComputeParameters(max_result_size=1 << 20))
    h.controller.update_configuration(ComputeParameters(step_interval_ms=50))
    dropped, moved, untouched = GlobalId.user(10), GlobalId.user(11), GlobalId.user(12)
    for id in (dropped, moved, untouched):
        h.controller.create_dataflow(I1, index_dataflow(S, id, 100))
    h.controller.set_read_policy(I1, [(moved, ReadPolicy.valid_from(f(200)))])
    h.maintain()  # warmup holds -> 299
    assert h.controller.collection_frontiers(moved).read_frontier == f(200)
    h.controller.drop_collections(I1, [dropped])
    h.respond(
        R1,
        Frontiers(dropped, write_frontier=f(None), input_frontier=f(None), output_frontier=f(None)),
    )
    h.maintain()
    assert dropped not in h.inst.collections
    for id in (moved, untouched):
        h.respond(
            R1, Frontiers(id, write_frontier=f(250), input_frontier=f(250), output_frontier=f(250))
        )
    for _ in range(1000):
        uuid = h.peek_id()
        h.controller.peek(I1, IndexTarget(untouched), uuid, 100, result_desc=D)
        h.respond(R1, PeekResponse(uuid, peek_rows(1)))
    h.responses()

    cmds = h.add_replica(R2).commands
    kinds = [type(c) for c in cmds]
    assert kinds[0] is Hello and cmds[0].epoch == 1  # type: ignore[union-attr]
    assert kinds[1] is CreateInstance
    assert kinds.count(UpdateConfiguration) <= 1
    assert cmds[2] == UpdateConfiguration(
        ComputeParameters(max_result_size=1 << 20, step_interval_ms=50)
    )
    creates = [c for c in cmds if isinstance(c, CreateDataflow)]
    assert [(c.dataflow.export_ids(), c.dataflow.as_of) for c in creates] == [
        ((moved,), f(200)),
        ((untouched,), f(100)),
    ]
    assert {c.id for c in cmds if isinstance(c, Schedule)} == {moved, untouched}
    assert not any(isinstance(c, (Peek, CancelPeek)) for c in cmds)
    assert not any(getattr(c, "id", None) == dropped for c in cmds)
    assert not any(isinstance(c, AllowCompaction) and c.id == moved for c in cmds)
    assert kinds[-1] is InitializationComplete
    assert kinds.index(CreateDataflow) < kinds.index(Schedule) < kinds.index(InitializationComplete)
    # The new replica reports what the old one reported, and the controller agrees.
    for id in (moved, untouched):
        h.respond(
            R2, Frontiers(id, write_frontier=f(250), input_frontier=f(250), output_frontier=f(250))
        )
        mine, theirs = h.controller.collection_info(I1, id).replicas[R2], None
        theirs = h.controller.collection_info(I1, id).replicas[R1]
        assert mine.as_of == h.controller.collection_frontiers(id).read_frontier
        assert (mine.write_frontier, mine.input_frontier, mine.output_frontier) == (
            theirs.write_frontier,
            theirs.input_frontier,
            theirs.output_frontier,
        )
        assert mine.hydrated and theirs.hydrated
    assert not h.inst.replicas[R2].is_failed()


async def test_scenario_15_history_stays_bounded() -> None:
    h = setup(as_of=0, upper=10)
    h.maintain()
    for i in range(400):
        uuid = h.peek_id()
        h.controller.peek(I1, IndexTarget(I), uuid, 5, result_desc=D)
        if i % 2:
            h.respond(R1, PeekResponse(uuid, peek_rows(1)))
        else:
            h.controller.cancel_peek(I1, uuid)
            h.respond(R1, PeekResponse(uuid, peek_rows(1)))
        if i % 50 == 0:  # create/drop cycles of another dataflow
            other = GlobalId.user(100 + i)
            h.controller.create_dataflow(I1, index_dataflow(S, other, 5))
            h.controller.drop_collections(I1, [other])
        assert len(h.inst.history) < 100, f"history grew to {len(h.inst.history)} at peek {i}"
    h.inst.history.reduce()
    assert len(h.inst.history) < 10


async def test_scenario_16_stale_epoch_filtering() -> None:
    h = setup(as_of=100, upper=100)
    h.respond(R1, Frontiers(I, write_frontier=f(120)))
    h.fail(R1)
    h.maintain()
    assert h.epoch(R1) == 2
    # Responses still in flight from epoch 1 are ignored ...
    h.respond(R1, Frontiers(I, write_frontier=f(500)), epoch=1)
    h.respond(R1, PeekResponse(h.peek_id(), peek_rows(1)), epoch=1)
    info = h.controller.collection_info(I1, I)
    assert info.upper == f(120)
    # ... and the new epoch's frontiers start afresh from the per-replica as_of.
    assert info.replicas[R1].write_frontier == info.replicas[R1].as_of == f(100)
    assert not h.inst.replicas[R1].is_failed()
    h.respond(R1, Frontiers(I, write_frontier=f(110)))  # behind the global upper: fine
    assert h.controller.collection_info(I1, I).replicas[R1].write_frontier == f(110)
    assert not h.inst.replicas[R1].is_failed()


async def test_scenario_17_drop_and_cleanup() -> None:
    h = setup(as_of=10, replicas=2)
    uuid = h.peek_id()
    future = h.controller.peek(I1, IndexTarget(I), uuid, 10, result_desc=D)
    h.controller.drop_collections(I1, [I])
    with pytest.raises(CollectionMissing, match="collection does not exist: u2"):
        h.controller.collection_frontiers(I)
    assert I in h.inst.collections
    assert AllowCompaction(I, f(None)) not in h.replica(R1).commands
    h.respond(R1, PeekResponse(uuid, peek_rows(2)))
    assert future.done()
    for r in (R1, R2):
        assert h.replica(r).commands[-1] == AllowCompaction(I, f(None))
    assert h.inst.collections[I].since() == f(None)
    empty = f(None)
    h.respond(R1, Frontiers(I, write_frontier=empty, input_frontier=empty, output_frontier=empty))
    h.respond(R2, Frontiers(I, write_frontier=empty, output_frontier=empty))
    h.maintain()
    assert I in h.inst.collections  # R2 still reads its inputs
    h.respond(R2, Frontiers(I, input_frontier=empty))
    h.maintain()
    assert I not in h.inst.collections
    assert all(I not in r.collections for r in h.inst.replicas.values())
    assert h.storage.hold_counts(S) == []  # every hold on the input is gone


async def test_scenario_18_subscribe_dedup_across_replicas() -> None:
    h = Harness()
    h.storage.add_collection(S, D)
    a, b = h.add_replica(R1), h.add_replica(R2)
    h.controller.create_dataflow(I1, subscribe_dataflow(S, SUB, f(0)))
    assert a.of(CreateDataflow) and b.of(CreateDataflow)
    h.responses()

    def batch(lower: int, upper: int | None, *times: int) -> SubscribeBatch:
        table = rows(*((t, f"t{t}", t, 1) for t in times))
        return SubscribeBatch(f(lower), f(upper), table)

    from spate.protocol.compute import SubscribeResponse as Proto

    h.respond(R1, Proto(SUB, batch(0, 5, 0, 3)))
    h.respond(R2, Proto(SUB, batch(0, 8, 0, 3, 6)))
    h.respond(R1, Proto(SUB, batch(5, 10, 6, 9)))
    out = [r for r in h.responses() if isinstance(r, SubscribeResponse)]
    assert [(r.lower, r.upper) for r in out] == [(f(0), f(5)), (f(5), f(8)), (f(8), f(10))]
    assert [[t for _, t, _ in table_to_updates(r.updates)] for r in out if r.updates] == [
        [0, 3],
        [6],
        [9],
    ]
    h.respond(R2, Proto(SUB, batch(8, None, 9)))
    final = [r for r in h.responses() if isinstance(r, SubscribeResponse)]
    assert [(r.lower, r.upper) for r in final] == [(f(10), f(None))]
    h.respond(R1, Proto(SUB, batch(10, None)))
    assert [r for r in h.responses() if isinstance(r, SubscribeResponse)] == []

    # A targeted subscribe ends with an error batch when its replica is dropped.
    t2 = GlobalId.transient(2)
    h.controller.create_dataflow(I1, subscribe_dataflow(S, t2, f(0)), target_replica=R1)
    h.respond(R2, Proto(t2, batch(0, 4, 1)))  # not the target: ignored
    h.respond(R1, Proto(t2, batch(0, 3, 1)))
    h.controller.drop_replica(I1, R1)
    out = [r for r in h.responses() if isinstance(r, SubscribeResponse) and r.id == t2]
    assert [(r.lower, r.upper, r.error) for r in out] == [
        (f(0), f(3), None),
        (f(3), f(3), ERROR_TARGET_REPLICA_FAILED),
    ]


def test_every_scenario_has_a_test() -> None:
    names = {n for n in globals() if n.startswith("test_scenario_")}
    numbers = {int(n.split("_")[2]) for n in names}
    assert numbers == {1, *range(4, 19)}
