"""A subscribe-only dataflow reads a view this replica computes from the view's feed (its
computed updates, before they are written) and persist where the feed does not reach; either
way every update of the shard exactly once. Real persist (embedded); the last test on a
replica on Spark, against the reference evaluator."""

from __future__ import annotations

import random
import uuid
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pytest

from spate.compute.replica.inputs import ReplicaInputs
from spate.compute.replica.runtime import _subscribes_only
from spate.compute.replica.uppers import ShardUppers
from spate.compute.replica.view_feed import ViewFeed
from spate.frontier import Antichain
from spate.ids import GlobalId, ShardId
from spate.persist import Appended
from spate.persist.error_shard import ERRORS_DESC, errors_shard
from spate.plan.dataflow import (
    BuildDesc,
    DataflowDescription,
    IndexDesc,
    IndexExport,
    SinkExport,
    SourceImport,
    SubscribeConnection,
)
from spate.plan.relation import Get
from spate.protocol.compute import AllowWrites, CreateDataflow, Schedule, SubscribeBatch
from spate.render.input import ArrowInput
from spate.repr import RelationDesc
from spate.repr.arrow import table_to_updates, updates_to_table
from spate.testing.reference import differences

from .inprocess import replica
from .tables import Table, Tables, Update
from .test_replica_spark import random_batches
from .views import KV, as_rows, oracle, totals

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def view_updates(rows: list[tuple[tuple[int, int], int, int]]) -> pa.Table:
    """Updates as a view's step hands them to its sink (the view's own column names)."""
    table = updates_to_table(KV, rows)
    return table.rename_columns(["key", "value", *table.column_names[2:]])


def subscribe_of(t: Table, as_of: int) -> DataflowDescription:
    sub = GlobalId.transient(1)
    return DataflowDescription(
        source_imports=(SourceImport(t.id, t.desc, shard=t.shard),),
        objects_to_build=(BuildDesc(GlobalId.transient(2), Get(t.id, t.desc)),),
        sink_exports=(SinkExport(sub, GlobalId.transient(2), t.desc, SubscribeConnection()),),
        as_of=Antichain.of(as_of),
        debug_name="subscribe",
    )


def read(inputs: ReplicaInputs, id: GlobalId, lower: int, upper: int) -> list[object]:
    data = inputs.updates(id, lower=lower, upper=upper)
    assert isinstance(data, ArrowInput)
    table = data.table
    inputs.after_step()
    return sorted(table_to_updates(table), key=repr)


def test_the_feed_serves_beyond_the_written_upper_and_persist_the_rest(tmp_path: Path) -> None:
    tables = Tables.embedded(tmp_path / "persist")
    view = tables.create(KV)  # the view's shard, written as its sink would
    view.append([((1, 10), 1)], time=0)
    view.append([((2, 20), 1)], time=1)  # upper 2
    feeds: dict[ShardId, ViewFeed] = {}
    uppers = ShardUppers(lambda s: tables.client.fetch_state(s).upper)
    inputs = ReplicaInputs(
        subscribe_of(view, 0),
        persist=tables.client,
        uppers=uppers,
        arrangements=lambda id: pytest.fail("no index imports"),
        feeds=feeds.get,
    )
    try:
        # The view's dataflow computed up to 5; its sink has written up to 2 so far.
        feed = feeds[view.shard] = ViewFeed(lower=2)
        feed.append(view_updates([((3, 30), 2, 1), ((2, 20), 3, -1)]), upper=Antichain.of(4))
        feed.append(view_updates([]), upper=Antichain.of(5))
        # Before the first step (the snapshot, from persist) the feed does not count.
        assert inputs.upper(view.id) == Antichain.of(2)
        inputs.snapshot(view.id, as_of=0)
        inputs.after_step()
        assert read(inputs, view.id, 1, 2) == [((2, 20), 1, 1)]  # persist
        assert inputs.upper(view.id) == Antichain.of(5)  # the feed's
        assert read(inputs, view.id, 2, 5) == [((2, 20), 3, -1), ((3, 30), 2, 1)]
        # The sink writes the same updates, and further; the feed forgets what is written.
        view.append([((3, 30), 1)], time=2)
        view.append([((2, 20), -1)], time=3)
        view.append([((4, 40), 1)], time=5)
        view.advance(8)
        uppers.observe(view.shard, Antichain.of(8))
        feed.trim(Antichain.of(8))
        assert feed.lower == 5 and not feed.covers(5, 8)
        # Beyond what the feed holds: persist, the listen restarted where the feed left off
        # (each update once: not the times 2 and 3 again).
        assert inputs.upper(view.id) == Antichain.of(8)
        assert read(inputs, view.id, 5, 8) == [((4, 40), 5, 1)]
        # A feed that closes (its dataflow dropped) serves nothing more.
        feed.append(view_updates([((5, 50), 9, 1)]), upper=Antichain.of(10))
        feed.close()
        assert inputs.upper(view.id) == Antichain.of(8)
    finally:
        inputs.close()
        tables.close()


