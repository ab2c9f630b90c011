"""A model of storage replica state, and a generator of valid storage command sequences."""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass, field

from spate.frontier import Antichain, Frontier
from spate.ids import GlobalId, ShardId
from spate.protocol.common import Hello
from spate.protocol.secret import Secret
from spate.protocol.storage import (
    AllowCompaction,
    AllowWrites,
    InitializationComplete,
    RunIngestion,
    RunSink,
    StorageCommand,
    StorageParameters,
    UpdateConfiguration,
)
from spate.protocol.storage_desc import (
    CollectionMetadata,
    IngestionDescription,
    LoadGenerator,
    LoadGeneratorSource,
    ParquetSinkConnection,
    PostgresSource,
    SinkDescription,
    SourceExport,
)
from spate.repr import INT64, TEXT, RelationDesc

D = RelationDesc.of(("k", INT64, False), ("v", TEXT))


def shard(n: int) -> ShardId:
    return ShardId(uuid.UUID(int=n))


def ingestion(
    id: GlobalId, exports: list[GlobalId], *, remap: GlobalId | None = None, seed: int = 0
) -> RunIngestion:
    """A PostgreSQL ingestion exporting tables ``t<i>``; the remap collection is ``remap``."""
    remap = remap or id
    desc = IngestionDescription(
        connection=PostgresSource(Secret(f"postgresql://u:pw{seed}@h/db"), "pub", "slot"),
        exports=tuple(
            SourceExport(e, f"public.t{e.value}", shard(e.value), D, key=(0,)) for e in exports
        ),
        remap=CollectionMetadata(remap, shard(remap.value + 1_000_000), D),
    )
    return RunIngestion(id, desc)


def counter(id: GlobalId, export: GlobalId) -> RunIngestion:
    desc = IngestionDescription(
        connection=LoadGeneratorSource(LoadGenerator.COUNTER, tick_interval_ms=10),
        exports=(SourceExport(export, "counter", shard(export.value), D),),
        remap=CollectionMetadata(id, shard(id.value), D),
    )
    return RunIngestion(id, desc)


def sink(id: GlobalId, from_id: GlobalId, as_of: int) -> RunSink:
    return RunSink(
        id,
        SinkDescription(
            from_id,
            shard(from_id.value),
            D,
            ParquetSinkConnection(f"/tmp/{id}"),
            Antichain.of(as_of),
        ),
    )


@dataclass
class StorageModel:
    hello: Hello | None = None
    initialized: bool = False
    writes: bool = False
    params: StorageParameters = field(default_factory=StorageParameters)
    ingestions: dict[GlobalId, tuple[IngestionDescription, dict[GlobalId, Frontier]]] = field(
        default_factory=dict
    )
    sinks: dict[GlobalId, tuple[SinkDescription, Frontier]] = field(default_factory=dict)

    def apply(self, c: StorageCommand) -> None:
        if isinstance(c, Hello):
            self.hello = c
        elif isinstance(c, InitializationComplete):
            self.initialized = True
        elif isinstance(c, AllowWrites):
            self.writes = True
        elif isinstance(c, UpdateConfiguration):
            self.params = self.params.update(c.params)
        elif isinstance(c, RunIngestion):
            old = self.ingestions.get(c.id, (None, {}))[1]
            ids = c.description.collection_ids(c.id)
            self.ingestions[c.id] = (
                c.description,
                {i: old.get(i, Antichain.minimum()) for i in ids},
            )
        elif isinstance(c, RunSink):
            since = self.sinks[c.id][1] if c.id in self.sinks else Antichain.minimum()
            self.sinks[c.id] = (c.description, since.join(c.description.as_of))
        else:
            assert isinstance(c, AllowCompaction)
            if c.id in self.ingestions and c.frontier.is_empty():
                del self.ingestions[c.id]
                return
            for _, sinces in self.ingestions.values():
                if c.id in sinces:
                    sinces[c.id] = sinces[c.id].join(c.frontier)
            if c.id in self.sinks:
                desc, since = self.sinks[c.id]
                if c.frontier.is_empty():
                    del self.sinks[c.id]
                else:
                    self.sinks[c.id] = (desc, since.join(c.frontier))

    def state(self) -> object:
        sinks = {
            id: (dataclasses.replace(d, as_of=Antichain.empty()), since)
            for id, (d, since) in self.sinks.items()
        }
        return (self.hello, self.initialized, self.writes, self.params, self.ingestions, sinks)


def replay(commands: list[StorageCommand] | tuple[StorageCommand, ...]) -> StorageModel:
    m = StorageModel()
    for c in commands:
        m.apply(c)
    return m


def valid_commands(actions: list[tuple[int, int]]) -> list[StorageCommand]:
    """Interpret ``(action, argument)`` pairs as a controller's valid storage commands."""
    out: list[StorageCommand] = [Hello(version=1, epoch=1, nonce=b"n")]
    ingestions: dict[GlobalId, list[GlobalId]] = {}  # live ingestion -> its collection ids
    shapes: dict[GlobalId, tuple[list[GlobalId], GlobalId]] = {}  # -> (exports, remap)
    sinces: dict[GlobalId, int] = {}  # live, compactable collections (and sinks)
    sinks: set[GlobalId] = set()
    next_id = 1
    for action, arg in actions:
        live = sorted(sinces)
        match action % 7:
            case 0:
                id = GlobalId.user(next_id)
                exports = [GlobalId.user(next_id + 1 + i) for i in range(1 + arg % 2)]
                remap = id if arg % 3 else GlobalId.user(next_id + 3)
                next_id += 4
                run = ingestion(id, exports, remap=remap)
                out.append(run)
                ids = list(run.description.collection_ids(id))
                ingestions[id] = ids
                shapes[id] = (exports, remap)
                for i in ids:
                    sinces[i] = 0
            case 1 if ingestions:
                id = sorted(ingestions)[arg % len(ingestions)]
                # Re-run (altered): same collections, another connection string.
                exports, remap = shapes[id]
                out.append(ingestion(id, exports, remap=remap, seed=arg))
            case 2 if live:
                target = live[arg % len(live)]
                if arg % 5 == 0:
                    out.append(AllowCompaction(target, Antichain.empty()))
                    del sinces[target]
                    if target in ingestions:
                        for i in ingestions.pop(target):
                            sinces.pop(i, None)
                    sinks.discard(target)
                else:
                    sinces[target] += arg % 9
                    out.append(AllowCompaction(target, Antichain.of(sinces[target])))
            case 3 if live:
                id = GlobalId.user(next_id)
                next_id += 1
                out.append(sink(id, live[arg % len(live)], arg % 20))
                sinks.add(id)
                sinces[id] = arg % 20
            case 4:
                out.append(
                    UpdateConfiguration(
                        StorageParameters(
                            statistics_interval_ms=arg % 3 or None,
                            sink_max_batch_rows=arg if arg % 2 else None,
                        )
                    )
                )
            case 5:
                out.append(InitializationComplete() if arg % 2 else AllowWrites())
            case 6 if sinks:
                id = sorted(sinks)[arg % len(sinks)]
                sinces[id] += arg % 3
                out.append(sink(id, GlobalId.user(1), sinces[id]))
            case _:
                pass
    return out
