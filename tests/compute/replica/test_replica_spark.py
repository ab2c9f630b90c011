"""A compute replica on Spark, in process, driven over loopback TCP (one shared SparkSession).

Each test checks results against the reference evaluator (``spate.testing.reference``) and the
driver's protocol checks (frontiers never regress, one answer per peek, contiguous subscribes).
"""

from __future__ import annotations

import asyncio
import random
import uuid
from pathlib import Path

import pytest

from spate.frontier import Antichain
from spate.ids import GlobalId, ShardId
from spate.persist.read import ReadHandle
from spate.plan.finishing import ColumnOrder, RowSetFinishing
from spate.protocol.compute import (
    AllowCompaction,
    AllowWrites,
    CancelPeek,
    ComputeParameters,
    CreateDataflow,
    IndexTarget,
    PeekCanceled,
    PeekError,
    PersistTarget,
    Schedule,
    SubscribeBatch,
    UpdateConfiguration,
)
from spate.repr.arrow import table_to_updates
from spate.testing.reference import differences
from spate.testing.replica_driver import ComputeDriver, rows_of

from .inprocess import replica
from .tables import Table, Tables
from .views import KV, as_rows, oracle, over_index, table_index, totals

pytestmark = pytest.mark.timeout(300)


def random_batches(t: Table, rng: random.Random, n: int) -> list[int]:
    """Append ``n`` batches of inserts and retractions of live rows; return their times."""
    live: list[tuple[int, int]] = []
    times = []
    for _ in range(n):
        rows: list[tuple[tuple[int, int], int]] = []
        for _ in range(rng.randint(1, 6)):
            if live and rng.random() < 0.3:
                rows.append((live.pop(rng.randrange(len(live))), -1))
            else:
                r = (rng.randint(1, 5), rng.randint(0, 9))
                live.append(r)
                rows.append((r, 1))
        times.append(t.append(rows))
    return times


async def test_index_peeks(spark, tmp_path: Path) -> None:
    """Peeks wait for the upper, honour finishing and literal constraints, fail below since."""
    tables = Tables.embedded(tmp_path / "persist")
    t = tables.create(KV)
    t.append([((k, k * 10), 1) for k in range(1, 6)], time=0)
    ix = GlobalId.user(100)
    async with replica(spark, tmp_path / "scratch", tables.location) as r:
        d = await r.driver(1)
        await d.start([CreateDataflow(table_index(t, ix, 0)), Schedule(ix)])
        assert rows_of(await d.peek(d.new_peek(IndexTarget(ix), 0, KV))) == [
            ((k, k * 10), 1) for k in range(1, 6)
        ]
        # A peek beyond the upper waits until the table gets there (scenario 3).
        late = d.new_peek(IndexTarget(ix), 3, KV)
        await d.send(late)
        ts = t.append([((2, 20), -1), ((7, 70), 2)])
        await asyncio.sleep(0.3)
        assert late.uuid not in d.observed.peeks and ts == 1
        t.append([((8, 80), 1)])
        t.append([((9, 90), 1)])
        await d.wait_for(lambda: late.uuid in d.observed.peeks)
        await d.send(CancelPeek(late.uuid))
        expected_at_3 = [((1, 10), 1), ((3, 30), 1), ((4, 40), 1), ((5, 50), 1)]
        expected_at_3 += [((7, 70), 2), ((8, 80), 1), ((9, 90), 1)]
        assert rows_of(d.observed.peeks[late.uuid]) == sorted(expected_at_3, key=repr)
        # Key lookups and finishing (order by v desc, offset 1, limit 2, project v).
        lookup = d.new_peek(IndexTarget(ix), 3, KV, literal_constraints=((7,), (3,), (6,)))
        assert rows_of(await d.peek(lookup)) == [((3, 30), 1), ((7, 70), 2)]
        fin = RowSetFinishing((ColumnOrder(1, desc=True),), limit=2, offset=1, project=(1,))
        proj = KV.project(["v"])
        resp = await d.peek(d.new_peek(IndexTarget(ix), 3, proj, finishing=fin))
        assert rows_of(resp) == [((70,), 1), ((80,), 1)]
        # Below the compaction frontier (scenario 2).
        await d.send(AllowCompaction(ix, Antichain.of(2)))
        resp = await d.peek(d.new_peek(IndexTarget(ix), 1, KV))
        assert isinstance(resp.response, PeekError)
        assert "compaction frontier {2} is beyond the time of the attempted read (1)" in (
            resp.response.message
        )
        # max_result_size, and a canceled waiting peek.
        await d.send(UpdateConfiguration(ComputeParameters(max_result_size=100)))
        resp = await d.peek(d.new_peek(IndexTarget(ix), 3, KV))
        assert isinstance(resp.response, PeekError) and "exceeds max size" in resp.response.message
        waiting = d.new_peek(IndexTarget(ix), 1000, KV)
        await d.send(waiting, CancelPeek(waiting.uuid))
        await d.wait_for(lambda: waiting.uuid in d.observed.peeks)
        assert isinstance(d.observed.peeks[waiting.uuid].response, PeekCanceled)
        assert d.violations == []
        await d.close()
    tables.close()


