"""The MySQL part of ``bench/storage.py`` (``--only mysql``), against a MariaDB of its own.

* **MySQL ingest rows/s**: inserts in the binlog of a MariaDB server (row-based, transactions of
  1,000 rows) read by the MySQL source into persist through the ingestion runner (poll, decode,
  bind the GTID position, append), against a bare ``mysql-replication`` binlog reader reading
  and decoding the same row events from the same position (no Arrow, no persist).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from spate.clock import SystemClock
from spate.ids import GlobalId, ShardId, SystemIdGen
from spate.persist.client import PersistClient
from spate.protocol.mysql import MySqlSource, mysql_connection_settings
from spate.protocol.storage_desc import CollectionMetadata, IngestionDescription, SourceExport
from spate.storage.replica.ingestion import IngestionRunner
from spate.storage.sources.mysql import binlog
from spate.storage.sources.mysql.catalog import describe_source, settings_of
from spate.storage.sources.mysql.reader import MYSQL_PROGRESS_DESC, MySqlReader
from spate.storage.sources.stash import MemStash

BATCH = 1_000


def _bench(db: Any, client: PersistClient, rows: int) -> dict[str, Any]:
    conn = db.connect()
    with conn.cursor() as cur:
        cur.execute("create database bench")
        cur.execute("create table bench.t (k bigint primary key, v varchar(40), n bigint)")
    settings = mysql_connection_settings(db.host, db.port, db.user)
    (table,) = describe_source(settings_of(settings.reveal()), ["bench.t"])
    ids = SystemIdGen()
    source = MySqlSource(settings, server_id=4321)
    remap = CollectionMetadata(GlobalId.user(1), ShardId.new(ids), MYSQL_PROGRESS_DESC)
    reader = MySqlReader(source, {table.output: table.desc}, MemStash(), stash_key=str(remap.shard))
    description = IngestionDescription(
        source,
        (SourceExport(GlobalId.user(2), table.output, ShardId.new(ids), table.desc),),
        remap,
    )
    runner = IngestionRunner(
        GlobalId.user(1), description, reader=reader, persist=client, clock=SystemClock(), ids=ids
    )
    runner.rehydrate()
    runner.step()  # the (empty) snapshot: the binlog is read from its GTID position
    start_point = runner._point
    with conn.cursor() as cur:
        for lo in range(0, rows, BATCH):
            cur.execute("begin")
            cur.executemany(
                "insert into bench.t values (%s, %s, %s)",
                [(i, f"value-{i}", i * 3) for i in range(lo, min(rows, lo + BATCH))],
            )
            cur.execute("commit")
    out: dict[str, Any] = {"rows": rows}

    # Baseline: a bare binlog reader, decoding every row event from the same position.
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import WriteRowsEvent

    start = time.perf_counter()
    stream = BinLogStreamReader(
        connection_settings={"host": db.host, "port": db.port, "user": db.user},
        server_id=4322,
        blocking=True,  # as the source reads (see spate.storage.sources.mysql.reader)
        is_mariadb=True,
        auto_position=binlog.gtid_position(start_point),
        only_events=[WriteRowsEvent],
    )
    seen = 0
    for event in stream:
        seen += len(event.rows)
        if seen >= rows:
            break
    stream.close()
    base_s = time.perf_counter() - start
    assert seen == rows, (seen, rows)

    # spate: the ingestion runner with the MySQL source.
    start = time.perf_counter()
    while runner.counters.updates_committed < rows:
        runner.step()
    ingest_s = time.perf_counter() - start
    runner.close()
    with conn.cursor() as cur:
        cur.execute("drop database bench")
    conn.close()
    out["ingest_rows_per_s"] = round(rows / ingest_s)
    out["bare_binlog_reader_rows_per_s"] = round(rows / base_s)
    out["ingest_ratio"] = round(base_s / ingest_s, 3)
    return out


def run(work: Path, rows: int, persist: Any) -> dict[str, Any]:
    import pytest
    from tests._mariadb import start_mariadb, stop_mariadb

    tmp = Path(tempfile.mkdtemp(prefix="bench-mariadb-"))
    client = persist(work / "mysql")
    try:
        try:
            db = start_mariadb(tmp)
        except pytest.skip.Exception as e:
            return {"skipped": str(e)}
        try:
            return _bench(db, client, rows)
        finally:
            stop_mariadb(db)
    finally:
        client.close()
        shutil.rmtree(tmp, ignore_errors=True)
