"""Benchmark: the storage layer — CDC ingestion, table appends, sinks (and file reads).

* **CDC rows/s** from PostgreSQL into persist (embedded: file blob + SQLite consensus), for the
  initial snapshot and for the change stream (inserts and updates, decoded from pgoutput),
  against a plain psycopg read (``select *``, fetchall) of the same number of rows.
* **Table append latency** p50/p99 of ``StorageController.append`` (validation, one
  compare-and-append per table, the frontier update) against a bare persist
  ``compare_and_append`` of the same batch.
* **Group commit**: ``--writers`` concurrent writers each inserting ``--writes`` small batches
  into one table through the group committer (every write pending at a commit goes in one
  compare-and-append), against the same writes committed one at a time (one timestamp and one
  compare-and-append per write, as a write lock would): per-write latency p50/p99 and writes/s.

The machine's 1-minute load average at the end is recorded with the figures: latencies taken on
a loaded machine are not comparable with figures from an idle one.
* **Sink rows/s**: a collection written to a Parquet directory and to a PostgreSQL upsert table
  by the sink runner, against pyarrow writing the same rows to one Parquet file and psycopg
  COPYing them into a plain table.
* **Kafka** (``--only kafka``; :mod:`bench.kafka`): Kafka ingest rows/s against a bare
  confluent-kafka consumer, and Kafka sink rows/s against a bare producer, on a Tansu broker.
* **MySQL** (``--only mysql``; :mod:`bench.mysql`): MySQL (MariaDB binlog) ingest rows/s
  against a bare ``mysql-replication`` binlog reader, on a MariaDB server of its own.
* **File source**: pyarrow against Spark reading one small and one large Parquet file (why a
  poll of small files is read with pyarrow and a large one with Spark); ``--no-spark`` skips it.

    SPATE_TEST_POSTGRES_URL=postgresql://postgres@127.0.0.1:5432/test python -m bench.storage
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pyarrow as pa
import pyarrow.parquet as pq

from bench._results import RESULTS, write_result
from spate.clock import SystemClock
from spate.frontier import Antichain
from spate.ids import GlobalId, ShardId, SystemIdGen
from spate.persist.client import PersistClient
from spate.persist.location import PersistLocation
from spate.protocol.secret import Secret
from spate.protocol.storage_desc import (
    CollectionMetadata,
    FileFormat,
    FileSource,
    IngestionDescription,
    ParquetSinkConnection,
    PostgresSinkConnection,
    PostgresSinkMode,
    PostgresSource,
    SinkDescription,
    SourceExport,
)
from spate.repr.arrow import updates_schema
from spate.repr.desc import RelationDesc
from spate.repr.types import INT64, TEXT
from spate.storage.controller import CollectionDescription, StorageController, TableSource
from spate.storage.controller.group_commit import GroupCommit
from spate.storage.controller.tables import ValidatedChanges, validate_changes
from spate.storage.replica.ingestion import IngestionRunner
from spate.storage.replica.sink import SinkRunner
from spate.storage.sources.files import FilesReader
from spate.storage.sources.postgres.catalog import describe_source
from spate.storage.sources.postgres.reader import LSN_DESC, PostgresReader
from spate.storage.sources.stash import MemStash

DESC = RelationDesc.of(("k", INT64, False), ("v", TEXT), ("n", INT64))


def persist(directory: Path) -> PersistClient:
    return PersistClient(
        PersistLocation.embedded(directory), clock=SystemClock(), ids=SystemIdGen()
    )


def pct(samples: list[float], q: float) -> float:
    return float(np.percentile(np.array(samples), q))


# --- CDC ---------------------------------------------------------------------------------------


def drop_pg(conn: psycopg.Connection[Any], name: str) -> None:
    conn.execute(
        "select pg_drop_replication_slot(slot_name) from pg_replication_slots where slot_name = %s",
        (name,),
    )
    conn.execute(f"drop publication if exists {name}")  # type: ignore[arg-type]
    conn.execute(f"drop table if exists {name}")  # type: ignore[arg-type]


def bench_cdc(url: str, rows: int, changes: int, work: Path) -> dict[str, Any]:
    name = f"bench_cdc_{uuid.uuid4().hex[:8]}"
    conn = psycopg.connect(url, autocommit=True)
    try:
        drop_pg(conn, name)
        conn.execute(f"create table {name} (k bigint primary key, v text, n bigint)")  # type: ignore[arg-type]
        conn.execute(f"alter table {name} replica identity full")  # type: ignore[arg-type]
        conn.execute(
            f"insert into {name} select g, 'value-' || g, g * 7 "  # type: ignore[arg-type]
            "from generate_series(1, %s::bigint) g",
            (rows,),
        )
        conn.execute(f"create publication {name} for table {name}")  # type: ignore[arg-type]
        conn.execute(f"vacuum analyze {name}")  # type: ignore[arg-type]
        # Baseline: a plain psycopg read of every row.
        start = time.perf_counter()
        with psycopg.connect(url) as reader:
            got = reader.execute(f"select * from {name}").fetchall()  # type: ignore[arg-type]
        base_snapshot_s = time.perf_counter() - start
        assert len(got) == rows
        table = describe_source(url, publication=name, slot=name).tables[0]
        client = persist(work / "cdc")
        ids = SystemIdGen()
        source = PostgresSource(Secret(url), name, name)
        description = IngestionDescription(
            source,
            (SourceExport(GlobalId.user(2), table.output, ShardId.new(ids), table.desc),),
            CollectionMetadata(GlobalId.user(1), ShardId.new(ids), LSN_DESC),
        )
        reader_ = PostgresReader(source, {table.output: table.desc}, MemStash())
        runner = IngestionRunner(
            GlobalId.user(1),
            description,
            reader=reader_,
            persist=client,
            clock=SystemClock(),
            ids=ids,
        )
        start = time.perf_counter()
        runner.step()  # the snapshot, bound and written to persist
        snapshot_s = time.perf_counter() - start
        assert runner.counters.updates_committed == rows
        # The change stream: inserts, then updates (each a retraction and an insertion).
        with conn.transaction():
            conn.execute(
                f"insert into {name} select g, 'new-' || g, g "  # type: ignore[arg-type]
                "from generate_series(%s::bigint, %s::bigint) g",
                (rows + 1, rows + changes // 2),
            )
        with conn.transaction():
            conn.execute(
                f"update {name} set n = n + 1 where k <= %s",  # type: ignore[arg-type]
                (changes - changes // 2,),
            )
        committed = runner.counters.updates_committed
        start = time.perf_counter()
        while runner.counters.updates_committed - committed < changes + (changes - changes // 2):
            runner.step()
        changes_s = time.perf_counter() - start
        start = time.perf_counter()
        with psycopg.connect(url) as reader:
            got = reader.execute(f"select * from {name} limit %s", (changes,)).fetchall()  # type: ignore[arg-type]
        base_changes_s = time.perf_counter() - start
        runner.close()
        client.close()
        return {
            "rows": rows,
            "changes": changes,
            "snapshot_rows_per_s": round(rows / snapshot_s),
            "changes_rows_per_s": round(changes / changes_s),
            "psycopg_read_rows_per_s": round(rows / base_snapshot_s),
            "psycopg_read_changes_rows_per_s": round(changes / base_changes_s),
            "snapshot_ratio": round((rows / snapshot_s) / (rows / base_snapshot_s), 3),
            "changes_ratio": round((changes / changes_s) / (changes / base_changes_s), 3),
        }
    finally:
        drop_pg(conn, name)
        conn.close()


# --- table appends ---------------------------------------------------------------------------


async def bench_appends(appends: int, batch: int, work: Path) -> dict[str, Any]:
    client = persist(work / "tables")
    c = StorageController(client)
    await c.open()
    tid = GlobalId.user(1)
    await c.create_collections([(tid, CollectionDescription(DESC, TableSource()))])
    samples = []
    for i in range(appends):
        ups = [((i * batch + j, "x" * 20, j), i, 1) for j in range(batch)]
        start = time.perf_counter()
        await c.append([(tid, ups, Antichain.of(i + 1))])
        await c.process()
        samples.append(time.perf_counter() - start)
    await c.shutdown()
    # Baseline: persist compare_and_append of the same batches on a fresh shard.
    writer = client.open_writer(ShardId.new(SystemIdGen()), DESC)
    schema = updates_schema(DESC)
    base = []
    for i in range(appends):
        t = pa.table(
            {
                "k": pa.array(range(i * batch, (i + 1) * batch), pa.int64()),
                "v": pa.array(["x" * 20] * batch),
                "n": pa.array(range(batch), pa.int64()),
                "_time": pa.array([i] * batch, pa.int64()),
                "_diff": pa.array([1] * batch, pa.int64()),
            }
        ).cast(schema)
        start = time.perf_counter()
        writer.compare_and_append(
            t,
            expected_upper=Antichain.of(i),
            new_upper=Antichain.of(i + 1),
            idempotency_token=uuid.uuid4(),
        )
        base.append(time.perf_counter() - start)
    client.close()
    return {
        "appends": appends,
        "rows_per_append": batch,
        "p50_ms": round(pct(samples, 50) * 1000, 2),
        "p99_ms": round(pct(samples, 99) * 1000, 2),
        "persist_caa_p50_ms": round(pct(base, 50) * 1000, 2),
        "persist_caa_p99_ms": round(pct(base, 99) * 1000, 2),
        "p50_ratio_to_persist": round(pct(samples, 50) / pct(base, 50), 3),
    }


def previous_figures(name: str) -> dict[str, Any]:
    """The figures last recorded for ``name`` (to update part of them), or none."""
    path = RESULTS / f"{name}.json"
    if not path.exists():
        return {}
    figures: dict[str, Any] = json.loads(path.read_text()).get("figures", {})
    return figures


class _Oracle:
    """Timestamps for the group-commit benchmark (the environment uses its durable oracle)."""

    def __init__(self) -> None:
        self.last = 0

    def write_ts(self) -> int:
        self.last += 1
        return self.last

    def apply_write(self, ts: int) -> None:
        pass


async def bench_group_commit(writers: int, writes: int, batch: int, work: Path) -> dict[str, Any]:
    client = persist(work / "group")
    c = StorageController(client)
    await c.open()
    tid = GlobalId.user(1)
    await c.create_collections([(tid, CollectionDescription(DESC, TableSource()))])
    oracle = _Oracle()
    commit = GroupCommit(c, oracle)

    def changes(w: int, i: int) -> ValidatedChanges:
        rows = [((w * 1_000_000 + i * batch + j, "x" * 20, j), 1) for j in range(batch)]
        return validate_changes(DESC, rows, collection="bench")

    async def writer(w: int, out: list[float]) -> None:
        for i in range(writes):
            start = time.perf_counter()
            await commit.write(tid, changes(w, i))
            out.append(time.perf_counter() - start)

    grouped: list[float] = []
    start = time.perf_counter()
    await asyncio.gather(*(writer(w, grouped) for w in range(writers)))
    grouped_s = time.perf_counter() - start
    groups = commit.groups
    # Baseline: the same writes one at a time, each its own timestamp and compare-and-append.
    lock = asyncio.Lock()
    serial: list[float] = []

    async def one_at_a_time(w: int) -> None:
        for i in range(writes):
            start = time.perf_counter()
            async with lock:
                ts = oracle.write_ts()
                ups = changes(w + writers, i).at(ts)
                await c.append([(tid, ups, Antichain.of(ts + 1))])
                oracle.apply_write(ts)
            serial.append(time.perf_counter() - start)

    start = time.perf_counter()
    await asyncio.gather(*(one_at_a_time(w) for w in range(writers)))
    serial_s = time.perf_counter() - start
    await c.shutdown()
    client.close()
    total = writers * writes
    return {
        "writers": writers,
        "writes": total,
        "rows_per_write": batch,
        "groups": groups,
        "p50_ms": round(pct(grouped, 50) * 1000, 2),
        "p99_ms": round(pct(grouped, 99) * 1000, 2),
        "writes_per_s": round(total / grouped_s),
        "one_at_a_time_p50_ms": round(pct(serial, 50) * 1000, 2),
        "one_at_a_time_p99_ms": round(pct(serial, 99) * 1000, 2),
        "one_at_a_time_writes_per_s": round(total / serial_s),
        "throughput_ratio": round(serial_s / grouped_s, 2),
    }


# --- sinks -------------------------------------------------------------------------------------


def sink_input(client: PersistClient, rows: int) -> tuple[ShardId, pa.Table]:
    shard = ShardId.new(SystemIdGen())
    table = pa.table(
        {
            "k": pa.array(np.arange(rows, dtype=np.int64)),
            "v": pa.array([f"value-{i}" for i in range(rows)]),
            "n": pa.array(np.arange(rows, dtype=np.int64) * 3),
            "_time": pa.array(np.arange(rows, dtype=np.int64) % 10),
            "_diff": pa.array(np.ones(rows, dtype=np.int64)),
        }
    ).cast(updates_schema(DESC))
    client.open_leased_reader(shard, DESC)  # holds the since at 0, as a controller would
    writer = client.open_writer(shard, DESC)
    writer.compare_and_append(
        table,
        expected_upper=Antichain.of(0),
        new_upper=Antichain.of(10),
        idempotency_token=uuid.uuid4(),
    )
    return shard, table


def bench_sinks(url: str | None, rows: int, work: Path) -> dict[str, Any]:
    client = persist(work / "sinks")
    shard, table = sink_input(client, rows)
    out: dict[str, Any] = {"rows": rows}
    conn = ParquetSinkConnection(str(work / "parquet-sink"))
    d = SinkDescription(GlobalId.user(1), shard, DESC, conn, Antichain.of(0))
    runner = SinkRunner(GlobalId.user(2), d, persist=client)
    start = time.perf_counter()
    while runner.upper != Antichain.of(10):
        runner.step()
    parquet_s = time.perf_counter() - start
    runner.close()
    start = time.perf_counter()
    pq.write_table(table, work / "baseline.parquet")
    base_s = time.perf_counter() - start
    out["parquet_rows_per_s"] = round(rows / parquet_s)
    out["pyarrow_write_rows_per_s"] = round(rows / base_s)
    out["parquet_ratio"] = round(base_s / parquet_s, 3)
    if url is not None:
        name = f"bench_sink_{uuid.uuid4().hex[:8]}"
        pg = psycopg.connect(url, autocommit=True)
        try:
            conn2 = PostgresSinkConnection(
                Secret(url), name, PostgresSinkMode.UPSERT, ("k",), progress_table=f"{name}_p"
            )
            d2 = SinkDescription(GlobalId.user(1), shard, DESC, conn2, Antichain.of(0))
            runner2 = SinkRunner(GlobalId.user(3), d2, persist=client)
            start = time.perf_counter()
            while runner2.upper != Antichain.of(10):
                runner2.step()
            pg_s = time.perf_counter() - start
            runner2.close()
            pg.execute(f"create table {name}_base (k bigint primary key, v text, n bigint)")  # type: ignore[arg-type]
            start = time.perf_counter()
            with pg.cursor().copy(f"copy {name}_base (k, v, n) from stdin") as copy:  # type: ignore[arg-type]
                for k, v, n in zip(
                    table.column("k").to_pylist(),
                    table.column("v").to_pylist(),
                    table.column("n").to_pylist(),
                    strict=True,
                ):
                    copy.write_row((k, v, n))
            pg_base_s = time.perf_counter() - start
            out["postgres_upsert_rows_per_s"] = round(rows / pg_s)
            out["psycopg_copy_rows_per_s"] = round(rows / pg_base_s)
            out["postgres_ratio"] = round(pg_base_s / pg_s, 3)
        finally:
            pg.execute(f"drop table if exists {name}, {name}_p, {name}_base")  # type: ignore[arg-type]
            pg.close()
    client.close()
    return out


# --- file reads --------------------------------------------------------------------------------


def bench_files(work: Path, large_rows: int) -> dict[str, Any]:
    from spate.render.spark import create_session

    small = work / "files-small"
    large = work / "files-large"
    small.mkdir()
    large.mkdir()
    t_small = pa.table(
        {
            "k": pa.array(range(100), pa.int64()),
            "v": ["x"] * 100,
            "n": pa.array(range(100), pa.int64()),
        }
    )
    pq.write_table(t_small, small / "a.parquet")
    n = large_rows
    t_large = pa.table(
        {
            "k": pa.array(np.arange(n, dtype=np.int64)),
            "v": pa.array(np.char.add("v", np.arange(n).astype(str)).tolist()),
            "n": pa.array(np.arange(n, dtype=np.int64)),
        }
    )
    pq.write_table(t_large, large / "a.parquet")
    spark = create_session("local[2]", app_name="bench-storage")
    out: dict[str, Any] = {"large_rows": n}
    for label, directory in (("small", small), ("large", large)):
        for engine, min_bytes in (("pyarrow", 1 << 62), ("spark", 0)):
            times = []
            for _ in range(3):
                reader = FilesReader(
                    FileSource(str(directory), FileFormat.PARQUET),
                    DESC,
                    spark=lambda: spark,
                    spark_min_bytes=min_bytes,
                )
                start = time.perf_counter()
                chunk = reader.poll(frozenset(), now_millis=0)
                times.append(time.perf_counter() - start)
                assert chunk is not None
            out[f"{label}_{engine}_ms"] = round(statistics.median(times) * 1000, 1)
    spark.stop()
    return out


def load_now() -> float:
    return round(os.getloadavg()[0], 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--changes", type=int, default=50_000)
    ap.add_argument("--appends", type=int, default=300)
    ap.add_argument("--append-rows", type=int, default=10)
    ap.add_argument("--sink-rows", type=int, default=200_000)
    ap.add_argument("--large-file-rows", type=int, default=2_000_000)
    ap.add_argument("--writers", type=int, default=16)
    ap.add_argument("--writes", type=int, default=30)
    ap.add_argument("--no-spark", action="store_true")
    ap.add_argument(
        "--only",
        choices=["tables", "kafka", "mysql"],
        help="run only these benchmarks, updating their figures in the results file",
    )
    ap.add_argument("--kafka-rows", type=int, default=100_000)
    ap.add_argument("--kafka-repeats", type=int, default=3)
    ap.add_argument("--kafka-catchup-rows", type=int, default=0)
    ap.add_argument("--mysql-rows", type=int, default=100_000)
    args = ap.parse_args()
    if args.only == "mysql":
        from bench.mysql import run as run_mysql

        work = Path(tempfile.mkdtemp(prefix="bench-storage-"))
        try:
            figures = dict(previous_figures("storage"))
            figures["mysql"] = run_mysql(work, args.mysql_rows, persist)
            figures["mysql"]["load_average_1m"] = load_now()
            print("mysql", figures["mysql"])
        finally:
            shutil.rmtree(work, ignore_errors=True)
        write_result("storage", figures)
        return
    if args.only == "kafka":
        from bench.kafka import run

        work = Path(tempfile.mkdtemp(prefix="bench-storage-"))
        try:
            figures = dict(previous_figures("storage"))
            figures["kafka"] = run(
                work,
                args.kafka_rows,
                DESC,
                sink_input,
                persist,
                args.kafka_repeats,
                args.kafka_catchup_rows,
            )
            figures["kafka"]["load_average_1m"] = load_now()
            print("kafka", figures["kafka"])
        finally:
            shutil.rmtree(work, ignore_errors=True)
        write_result("storage", figures)
        return
    if args.only == "tables":
        work = Path(tempfile.mkdtemp(prefix="bench-storage-"))
        try:
            figures = dict(previous_figures("storage"))
            load_at_start = round(os.getloadavg()[0], 1)
            figures["table_append"] = asyncio.run(
                bench_appends(args.appends, args.append_rows, work)
            )
            figures["table_append"]["load_average_1m"] = [load_at_start, load_now()]
            print("table append", figures["table_append"])
            figures["group_commit"] = asyncio.run(
                bench_group_commit(args.writers, args.writes, args.append_rows, work)
            )
            figures["group_commit"]["load_average_1m"] = load_now()
            print("group commit", figures["group_commit"])
        finally:
            shutil.rmtree(work, ignore_errors=True)
        figures["load_average_1m"] = round(os.getloadavg()[0], 1)
        write_result("storage", figures)
        return
    url = os.environ.get("SPATE_TEST_POSTGRES_URL")
    work = Path(tempfile.mkdtemp(prefix="bench-storage-"))
    pq.write_table(pa.table({"x": [1]}), work / "warmup.parquet")  # one-time imports (pandas)
    figures: dict[str, Any] = {}
    try:
        if url:
            figures["cdc"] = bench_cdc(url, args.rows, args.changes, work)
            print("cdc", figures["cdc"])
        else:
            print("SPATE_TEST_POSTGRES_URL is not set: CDC and PostgreSQL sink skipped")
        figures["table_append"] = asyncio.run(bench_appends(args.appends, args.append_rows, work))
        print("table append", figures["table_append"])
        figures["group_commit"] = asyncio.run(
            bench_group_commit(args.writers, args.writes, args.append_rows, work)
        )
        print("group commit", figures["group_commit"])
        figures["sinks"] = bench_sinks(url, args.sink_rows, work)
        print("sinks", figures["sinks"])
        if not args.no_spark:
            figures["file_reads"] = bench_files(work, args.large_file_rows)
            print("file reads", figures["file_reads"])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    figures["load_average_1m"] = round(os.getloadavg()[0], 1)
    write_result("storage", figures)


if __name__ == "__main__":
    main()