def test_a_feed_starts_where_the_view_is_known_and_keeps_each_update_once() -> None:
    feed = ViewFeed(lower=3)
    # The first step's updates hold the snapshot at the as_of (2): not the view's changes.
    feed.append(view_updates([((1, 1), 2, 1), ((2, 2), 3, 1)]), upper=Antichain.of(4))
    feed.append(view_updates([((2, 2), 5, -1)]), upper=Antichain.of(6))
    feed.append(view_updates([]), upper=Antichain.of(6))  # no progress: nothing changes
    assert not feed.covers(2, 4) and feed.covers(3, 6) and not feed.covers(3, 7)
    got = feed.updates(3, 6)
    assert got is not None and sorted(table_to_updates(got), key=repr) == [
        ((2, 2), 3, 1),
        ((2, 2), 5, -1),
    ]
    assert feed.updates(4, 5) is None
    feed.trim(Antichain.of(5))
    assert feed.lower == 5 and feed.upper == Antichain.of(6)
    got = feed.updates(5, 6)
    assert got is not None and table_to_updates(got) == [((2, 2), 5, -1)]
    feed.append(view_updates([]), upper=Antichain.empty())  # complete: persist has the rest
    assert feed.closed and not feed.covers(6, 6)


def test_only_subscribe_only_dataflows_read_feeds() -> None:
    t = Table(GlobalId.user(1), ShardId(uuid.uuid4()), KV, None, None)  # type: ignore[arg-type]
    sub = subscribe_of(t, 0)
    assert _subscribes_only(sub)
    ix = IndexExport(GlobalId.user(9), IndexDesc(GlobalId.transient(2), (0,)), KV)
    assert not _subscribes_only(replace(sub, index_exports=(ix,)))


def write_view(
    tables: Tables, shard: ShardId, desc: RelationDesc, updates: list[Update], lower: int
) -> None:
    """Write the view's ``updates`` at ``lower`` as another writer would: its errors shard
    first (none), then its rows; both uppers become ``lower + 1``."""
    for s, d, rows in ((errors_shard(shard), ERRORS_DESC, []), (shard, desc, updates)):
        w = tables.client.open_writer(s, d)
        result = w.compare_and_append(
            updates_to_table(d, rows) if rows else None,
            expected_upper=Antichain.of(lower),
            new_upper=Antichain.of(lower + 1),
            idempotency_token=uuid.uuid4(),
        )
        assert isinstance(result, Appended), result
        w.expire()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("writes", [False, True], ids=["read-only", "writing"])
