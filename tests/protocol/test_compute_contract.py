"""The compute protocol contract: messages round-trip; parameters merge; configs compare."""

from __future__ import annotations

import pyarrow as pa
import pytest

from spate.codec import decode, encode
from spate.frontier import Antichain
from spate.ids import GlobalId, PeekId, SeededIdGen, ShardId
from spate.plan.dataflow import (
    BuildDesc,
    DataflowDescription,
    IndexDesc,
    IndexExport,
    MaterializedViewConnection,
    SinkExport,
    SourceImport,
    SubscribeConnection,
)
from spate.plan.finishing import ColumnOrder, InvalidFinishing, RowSetFinishing
from spate.plan.relation import Get
from spate.protocol.common import Hello
from spate.protocol.compute import (
    AllowCompaction,
    ComputeParameters,
    CreateDataflow,
    Frontiers,
    IndexTarget,
    InstanceConfig,
    Peek,
    PeekCanceled,
    PeekResponse,
    PersistTarget,
    SubscribeBatch,
    SubscribeDroppedAt,
    SubscribeResponse,
)
from spate.repr import INT64, TEXT, RelationDesc

IDS = SeededIdGen(3)
D = RelationDesc.of(("k", INT64, False), ("v", TEXT))
U1, U2, U3, U4 = (GlobalId.user(i) for i in range(1, 5))


def dataflow() -> DataflowDescription:
    return DataflowDescription(
        source_imports=(SourceImport(U1, D, ShardId.new(IDS), Antichain.of(7)),),
        objects_to_build=(BuildDesc(U2, Get(U1, D)),),
        index_exports=(IndexExport(U3, IndexDesc(U2, (0,)), D),),
        sink_exports=(
            SinkExport(U4, U2, D, MaterializedViewConnection(ShardId.new(IDS))),
            SinkExport(GlobalId.transient(1), U2, D, SubscribeConnection(), up_to=Antichain.of(9)),
        ),
        as_of=Antichain.of(5),
    )


MESSAGES = [
    Hello(version=1, epoch=3, nonce=b"\x01" * 16),
    CreateDataflow(dataflow()),
    AllowCompaction(U3, Antichain.empty()),
    Peek(
        target=IndexTarget(U3),
        uuid=PeekId.new(IDS),
        timestamp=6,
        finishing=RowSetFinishing(
            order_by=(ColumnOrder(1, desc=True),), limit=10, offset=2, project=(1,)
        ),
        result_desc=D.project(["v"]),
        literal_constraints=((1,), (2,)),
    ),
    Peek(
        target=PersistTarget(U1, ShardId.new(IDS), D),
        uuid=PeekId.new(IDS),
        timestamp=0,
        finishing=RowSetFinishing(),
        result_desc=D,
    ),
    Frontiers(U3, write_frontier=Antichain.of(8), output_frontier=Antichain.empty()),
    PeekResponse(PeekId.new(IDS), PeekCanceled()),
    SubscribeResponse(
        U4,
        SubscribeBatch(
            Antichain.of(5),
            Antichain.of(6),
            pa.table({"k": [1], "v": ["a"], "_time": [5], "_diff": [1]}),
        ),
    ),
    SubscribeResponse(U4, SubscribeBatch(Antichain.of(6), Antichain.of(7), None, error="too big")),
    SubscribeResponse(U4, SubscribeDroppedAt(Antichain.of(7))),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_messages_round_trip(message: object) -> None:
    assert decode(encode(message), type(message)) == message


def test_dataflow_description_helpers() -> None:
    df = dataflow()
    assert df.export_ids() == (U3, U4, GlobalId.transient(1))
    assert df.subscribe_ids() == (GlobalId.transient(1),)
    assert df.persist_sink_ids() == (U4,)
    assert not df.is_transient()
    assert df.with_as_of(Antichain.of(9)).as_of == Antichain.of(9)
    assert df.objects_to_build[0].plan.depends_on() == frozenset({U1})


def test_parameters_merge_keeps_unset_fields() -> None:
    a = ComputeParameters(max_result_size=100, step_interval_ms=50)
    merged = a.update(ComputeParameters(step_interval_ms=10))
    assert merged == ComputeParameters(max_result_size=100, step_interval_ms=10)
    assert ComputeParameters().is_empty() and not merged.is_empty()


def test_instance_config_compatibility() -> None:
    old = InstanceConfig(logging_interval_ms=1000, expiration_offset_ms=60_000)
    assert InstanceConfig(1000, 30_000).compatible_with(old)
    assert not InstanceConfig(1000, 90_000).compatible_with(old)
    assert not InstanceConfig(1000, None).compatible_with(old)
    assert not InstanceConfig(500, 60_000).compatible_with(old)
    assert InstanceConfig(1000, 5).compatible_with(InstanceConfig(1000, None))


def test_finishing_validation() -> None:
    with pytest.raises(InvalidFinishing, match="limit must be >= 0"):
        RowSetFinishing(limit=-1)
    with pytest.raises(InvalidFinishing, match="order by column 3: relation has 2 columns"):
        RowSetFinishing(order_by=(ColumnOrder(3),)).validate(2)
    assert RowSetFinishing(project=(0, 1)).is_trivial(2)
    assert not RowSetFinishing(offset=1).is_trivial(2)
