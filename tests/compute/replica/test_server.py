"""Server + runtime without Spark: a fake renderer over real persist inputs, in-memory transport.

Covers the glue the pure state tests cannot: the scheduler steps dataflows when shard uppers
advance, step failures are retried and then reported for that collection only, a newer epoch
replaces the connection and reconciles, and a halt stops the replica.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from spate.compute.replica.metrics import ReplicaMetrics
from spate.compute.replica.runtime import ComputeRuntime
from spate.compute.replica.server import ComputeReplica
from spate.compute.replica.state import ReplicaState
from spate.ids import GlobalId, SystemIdGen
from spate.protocol.compute import CreateDataflow, IndexTarget, InstanceConfig, Schedule
from spate.protocol.errors import ConnectionClosed
from spate.protocol.memory import InMemoryTransport
from spate.testing.replica_driver import ComputeDriver, rows_of

from .fake_render import FakeIndex
from .tables import Tables
from .views import KV, table_index

pytestmark = pytest.mark.timeout(60)


@dataclass
class Setup:
    transport: InMemoryTransport
    replica: ComputeReplica
    port: int
    secret: bytes
    halts: list[str]

    async def driver(self, epoch: int) -> ComputeDriver:
        conn = await self.transport.connect(
            "127.0.0.1", self.port, role="compute", epoch=epoch, secret=self.secret
        )
        return ComputeDriver(conn)


@contextlib.asynccontextmanager
async def serving(tmp_path: Path, tables: Tables, spark: object = None) -> AsyncIterator[Setup]:
    FakeIndex.fail_next = 0
    metrics = ReplicaMetrics("unit")
    halts: list[str] = []

    def runtime(post):  # type: ignore[no-untyped-def]
        return ComputeRuntime(
            post=post,
            spark=lambda: spark,  # the fake renderer needs no SparkSession
            persist=tables.client,
            scratch=tmp_path / "scratch",
            ids=SystemIdGen(),
            metrics=metrics,
            renderer=FakeIndex,  # type: ignore[arg-type]
            name="unit",
        )

    replica = ComputeReplica(
        state=ReplicaState(name="unit"),
        runtime_factory=runtime,
        metrics=metrics,
        on_halt=halts.append,
    )
    await replica.start(warm_up=False)
    transport = InMemoryTransport()
    secret = secrets.token_bytes(32)
    server = await transport.serve(
        "127.0.0.1", 0, role="compute", handler=replica.handle, secret=secret
    )
    try:
        yield Setup(transport, replica, server.port, secret, halts)
    finally:
        await server.close()
        await replica.close()


async def test_steps_follow_the_shard_and_peeks_see_the_appends(tmp_path: Path) -> None:
    tables = Tables.embedded(tmp_path / "persist")
    t = tables.create(KV)
    t.append([((1, 1), 1)], time=0)
    ix = GlobalId.user(10)
    async with serving(tmp_path, tables) as s:
        d = await s.driver(1)
        await d.start([CreateDataflow(table_index(t, ix, 0)), Schedule(ix)])
        for i in range(2, 6):
            ts = t.append([((i, i), 1)])
            resp = await d.peek(d.new_peek(IndexTarget(ix), ts, KV))
            assert rows_of(resp) == [((k, k), 1) for k in range(1, i + 1)]
        await d.wait_frontier(ix, ts)
        assert d.violations == []
        await d.close()
    tables.close()


async def test_a_failing_dataflow_is_retried_then_reported_alone(tmp_path: Path) -> None:
    tables = Tables.embedded(tmp_path / "persist")
    t = tables.create(KV)
    t.append([((1, 1), 1)], time=0)
    bad, good = GlobalId.user(10), GlobalId.user(11)
    async with serving(tmp_path, tables) as s:
        d = await s.driver(1)
        await d.start([CreateDataflow(table_index(t, good, 0)), Schedule(good)])
        await d.wait_frontier(good, 0)
        FakeIndex.fail_next = 3  # the next three steps fail: bad's hydration, twice retried
        await d.send(CreateDataflow(table_index(t, bad, 0)), Schedule(bad))
        await d.wait_for(lambda: any(st.id == bad for st in d.observed.statuses), timeout=20)
        (status,) = d.observed.statuses
        assert "injected step failure" in status.message and str(bad) in status.message
        ts = t.append([((2, 2), 1)])
        resp = await d.peek(d.new_peek(IndexTarget(good), ts, KV))
        assert rows_of(resp) == [((1, 1), 1), ((2, 2), 1)]
        assert d.violations == []
        await d.close()
    tables.close()


async def test_newer_epoch_replaces_the_connection_and_reuses_the_dataflow(tmp_path: Path) -> None:
    tables = Tables.embedded(tmp_path / "persist")
    t = tables.create(KV)
    t.append([((1, 1), 1)], time=0)
    ix = GlobalId.user(10)
    async with serving(tmp_path, tables) as s:
        d1 = await s.driver(1)
        await d1.start([CreateDataflow(table_index(t, ix, 0)), Schedule(ix)])
        await d1.wait_frontier(ix, 0)
        built = FakeIndex.built
        d2 = await s.driver(2)
        await d2.replay(d1.history.commands())
        with pytest.raises(ConnectionClosed):
            await d1.wait_for(lambda: False, timeout=5)
        # Reused: reported afresh, not rebuilt.
        await d2.wait_frontier(ix, 0)
        assert FakeIndex.built == built
        assert s.replica.state.stats.reused == 1
        ts = t.append([((2, 2), 1)])
        assert rows_of(await d2.peek(d2.new_peek(IndexTarget(ix), ts, KV))) == [
            ((1, 1), 1),
            ((2, 2), 1),
        ]
        assert d1.violations == [] and d2.violations == []
        await d2.close()
    tables.close()


async def test_incompatible_create_instance_halts_the_replica(tmp_path: Path) -> None:
    tables = Tables.embedded(tmp_path / "persist")
    async with serving(tmp_path, tables) as s:
        d1 = await s.driver(1)
        await d1.start([])
        d2 = await s.driver(2)
        await d2.start([], config=InstanceConfig(logging_interval_ms=7))
        await asyncio.wait_for(_until(lambda: bool(s.halts)), 5)
        assert "not compatible" in s.halts[0]
        with pytest.raises(ConnectionClosed):
            await d2.wait_for(lambda: False, timeout=5)
        # A halted replica serves nobody.
        d3 = await s.driver(3)
        with pytest.raises(ConnectionClosed):
            await d3.wait_for(lambda: False, timeout=5)
    tables.close()


async def _until(cond) -> None:  # type: ignore[no-untyped-def]
    while not cond():
        await asyncio.sleep(0.01)


class TagRecorder:
    """A stand-in SparkSession whose ``sparkContext`` records the worker thread's job tags."""

    def __init__(self) -> None:
        self.sparkContext = self
        self.tags: set[str] = set()
        self.calls: list[str] = []

    def setInterruptOnCancel(self, value: bool) -> None:
        pass

    def addJobTag(self, tag: str) -> None:
        assert not self.tags, f"{tag} added while {self.tags} is on"
        self.tags.add(tag)
        self.calls.append(f"+{tag}")

    def removeJobTag(self, tag: str) -> None:
        self.tags.remove(tag)
        self.calls.append(f"-{tag}")


