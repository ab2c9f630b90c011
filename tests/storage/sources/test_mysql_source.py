"""The MySQL source against a real MariaDB (its own server, binlog on): validation, snapshot,
binlog changes, replay and resumption, schema changes upstream. No JVM."""

from __future__ import annotations

import datetime as dt
import json
import random
import re
import uuid
from collections import Counter
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from spate.protocol.mysql import MySqlSource, mysql_connection_settings
from spate.repr.arrow import table_to_rows
from spate.storage.sources.mysql.binlog import less_equal
from spate.storage.sources.mysql.catalog import (
    ERRORS_DESC,
    ERRORS_OUTPUT,
    describe_source,
    settings_of,
    source_outputs,
)
from spate.storage.sources.mysql.reader import MySqlReader
from spate.storage.sources.source import SourceChunk, SourceError
from spate.storage.sources.stash import MemStash
from tests._mariadb import MariaDB

COLUMNS = (
    "id int primary key, n bigint, price decimal(12,2), name varchar(40), body text, "
    "at datetime(6), ts timestamp(3) null default null, day date, doc json, raw blob, "
    "ratio double, small tinyint unsigned, big bigint unsigned, kind enum('a','b'), "
    "vb varbinary(8)"
)
NCOLS = 15


@pytest.fixture
def db(mariadb: MariaDB) -> Iterator[tuple[Any, str]]:
    name = f"t{uuid.uuid4().hex[:10]}"
    conn: Any = mariadb.connect()
    with conn.cursor() as cur:
        cur.execute(f"create database {name}")
    yield conn, name
    with conn.cursor() as cur:
        cur.execute(f"drop database {name}")
    conn.close()


def settings(mariadb: MariaDB) -> dict[str, Any]:
    return settings_of(mysql_connection_settings(mariadb.host, mariadb.port, "root").reveal())


def execute(conn: Any, sql: str, args: object = None) -> None:
    with conn.cursor() as cur:
        cur.execute(sql, args)


def random_row(rng: random.Random, key: int) -> tuple[object, ...]:
    def maybe(v: object) -> object:
        return None if rng.random() < 0.15 else v

    return (
        key,
        maybe(rng.randint(-(2**63), 2**63 - 1)),
        maybe(Decimal(rng.randint(-(10**9), 10**9)) / 100),
        maybe(rng.choice(["plain", "", "quo'te", "new\nline", "ünï", "x" * 40])),
        maybe(rng.choice(["t", "long " * 50, "ünï"])),
        maybe(dt.datetime(2020, 5, 5) + dt.timedelta(microseconds=rng.randint(0, 10**12))),
        maybe(dt.datetime(2024, 1, 1) + dt.timedelta(milliseconds=rng.randint(0, 10**9))),
        maybe(dt.date(2000, 1, 1) + dt.timedelta(days=rng.randint(0, 9000))),
        maybe(json.dumps({"k": rng.randint(0, 9), "s": "x"})),
        maybe(bytes(rng.randrange(256) for _ in range(rng.randint(0, 5)))),
        maybe(rng.choice([0.5, -1e300, rng.random()])),
        maybe(rng.randint(0, 255)),
        maybe(rng.choice([0, 2**64 - 1, rng.randint(0, 2**64 - 1)])),
        maybe(rng.choice(["a", "b"])),
        maybe(bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))),
    )


INSERT = "insert into {} values (" + ", ".join(["%s"] * NCOLS) + ")"


def upstream(conn: Any, table: str) -> Counter[tuple[object, ...]]:
    """The table as MariaDB has it, read with a plain client (the oracle)."""
    execute(conn, "set time_zone = '+00:00'")
    with conn.cursor() as cur:
        cur.execute(f"select * from {table}")
        rows = cur.fetchall()
    return Counter(
        tuple(Decimal(v) if i == 12 and v is not None else v for i, v in enumerate(r)) for r in rows
    )


def apply(contents: Counter[tuple[object, ...]], chunk: SourceChunk[Any], output: str) -> None:
    table = chunk.updates.get(output)
    if table is None:
        return
    for data, diff in zip(table_to_rows(table), table.column("_diff").to_pylist(), strict=True):
        contents[data] += diff
        if contents[data] == 0:
            del contents[data]


