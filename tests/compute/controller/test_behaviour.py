"""Controller behaviours beyond the scenario tests: persist peeks, dependencies between indexes,
read-only mode, subscribes' replica bugs, maintenance timing, introspection, instance drop."""

from __future__ import annotations

import asyncio

import pytest

from spate.compute.controller import (
    InstanceMissing,
    PeekNotification,
    PeekWasCanceled,
    SubscribeResponse,
)
from spate.frontier import Antichain, ReadPolicy
from spate.ids import GlobalId, InstanceId
from spate.protocol.compute import (
    AllowCompaction,
    AllowWrites,
    CancelPeek,
    ComputeParameters,
    Frontiers,
    IndexTarget,
    Peek,
    PeekCanceled,
    PeekResponse,
    PersistTarget,
    Schedule,
    SubscribeBatch,
    SubscribeDroppedAt,
    UpdateConfiguration,
)
from spate.protocol.compute import SubscribeResponse as ProtoSubscribe

from .harness import (
    I1,
    R1,
    R2,
    D,
    Harness,
    f,
    index_dataflow,
    index_on_index,
    mv_dataflow,
    peek_rows,
    rows,
    subscribe_dataflow,
)

S, IDX, IDX2, MV = GlobalId.user(1), GlobalId.user(2), GlobalId.user(3), GlobalId.user(4)
SUB = GlobalId.transient(1)


async def test_persist_peek_holds_the_storage_collection() -> None:
    h = Harness()
    h.storage.add_collection(S, D, since=3, upper=10)
    h.add_replica(R1)
    uuid = h.peek_id()
    shard = h.storage.collections[S].meta.shard
    future = h.controller.peek(I1, PersistTarget(S, shard, D), uuid, 7, result_desc=D)
    (sent,) = h.replica(R1).of(Peek)
    assert isinstance(sent, Peek) and sent.target == PersistTarget(S, shard, D)
    assert h.storage.hold_counts(S) == [(7, 1)]
    h.storage.allow_compaction(S, 9)
    assert h.storage.since(S) == f(7)
    h.respond(R1, PeekResponse(uuid, peek_rows(1)))
    assert future.done()
    assert h.storage.hold_counts(S) == [] and h.storage.since(S) == f(9)


async def test_index_on_index_holds_and_waits_for_its_input() -> None:
    h = Harness()
    h.storage.add_collection(S, D, upper=11)
    h.add_replica(R1)
    h.controller.create_dataflow(I1, index_dataflow(S, IDX, 10))
    h.controller.create_dataflow(I1, index_on_index(IDX, S, IDX2, 10))
    h.maintain()
    assert Schedule(IDX) in h.replica(R1).commands
    assert Schedule(IDX2) not in h.replica(R1).commands  # IDX's upper is still 10
    h.respond(R1, Frontiers(IDX, write_frontier=f(20)))
    h.maintain()
    assert Schedule(IDX2) in h.replica(R1).commands
    # IDX2 holds IDX at its own since: IDX's policy cannot compact past it.
    h.controller.set_read_policy(I1, [(IDX, ReadPolicy.valid_from(f(15)))])
    h.storage.advance_upper(S, 30)
    h.maintain()
    assert h.controller.collection_frontiers(IDX).read_frontier == f(10)
    h.respond(R1, Frontiers(IDX2, write_frontier=f(20)))
    h.controller.set_read_policy(I1, [(IDX2, ReadPolicy.valid_from(f(12)))])
    h.maintain()  # IDX2's warmup follows IDX's upper - 1 = 19
    assert h.controller.collection_frontiers(IDX2).read_frontier == f(12)
    assert h.controller.collection_frontiers(IDX).read_frontier == f(12)
    assert h.controller.collection_info(I1, IDX2).dependencies == (IDX,)
    assert h.controller.collection_reverse_dependencies(I1, IDX) == [IDX2]
    assert h.controller.collection_reverse_dependencies(I1, IDX2) == []


def Antichain_valid(t: int) -> object:
    from spate.frontier import ReadPolicy

    return ReadPolicy.valid_from(f(t))


