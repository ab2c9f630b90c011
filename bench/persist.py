"""Benchmark: persist's write path, consensus CaS rate, snapshot and churn (compaction + GC).

Each section measures a baseline in the same run and prints the ratio:

* ``caa``: ``compare_and_append`` of 100k-row Nexmark-bid batches (file blob + SQLite, fsync'd)
  against pyarrow writing the same Parquet file (same zstd level) directly. Target >= 0.7.
  Measured with automatic maintenance off (compaction rewrites data; its cost is reported by
  ``churn``), and once more with it on for information.
* ``cas``: sequential ``Consensus.compare_and_set`` of a ~1 KiB state on SQLite (target >= 1,000/s)
  and PostgreSQL, against a bare autocommit INSERT on the same database (the floor); also
  full persist ``compare_and_append`` heartbeats (empty appends) per second on SQLite.
* ``snapshot``: ``snapshot`` of a shard of 10M updates in 20 batches against pyarrow reading
  the same files (and against pyarrow read + group-by-sum, the least work a consolidated
  snapshot needs).
* ``churn``: 1,000 appends of 1,000 insert/retract updates over 1,000 keys, the since
  following the upper: blob bytes on disk against the live data (the final contents written
  once as Parquet). Target: within 3x.

    python -m bench.persist [--sections caa,cas,snapshot,churn] [--quick]

PostgreSQL figures need ``SPATE_TEST_POSTGRES_URL`` (skipped otherwise).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench._results import write_result
from spate.clock import SystemClock
from spate.frontier.antichain import Antichain
from spate.ids import ShardId, SystemIdGen
from spate.persist import PersistClient, PersistConfig, PersistLocation
from spate.persist.consensus_sqlite import SqliteConsensus
from spate.persist.location import Consensus
from spate.repr import INT64, TEXT, TIMESTAMP, RelationDesc
from spate.repr.arrow import updates_schema

BIDS = RelationDesc.of(
    ("auction", INT64, False),
    ("bidder", INT64, False),
    ("price", INT64, False),
    ("channel", TEXT),
    ("url", TEXT),
    ("date_time", TIMESTAMP, False),
)
A = Antichain.of


def bids(rows: int, time: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    auction = 1000 + rng.integers(0, 10_000, rows)
    bidder = 1000 + rng.integers(0, 100_000, rows)
    price = np.round(10 ** (6 * rng.random(rows)) * 100).astype(np.int64)
    channels = np.array(["apple", "google", "facebook", "baidu"])
    channel = channels[rng.integers(0, 4, rows)]
    url = np.char.add(
        "https://www.nexmark.com/item.htm?query=1&channel_id=",
        rng.integers(0, 10_000, rows).astype(str),
    )
    base = np.datetime64("2026-01-01T00:00:00", "us")
    dt = base + rng.integers(0, 10**9, rows).astype("timedelta64[us]")
    return pa.Table.from_arrays(
        [
            pa.array(auction, pa.int64()),
            pa.array(bidder, pa.int64()),
            pa.array(price, pa.int64()),
            pa.array(channel, pa.string()),
            pa.array(url, pa.string()),
            pa.array(dt, pa.timestamp("us")),
            pa.array(np.full(rows, time, np.int64)),
            pa.array(np.ones(rows, np.int64)),
        ],
        schema=updates_schema(BIDS),
    )


def _client(root: Path, **config: Any) -> PersistClient:
    return PersistClient(
        PersistLocation.embedded(root),
        clock=SystemClock(),
        ids=SystemIdGen(),
        config=PersistConfig(**config),
    )


def bench_caa(args: argparse.Namespace, out: dict[str, Any]) -> None:
    rows, n = args.caa_rows, args.caa_batches
    tables = [bids(rows, t, seed=t) for t in range(n)]
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        root = Path(d)
        ours, base, ours_m = [], [], []
        client = _client(root / "off", maintenance=False)
        client_m = _client(root / "on")
        w = client.open_writer(ShardId(uuid.uuid4()), BIDS)
        wm = client_m.open_writer(ShardId(uuid.uuid4()), BIDS)
        (root / "pa").mkdir()
        for t, table in enumerate(tables):  # interleaved so noise hits both alike
            s = time.perf_counter()
            pq.write_table(
                table,
                root / "pa" / f"{t}.parquet",
                compression="zstd",
                compression_level=1,
                coerce_timestamps="us",
            )
            base.append(time.perf_counter() - s)
            s = time.perf_counter()
            w.compare_and_append(
                table, expected_upper=A(t), new_upper=A(t + 1), idempotency_token=uuid.uuid4()
            )
            ours.append(time.perf_counter() - s)
            s = time.perf_counter()
            wm.compare_and_append(
                table, expected_upper=A(t), new_upper=A(t + 1), idempotency_token=uuid.uuid4()
            )
            ours_m.append(time.perf_counter() - s)
        client.close()
        client_m.close()
    r_base = rows / statistics.median(base)
    r_ours = rows / statistics.median(ours)
    r_m = rows * n / sum(ours_m)
    ratio = r_ours / r_base
    print(
        f"[caa] {n} x {rows:,} rows: pyarrow write {r_base / 1e6:.2f} M rows/s, "
        f"compare_and_append {r_ours / 1e6:.2f} M rows/s, ratio {ratio:.2f} (target >= 0.7); "
        f"with maintenance on (total) {r_m / 1e6:.2f} M rows/s"
    )
    out["caa"] = {
        "rows_per_batch": rows,
        "batches": n,
        "pyarrow_write_rows_per_s": round(r_base),
        "compare_and_append_rows_per_s": round(r_ours),
        "ratio": round(ratio, 3),
        "target": 0.7,
        "with_maintenance_rows_per_s": round(r_m),
    }


def _cas_rate(c: Consensus, ops: int) -> float:
    key = f"bench-{uuid.uuid4()}"
    data = os.urandom(1024)
    assert c.compare_and_set(key, None, data)
    s = time.perf_counter()
    for i in range(ops):
        assert c.compare_and_set(key, i, data)
    return ops / (time.perf_counter() - s)


def _sqlite_floor(path: Path, ops: int) -> float:
    conn = sqlite3.connect(str(path), isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE t (k TEXT, s INTEGER, d BLOB, PRIMARY KEY (k, s)) WITHOUT ROWID")
    data = os.urandom(1024)
    s = time.perf_counter()
    for i in range(ops):
        conn.execute("INSERT INTO t VALUES ('k', ?, ?)", (i, data))
    rate = ops / (time.perf_counter() - s)
    conn.close()
    return rate


def _pg_floor(url: str, table: str, ops: int) -> float:
    import psycopg

    data = os.urandom(1024)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} (k text, s bigint, d bytea, PRIMARY KEY (k, s))")
        try:
            s = time.perf_counter()
            for i in range(ops):
                conn.execute(f"INSERT INTO {table} VALUES ('k', %s, %s)", (i, data))
            rate = ops / (time.perf_counter() - s)
        finally:
            conn.execute(f"DROP TABLE {table}")
    return rate


def bench_cas(args: argparse.Namespace, out: dict[str, Any]) -> None:
    ops = args.cas_ops
    res: dict[str, Any] = {"ops": ops, "target_sqlite_per_s": 1000}
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        c = SqliteConsensus(Path(d) / "c.db")
        res["sqlite_cas_per_s"] = round(_cas_rate(c, ops))
        c.close()
        res["sqlite_insert_floor_per_s"] = round(_sqlite_floor(Path(d) / "floor.db", ops))
        client = _client(Path(d) / "p", maintenance=True)
        w = client.open_writer(ShardId(uuid.uuid4()), BIDS)
        s = time.perf_counter()
        for t in range(ops):
            w.compare_and_append(
                None, expected_upper=A(t), new_upper=A(t + 1), idempotency_token=uuid.uuid4()
            )
        res["sqlite_empty_compare_and_append_per_s"] = round(ops / (time.perf_counter() - s))
        client.close()
    if Path("/dev/shm").is_dir():
        # The same on tmpfs, where fsync is free: the cost of the code, not of the disk.
        with tempfile.TemporaryDirectory(dir="/dev/shm") as d:
            c = SqliteConsensus(Path(d) / "c.db")
            res["sqlite_tmpfs_cas_per_s"] = round(_cas_rate(c, ops))
            c.close()
            res["sqlite_tmpfs_insert_floor_per_s"] = round(_sqlite_floor(Path(d) / "f.db", ops))
        print(
            f"[cas] sqlite on tmpfs (no fsync cost): {res['sqlite_tmpfs_cas_per_s']:,}/s CaS, "
            f"bare INSERT {res['sqlite_tmpfs_insert_floor_per_s']:,}/s"
        )
    cas, floor = res["sqlite_cas_per_s"], res["sqlite_insert_floor_per_s"]
    empty = res["sqlite_empty_compare_and_append_per_s"]
    print(
        f"[cas] sqlite: {cas:,}/s CaS (bare INSERT floor {floor:,}/s, ratio {cas / floor:.2f}); "
        f"empty compare_and_append {empty:,}/s (target CaS >= 1,000/s)"
    )
    url = os.environ.get("SPATE_TEST_POSTGRES_URL")
    if url:
        from spate.persist.consensus_postgres import PostgresConsensus

        table = f"bench_{uuid.uuid4().hex[:10]}"
        pc = PostgresConsensus(url, table=table)
        try:
            res["postgres_cas_per_s"] = round(_cas_rate(pc, ops))
        finally:
            pc.drop_table()
            pc.close()
        res["postgres_insert_floor_per_s"] = round(
            _pg_floor(url, f"floor_{uuid.uuid4().hex[:10]}", ops)
        )
        cas, floor = res["postgres_cas_per_s"], res["postgres_insert_floor_per_s"]
        print(
            f"[cas] postgres: {cas:,}/s CaS (bare INSERT floor {floor:,}/s, "
            f"ratio {cas / floor:.2f})"
        )
    else:
        print("[cas] postgres: skipped (SPATE_TEST_POSTGRES_URL not set)")
    out["cas"] = res


SNAP = RelationDesc.of(("key", INT64, False), ("value", INT64, False))


def bench_snapshot(args: argparse.Namespace, out: dict[str, Any]) -> None:
    total, nb = args.snap_updates, 20
    per = total // nb
    rng = np.random.default_rng(3)
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        client = _client(Path(d), maintenance=False)
        shard = ShardId(uuid.uuid4())
        w = client.open_writer(shard, SNAP)
        for b in range(nb):
            t = pa.Table.from_arrays(
                [
                    pa.array(rng.integers(0, total // 10, per), pa.int64()),
                    pa.array(rng.integers(0, 4, per), pa.int64()),
                    pa.array(np.full(per, b, np.int64)),
                    pa.array(rng.choice(np.array([1, 1, 1, -1], np.int64), per)),
                ],
                schema=updates_schema(SNAP),
            )
            w.compare_and_append(
                t, expected_upper=A(b), new_upper=A(b + 1), idempotency_token=uuid.uuid4()
            )
        r = client.open_leased_reader(shard, SNAP)
        paths = list(r.live_batches(nb - 1).paths)
        assert len(paths) == nb
        ours, base, base_c = [], [], []
        rows_out = 0
        for _ in range(args.repeat):
            s = time.perf_counter()
            tbl = pq.ParquetDataset(paths).read(use_threads=True)
            base.append(time.perf_counter() - s)
            s = time.perf_counter()
            tbl.group_by(["key", "value"], use_threads=True).aggregate([("_diff", "sum")])
            base_c.append(time.perf_counter() - s + base[-1])
            del tbl
            s = time.perf_counter()
            snap = r.snapshot(nb - 1)
            ours.append(time.perf_counter() - s)
            rows_out = snap.num_rows
            del snap
        client.close()
    t_b, t_c, t_o = statistics.median(base), statistics.median(base_c), statistics.median(ours)
    print(
        f"[snapshot] {total:,} updates in {nb} batches -> {rows_out:,} rows: pyarrow read "
        f"{t_b:.2f}s, pyarrow read+group-by {t_c:.2f}s, snapshot {t_o:.2f}s; ratio vs read "
        f"{t_b / t_o:.2f}, vs read+group-by {t_c / t_o:.2f}"
    )
    out["snapshot"] = {
        "updates": total,
        "batches": nb,
        "rows_out": rows_out,
        "pyarrow_read_s": round(t_b, 3),
        "pyarrow_read_groupby_s": round(t_c, 3),
        "snapshot_s": round(t_o, 3),
        "snapshot_updates_per_s": round(total / t_o),
        "ratio_vs_read": round(t_b / t_o, 3),
        "ratio_vs_read_groupby": round(t_c / t_o, 3),
    }


KV = RelationDesc.of(("key", INT64, False), ("value", TEXT, False))


def _dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def bench_churn(args: argparse.Namespace, out: dict[str, Any]) -> None:
    steps, keys = args.churn_steps, 1000
    rng = np.random.default_rng(5)
    values = {k: f"value-{k}-0" for k in range(keys)}
    ratios: list[float] = []
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        root = Path(d)
        client = _client(root)
        shard = ShardId(uuid.uuid4())
        w = client.open_writer(shard, KV)
        r = client.open_leased_reader(shard, KV)
        init = pa.table(
            {
                "key": list(values),
                "value": list(values.values()),
                "_time": [0] * keys,
                "_diff": [1] * keys,
            }
        )
        w.compare_and_append(
            init, expected_upper=A(0), new_upper=A(1), idempotency_token=uuid.uuid4()
        )
        live_bytes = 0
        s = time.perf_counter()
        for t in range(1, steps + 1):
            ks = rng.choice(keys, 500, replace=False).tolist()
            rows_k, rows_v, diffs = [], [], []
            for k in ks:
                rows_k += [k, k]
                new = f"value-{k}-{t}"
                rows_v += [values[k], new]
                diffs += [-1, 1]
                values[k] = new
            batch = pa.table(
                {"key": rows_k, "value": rows_v, "_time": [t] * len(ks) * 2, "_diff": diffs}
            )
            w.compare_and_append(
                batch, expected_upper=A(t), new_upper=A(t + 1), idempotency_token=uuid.uuid4()
            )
            r.downgrade_since(A(t))
            if t % 10 == 0 or t == steps:
                live = pa.table(
                    {
                        "key": list(values),
                        "value": list(values.values()),
                        "_time": [t] * keys,
                        "_diff": [1] * keys,
                    }
                )
                sink = pa.BufferOutputStream()
                pq.write_table(
                    live.cast(updates_schema(KV)), sink, compression="zstd", compression_level=1
                )
                live_bytes = len(sink.getvalue())
                ratios.append(_dir_bytes(root / "blob") / live_bytes)
        elapsed = time.perf_counter() - s
        state = client.fetch_state(shard)
        snap = r.snapshot(steps)
        assert snap.num_rows == keys
        states_kept = len(client.consensus.scan(str(shard), 0, 1_000_000))
        consensus_bytes = sum(p.stat().st_size for p in root.glob("consensus.db*"))
        blob_final = _dir_bytes(root / "blob")
        client.close()
    print(
        f"[churn] {steps} appends x 1,000 updates over {keys} keys in {elapsed:.1f}s: "
        f"blob bytes / live data: max {max(ratios):.2f}, mean {statistics.mean(ratios):.2f}, final "
        f"{blob_final / live_bytes:.2f} (target <= 3); {len(state.batches)} batches, "
        f"{states_kept} consensus states kept, consensus files {consensus_bytes:,} bytes"
    )
    out["churn"] = {
        "appends": steps,
        "updates_per_append": 1000,
        "keys": keys,
        "live_data_bytes": live_bytes,
        "blob_bytes_final": blob_final,
        "ratio_max": round(max(ratios), 3),
        "ratio_mean": round(statistics.mean(ratios), 3),
        "ratio_final": round(blob_final / live_bytes, 3),
        "target_max_ratio": 3,
        "batches_final": len(state.batches),
        "consensus_states_kept": states_kept,
        "consensus_file_bytes": consensus_bytes,
        "seconds": round(elapsed, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--sections", default="caa,cas,snapshot,churn")
    ap.add_argument(
        "--quick", action="store_true", help="small sizes (smoke run; results not written)"
    )
    ap.add_argument("--dir", default=None, help="where temporary data goes (default: the temp dir)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    args.caa_rows, args.caa_batches = (10_000, 3) if args.quick else (100_000, 10)
    args.cas_ops = 200 if args.quick else 3000
    args.snap_updates = 200_000 if args.quick else 10_000_000
    args.churn_steps = 50 if args.quick else 1000
    out: dict[str, Any] = {}
    sections = {
        "caa": bench_caa,
        "cas": bench_cas,
        "snapshot": bench_snapshot,
        "churn": bench_churn,
    }
    for name in args.sections.split(","):
        sections[name.strip()](args, out)
    if not args.quick:
        write_result("persist", out)


if __name__ == "__main__":
    main()