def reader_for(mariadb: MariaDB, tables: list[str], stash: MemStash) -> MySqlReader:
    described = describe_source(settings(mariadb), tables)
    source = MySqlSource(mysql_connection_settings(mariadb.host, mariadb.port, "root"), 77)
    return MySqlReader(source, source_outputs(described), stash, stash_key="k")


def test_types_are_mapped(mariadb: MariaDB, db: tuple[Any, str]) -> None:
    conn, name = db
    execute(conn, f"create table {name}.t ({COLUMNS})")
    (table,) = describe_source(settings(mariadb), [f"{name}.t"])
    assert [str(c.type) for c in table.desc.columns] == [
        "int64",
        "int64",
        "numeric(12,2)",
        "text",
        "text",
        "timestamp",
        "timestamp",
        "date",
        "text",
        "bytes",
        "float64",
        "int64",
        "numeric(20,0)",
        "text",
        "bytes",
    ]
    assert not table.desc.columns[0].nullable and table.desc.columns[1].nullable


def test_unsupported_types_and_missing_tables_are_refused(
    mariadb: MariaDB, db: tuple[Any, str]
) -> None:
    conn, name = db
    execute(conn, f"create table {name}.g (id int, t time)")
    with pytest.raises(SourceError, match=r"column 't'.*time.*not supported"):
        describe_source(settings(mariadb), [f"{name}.g"])
    with pytest.raises(SourceError, match="does not exist upstream"):
        describe_source(settings(mariadb), [f"{name}.nope"])
    with pytest.raises(SourceError, match=r"database\.table"):
        describe_source(settings(mariadb), ["nodot"])


def test_snapshot_then_binlog_equals_the_table_and_replays_alike(
    mariadb: MariaDB, db: tuple[Any, str], seed: int
) -> None:
    rng = random.Random(seed)  # the seed fixture prints it
    conn, name = db
    table = f"{name}.t"
    execute(conn, f"create table {table} ({COLUMNS})")
    execute(conn, f"create table {name}.other (id int primary key)")
    keys = list(range(40))
    for k in keys:
        execute(conn, INSERT.format(table), random_row(rng, k))
    stash = MemStash()
    reader = reader_for(mariadb, [table], stash)
    contents: Counter[tuple[object, ...]] = Counter()
    points = [reader.minimum()]
    chunks = []
    next_key = len(keys)
    for _ in range(6):
        chunk = reader.poll(points[-1], now_millis=0)
        if chunk is not None:
            assert less_equal(points[-1], chunk.upper)
            apply(contents, chunk, table)
            chunks.append((points[-1], chunk))
            points.append(chunk.upper)
            reader.committed(chunk.upper)
        assert contents == upstream(conn, table)
        for _ in range(30):  # inserts, updates (also of the key), deletes, in transactions
            op = rng.random()
            if op < 0.4 or not keys:
                execute(conn, INSERT.format(table), random_row(rng, next_key))
                keys.append(next_key)
                next_key += 1
            elif op < 0.75:
                k = rng.choice(keys)
                row = random_row(rng, k)
                cols = COLUMNS.split(", ")
                sets = ", ".join(f"{c.split()[0]} = %s" for c in cols[1:])
                execute(conn, f"update {table} set {sets} where id = %s", (*row[1:], k))
            elif op < 0.8:
                execute(conn, "begin")
                k = rng.choice(keys)
                execute(conn, f"update {table} set id = %s where id = %s", (next_key, k))
                execute(conn, f"insert into {name}.other values (%s)", (next_key,))
                execute(conn, "commit")
                keys[keys.index(k)] = next_key
                next_key += 1
            else:
                k = rng.choice(keys)
                execute(conn, f"delete from {table} where id = %s", (k,))
                keys.remove(k)
    chunk = reader.poll(points[-1], now_millis=0)
    assert chunk is not None
    apply(contents, chunk, table)
    chunks.append((points[-1], chunk))
    assert contents == upstream(conn, table)
    # a restarted reader derives every chunk again (the snapshot from the stash: it is kept
    # until a later point commits, and replay of the first chunk reads it)
    fresh = reader_for(mariadb, [table], stash)  # the same stash, as after a restart
    for lower, original in chunks[1:]:
        again = fresh.replay(lower, original.upper)
        assert again.upper == original.upper
        want, got = Counter[tuple[object, ...]](), Counter[tuple[object, ...]]()
        apply(want, original, table)
        apply(got, again, table)
        assert got == want
    # a replay across several chunks equals their sum
    whole = fresh.replay(points[1], chunk.upper)
    total: Counter[tuple[object, ...]] = Counter()
    for _, c in chunks[1:]:
        apply(total, c, table)
    got_total: Counter[tuple[object, ...]] = Counter()
    apply(got_total, whole, table)
    assert got_total == total


