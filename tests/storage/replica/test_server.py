"""The storage replica's protocol behaviour, over an in-memory connection (no sockets)."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from pathlib import Path
from typing import Any

import pytest

from spate.clock import SystemClock
from spate.frontier import Antichain
from spate.ids import GlobalId, SeededIdGen, ShardId
from spate.protocol.common import PROTOCOL_VERSION, Hello
from spate.protocol.memory import memory_pair
from spate.protocol.stages import StageViolation
from spate.protocol.storage import (
    AllowCompaction,
    AllowWrites,
    DroppedId,
    FrontierUpper,
    InitializationComplete,
    ObjectStatus,
    RunIngestion,
    RunSink,
    StatisticsUpdates,
    StatusUpdate,
    StorageParameters,
    UpdateConfiguration,
)
from spate.protocol.storage_desc import ParquetSinkConnection, SinkDescription
from spate.storage.replica.server import ReplicaContext, StorageReplica
from spate.storage.sources.stash import MemStash
from tests.storage.replica._setup import counter, loadgen_ingestion, persist_client


class Controller:
    """The controller end of one connection, collecting responses."""

    def __init__(self, replica: StorageReplica, epoch: int) -> None:
        self.conn, replica_end = memory_pair(role="storage", epoch=epoch)
        self.epoch = epoch
        self.task = asyncio.create_task(replica.handle(replica_end))
        self.responses: list[Any] = []

    async def send(self, *commands: Any) -> None:
        for c in commands:
            await self.conn.send(c)

    async def hello(self) -> None:
        await self.send(Hello(PROTOCOL_VERSION, self.epoch, b"n" * 16))

    async def until(self, pred: Any, timeout: float = 20.0) -> Any:
        async with asyncio.timeout(timeout):
            while True:
                for r in self.responses:
                    if pred(r):
                        return r
                self.responses.append(await self.conn.recv())


def upper_of(id: GlobalId, beyond: int) -> Any:
    def pred(r: Any) -> bool:
        return (
            isinstance(r, FrontierUpper)
            and r.id == id
            and not r.upper.is_empty()
            and r.upper.as_option() > beyond
        )

    return pred


@pytest.fixture
def replica() -> Any:
    client = persist_client(SystemClock())  # type: ignore[arg-type]
    ctx = ReplicaContext(
        persist=client, stash=MemStash(), clock=SystemClock(), ids=SeededIdGen(1), sink_step_ms=20
    )
    return StorageReplica(ctx)


async def test_ingestion_runs_after_allow_writes_and_survives_reconnection(replica: Any) -> None:
    ids = SeededIdGen(7)
    ingestion, description = loadgen_ingestion(counter(tick_interval_ms=10, rows_per_tick=2), ids)
    description = dataclasses.replace(description, timestamp_interval_ms=20)
    export = description.exports[0].id
    c1 = Controller(replica, epoch=1)
    await c1.hello()
    await c1.send(
        UpdateConfiguration(StorageParameters(statistics_interval_ms=50)),
        RunIngestion(ingestion, description),
        InitializationComplete(),
    )
    await c1.until(lambda r: isinstance(r, StatusUpdate) and r.status is ObjectStatus.STARTING)
    await asyncio.sleep(0.2)
    assert not any(isinstance(r, FrontierUpper) and r.upper.as_option() for r in c1.responses)
    await c1.send(AllowWrites())
    first = await c1.until(upper_of(export, 0))
    await c1.until(lambda r: isinstance(r, StatusUpdate) and r.status is ObjectStatus.RUNNING)
    stats = await c1.until(lambda r: isinstance(r, StatisticsUpdates) and r.sources)
    assert {s.id for s in stats.sources} >= {ingestion, export}
    uppers = [r.upper for r in c1.responses if isinstance(r, FrontierUpper) and r.id == export]
    assert all(a.less_equal(b) for a, b in itertools.pairwise(uppers))  # never regress
    runner_before = replica.running()[ingestion].runner

    # A new controller epoch replays the same history: the ingestion is reused, not restarted.
    c2 = Controller(replica, epoch=2)
    await c2.hello()
    await c2.send(RunIngestion(ingestion, description), InitializationComplete(), AllowWrites())
    await c2.until(upper_of(export, first.upper.as_option()))
    assert replica.running()[ingestion].runner is runner_before

    # Dropping the ingestion stops it and answers DroppedId.
    await c2.send(AllowCompaction(ingestion, Antichain.empty()))
    await c2.until(lambda r: isinstance(r, DroppedId) and r.id == ingestion)
    assert ingestion not in replica.running()
    await replica.close()


async def test_objects_the_history_omits_are_stopped(replica: Any, tmp_path: Path) -> None:
    ids = SeededIdGen(8)
    ingestion, description = loadgen_ingestion(counter(tick_interval_ms=10), ids)
    description = dataclasses.replace(description, timestamp_interval_ms=20)
    export = description.exports[0]
    sink = GlobalId.user(50)
    sink_desc = SinkDescription(
        export.id, export.shard, export.desc, ParquetSinkConnection(str(tmp_path)), Antichain.of(1)
    )
    c1 = Controller(replica, epoch=1)
    await c1.hello()
    await c1.send(
        RunIngestion(ingestion, description),
        RunSink(sink, sink_desc),
        InitializationComplete(),
        AllowWrites(),
    )
    await c1.until(upper_of(sink, 1))  # the sink commits progress past its as_of
    assert (tmp_path / "_manifest.json").exists()
    c2 = Controller(replica, epoch=2)
    await c2.hello()
    await c2.send(RunIngestion(ingestion, description), InitializationComplete())
    await c2.until(lambda r: isinstance(r, FrontierUpper) and r.id == ingestion)
    assert set(replica.running()) == {ingestion}
    await replica.close()


async def test_stage_violations_close_the_connection(replica: Any) -> None:
    ids = SeededIdGen(3)
    ingestion, description = loadgen_ingestion(counter(), ids)
    c = Controller(replica, epoch=1)
    await c.send(RunIngestion(ingestion, description))  # before Hello: executes nothing
    with pytest.raises(StageViolation, match="expected Hello first"):
        await c.task  # the handler fails; the transport then closes the connection
    assert replica.running() == {}
    await replica.close()


async def test_a_broken_source_is_stalled_with_its_error(replica: Any) -> None:
    ids = SeededIdGen(9)
    ingestion, description = loadgen_ingestion(counter(), ids)
    bad = dataclasses.replace(
        description,
        exports=(dataclasses.replace(description.exports[0], shard=ShardId.new(ids)),),
        remap=dataclasses.replace(description.remap, desc=description.exports[0].desc.project([])),
    )
    c = Controller(replica, epoch=1)
    await c.hello()
    await c.send(RunIngestion(ingestion, bad), InitializationComplete(), AllowWrites())
    stalled = await c.until(
        lambda r: isinstance(r, StatusUpdate) and r.status is ObjectStatus.STALLED
    )
    assert "records its progress as" in stalled.error
    await replica.close()