async def test_read_only_mode_and_allow_writes() -> None:
    h = Harness()
    h.storage.add_collection(S, D)
    h.storage.add_collection(MV, D, upper=40)
    h.controller._read_only = True  # as if created read-only
    h.inst.read_only = True
    h.add_replica(R1)
    h.controller.create_dataflow(I1, mv_dataflow(S, MV, f(5)))
    # The materialized view adopts its shard's upper at once.
    assert h.controller.collection_frontiers(MV).write_frontier == f(40)
    h.controller.allow_writes(I1, MV)
    assert h.replica(R1).of(AllowWrites) == []
    h.controller.exit_read_only()
    h.controller.allow_writes(I1, MV)
    h.controller.allow_writes(I1, MV)  # at most once
    assert h.replica(R1).of(AllowWrites) == [AllowWrites(MV)]
    assert not h.controller.collection_info(I1, MV).read_only
    # A replica added later learns it from the history.
    assert AllowWrites(MV) in h.add_replica(R2).commands


async def test_configuration_is_merged_and_sent_to_new_instances() -> None:
    h = Harness(initialized=False)
    h.storage.add_collection(S, D)
    h.add_replica(R1)
    h.controller.update_configuration(ComputeParameters(max_result_size=10))
    h.controller.update_configuration(ComputeParameters(step_interval_ms=5))
    assert h.replica(R1).of(UpdateConfiguration) == [
        UpdateConfiguration(ComputeParameters(max_result_size=10)),
        UpdateConfiguration(ComputeParameters(step_interval_ms=5)),
    ]
    h.controller.create_instance(InstanceId(2))
    history = h.controller._instances[InstanceId(2)].history.commands()
    assert UpdateConfiguration(ComputeParameters(max_result_size=10, step_interval_ms=5)) in (
        history
    )


async def test_subscribe_protocol_violations_are_replica_bugs() -> None:
    h = Harness()
    h.storage.add_collection(S, D)
    h.add_replica(R1)
    h.add_replica(R2)
    h.controller.create_dataflow(I1, subscribe_dataflow(S, SUB, f(0)))
    h.respond(R1, ProtoSubscribe(SUB, SubscribeBatch(f(0), f(5), rows((1, "a", 1, 1)))))
    # A gap: [7, 9) does not start where [0, 5) ended.
    h.respond(R1, ProtoSubscribe(SUB, SubscribeBatch(f(7), f(9), rows())))
    assert h.inst.replicas[R1].is_failed()
    assert h.controller.collection_frontiers(SUB).write_frontier == f(5)
    # Frontiers are never sent for subscribes.
    h.respond(R2, Frontiers(SUB, write_frontier=f(3)))
    assert h.inst.replicas[R2].is_failed()
    out = [r for r in h.responses() if isinstance(r, SubscribeResponse)]
    assert [(r.lower, r.upper) for r in out] == [(f(0), f(5))]


async def test_dropped_at_of_a_tracked_subscribe_ends_it_with_an_error() -> None:
    h = Harness()
    h.storage.add_collection(S, D)
    h.add_replica(R1)
    h.controller.create_dataflow(I1, subscribe_dataflow(S, SUB, f(0)))
    h.respond(R1, ProtoSubscribe(SUB, SubscribeBatch(f(0), f(4), rows())))
    h.respond(R1, ProtoSubscribe(SUB, SubscribeDroppedAt(f(4))))
    out = [r for r in h.responses() if isinstance(r, SubscribeResponse)]
    assert [(r.lower, r.upper, r.error is not None) for r in out] == [
        (f(0), f(4), False),
        (f(4), f(4), True),
    ]
    assert not h.inst.replicas[R1].is_failed()


async def test_peeks_wait_for_a_replica_and_cancellation_answers_once() -> None:
    h = Harness()
    h.storage.add_collection(S, D)
    h.controller.create_dataflow(I1, index_dataflow(S, IDX, 0))
    uuid = h.peek_id()
    future = h.controller.peek(I1, IndexTarget(IDX), uuid, 0, result_desc=D)
    replica = h.add_replica(R1)
    assert replica.of(Peek) and replica.of(Peek)[0].uuid == uuid  # type: ignore[attr-defined]
    h.controller.cancel_peek(I1, uuid)
    assert future.result() == PeekCanceled()
    assert replica.commands[-1] == CancelPeek(uuid)
    assert [n.outcome for n in h.responses() if isinstance(n, PeekNotification)] == [
        PeekWasCanceled()
    ]
    h.respond(R1, PeekResponse(uuid, PeekCanceled()))  # the replica's own answer: fine
    assert not h.inst.replicas[R1].is_failed()
    h.controller.cancel_peek(I1, uuid)  # unknown by now: a warning, no error
    assert h.responses() == []