async def test_the_job_tag_stays_between_steps_of_one_dataflow(tmp_path: Path) -> None:
    """Steps of one dataflow run under its tag without taking it off and on each time; another
    dataflow's build switches to its own tag (only one at a time); steps after a step that ran
    no Spark job leave the tag as it is."""
    tables = Tables.embedded(tmp_path / "persist")
    t = tables.create(KV)
    t.append([((1, 1), 1)], time=0)
    a, b = GlobalId.user(10), GlobalId.user(11)
    spark = TagRecorder()
    async with serving(tmp_path, tables, spark) as s:
        d = await s.driver(1)
        await d.start([CreateDataflow(table_index(t, a, 0)), Schedule(a)])
        for i in range(2, 6):
            ts = t.append([((i, i), 1)])
            await d.wait_frontier(a, ts)
        assert len(spark.calls) == 1 and spark.calls[0].startswith("+spate-df"), spark.calls
        await d.send(CreateDataflow(table_index(t, b, 0)), Schedule(b))
        ts = t.append([((9, 9), 1)])
        await d.wait_frontier(a, ts)
        await d.wait_frontier(b, ts)
        assert len(spark.calls) >= 3 and len(spark.tags) == 1, spark.calls
        switched = len(spark.calls)
        for i in range(10, 14):  # the fake's steps run no Spark job: no tag is switched
            ts = t.append([((i, i), 1)])
            await d.wait_frontier(a, ts)
            await d.wait_frontier(b, ts)
        assert len(spark.calls) == switched, spark.calls
        await d.close()
    tables.close()