async def test_view_exports_equal_the_oracle(spark, tmp_path: Path, seed: int) -> None:
    """A reduce exported as index, materialized view and subscribe; an index over an index."""
    rng = random.Random(seed)
    tables = Tables.embedded(tmp_path / "persist")
    t = tables.create(KV)
    t.append([((1, 1), 1), ((2, 5), 1)], time=0)
    view, ix, mv = (GlobalId.user(n) for n in (200, 201, 202))
    sub = GlobalId.transient(1)
    ix2 = GlobalId.user(203)
    mv_shard = ShardId(uuid.uuid4())
    df = totals(t, view, 0, index=ix, mv=mv, mv_shard=mv_shard, subscribe=sub)
    df2 = over_index(ix, view, df.index_exports[0].desc, ix2, 0)
    async with replica(spark, tmp_path / "scratch", tables.location) as r:
        d = await r.driver(1)
        await d.start(
            [
                CreateDataflow(df),
                CreateDataflow(df2),
                *(Schedule(i) for i in (ix, mv, sub, ix2)),
                AllowWrites(mv),
            ]
        )
        times = random_batches(t, rng, 6)
        upper = times[-1] + 1
        await d.wait_frontier(mv, upper - 1, kind="write")
        await d.wait_frontier(ix2, upper - 1)
        expected = oracle(df, {t.id: t}, upper=upper)
        expected2 = oracle(df2, {view: differences(expected[ix])}, upper=upper)
        for ts in range(upper):
            got = rows_of(await d.peek(d.new_peek(IndexTarget(ix), ts, df.index_exports[0].desc)))
            assert got == as_rows(expected[ix][ts]), f"index at {ts}"
            got2 = rows_of(
                await d.peek(d.new_peek(IndexTarget(ix2), ts, df2.index_exports[0].desc))
            )
            assert got2 == as_rows(expected2[ix2][ts]), f"index over index at {ts}"
            assert tables.contents(mv_shard, df.sink_exports[0].from_desc, ts) == as_rows(
                expected[mv][ts]
            ), f"materialized view at {ts}"
        await d.wait_for(
            lambda: any(
                isinstance(b, SubscribeBatch) and not b.upper.less_equal(upper - 1)
                for b in d.observed.subscribes[sub]
            )
        )
        got_updates = sorted(
            (
                u
                for b in d.observed.subscribes[sub]
                if isinstance(b, SubscribeBatch) and b.updates is not None
                for u in table_to_updates(b.updates)
                if u[1] < upper
            ),
            key=repr,
        )
        assert got_updates == sorted(differences(expected[sub]), key=repr)
        assert d.violations == []
        await d.close()
    tables.close()


