"""Real compute replica processes on loopback, driven by a small protocol driver.

* a peek below the compaction frontier, a peek that waits for the upper, and
  reconnection (it reuses the dataflow, dropped-during-reconnect collections stay silent,
  an incompatible ``CreateInstance`` halts the process);
* a materialized view written by two replicas at once equals the recomputation, with no
  duplicated or missing update;
* kill -9 a replica mid-dataflow; a fresh one given the reduced history reproduces identical
  peek results and view contents.

Each replica process costs a Spark driver (~10 s, 0.5 GiB): these tests start four in all.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from spate.compute.replica.main import HALT_EXIT_CODE
from spate.frontier import Antichain
from spate.ids import GlobalId, ShardId
from spate.orchestrator import ProcessOrchestrator, Service, ServiceConfig, ServiceEvent
from spate.persist.read import ListenUpdates
from spate.protocol.compute import (
    AllowCompaction,
    AllowWrites,
    CreateDataflow,
    Frontiers,
    IndexTarget,
    InstanceConfig,
    PeekError,
    Schedule,
    SubscribeDroppedAt,
)
from spate.protocol.errors import ConnectionClosed
from spate.protocol.history import ComputeCommandHistory
from spate.protocol.secret import Secret
from spate.repr.arrow import table_to_updates
from spate.testing.process import spate_env
from spate.testing.reference import differences
from spate.testing.replica_driver import ComputeDriver, rows_of
from spate.testing.replica_launch import (
    ReplicaProcess,
    replica_argv,
    scrape_metric,
    start_replica,
)
from tests.compute.replica.tables import Table, Tables
from tests.compute.replica.views import KV, as_rows, oracle, table_index, totals

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


@pytest.fixture
def tables(tmp_path: Path) -> Iterator[Tables]:
    t = Tables.embedded(tmp_path / "persist")
    yield t
    t.close()


@pytest.fixture
def processes() -> Iterator[list[ReplicaProcess]]:
    started: list[ReplicaProcess] = []
    yield started
    for p in started:
        p.kill(hard=True)


async def next_event(events: AsyncIterator[ServiceEvent], status: str) -> ServiceEvent:
    async with asyncio.timeout(180):
        async for e in events:
            if e.status == status:
                return e
    raise AssertionError(f"no {status} event")


async def test_peeks_and_reconciliation(tmp_path: Path, tables: Tables) -> None:
    """Started by the orchestrator (as the environment will), on the orchestrator's secret."""
    orchestrator = ProcessOrchestrator(tmp_path / "orch", backoff_initial=0.1, backoff_max=0.5)
    events = orchestrator.watch_services()
    config = ServiceConfig(
        argv=tuple(
            replica_argv(
                listen="127.0.0.1:{port:listen}",
                secret_file="{secret_file}",
                scratch_dir="{service_dir}/scratch",
                location=tables.location,
                name="r1",
                metrics_port="{port:metrics}",
            )
        ),
        ports=("listen", "metrics"),
        env={"PYTHONPATH": spate_env()["PYTHONPATH"]},
    )
    try:
        service = await orchestrator.ensure_service("r1", config)
        await next_event(events, "online")
        await _peeks_and_reconciliation(service, tables, events)
    finally:
        await orchestrator.close()


