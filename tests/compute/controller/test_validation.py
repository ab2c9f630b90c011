"""Bad input gets a clear, narrow error that names the objects — and changes nothing."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from spate.compute.controller import (
    CollectionMissing,
    HydrationCheckBadTarget,
    InstanceExists,
    InstanceMissing,
    InstanceNotEmpty,
    InvalidDataflow,
    InvalidPeek,
    PeekExists,
    PeekTargetInvalid,
    ReplicaExists,
    ReplicaMissing,
    WriteOnlyCollection,
)
from spate.errors import UsageError
from spate.frontier import ReadPolicy
from spate.ids import GlobalId, InstanceId, ReplicaId
from spate.plan.dataflow import (
    BuildDesc,
    DataflowDescription,
    IndexDesc,
    IndexExport,
    SourceImport,
)
from spate.plan.relation import Get
from spate.protocol.compute import IndexTarget, PersistTarget
from spate.repr import INT64, RelationDesc

from .harness import CONFIG, I1, R1, R2, D, Harness, f, index_dataflow, mv_dataflow

S, IDX, MV, OTHER = GlobalId.user(1), GlobalId.user(2), GlobalId.user(3), GlobalId.user(4)
MISSING = GlobalId.user(99)
I9 = InstanceId(9)


@pytest.fixture
def h() -> Harness:
    h = Harness()
    h.storage.add_collection(S, D, since=0, upper=10)
    h.storage.add_collection(MV, D)
    h.add_replica(R1)
    h.controller.create_dataflow(I1, index_dataflow(S, IDX, 5))
    h.controller.create_dataflow(I1, mv_dataflow(S, MV, f(5)))
    return h


def snapshot(h: Harness) -> tuple[object, ...]:
    inst = h.inst
    return (
        len(inst.history),
        sorted(inst.collections),
        [(id, c.since(), c.write_frontier, c.read_policy) for id, c in inst.collections.items()],
        sorted(inst.replicas),
        len(inst.peeks),
        len(h.replica(R1).commands),
        h.storage.hold_counts(S),
        h.storage.collections[S].holds_issued,
    )


def unchanged(h: Harness, call: Callable[[], object], error: type[Exception], *names: str) -> str:
    before = snapshot(h)
    with pytest.raises(error) as info:
        call()
    assert isinstance(info.value, UsageError)
    message = str(info.value)
    for name in names:
        assert name in message, f"{name!r} not in {message!r}"
    assert snapshot(h) == before, f"{error.__name__} changed state"
    return message


async def test_unknown_instance_everywhere(h: Harness) -> None:
    c = h.controller
    calls: list[Callable[[], object]] = [
        lambda: c.drop_instance(I9),
        lambda: c.add_replica_to_instance(I9, R2, CONFIG),
        lambda: c.drop_replica(I9, R1),
        lambda: c.create_dataflow(I9, index_dataflow(S, OTHER, 5)),
        lambda: c.drop_collections(I9, [IDX]),
        lambda: c.peek(I9, IndexTarget(IDX), h.peek_id(), 5, result_desc=D),
        lambda: c.set_read_policy(I9, []),
        lambda: c.acquire_read_hold(I9, IDX),
        lambda: c.collection_hydrated(I9, IDX),
        lambda: c.allow_writes(I9, MV),
    ]
    for call in calls:
        msg = unchanged(h, call, InstanceMissing, "instance does not exist: i9")
        assert not msg.startswith("'")  # not quoted like a bare KeyError


async def test_instance_and_replica_lifecycle_errors(h: Harness) -> None:
    c = h.controller
    unchanged(h, lambda: c.create_instance(I1), InstanceExists, "i1")
    unchanged(h, lambda: c.add_replica_to_instance(I1, R1, CONFIG), ReplicaExists, "r1", "i1")
    unchanged(h, lambda: c.drop_replica(I1, R2), ReplicaMissing, "replica does not exist: r2")
    unchanged(h, lambda: c.drop_instance(I1), InstanceNotEmpty, "r1", "u2", "u3")
    with pytest.raises(HydrationCheckBadTarget, match="No replicas found"):
        c.collections_hydrated_for_replicas(I1, [R2, ReplicaId(7)])


async def test_create_dataflow_errors(h: Harness) -> None:
    c = h.controller

    def create(df: DataflowDescription, target: ReplicaId | None = None) -> Callable[[], None]:
        return lambda: c.create_dataflow(I1, df, target)

    unchanged(h, create(index_dataflow(S, OTHER, 5), R2), ReplicaMissing, "r2")
    unchanged(h, create(index_dataflow(S, OTHER, 5), R1), InvalidDataflow, "cannot target")
    unchanged(h, create(index_dataflow(S, IDX, 5)), InvalidDataflow, "u2 exists already")
    unchanged(h, create(index_dataflow(MISSING, OTHER, 5)), CollectionMissing, "u99")
    unchanged(h, create(mv_dataflow(S, MISSING, f(5))), CollectionMissing, "u99")
    dup = DataflowDescription(
        source_imports=(SourceImport(S, D),),
        index_exports=(
            IndexExport(OTHER, IndexDesc(S, (0,)), D),
            IndexExport(OTHER, IndexDesc(S, (1,)), D),
        ),
        as_of=f(5),
    )
    unchanged(h, create(dup), InvalidDataflow, "duplicate export id(s): u4")
    unordered = DataflowDescription(
        source_imports=(SourceImport(S, D),),
        objects_to_build=(
            BuildDesc(GlobalId.transient(2), Get(GlobalId.transient(1), D)),
            BuildDesc(GlobalId.transient(1), Get(S, D)),
        ),
        index_exports=(IndexExport(OTHER, IndexDesc(GlobalId.transient(2), (0,)), D),),
        as_of=f(5),
    )
    unchanged(h, create(unordered), InvalidDataflow, "t2 reads t1", "topologically")
    arranges_nothing = DataflowDescription(
        source_imports=(SourceImport(S, D),),
        index_exports=(IndexExport(OTHER, IndexDesc(MISSING, (0,)), D),),
        as_of=f(5),
    )
    unchanged(h, create(arranges_nothing), InvalidDataflow, "arranges u99")
    wrong_schema = DataflowDescription(
        source_imports=(SourceImport(S, RelationDesc.of(("x", INT64))),),
        index_exports=(IndexExport(OTHER, IndexDesc(S, (0,)), D),),
        as_of=f(5),
    )
    unchanged(h, create(wrong_schema), InvalidDataflow, "u1", "('x',)", "('k', 'v')")
    unchanged(h, create(DataflowDescription(as_of=f(5))), InvalidDataflow, "exports nothing")


async def test_drop_and_policy_are_all_or_nothing(h: Harness) -> None:
    c = h.controller
    unchanged(h, lambda: c.drop_collections(I1, [IDX, MISSING]), CollectionMissing, "u99")
    assert c.collection_ids(I1) == [IDX, MV]
    policies = [(IDX, ReadPolicy.valid_from(f(7))), (MISSING, ReadPolicy.valid_from(f(7)))]
    unchanged(h, lambda: c.set_read_policy(I1, policies), CollectionMissing, "u99")
    policies = [(IDX, ReadPolicy.valid_from(f(7))), (MV, ReadPolicy.valid_from(f(7)))]
    unchanged(h, lambda: c.set_read_policy(I1, policies), WriteOnlyCollection, "u3")
    c.drop_collections(I1, [IDX])
    unchanged(h, lambda: c.drop_collections(I1, [IDX]), CollectionMissing, "u2")
    unchanged(h, lambda: c.acquire_read_hold(I1, IDX), CollectionMissing, "u2")


async def test_peek_errors(h: Harness) -> None:
    c = h.controller

    def peek(target: object, ts: object, **kw: object) -> Callable[[], object]:
        return lambda: c.peek(I1, target, h.peek_id(), ts, result_desc=D, **kw)  # type: ignore[arg-type]

    unchanged(h, peek(IndexTarget(MISSING), 5), CollectionMissing, "u99")
    unchanged(h, peek(IndexTarget(MV), 5), PeekTargetInvalid, "u3", "materialized view")
    unchanged(h, peek(IndexTarget(IDX), 5, target_replica=R2), ReplicaMissing, "r2")
    unchanged(h, peek(IndexTarget(IDX), -1), InvalidPeek, "-1")
    unchanged(h, peek(IndexTarget(IDX), "5"), InvalidPeek, "'5'")
    unchanged(h, peek(IndexTarget(IDX), 5, literal_constraints=()), InvalidPeek, "empty")
    bogus = PersistTarget(MISSING, h.storage.collections[S].meta.shard, D)
    unchanged(h, peek(bogus, 5), CollectionMissing, "u99")
    uuid = h.peek_id()
    c.peek(I1, IndexTarget(IDX), uuid, 5, result_desc=D)
    unchanged(
        h, lambda: c.peek(I1, IndexTarget(IDX), uuid, 6, result_desc=D), PeekExists, str(uuid)
    )