async def test_persist_peek(spark, tmp_path: Path) -> None:
    tables = Tables.embedded(tmp_path / "persist")
    t = tables.create(KV)
    t.append([((1, 1), 1), ((2, 2), 3)], time=0)
    async with replica(spark, tmp_path / "scratch", tables.location) as r:
        d = await r.driver(1)
        await d.start([])
        target = PersistTarget(t.id, t.shard, KV)
        assert rows_of(await d.peek(d.new_peek(target, 0, KV))) == [((1, 1), 1), ((2, 2), 3)]
        waiting = d.new_peek(target, 2, KV, finishing=RowSetFinishing(limit=2))
        await d.send(waiting)
        await asyncio.sleep(0.2)
        assert waiting.uuid not in d.observed.peeks
        t.append([((1, 1), -1)])
        t.append([((3, 3), 1)])
        await d.wait_for(lambda: waiting.uuid in d.observed.peeks)
        assert sum(n for _, n in rows_of(d.observed.peeks[waiting.uuid])) == 2
        assert d.violations == []
        await d.close()
    tables.close()


async def test_a_failing_dataflow_is_reported_and_the_replica_carries_on(
    spark, tmp_path: Path
) -> None:
    tables = Tables.embedded(tmp_path / "persist")
    t = tables.create(KV)
    t.append([((1, 1), 1)], time=0)
    t.advance(20)
    # Hold the shard's since at 10: a dataflow at as_of 5 cannot read it.
    holder: ReadHandle = tables.client.open_leased_reader(t.shard, KV)
    holder.downgrade_since(Antichain.of(10))
    t.hold_at(10)
    bad, good = GlobalId.user(300), GlobalId.user(301)
    async with replica(spark, tmp_path / "scratch", tables.location) as r:
        d: ComputeDriver = await r.driver(1)
        await d.start(
            [
                CreateDataflow(table_index(t, bad, 5)),
                Schedule(bad),
                CreateDataflow(table_index(t, good, 12)),
                Schedule(good),
            ]
        )
        await d.wait_for(lambda: any(s.id == bad for s in d.observed.statuses))
        (status,) = [s for s in d.observed.statuses if s.id == bad]
        assert str(bad) in status.message and "{10}" in status.message
        assert rows_of(await d.peek(d.new_peek(IndexTarget(good), 15, KV))) == [((1, 1), 1)]
        resp = await d.peek(d.new_peek(IndexTarget(bad), 15, KV))
        assert isinstance(resp.response, PeekError) and "failed" in resp.response.message
        assert d.violations == []
        await d.close()
    holder.expire()
    tables.close()


async def test_closed_inputs_close_the_exports(spark, tmp_path: Path) -> None:
    """Once its input is sealed for good, an index reports {} and a subscribe ends."""
    tables = Tables.embedded(tmp_path / "persist")
    t = tables.create(KV)
    t.append([((1, 1), 1)], time=0)
    ix, view, sub = GlobalId.user(400), GlobalId.user(401), GlobalId.transient(402)
    async with replica(spark, tmp_path / "scratch", tables.location) as r:
        d = await r.driver(1)
        await d.start(
            [
                CreateDataflow(table_index(t, ix, 0)),
                CreateDataflow(totals(t, view, 0, subscribe=sub)),
                Schedule(ix),
                Schedule(sub),
            ]
        )
        await d.wait_frontier(ix, 0)
        t.append([((2, 2), 1)])
        t.close()
        done = Antichain.empty()
        await d.wait_for(lambda: d.observed.frontiers[ix].write == done)
        assert d.observed.frontiers[ix].output == done
        await d.wait_for(
            lambda: any(
                isinstance(b, SubscribeBatch) and b.upper.is_empty()
                for b in d.observed.subscribes[sub]
            )
        )
        assert rows_of(await d.peek(d.new_peek(IndexTarget(ix), 10**9, KV))) == [
            ((1, 1), 1),
            ((2, 2), 1),
        ]
        assert d.violations == []
        await d.close()
    tables.close()