async def _peeks_and_reconciliation(
    service: Service, tables: Tables, events: AsyncIterator[ServiceEvent]
) -> None:
    host, port = service.address()
    secret = Secret.from_file(service.secret_file)  # as the environment reads its secret

    async def driver(epoch: int) -> ComputeDriver:
        return await ComputeDriver.connect(host, port, epoch=epoch, secret=secret)

    def metric(name: str, **labels: str) -> float | None:
        return scrape_metric(service.ports["metrics"], name, **labels)

    t = tables.create(KV)
    t.append([((k, k), 1) for k in range(5)], time=0)
    t.advance(15)
    ix, other, sub = GlobalId.user(10), GlobalId.user(11), GlobalId.transient(12)
    d1 = await driver(1)
    await d1.start(
        [
            CreateDataflow(table_index(t, ix, 0)),
            CreateDataflow(table_index(t, other, 0)),
            CreateDataflow(totals(t, GlobalId.user(13), 0, subscribe=sub)),
            *(Schedule(i) for i in (ix, other, sub)),
        ]
    )
    await d1.wait_frontier(ix, 14, timeout=300)

    # Scenario 3: the index upper is 15; a peek at 20 waits until the upper passes 20.
    p20 = d1.new_peek(IndexTarget(ix), 20, KV)
    await d1.send(p20)
    for ts in range(15, 20):
        t.append([((100 + ts, ts), 1)], time=ts)
    await asyncio.sleep(1.0)
    assert p20.uuid not in d1.observed.peeks
    t.append([((120, 20), 1), ((0, 0), -1)], time=20)
    await d1.wait_for(lambda: p20.uuid in d1.observed.peeks)
    assert rows_of(d1.observed.peeks[p20.uuid]) == as_rows(
        oracle(table_index(t, ix, 0), {t.id: t}, upper=21)[ix][20]
    )

    # Scenario 2: below the arrangement's compaction frontier.
    await d1.send(AllowCompaction(ix, Antichain.of(10)))
    resp = await d1.peek(d1.new_peek(IndexTarget(ix), 5, KV))
    assert isinstance(resp.response, PeekError)
    assert "compaction frontier {10} is beyond the time of the attempted read (5)" in (
        resp.response.message
    )
    before = rows_of(await d1.peek(d1.new_peek(IndexTarget(ix), 20, KV)))
    await d1.wait_for(lambda: len(d1.observed.subscribes[sub]) > 0)

    # Scenario 19: a new controller epoch, whose history no longer has `other` and the
    # subscribe (dropped while the replica was not connected to it).
    history = ComputeCommandHistory()
    for c in d1.history.commands():
        history.push(c)
    history.push(AllowCompaction(other, Antichain.empty()))
    history.push(AllowCompaction(sub, Antichain.empty()))
    history.discard_peeks()
    history.reduce()
    d2 = await driver(2)
    await d2.replay(history.commands())
    with pytest.raises(ConnectionClosed):  # the older connection is replaced
        await d1.wait_for(lambda: False, timeout=10)
    assert rows_of(await d2.peek(d2.new_peek(IndexTarget(ix), 20, KV))) == before
    t.append([((121, 21), 1)], time=21)
    await d2.wait_frontier(ix, 21)
    await asyncio.sleep(1.0)
    assert metric("spate_compute_replica_reconciliation", replica="r1", outcome="reused") == 1
    assert metric("spate_compute_replica_reconciliation", replica="r1", outcome="dropped") == 2
    empty = Antichain.empty()
    spurious = [
        f
        for f in d2.observed.frontier_log
        if f.id in (other, sub) or empty in (f.write_frontier, f.input_frontier, f.output_frontier)
    ]
    assert spurious == []
    assert not any(isinstance(b, SubscribeDroppedAt) for b in d2.observed.subscribes[sub])
    assert all(isinstance(f, Frontiers) and f.id == ix for f in d2.observed.frontier_log)
    assert d1.violations == [] and d2.violations == []

    # An incompatible CreateInstance halts the process; the orchestrator starts a fresh one.
    d3 = await driver(3)
    await d3.start([], config=InstanceConfig(logging_interval_ms=12_345))
    offline = await next_event(events, "offline")
    assert offline.reason == f"exited with code {HALT_EXIT_CODE}"
    await next_event(events, "online")
    d4 = await driver(4)
    await d4.start([])
    resp = await d4.peek(d4.new_peek(IndexTarget(ix), 20, KV))
    assert isinstance(resp.response, PeekError) and "not an index here" in resp.response.message
    for d in (d2, d3, d4):
        await d.close()


