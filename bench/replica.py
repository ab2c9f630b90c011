"""Benchmark: a compute replica process — freshness of an index, and peek latency.

One real replica process (``spate replica --role compute``, Spark ``local[2]``), persist on
files + SQLite in a temporary directory, driven over loopback by the protocol driver. Table
appends are written directly with ``compare_and_append`` on the table's shard (the storage
controller's job in production).

* **Freshness**: 200 appends at 10 per second to a table with an index; after each append, a
  peek of the index at the append's timestamp (a key lookup of the appended row). Latency =
  answer received − append acknowledged. Target p50 <= 1 s, goal 300 ms. Baseline in the same
  run: the same peek on persist (the fast path reads the shard itself: no dataflow step).
* **Peek latency** on an index of 100k rows (1,000 groups of 100 rows, keyed by group): a key
  lookup returning 100 rows (target p50 <= 50 ms) and a full scan. Baselines in the same run: a
  lookup of an absent key (the protocol round trip) and a persist peek of the same 100k rows.

    python -m bench.replica [--appends N] [--rate R] [--peeks N] [--rows N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
import uuid
from pathlib import Path

from bench._results import write_result
from spate.clock import SystemClock
from spate.frontier import Antichain
from spate.ids import GlobalId, ShardId, SystemIdGen
from spate.persist import Appended, PersistClient, PersistLocation, WriteHandle
from spate.plan.builder import count
from spate.plan.dataflow import (
    BuildDesc,
    DataflowDescription,
    IndexDesc,
    IndexExport,
    SourceImport,
)
from spate.plan.relation import Get
from spate.protocol.compute import (
    CancelPeek,
    CreateDataflow,
    IndexTarget,
    PeekRows,
    PersistTarget,
    Schedule,
)
from spate.repr import INT64, TEXT, RelationDesc
from spate.repr.arrow import updates_to_table
from spate.testing.replica_driver import ComputeDriver
from spate.testing.replica_launch import start_replica

D = RelationDesc.of(("g", INT64, False), ("k", INT64, False), ("v", TEXT))


def index_on(table: GlobalId, shard: ShardId, index: GlobalId) -> DataflowDescription:
    return DataflowDescription(
        source_imports=(SourceImport(table, D, shard=shard),),
        index_exports=(IndexExport(index, IndexDesc(table, (0,)), D),),
        as_of=Antichain.of(0),
        debug_name=f"index {index}",
    )


def counts_on(
    table: GlobalId, shard: ShardId, view: GlobalId, index: GlobalId
) -> DataflowDescription:
    """An index of ``count(*)`` per ``g``: every step is a Spark job."""
    plan = Get(table, D).reduce(["g"], n=count())
    return DataflowDescription(
        source_imports=(SourceImport(table, D, shard=shard),),
        objects_to_build=(BuildDesc(view, plan),),
        index_exports=(IndexExport(index, IndexDesc(view, (0,)), plan.desc),),
        as_of=Antichain.of(0),
        debug_name=f"counts {index}",
    )


def append(writer: WriteHandle, rows: list[tuple[int, int, str]], time_: int) -> None:
    table = updates_to_table(D, [((g, k, v), time_, 1) for g, k, v in rows])
    r = writer.compare_and_append(
        table,
        expected_upper=Antichain.of(time_),
        new_upper=Antichain.of(time_ + 1),
        idempotency_token=uuid.uuid4(),
    )
    assert isinstance(r, Appended), r


def pct(samples: list[float], p: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]


async def timed_peeks(d: ComputeDriver, make, n: int) -> list[float]:  # type: ignore[no-untyped-def]
    out = []
    for i in range(n):
        peek = make(i)
        start = time.monotonic()
        resp = await d.peek(peek, finish=False)
        out.append(time.monotonic() - start)
        assert isinstance(resp.response, PeekRows), resp.response
        await d.send(CancelPeek(peek.uuid))
    return out


async def freshness(
    d: ComputeDriver,
    writer: WriteHandle,
    *,
    index: GlobalId,
    index_desc: RelationDesc,
    table: GlobalId,
    n: int,
    rate: float,
) -> tuple[list[float], list[float]]:
    """Append ``n`` rows at ``rate``/s; after each, peek ``index`` (and persist) at its time."""
    acked: dict[object, float] = {}
    index_peeks, persist_peeks = [], []
    interval = 1 / rate
    next_at = time.monotonic()
    for i in range(1, n + 1):
        await asyncio.sleep(max(0.0, next_at - time.monotonic()))
        next_at += interval
        await asyncio.to_thread(append, writer, [(i, i, f"fresh {i}")], i)
        now = time.monotonic()
        p = d.new_peek(IndexTarget(index), i, index_desc, literal_constraints=((i,),))
        q = d.new_peek(PersistTarget(table, writer.shard_id, D), i, D)
        acked[p.uuid] = acked[q.uuid] = now
        index_peeks.append(p)
        persist_peeks.append(q)
        await d.send(p, q)
    everything = [*index_peeks, *persist_peeks]
    await d.wait_for(lambda: all(p.uuid in d.observed.peeks for p in everything), timeout=300)
    for p in index_peeks:
        resp = d.observed.peeks[p.uuid].response
        assert isinstance(resp, PeekRows) and resp.rows.num_rows == 1, resp
    await d.send(*(CancelPeek(p.uuid) for p in everything))
    got = [d.observed.peek_received[p.uuid] - acked[p.uuid] for p in index_peeks]
    base = [d.observed.peek_received[p.uuid] - acked[p.uuid] for p in persist_peeks]
    return got, base


async def run(args: argparse.Namespace, root: Path) -> dict[str, object]:
    location = PersistLocation.embedded(root / "persist")
    client = PersistClient(location, clock=SystemClock(), ids=SystemIdGen())
    big, plain, view_t = GlobalId.user(1), GlobalId.user(2), GlobalId.user(3)
    big_ix, plain_ix, view, view_ix = (GlobalId.user(n) for n in (11, 12, 13, 14))
    writers = {t: client.open_writer(ShardId(uuid.uuid4()), D) for t in (big, plain, view_t)}
    rows = args.rows
    groups = max(1, rows // 100)
    append(writers[big], [(i % groups, i, f"value {i}") for i in range(rows)], 0)
    append(writers[plain], [(0, 0, "seed")], 0)
    append(writers[view_t], [(0, 0, "seed")], 0)
    counts = counts_on(view_t, writers[view_t].shard_id, view, view_ix)

    replica = start_replica("bench", root, location, spark_master="local[2]", driver_memory="1g")
    try:
        d = await replica.driver(1)
        await d.start(
            [
                CreateDataflow(index_on(big, writers[big].shard_id, big_ix)),
                CreateDataflow(index_on(plain, writers[plain].shard_id, plain_ix)),
                CreateDataflow(counts),
                *(Schedule(i) for i in (big_ix, plain_ix, view_ix)),
            ]
        )
        started = time.monotonic()
        for ix in (big_ix, plain_ix, view_ix):
            await d.wait_frontier(ix, 0, timeout=600)
        hydration_s = time.monotonic() - started
        print(f"replica ready, {rows:,}-row index hydrated after {hydration_s:.1f} s")

        # -- peek latency on the idle 100k-row index ------------------------------------------
        lookup = await timed_peeks(
            d,
            lambda i: d.new_peek(
                IndexTarget(big_ix), 0, D, literal_constraints=((i * 7 % groups,),)
            ),
            args.peeks,
        )
        absent = await timed_peeks(
            d,
            lambda i: d.new_peek(IndexTarget(big_ix), 0, D, literal_constraints=((-1 - i,),)),
            args.peeks,
        )
        scans = await timed_peeks(d, lambda i: d.new_peek(IndexTarget(big_ix), 0, D), 20)
        persist_scans = await timed_peeks(
            d, lambda i: d.new_peek(PersistTarget(big, writers[big].shard_id, D), 0, D), 20
        )

        # -- freshness -------------------------------------------------------------------------
        fresh, fresh_persist = await freshness(
            d,
            writers[plain],
            index=plain_ix,
            index_desc=D,
            table=plain,
            n=args.appends,
            rate=args.rate,
        )
        fresh_view, _ = await freshness(
            d,
            writers[view_t],
            index=view_ix,
            index_desc=counts.index_exports[0].desc,
            table=view_t,
            n=args.appends,
            rate=args.rate,
        )
        assert d.violations == [], d.violations
        await d.close()
    finally:
        replica.kill(hard=False)
        client.close()

    ms = 1000.0
    figures: dict[str, object] = {
        "rows": rows,
        "appends": args.appends,
        "append_rate_per_s": args.rate,
        "hydration_s": round(hydration_s, 1),
        "freshness_p50_ms": round(pct(fresh, 50) * ms, 1),
        "freshness_p99_ms": round(pct(fresh, 99) * ms, 1),
        "freshness_reduce_view_p50_ms": round(pct(fresh_view, 50) * ms, 1),
        "freshness_reduce_view_p99_ms": round(pct(fresh_view, 99) * ms, 1),
        "baseline_persist_peek_after_append_p50_ms": round(pct(fresh_persist, 50) * ms, 1),
        "baseline_persist_peek_after_append_p99_ms": round(pct(fresh_persist, 99) * ms, 1),
        "lookup_100_rows_p50_ms": round(pct(lookup, 50) * ms, 1),
        "lookup_100_rows_p99_ms": round(pct(lookup, 99) * ms, 1),
        "baseline_absent_key_p50_ms": round(pct(absent, 50) * ms, 1),
        "full_scan_p50_ms": round(pct(scans, 50) * ms, 1),
        "baseline_persist_full_scan_p50_ms": round(pct(persist_scans, 50) * ms, 1),
        "freshness_ratio_to_persist": round(pct(fresh, 50) / pct(fresh_persist, 50), 2),
        "lookup_ratio_to_round_trip": round(pct(lookup, 50) / pct(absent, 50), 2),
        "scan_ratio_to_persist_scan": round(pct(scans, 50) / pct(persist_scans, 50), 2),
        "targets": {"freshness_p50_ms": 1000, "freshness_goal_ms": 300, "lookup_p50_ms": 50},
        "load_average_1m": round(os.getloadavg()[0], 2),
    }
    return figures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--appends", type=int, default=200)
    ap.add_argument("--rate", type=float, default=10.0)
    ap.add_argument("--peeks", type=int, default=200)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--keep", type=Path, default=None, help="keep files (replica log) here")
    args = ap.parse_args()
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        f = asyncio.run(run(args, args.keep))
    else:
        with tempfile.TemporaryDirectory(prefix="spate-bench-replica-") as tmp:
            f = asyncio.run(run(args, Path(tmp)))
    print(
        f"freshness over {args.appends} appends at {args.rate:g}/s: "
        f"p50 {f['freshness_p50_ms']} ms, p99 {f['freshness_p99_ms']} ms "
        f"(persist peek after append: p50 {f['baseline_persist_peek_after_append_p50_ms']} ms; "
        f"ratio {f['freshness_ratio_to_persist']}); target p50 <= 1000 ms, goal 300 ms"
    )
    print(
        f"freshness of an index on a reduce (a Spark job per step): "
        f"p50 {f['freshness_reduce_view_p50_ms']} ms, p99 {f['freshness_reduce_view_p99_ms']} ms"
    )
    print(
        f"key lookup (100 of {args.rows:,} rows): p50 {f['lookup_100_rows_p50_ms']} ms, "
        f"p99 {f['lookup_100_rows_p99_ms']} ms (absent key round trip: "
        f"{f['baseline_absent_key_p50_ms']} ms); target p50 <= 50 ms"
    )
    print(
        f"full scan of {args.rows:,} rows: p50 {f['full_scan_p50_ms']} ms (persist peek of the "
        f"same rows: {f['baseline_persist_full_scan_p50_ms']} ms)"
    )
    print(f"load average: {f['load_average_1m']}")
    write_result("replica", f)


if __name__ == "__main__":
    main()