async def test_maintenance_runs_from_process_when_due() -> None:
    h = Harness()
    h.storage.add_collection(S, D, upper=100)
    h.add_replica(R1)
    h.controller.create_dataflow(I1, index_dataflow(S, IDX, 100))
    h.storage.advance_upper(S, 101)
    assert await h.controller.process() is None
    assert Schedule(IDX) not in h.replica(R1).commands
    h.clock.advance(1000)
    await asyncio.wait_for(h.controller.ready(), 1)  # due: returns at once
    await h.controller.process()
    assert Schedule(IDX) in h.replica(R1).commands


async def test_introspection_reports_replica_health_and_frontiers() -> None:
    h = Harness()
    h.storage.add_collection(S, D, upper=100)
    h.add_replica(R1)
    h.add_replica(R2, connected=False)
    h.controller.create_dataflow(I1, index_dataflow(S, IDX, 10))
    h.respond(R1, Frontiers(IDX, write_frontier=f(20), output_frontier=f(20)))
    info = h.controller.collection_info(I1, IDX)
    assert (info.since, info.upper, info.as_of, info.hydrated) == (f(10), f(20), f(10), True)
    assert info.replicas[R1].hydrated and not info.replicas[R2].hydrated
    assert h.controller.replica_info(I1, R1).health == "connected"
    assert h.controller.replica_info(I1, R2).health == "connecting"
    assert h.controller.replica_frontiers(I1, R1)[IDX].write_frontier == f(20)
    assert h.controller.collections_hydrated_for_replicas(I1, [R1])
    assert not h.controller.collections_hydrated_for_replicas(I1, [R2])
    assert h.controller.collections_hydrated_for_replicas(I1, [R2], exclude=[IDX])
    h.fail(R1)
    assert h.controller.replica_info(I1, R1).health == "failed"


async def test_drop_instance_after_everything_is_gone() -> None:
    h = Harness()
    h.storage.add_collection(S, D)
    h.add_replica(R1)
    h.controller.create_dataflow(I1, index_dataflow(S, IDX, 0))
    h.controller.drop_collections(I1, [IDX])
    h.controller.drop_replica(I1, R1)
    h.controller.drop_instance(I1)
    assert h.storage.hold_counts(S) == []
    assert h.replica(R1, 1).closed
    with pytest.raises(InstanceMissing):
        h.controller.collection_ids(I1)


async def test_allow_compaction_goes_out_once_per_since_change() -> None:
    h = Harness()
    h.storage.add_collection(S, D, upper=50)
    h.add_replica(R1)
    h.controller.create_dataflow(I1, index_dataflow(S, IDX, 10))
    h.maintain()
    h.controller.set_read_policy(I1, [(IDX, ReadPolicy.valid_from(f(20)))])
    h.controller.set_read_policy(I1, [(IDX, ReadPolicy.valid_from(f(20)))])
    h.controller.set_read_policy(
        I1, [(IDX, ReadPolicy.valid_from(f(15)))]
    )  # would regress: ignored
    compactions = h.replica(R1).of(AllowCompaction)
    assert compactions == [AllowCompaction(IDX, f(20))]
    assert h.controller.collection_frontiers(IDX).read_frontier == f(20)
    assert Antichain.of(20) == h.inst.collections[IDX].implied


async def test_cancelling_the_future_cancels_the_peek() -> None:
    h = Harness()
    h.storage.add_collection(S, D)
    h.add_replica(R1)
    h.controller.create_dataflow(I1, index_dataflow(S, IDX, 0))
    uuid = h.peek_id()
    future = h.controller.peek(I1, IndexTarget(IDX), uuid, 3, result_desc=D)
    assert (3, 1) in h.inst.collections[IDX].read_capabilities.counts()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(future, 0.01)
    await asyncio.sleep(0)  # the done-callback runs on the loop
    assert uuid not in h.inst.peeks
    assert h.replica(R1).commands[-1] == CancelPeek(uuid)
    assert (3, 1) not in h.inst.collections[IDX].read_capabilities.counts()
