"""The scale-out path: a compute replica on a real Spark standalone cluster.

A master and one worker (1 core, 1 GiB) are started from the PySpark distribution on 127.0.0.1
(:mod:`spate.testing.spark_cluster`); a real ``spate replica --role compute`` process runs with
``--spark-master spark://127.0.0.1:<port>``, so its Spark jobs run in an executor JVM the worker
launched, not inside the replica's driver JVM. The replica's index peeks and the contents of the
materialized view it writes must equal the reference oracle (``spate.testing.reference``) at
every checked time — the very oracle the ``local[*]`` replicas and the in-process renderer are
held to (``test_compute_replica.py``, ``tests/render``), so the cluster gives the same results
as ``local[*]``.

The replica writes large batches as Parquet files into its local scratch directory and the
executors read them from there: fine on one machine, but a cluster across machines needs the
scratch directory on a filesystem every worker shares (the same path everywhere).

Costs a Spark driver plus a master, a worker and an executor JVM: 1–1.5 min on two busy cores.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections import Counter
from pathlib import Path

import pytest

from spate.ids import GlobalId, ShardId
from spate.persist.read import ListenUpdates
from spate.protocol.compute import AllowWrites, CreateDataflow, IndexTarget, Schedule
from spate.repr import RelationDesc
from spate.repr.arrow import table_to_updates
from spate.repr.types import Row
from spate.testing.reference import differences
from spate.testing.replica_driver import rows_of
from spate.testing.replica_launch import ReplicaProcess, start_replica
from spate.testing.spark_cluster import SparkStandalone, standalone_cluster, unavailable_reason
from tests.compute.replica.tables import Tables
from tests.compute.replica.views import KV, as_rows, oracle, totals

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

APP = "spate-compute-rc"
"""The Spark application name of replica ``rc`` (``spate-compute-<replica id>``)."""


def view_updates(
    tables: Tables, shard: ShardId, desc: RelationDesc, upper: int
) -> Counter[tuple[Row, int]]:
    """The shard's updates below ``upper``, consolidated: ``(row, time) -> diff``."""
    reader = tables.client.open_leased_reader(shard, desc)
    try:
        found = table_to_updates(reader.snapshot(0))
        for e in reader.listener(0).poll_once():
            if isinstance(e, ListenUpdates):
                found += table_to_updates(e.updates)
    finally:
        reader.expire()
    acc: Counter[tuple[Row, int]] = Counter()
    for r, t, d in found:
        if t < upper:
            acc[(r, t)] += d
    return Counter({k: v for k, v in acc.items() if v})


def random_batch(rng: random.Random, live: list[Row]) -> list[tuple[Row, int]]:
    """A few inserts and retractions of earlier inserts (``live``: the rows present)."""
    rows: list[tuple[Row, int]] = []
    for _ in range(rng.randint(1, 4)):
        if live and rng.random() < 0.35:
            rows.append((live.pop(rng.randrange(len(live))), -1))
        else:
            r = (rng.randint(1, 5), rng.randint(0, 50))
            live.append(r)
            rows.append((r, 1))
    return rows


async def test_compute_replica_on_spark_standalone_cluster(tmp_path: Path, seed: int) -> None:
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    rng = random.Random(seed)
    tables = Tables.embedded(tmp_path / "persist")
    try:
        with standalone_cluster(tmp_path / "spark", cores=1, memory="1g") as cluster:
            replica = start_replica(
                "rc",
                tmp_path,
                tables.location,
                spark_master=cluster.url,
                # The executor fits the worker's 1 GiB with room to spare; all on loopback.
                env={"SPARK_EXECUTOR_MEMORY": "512m", "SPARK_LOCAL_IP": "127.0.0.1"},
            )
            try:
                await _run(cluster, replica, tables, rng)
            except BaseException:
                print(f"replica log:\n{replica.log_tail(80)}\ncluster logs:\n{cluster.logs(80)}")
                raise
            finally:
                replica.kill(hard=True)
    finally:
        tables.close()
    # Nothing of the cluster outlives it: daemons, executor JVM, Python workers.
    assert cluster.running_groups() == []


async def _run(
    cluster: SparkStandalone, replica: ReplicaProcess, tables: Tables, rng: random.Random
) -> None:
    t = tables.create(KV)
    live: list[Row] = []
    t.append([((9, 1), 1), ((9, 2), 1), *random_batch(rng, live)], time=0)
    view, ix, mv = GlobalId.user(30), GlobalId.user(31), GlobalId.user(32)
    shard = ShardId(uuid.uuid4())
    df = totals(t, view, 0, index=ix, mv=mv, mv_shard=shard)
    d = await replica.driver(1)
    await d.start([CreateDataflow(df), Schedule(ix), Schedule(mv), AllowWrites(mv)])
    await d.wait_frontier(ix, 0, timeout=300)

    # The replica's Spark application runs on the cluster, on an executor of the worker.
    master = cluster.master_state()
    apps = [a for a in master["activeapps"] if a["name"] == APP]
    assert len(apps) == 1, master
    assert apps[0]["state"] == "RUNNING" and apps[0]["cores"] == 1, apps
    executors = cluster.worker_state()["executors"]
    assert [e["appid"] for e in executors] == [apps[0]["id"]], executors

    # Batches of inserts and retractions, stepped through the dataflow a few at a time.
    for i in range(12):
        await asyncio.to_thread(t.append, random_batch(rng, live))
        if i % 3 == 2:
            await d.wait_frontier(ix, t.upper - 1, timeout=120)
    # Whatever the seed: every row of key 9 goes (its group disappears from the reduce).
    await asyncio.to_thread(t.append, [((9, 1), -1), ((9, 2), -1), *random_batch(rng, live)])
    upper = t.upper
    await d.wait_frontier(ix, upper - 1, timeout=120)
    await d.wait_frontier(mv, upper - 1, kind="write", timeout=120)

    # Index peeks at every time, and the view's shard, equal the oracle.
    expected = oracle(df, {t.id: t}, upper=upper)
    out_desc = df.index_exports[0].desc
    for ts in range(upper):
        got = rows_of(await d.peek(d.new_peek(IndexTarget(ix), ts, out_desc)))
        assert got == as_rows(expected[ix][ts]), f"index at {ts}"
    want = Counter({(r, tm): n for r, tm, n in differences(expected[mv])})
    assert view_updates(tables, shard, df.sink_exports[0].from_desc, upper) == want
    assert d.violations == []

    # The work was done by the executor: it ran tasks (its log is in the worker's work dir).
    assert "Finished task" in cluster.executor_logs()
    await d.close()