def test_replay_of_the_snapshot_reads_the_stash(mariadb: MariaDB, db: tuple[Any, str]) -> None:
    conn, name = db
    table = f"{name}.t"
    execute(conn, f"create table {table} (id int primary key, v varchar(10))")
    execute(conn, f"insert into {table} values (1, 'a'), (2, 'b')")
    stash = MemStash()
    reader = reader_for(mariadb, [table], stash)
    first = reader.poll((), now_millis=0)
    assert first is not None
    execute(conn, f"update {table} set v = 'c' where id = 1")
    second = reader.poll(first.upper, now_millis=0)
    assert second is not None
    again = reader.replay((), second.upper)
    got: Counter[tuple[object, ...]] = Counter()
    apply(got, again, table)
    assert got == Counter({(1, "c"): 1, (2, "b"): 1})
    reader.committed(second.upper)  # beyond the snapshot: the stash is released
    with pytest.raises(SourceError, match="no longer stashed"):
        reader.replay((), second.upper)


def _rows(chunk: SourceChunk[Any], output: str) -> list[tuple[object, ...]]:
    table = chunk.updates.get(output)
    return [] if table is None else table_to_rows(table)


def test_an_incompatible_alter_stops_only_that_table(mariadb: MariaDB, db: tuple[Any, str]) -> None:
    conn, name = db
    a, b = f"{name}.a", f"{name}.b"
    execute(conn, f"create table {a} (id int primary key, v varchar(10))")
    execute(conn, f"create table {b} (id int primary key)")
    stash = MemStash()
    reader = reader_for(mariadb, [a, b], stash)
    assert reader.outputs[ERRORS_OUTPUT] == ERRORS_DESC
    point = reader.poll((), now_millis=0)
    assert point is not None
    execute(conn, f"alter table {a} modify v varchar(20)")  # compatible: still text
    execute(conn, f"insert into {a} values (1, 'x')")
    ok = reader.poll(point.upper, now_millis=0)
    assert ok is not None and _rows(ok, a) == [(1, "x")]
    execute(conn, f"alter table {a} add column w int")
    execute(conn, f"insert into {b} values (2)")  # b goes on until a changes
    execute(conn, f"insert into {a} values (2, 'y', 3)")  # a fails here
    execute(conn, f"insert into {b} values (3)")  # and b still goes on
    failed = reader.poll(ok.upper, now_millis=0)
    assert failed is not None
    assert _rows(failed, b) == [(2,), (3,)]
    assert _rows(failed, a) == []
    ((table, message),) = _rows(failed, ERRORS_OUTPUT)
    assert table == a
    assert isinstance(message, str) and re.search(rf"table {a} changed upstream.*w int64", message)
    # A replay of the range finds the same failure; a read after it skips the table silently.
    again = MySqlReader(reader._source, reader.outputs, stash, stash_key="k")
    replayed = again.replay(ok.upper, failed.upper)
    assert {k: table_to_rows(v) for k, v in replayed.updates.items()} == {
        k: table_to_rows(v) for k, v in failed.updates.items()
    }
    execute(conn, f"insert into {a} values (4, 'z', 5)")
    execute(conn, f"insert into {b} values (4)")
    later = again.poll(failed.upper, now_millis=0)
    assert later is not None
    assert _rows(later, b) == [(4,)]
    assert _rows(later, a) == [] and _rows(later, ERRORS_OUTPUT) == []


def test_a_truncate_stops_only_that_table(mariadb: MariaDB, db: tuple[Any, str]) -> None:
    conn, name = db
    execute(conn, f"create table {name}.a (id int primary key)")
    execute(conn, f"create table {name}.b (id int primary key)")
    reader = reader_for(mariadb, [f"{name}.a", f"{name}.b"], MemStash())
    first = reader.poll((), now_millis=0)
    assert first is not None
    execute(conn, f"truncate table {name}.a")
    execute(conn, f"insert into {name}.a values (1)")
    execute(conn, f"insert into {name}.b values (1)")
    chunk = reader.poll(first.upper, now_millis=0)
    assert chunk is not None
    assert _rows(chunk, f"{name}.b") == [(1,)] and _rows(chunk, f"{name}.a") == []
    ((table, message),) = _rows(chunk, ERRORS_OUTPUT)
    assert table == f"{name}.a" and "was truncated upstream" in str(message)