def view_updates(tables: Tables, shard: ShardId, desc, upper: int) -> Counter:  # type: ignore[no-untyped-def]
    """The shard's updates below ``upper``, consolidated: (row, time) -> diff."""
    reader = tables.client.open_leased_reader(shard, desc)
    found = table_to_updates(reader.snapshot(0))
    for e in reader.listener(0).poll_once():
        if isinstance(e, ListenUpdates):
            found += table_to_updates(e.updates)
    reader.expire()
    acc: Counter = Counter()
    for r, t, d in found:
        if t < upper:
            acc[(r, t)] += d
    return Counter({k: v for k, v in acc.items() if v})


async def append_batches(t: Table, rng: random.Random, n: int, per_second: float) -> None:
    live: list[tuple[int, int]] = []
    for _ in range(n):
        rows: list[tuple[tuple[int, int], int]] = []
        for _ in range(rng.randint(1, 4)):
            if live and rng.random() < 0.3:
                rows.append((live.pop(rng.randrange(len(live))), -1))
            else:
                r = (rng.randint(1, 8), rng.randint(0, 50))
                live.append(r)
                rows.append((r, 1))
        await asyncio.to_thread(t.append, rows)
        await asyncio.sleep(1 / per_second)


async def test_view_written_by_two_replicas_and_kill_9(
    tmp_path: Path, tables: Tables, processes: list[ReplicaProcess], seed: int
) -> None:
    rng = random.Random(seed)
    # r4 replaces r3 later; started now so that its Spark driver warms up meanwhile.
    r2, r3, r4 = (start_replica(n, tmp_path, tables.location) for n in ("r2", "r3", "r4"))
    processes.extend((r2, r3, r4))
    t = tables.create(KV)
    t.append([((1, 1), 1)], time=0)
    view, ix, mv = GlobalId.user(20), GlobalId.user(21), GlobalId.user(22)
    shard = ShardId(uuid.uuid4())
    df = totals(t, view, 0, index=ix, mv=mv, mv_shard=shard)
    commands = [CreateDataflow(df), Schedule(ix), Schedule(mv), AllowWrites(mv)]
    d2, d3 = await r2.driver(1), await r3.driver(1)
    await d2.start(commands)
    await d3.start(commands)
    await asyncio.gather(d2.wait_frontier(ix, 0, timeout=300), d3.wait_frontier(ix, 0, timeout=300))

    # Both write the view while the table changes; kill -9 r3 in the middle.
    appends = asyncio.create_task(append_batches(t, rng, 40, per_second=8))
    await asyncio.sleep(rng.uniform(1.5, 3.5))
    r3.kill(hard=True)
    await appends
    upper = t.upper
    await d2.wait_frontier(mv, upper - 1, kind="write", timeout=120)
    expected = oracle(df, {t.id: t}, upper=upper)
    want = Counter({(r, tm): d for r, tm, d in differences(expected[mv])})
    assert view_updates(tables, shard, df.sink_exports[0].from_desc, upper) == want

    # A fresh replica, given the reduced history, reproduces the peeks and the view.
    history = ComputeCommandHistory()
    for c in d3.history.commands():
        history.push(c)
    history.reduce()
    d4 = await r4.driver(1)
    await d4.replay(history.commands())
    await d4.wait_frontier(ix, upper - 1, timeout=300)
    out_desc = df.index_exports[0].desc
    for ts in sorted({0, upper // 3, upper // 2, upper - 1}):
        a = rows_of(await d2.peek(d2.new_peek(IndexTarget(ix), ts, out_desc)))
        b = rows_of(await d4.peek(d4.new_peek(IndexTarget(ix), ts, out_desc)))
        assert a == b == as_rows(expected[ix][ts]), f"at {ts}"
    await asyncio.to_thread(t.append, [((99, 1), 1)])
    final = t.upper
    await d4.wait_frontier(mv, final - 1, kind="write", timeout=120)
    expected = oracle(df, {t.id: t}, upper=final)
    want = Counter({(r, tm): d for r, tm, d in differences(expected[mv])})
    assert view_updates(tables, shard, df.sink_exports[0].from_desc, final) == want
    assert d2.violations == [] and d4.violations == []
    for d in (d2, d4):
        await d.close()
