"""Shared helpers for compute controller tests: dataflow builders, a recording replica
connector (no sockets) and a harness around ``ComputeController``."""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from spate.clock import ManualClock
from spate.compute.controller import (
    ComputeController,
    ComputeControllerResponse,
    ReplicaConfig,
    ReplicaConnected,
    ReplicaFailed,
    ReplicaLocation,
    ReplicaResponse,
)
from spate.compute.controller.replica_client import EventSink
from spate.compute.controller.storage import StorageCollections
from spate.frontier import Antichain, Frontier
from spate.ids import GlobalId, InstanceId, PeekId, ReplicaId, SeededIdGen
from spate.plan.dataflow import (
    DataflowDescription,
    IndexDesc,
    IndexExport,
    IndexImport,
    MaterializedViewConnection,
    SinkExport,
    SourceImport,
    SubscribeConnection,
)
from spate.protocol.compute import ComputeCommand, ComputeResponse, PeekRows
from spate.repr import INT64, TEXT, RelationDesc
from spate.repr.arrow import updates_to_table

from .storage_double import FakeStorage

D = RelationDesc.of(("k", INT64, False), ("v", TEXT))
I1 = InstanceId(1)
R1, R2, R3 = ReplicaId(1), ReplicaId(2), ReplicaId(3)


def f(t: int | None) -> Frontier:
    return Antichain.empty() if t is None else Antichain.of(t)


def index_dataflow(
    source: GlobalId, index: GlobalId, as_of: int | None, *, name: str = ""
) -> DataflowDescription:
    """Index ``index`` arranging storage collection ``source`` by its first column."""
    return DataflowDescription(
        source_imports=(SourceImport(source, D),),
        index_exports=(IndexExport(index, IndexDesc(source, (0,)), D),),
        as_of=None if as_of is None else f(as_of),
        debug_name=name or f"index {index}",
    )


def index_on_index(
    imported: GlobalId, on: GlobalId, index: GlobalId, as_of: int
) -> DataflowDescription:
    return DataflowDescription(
        index_imports=(IndexImport(imported, IndexDesc(on, (0,)), D),),
        index_exports=(IndexExport(index, IndexDesc(imported, (0,)), D),),
        as_of=f(as_of),
    )


def mv_dataflow(source: GlobalId, mv: GlobalId, as_of: Frontier | None) -> DataflowDescription:
    return DataflowDescription(
        source_imports=(SourceImport(source, D),),
        sink_exports=(SinkExport(mv, source, D, MaterializedViewConnection()),),
        as_of=as_of,
    )


def subscribe_dataflow(
    source: GlobalId, sub: GlobalId, as_of: Frontier | None
) -> DataflowDescription:
    return DataflowDescription(
        source_imports=(SourceImport(source, D),),
        sink_exports=(SinkExport(sub, source, D, SubscribeConnection()),),
        as_of=as_of,
    )


def rows(*updates: tuple[int, str, int, int]) -> pa.Table:
    """A table of ``(k, v, time, diff)`` updates in the physical format."""
    return updates_to_table(D, [((k, v), t, d) for k, v, t, d in updates])


def peek_rows(n: int) -> PeekRows:
    return PeekRows(pa.table({"k": list(range(n)), "v": ["x"] * n, "_diff": [1] * n}))


@dataclass
class FakeReplica:
    """What the controller sent to one ``(replica, epoch)``."""

    epoch: int
    commands: list[ComputeCommand] = field(default_factory=list)
    closed: bool = False

    def send(self, command: ComputeCommand) -> None:
        assert not self.closed, "command sent to a closed replica client"
        self.commands.append(command)

    def close(self) -> None:
        self.closed = True

    def of(self, kind: type) -> list[ComputeCommand]:
        return [c for c in self.commands if isinstance(c, kind)]


class RecordingConnector:
    """A ``ReplicaConnector`` that records commands instead of opening connections."""

    def __init__(self) -> None:
        self.replicas: dict[tuple[ReplicaId, int], FakeReplica] = {}
        self.sinks: dict[tuple[ReplicaId, int], EventSink] = {}

    def connect(
        self,
        instance: InstanceId,
        replica: ReplicaId,
        epoch: int,
        config: ReplicaConfig,
        events: EventSink,
    ) -> FakeReplica:
        fake = FakeReplica(epoch)
        self.replicas[(replica, epoch)] = fake
        self.sinks[(replica, epoch)] = events
        return fake


CONFIG = ReplicaConfig(ReplicaLocation("127.0.0.1", 1))


class Harness:
    """A controller with one instance ``i1`` over a ``FakeStorage``, driven synchronously."""

    def __init__(
        self,
        *,
        hydration_concurrency: int = 100,
        initialized: bool = True,
        storage: StorageCollections | None = None,
    ) -> None:
        self.storage = FakeStorage()
        backend: StorageCollections = self.storage if storage is None else storage
        self.connector = RecordingConnector()
        self.clock = ManualClock(1_000_000)
        self.ids = SeededIdGen(7)
        self.controller = ComputeController(
            backend,
            connector=self.connector,
            clock=self.clock,
            ids=self.ids,
            hydration_concurrency=hydration_concurrency,
        )
        self.controller.create_instance(I1)
        if initialized:
            self.controller.initialization_complete()
        self.inst = self.controller._instances[I1]
        self._out: list[ComputeControllerResponse] = []

    def _pump(self) -> None:
        r = self.controller.process_now()
        if r is not None:
            self._out.append(r)

    def add_replica(self, replica: ReplicaId, *, connected: bool = True) -> FakeReplica:
        self.controller.add_replica_to_instance(I1, replica, CONFIG)
        if connected:
            self.event(ReplicaConnected(I1, replica, self.epoch(replica)))
        return self.replica(replica)

    def epoch(self, replica: ReplicaId) -> int:
        return self.inst.replicas[replica].epoch

    def replica(self, replica: ReplicaId, epoch: int | None = None) -> FakeReplica:
        return self.connector.replicas[(replica, epoch or self.epoch(replica))]

    def event(self, event: ReplicaConnected | ReplicaResponse | ReplicaFailed) -> None:
        self.controller.handle_replica_event(event)
        self._pump()

    def respond(
        self, replica: ReplicaId, response: ComputeResponse, *, epoch: int | None = None
    ) -> None:
        e = epoch if epoch is not None else self.epoch(replica)
        self.controller.handle_replica_event(ReplicaResponse(I1, replica, e, response))
        self._pump()

    def fail(self, replica: ReplicaId, reason: str = "connection reset") -> None:
        self.event(ReplicaFailed(I1, replica, self.epoch(replica), reason))

    def maintain(self) -> None:
        self.controller.maintain()

    def responses(self) -> list[ComputeControllerResponse]:
        out, self._out = self._out, []
        while (r := self.controller.process_now()) is not None:
            out.append(r)
        return out

    def peek_id(self) -> PeekId:
        return PeekId.new(self.ids)
