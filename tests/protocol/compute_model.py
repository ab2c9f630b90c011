"""A model of compute replica state, and a generator of valid compute command sequences.

The model applies commands the way a replica must: exports with their since
(``as_of`` joined with every compaction), scheduled exports, live peeks, merged parameters.
Used to check that replaying a reduced history gives the same end state as the full history.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from spate.frontier import Antichain, Frontier
from spate.ids import GlobalId, PeekId, SeededIdGen
from spate.plan.dataflow import (
    BuildDesc,
    DataflowDescription,
    IndexDesc,
    IndexExport,
    SinkExport,
    SourceImport,
    SubscribeConnection,
)
from spate.plan.finishing import RowSetFinishing
from spate.plan.relation import Get
from spate.protocol.common import Hello
from spate.protocol.compute import (
    AllowCompaction,
    AllowWrites,
    CancelPeek,
    ComputeCommand,
    ComputeParameters,
    CreateDataflow,
    CreateInstance,
    IndexTarget,
    InitializationComplete,
    InstanceConfig,
    Peek,
    Schedule,
    UpdateConfiguration,
)
from spate.repr import INT64, TEXT, RelationDesc

D = RelationDesc.of(("k", INT64, False), ("v", TEXT))
SOURCE = GlobalId.user(1)


@dataclass
class ReplicaModel:
    hello: Hello | None = None
    instance: CreateInstance | None = None
    initialized: bool = False
    params: ComputeParameters = field(default_factory=ComputeParameters)
    exports: dict[GlobalId, tuple[DataflowDescription, Frontier]] = field(default_factory=dict)
    scheduled: set[GlobalId] = field(default_factory=set)
    writes: set[GlobalId] = field(default_factory=set)
    peeks: dict[PeekId, Peek] = field(default_factory=dict)
    other: dict[GlobalId, Frontier] = field(default_factory=dict)

    def apply(self, c: ComputeCommand) -> None:
        if isinstance(c, Hello):
            self.hello = c
        elif isinstance(c, CreateInstance):
            self.instance = c
        elif isinstance(c, InitializationComplete):
            self.initialized = True
        elif isinstance(c, UpdateConfiguration):
            self.params = self.params.update(c.params)
        elif isinstance(c, CreateDataflow):
            assert c.dataflow.as_of is not None
            for id in c.dataflow.export_ids():
                assert id not in self.exports, f"export {id} created twice"
                self.exports[id] = (c.dataflow.with_as_of(None), c.dataflow.as_of)
        elif isinstance(c, Schedule):
            assert c.id in self.exports, f"schedule of unknown {c.id}"
            self.scheduled.add(c.id)
        elif isinstance(c, AllowCompaction):
            if c.id in self.exports:
                df, since = self.exports[c.id]
                since = since.join(c.frontier)
                if since.is_empty():
                    del self.exports[c.id]
                    self.scheduled.discard(c.id)
                    self.writes.discard(c.id)
                else:
                    self.exports[c.id] = (df, since)
            else:
                f = self.other.get(c.id, Antichain.minimum()).join(c.frontier)
                if f.is_empty():
                    self.other.pop(c.id, None)
                else:
                    self.other[c.id] = f
        elif isinstance(c, Peek):
            assert isinstance(c.target, IndexTarget)
            assert c.target.id in self.exports, f"peek of unknown {c.target.id}"
            since = self.exports[c.target.id][1]
            assert since.less_equal(c.timestamp), f"peek at {c.timestamp} below since {since}"
            self.peeks[c.uuid] = c
        elif isinstance(c, CancelPeek):
            self.peeks.pop(c.uuid, None)
        else:
            assert isinstance(c, AllowWrites)
            if c.id in self.exports:
                self.writes.add(c.id)

    def state(self) -> object:
        return (
            self.hello,
            self.instance,
            self.initialized,
            self.params,
            self.exports,
            self.scheduled,
            self.writes,
            self.peeks,
            self.other,
        )


def replay(commands: list[ComputeCommand] | tuple[ComputeCommand, ...]) -> ReplicaModel:
    model = ReplicaModel()
    for c in commands:
        model.apply(c)
    return model


def dataflow(
    exports: list[GlobalId], as_of: int, *, subscribe: GlobalId | None = None
) -> DataflowDescription:
    built = GlobalId.user(10_000 + exports[0].value)
    sinks: list[SinkExport] = []
    indexes = [IndexExport(e, IndexDesc(built, (0,)), D) for e in exports]
    if subscribe is not None:
        sinks.append(SinkExport(subscribe, built, D, SubscribeConnection()))
    return DataflowDescription(
        source_imports=(SourceImport(SOURCE, D),),
        objects_to_build=(BuildDesc(built, Get(SOURCE, D)),),
        index_exports=tuple(indexes),
        sink_exports=tuple(sinks),
        as_of=Antichain.of(as_of),
        debug_name=f"df{exports[0]}",
    )


def peek(target: GlobalId, timestamp: int, ids: SeededIdGen) -> Peek:
    return Peek(
        target=IndexTarget(target),
        uuid=PeekId.new(ids),
        timestamp=timestamp,
        finishing=RowSetFinishing(),
        result_desc=D,
    )


def valid_commands(actions: list[tuple[int, int]], seed: int = 0) -> list[ComputeCommand]:
    """Interpret ``(action, argument)`` pairs as a valid command sequence (a controller's)."""
    rng = random.Random(seed)
    ids = SeededIdGen(seed)
    out: list[ComputeCommand] = [
        Hello(version=1, epoch=1, nonce=b"n" * 16),
        CreateInstance(InstanceConfig()),
    ]
    since: dict[GlobalId, int] = {}  # live exports (indexes and subscribes)
    indexes: set[GlobalId] = set()
    peeks: dict[PeekId, tuple[GlobalId, int]] = {}  # live peek -> (target, timestamp)
    logs: dict[GlobalId, int] = {}
    written: set[GlobalId] = set()
    next_id = 100
    initialized = False
    for action, arg in actions:
        live = sorted(since)
        match action % 9:
            case 0:
                n = 1 + arg % 3
                exports = [GlobalId.user(next_id + i) for i in range(n)]
                sub = GlobalId.transient(next_id) if arg % 5 == 0 else None
                next_id += n
                as_of = rng.randrange(0, 20)
                out.append(CreateDataflow(dataflow(exports, as_of, subscribe=sub)))
                for e in exports:
                    since[e] = as_of
                    indexes.add(e)
                if sub is not None:
                    since[sub] = as_of
            case 1 if live:
                out.append(Schedule(live[arg % len(live)]))
            case 2 if live:
                target = live[arg % len(live)]
                # A live peek holds its target back at the peek's timestamp.
                held = [ts for t, ts in peeks.values() if t == target]
                if arg % 4 == 0 and not held:
                    out.append(AllowCompaction(target, Antichain.empty()))
                    del since[target]
                else:
                    since[target] = min([since[target] + arg % 7, *held])
                    out.append(AllowCompaction(target, Antichain.of(since[target])))
            case 3 if indexes & set(live):
                candidates = sorted(indexes & set(live))
                target = candidates[arg % len(candidates)]
                p = peek(target, since[target] + arg % 5, ids)
                peeks[p.uuid] = (target, p.timestamp)
                out.append(p)
            case 4 if peeks:
                uuid = sorted(peeks)[arg % len(peeks)]
                del peeks[uuid]
                out.append(CancelPeek(uuid))
            case 5:
                out.append(
                    UpdateConfiguration(
                        ComputeParameters(
                            max_result_size=arg if arg % 2 else None,
                            step_interval_ms=arg % 3 or None,
                        )
                    )
                )
            case 6 if live:
                target = live[arg % len(live)]
                if target not in written:
                    written.add(target)
                    out.append(AllowWrites(target))
            case 7 if not initialized:
                initialized = True
                out.append(InitializationComplete())
            case 8:
                log = GlobalId.system(1 + arg % 2)
                logs[log] = logs.get(log, 0) + arg % 4
                out.append(AllowCompaction(log, Antichain.of(logs[log])))
            case _:
                pass
    return out