def test_progress_rows_round_trip(mariadb: MariaDB) -> None:
    source = MySqlSource(mysql_connection_settings(mariadb.host, mariadb.port), 5)
    reader = MySqlReader(source, {"d.t": pa.schema([]) and _desc()}, MemStash(), stash_key="x")
    point = ((-1, 0, 0), (0, 1, 42), (3, 2, 7))
    assert reader.point_from_rows(reader.progress_rows(point)) == point
    assert reader.point_from_rows([]) == reader.minimum()
    assert reader.less_equal((), point) and not reader.less_equal(point, ())
    assert reader.less_equal(((-1, 0, 0), (0, 1, 41)), point)
    assert not reader.less_equal(((-1, 0, 0), (0, 1, 43)), point)
    assert not reader.less_equal(((-1, 0, 0), (5, 1, 1)), point)


def _desc() -> Any:
    from spate.repr.desc import RelationDesc
    from spate.repr.types import INT64

    return RelationDesc.of(("id", INT64, False))


class MariadbGtidEvent:
    def __init__(self, seq: int) -> None:
        self.domain_id, self.server_id, self.gtid_seq_no, self.flags = 0, 1, seq, 12


class WriteRowsEvent:
    schema, table = "d", "t"

    def __init__(self, key: int) -> None:
        self.rows = [{"values": {"id": key}}]
        self.columns = [_Col()]


class XidEvent:
    pass


class _Col:
    name, type, unsigned, character_set_name = "id", 3, False, None


def test_a_stream_that_starts_over_after_a_lost_connection_ends_the_read() -> None:
    """The binlog reader reconnects by itself after a lost connection and reads again from
    where it began: the read ends at the last whole transaction, and nothing is taken twice."""
    from spate.storage.sources.mysql.binlog import read_transactions
    from spate.storage.sources.mysql.catalog import MySqlTable

    table = MySqlTable("d", "t", _desc())

    def txn(seq: int) -> list[object]:
        return [MariadbGtidEvent(seq), WriteRowsEvent(seq), XidEvent()]

    lower = ((-1, 0, 0), (0, 1, 4))
    events = [*txn(5), *txn(6), MariadbGtidEvent(7), WriteRowsEvent(7), *txn(5), *txn(6)]
    txns, point = read_transactions(events, [table], lower)
    assert [t.gtid for t in txns] == [(0, 1, 5), (0, 1, 6)]
    assert point == ((-1, 0, 0), (0, 1, 6))
    again, end = read_transactions([*txn(7), *txn(8)], [table], point)
    assert [t.changes for t in again] == [[("d.t", 1, (7,))], [("d.t", 1, (8,))]]
    assert end == ((-1, 0, 0), (0, 1, 8))


def test_one_poll_reads_a_large_backlog_whole(mariadb: MariaDB, db: tuple[Any, str]) -> None:
    """A poll reads up to the server's position at its start; a stream the server ended at
    the binlog's end was reset, losing events in flight, and a large backlog never arrived
    in one poll."""
    conn, name = db
    table = f"{name}.big"
    execute(conn, f"create table {table} (k bigint primary key, v varchar(40))")
    (described,) = describe_source(settings(mariadb), [table])
    source = MySqlSource(mysql_connection_settings(mariadb.host, mariadb.port, "root"), 78)
    reader = MySqlReader(
        source, {table: described.desc}, MemStash(), stash_key="big", poll_budget_s=120
    )
    first = reader.poll((), now_millis=0)
    assert first is not None
    rows = 20_000
    with conn.cursor() as cur:
        for lo in range(0, rows, 1000):
            cur.execute("begin")
            cur.executemany(
                f"insert into {table} values (%s, %s)",
                [(i, f"value-{i}") for i in range(lo, lo + 1000)],
            )
            cur.execute("commit")
    chunk = reader.poll(first.upper, now_millis=0)
    assert chunk is not None and chunk.updates[table].num_rows == rows
    assert reader.poll(chunk.upper, now_millis=0) is None