async def test_a_subscribe_of_a_view_computed_here_equals_the_oracle(
    spark: SparkSession, tmp_path: Path, seed: int, writes: bool
) -> None:
    """A view's dataflow and a subscribe of its shard on one replica, the shard written up to
    time 0 by another writer. Read-only, this replica never writes it; the other writer adds
    time 1 only: the subscribe reads times 0 and 1 from persist and follows the view beyond
    through the feed (which starts past the shard's upper when the sink opened, 1). Writing,
    it reads the feed and persist by turns (the feed forgets what is written). Either way its
    updates are the view's, every time."""
    rng = random.Random(seed)
    tables = Tables.embedded(tmp_path / "persist")
    t = tables.create(KV)
    t.append([((1, 1), 1), ((2, 5), 1)], time=0)
    view, mv, sub = GlobalId.user(200), GlobalId.user(202), GlobalId.transient(9)
    mv_shard = ShardId(uuid.uuid4())
    df = totals(t, view, 0, mv=mv, mv_shard=mv_shard)
    desc = df.sink_exports[0].from_desc
    tables.client.open_critical_since(mv_shard)  # the controller's hold: reads at 0 stay valid
    write_view(tables, mv_shard, desc, differences(oracle(df, {t.id: t}, upper=1)[mv]), 0)
    subscribe = DataflowDescription(
        source_imports=(SourceImport(mv, desc, shard=mv_shard),),
        objects_to_build=(BuildDesc(GlobalId.transient(10), Get(mv, desc)),),
        sink_exports=(SinkExport(sub, GlobalId.transient(10), desc, SubscribeConnection()),),
        as_of=Antichain.of(0),
        debug_name="subscribe of the view",
    )
    async with replica(spark, tmp_path / "scratch", tables.location) as r:
        d = await r.driver(1)
        commands = [CreateDataflow(df), CreateDataflow(subscribe), Schedule(mv), Schedule(sub)]
        await d.start([*commands, *([AllowWrites(mv)] if writes else [])])
        times = random_batches(t, rng, 6)
        upper = times[-1] + 1
        expected = oracle(df, {t.id: t}, upper=upper)[mv]
        if not writes:  # once the view's sink is open (the view computed) and found upper 1
            await d.wait_frontier(mv, upper - 1)
            write_view(tables, mv_shard, desc, [u for u in differences(expected) if u[1] == 1], 1)
        await d.wait_for(
            lambda: any(
                isinstance(b, SubscribeBatch) and not b.upper.less_equal(upper - 1)
                for b in d.observed.subscribes[sub]
            )
        )
        got = sorted(
            (
                u
                for b in d.observed.subscribes[sub]
                if isinstance(b, SubscribeBatch) and b.updates is not None
                for u in table_to_updates(b.updates)
                if u[1] < upper
            ),
            key=repr,
        )
        assert got == sorted(differences(expected), key=repr)
        if writes:
            await d.wait_frontier(mv, upper - 1, kind="write")
            for ts in range(upper):
                assert tables.contents(mv_shard, desc, ts) == as_rows(expected[ts])
        else:  # written up to time 1 only: the subscribe followed the feed beyond
            assert tables.client.fetch_state(mv_shard).upper == Antichain.of(2)
        assert d.violations == []
        await d.close()
    tables.close()


def test_a_step_writes_no_since_the_readers_sinces_move_when_asked(tmp_path: Path) -> None:
    """After a step nothing is written to persist (its output is not held up by consensus
    writes); :meth:`downgrade_sinces` moves each reader's since below the next read."""
    tables = Tables.embedded(tmp_path / "persist")
    t = tables.create(KV)
    t.append([((1, 10), 1)], time=0)
    t.append([((2, 20), 1)], time=3)
    uppers = ShardUppers(lambda s: tables.client.fetch_state(s).upper)
    inputs = ReplicaInputs(
        subscribe_of(t, 0),
        persist=tables.client,
        uppers=uppers,
        arrangements=lambda id: pytest.fail("no index imports"),
    )
    try:
        seqno = tables.client.fetch_state(t.shard).seqno
        inputs.snapshot(t.id, as_of=0)
        inputs.after_step()
        assert read(inputs, t.id, 1, 4) == [((2, 20), 3, 1)]
        assert tables.client.fetch_state(t.shard).seqno == seqno
        inputs.downgrade_sinces()
        state = tables.client.fetch_state(t.shard)
        assert [r.since for r in state.leased_readers.values()] == [Antichain.of(3)]
    finally:
        inputs.close()
        tables.close()
