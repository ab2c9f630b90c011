"""Dataflow descriptions and a small harness around ``ReplicaState`` for the unit tests."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from spate.compute.replica.actions import (
    Action,
    BuildDataflow,
    DataflowReady,
    Event,
    Send,
    Stepped,
)
from spate.compute.replica.state import ReplicaState
from spate.frontier import Antichain, Frontier
from spate.ids import GlobalId, PeekId, ShardId
from spate.plan.dataflow import (
    BuildDesc,
    DataflowDescription,
    IndexDesc,
    IndexExport,
    IndexImport,
    MaterializedViewConnection,
    SinkExport,
    SourceImport,
    SubscribeConnection,
)
from spate.plan.finishing import RowSetFinishing
from spate.plan.relation import Get
from spate.protocol.common import PROTOCOL_VERSION, Hello
from spate.protocol.compute import (
    ComputeCommand,
    ComputeResponse,
    CreateInstance,
    IndexTarget,
    InitializationComplete,
    InstanceConfig,
    Peek,
)
from spate.repr import INT64, TEXT, RelationDesc
from spate.repr.arrow import updates_to_table

D = RelationDesc.of(("k", INT64, False), ("v", TEXT))
SOURCE = GlobalId.user(1)
SHARD = ShardId(uuid.UUID(int=1))


def index_dataflow(
    index: GlobalId, as_of: int, *, source: GlobalId = SOURCE, until: Frontier | None = None
) -> DataflowDescription:
    """An index (keyed by column 0) over a persist source."""
    built = GlobalId.user(10_000 + index.value)
    return DataflowDescription(
        source_imports=(SourceImport(source, D, shard=SHARD),),
        objects_to_build=(BuildDesc(built, Get(source, D)),),
        index_exports=(IndexExport(index, IndexDesc(built, (0,)), D),),
        as_of=Antichain.of(as_of),
        until=until if until is not None else Antichain.empty(),
        debug_name=f"index {index}",
    )


def importing_dataflow(index: GlobalId, imported: GlobalId, as_of: int) -> DataflowDescription:
    """An index over another index of this replica (``imported`` arranges collection u10000+n)."""
    on = GlobalId.user(10_000 + imported.value)
    built = GlobalId.user(20_000 + index.value)
    return DataflowDescription(
        index_imports=(IndexImport(imported, IndexDesc(on, (0,)), D),),
        objects_to_build=(BuildDesc(built, Get(on, D)),),
        index_exports=(IndexExport(index, IndexDesc(built, (0,)), D),),
        as_of=Antichain.of(as_of),
        debug_name=f"index {index} on {imported}",
    )


def sink_dataflow(
    sink: GlobalId,
    as_of: int,
    *,
    subscribe: bool,
    with_snapshot: bool = True,
    up_to: Frontier | None = None,
) -> DataflowDescription:
    built = GlobalId.user(10_000 + sink.value)
    connection = (
        SubscribeConnection()
        if subscribe
        else MaterializedViewConnection(ShardId(uuid.UUID(int=sink.value)))
    )
    return DataflowDescription(
        source_imports=(SourceImport(SOURCE, D, shard=SHARD),),
        objects_to_build=(BuildDesc(built, Get(SOURCE, D)),),
        sink_exports=(
            SinkExport(
                sink,
                built,
                D,
                connection,
                with_snapshot=with_snapshot,
                up_to=up_to if up_to is not None else Antichain.empty(),
            ),
        ),
        as_of=Antichain.of(as_of),
        debug_name=f"sink {sink}",
    )


def updates(rows: Iterable[tuple[tuple[object, ...], int, int]]) -> pa.Table:
    return updates_to_table(D, list(rows))  # type: ignore[arg-type]


def peek(index: GlobalId, timestamp: int, n: int) -> Peek:
    return Peek(IndexTarget(index), PeekId(uuid.UUID(int=n)), timestamp, RowSetFinishing(), D)


def hello(epoch: int) -> Hello:
    return Hello(PROTOCOL_VERSION, epoch, b"\0" * 16)


@dataclass
class Harness:
    """A ``ReplicaState`` with a recorded action log."""

    state: ReplicaState = field(default_factory=lambda: ReplicaState(name="test"))
    actions: list[Action] = field(default_factory=list)
    epoch: int = 0

    def run(self, actions: list[Action]) -> list[Action]:
        self.actions.extend(actions)
        return actions

    def connect(
        self, commands: Sequence[ComputeCommand] = (), *, config: InstanceConfig | None = None
    ) -> list[Action]:
        """A new connection (next epoch): Hello, CreateInstance, ``commands``, init complete."""
        self.epoch += 1
        out = self.run(self.state.connect(self.epoch))
        out += self.cmd(hello(self.epoch))
        out += self.cmd(CreateInstance(config or InstanceConfig()))
        for c in commands:
            out += self.cmd(c)
        out += self.cmd(InitializationComplete())
        return out

    def cmd(self, command: ComputeCommand) -> list[Action]:
        return self.run(self.state.command(self.epoch, command))

    def event(self, event: Event) -> list[Action]:
        return self.run(self.state.handle(event))

    def build_all(self, actions: Iterable[Action], upper: int | None = None) -> list[Action]:
        """Report every ``BuildDataflow`` in ``actions`` as ready (at its as_of)."""
        out: list[Action] = []
        for a in list(actions):
            if isinstance(a, BuildDataflow):
                assert a.description.as_of is not None
                out += self.event(DataflowReady(a.key, a.description.as_of))
        return out

    def step(self, key: int, upper: int, **subscribe: pa.Table) -> list[Action]:
        return self.event(
            Stepped(key, Antichain.of(upper), {GlobalId.parse(k): v for k, v in subscribe.items()})
        )


def sent(actions: Iterable[Action]) -> list[ComputeResponse]:
    return [a.response for a in actions if isinstance(a, Send)]


def of_type(actions: Iterable[Action], kind: type) -> list[object]:
    return [a for a in actions if isinstance(a, kind)]
