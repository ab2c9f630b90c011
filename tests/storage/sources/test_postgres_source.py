"""The PostgreSQL source against the real server: validation, snapshot, changes, replay."""

from __future__ import annotations

import datetime as dt
import random
from collections import Counter
from collections.abc import Callable, Iterator
from decimal import Decimal

import psycopg
import pyarrow as pa
import pytest

from spate.repr.arrow import table_to_rows
from spate.storage.sources.postgres.catalog import describe_source
from spate.storage.sources.postgres.reader import PostgresReader
from spate.storage.sources.source import SourceChunk, SourceError
from spate.storage.sources.stash import MemStash

COLUMNS = (
    "id bigint primary key, name text, price numeric(12,2), at timestamptz, "
    "raw bytea, doc jsonb, day date, ratio double precision, flag boolean, small smallint, "
    "label varchar(20), ts timestamp"
)


@pytest.fixture
def pg(pg_logical_url: str, pg_name: str) -> Iterator[Callable[..., psycopg.Connection]]:
    conn = psycopg.connect(pg_logical_url, autocommit=True)
    yield conn  # type: ignore[misc]
    for sql in (
        f"select pg_drop_replication_slot(slot_name) from pg_replication_slots "
        f"where slot_name like '{pg_name}%'",
        f"drop publication if exists {pg_name}",
        f"drop table if exists {pg_name}, {pg_name}_b, {pg_name}_nopk, {pg_name}_pk cascade",
    ):
        conn.execute(sql)  # type: ignore[arg-type]
    conn.close()


def make_table(conn: psycopg.Connection, name: str, *, full: bool = True) -> None:
    conn.execute(f"create table {name} ({COLUMNS})")  # type: ignore[arg-type]
    if full:
        conn.execute(f"alter table {name} replica identity full")  # type: ignore[arg-type]


def random_row(rng: random.Random, key: int) -> tuple[object, ...]:
    def maybe(v: object) -> object:
        return None if rng.random() < 0.15 else v

    return (
        key,
        maybe(rng.choice(["plain", "", 'quo"te', "new\nline", "comma, here", "ünï"])),
        maybe(Decimal(rng.randint(-(10**9), 10**9)) / 100),
        maybe(dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=rng.randint(0, 10**7))),
        maybe(bytes(rng.randrange(256) for _ in range(rng.randint(0, 5)))),
        maybe(psycopg.types.json.Jsonb({"k": rng.randint(0, 9), "s": "x"})),
        maybe(dt.date(2000, 1, 1) + dt.timedelta(days=rng.randint(0, 9000))),
        maybe(rng.choice([0.5, -1e300, float("inf"), float("nan"), rng.random()])),
        maybe(rng.random() < 0.5),
        maybe(rng.randint(-300, 300)),
        maybe(rng.choice(["a", "bb", "  padded"])),
        maybe(dt.datetime(2020, 5, 5) + dt.timedelta(microseconds=rng.randint(0, 10**12))),
    )


INSERT = "insert into {} values (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"


def upstream_rows(conn: psycopg.Connection, name: str) -> Counter[tuple[object, ...]]:
    """The table as spate datums, read independently with psycopg."""
    out: Counter[tuple[object, ...]] = Counter()
    rows = conn.execute(  # type: ignore[call-overload]
        f"select id, name, price, at, raw, doc::text, day, ratio, flag, small, label, ts from {name}"
    ).fetchall()
    for row in rows:
        r = list(row)
        if r[3] is not None:
            r[3] = r[3].astimezone(dt.UTC).replace(tzinfo=None)
        out[tuple(_norm(v) for v in r)] += 1
    return out


def _norm(v: object) -> object:
    if isinstance(v, float) and v != v:
        return "NaN"
    return v


def accumulate(acc: Counter[tuple[object, ...]], chunk: SourceChunk[int], output: str) -> None:
    table = chunk.updates.get(output)
    if table is None:
        return
    for row in table_to_rows(table, table.column_names):
        *data, diff = row
        acc[tuple(_norm(v) for v in data)] += int(diff)  # type: ignore[call-overload]


def test_snapshot_then_changes_equal_the_table_at_every_commit(
    pg: psycopg.Connection, pg_logical_url: str, pg_name: str, seed: int
) -> None:
    rng = random.Random(seed)
    make_table(pg, pg_name)
    for key in range(200):
        pg.execute(INSERT.format(pg_name), random_row(rng, key))  # type: ignore[arg-type]
    pg.execute(f"create publication {pg_name} for table {pg_name}")  # type: ignore[arg-type]
    config = describe_source(pg_logical_url, publication=pg_name, slot=pg_name, tables=[pg_name])
    stash = MemStash()
    reader = PostgresReader.from_connection(config, stash)
    output = f"public.{pg_name}"
    try:
        snap = reader.poll(0, now_millis=0)
        assert snap is not None and snap.upper > 0
        acc: Counter[tuple[object, ...]] = Counter()
        accumulate(acc, snap, output)
        assert +acc == upstream_rows(pg, pg_name)
        replayed_snapshot = reader.replay(0, snap.upper).updates[output]
        assert replayed_snapshot.schema.equals(snap.updates[output].schema)
        assert _nan_equal(replayed_snapshot, snap.updates[output])
        reader.committed(snap.upper)
        assert stash.objects == {}  # the snapshot is bound and written: the stash is released
        lower = snap.upper
        keys = set(range(200))
        next_key = 200
        for _ in range(6):
            for _ in range(rng.randint(1, 20)):
                op = rng.random()
                if op < 0.4 or not keys:
                    pg.execute(INSERT.format(pg_name), random_row(rng, next_key))  # type: ignore[arg-type]
                    keys.add(next_key)
                    next_key += 1
                elif op < 0.75:
                    k = rng.choice(sorted(keys))
                    new = random_row(rng, k)
                    pg.execute(  # type: ignore[call-overload]
                        f"update {pg_name} set name = %s, price = %s, flag = %s where id = %s",
                        (new[1], new[2], new[8], k),
                    )
                else:
                    k = rng.choice(sorted(keys))
                    pg.execute(f"delete from {pg_name} where id = %s", (k,))  # type: ignore[call-overload]
                    keys.discard(k)
            chunk = reader.poll(lower, now_millis=0)
            assert chunk is not None and chunk.upper > lower
            accumulate(acc, chunk, output)
            assert +acc == upstream_rows(pg, pg_name)
            assert all(c == 1 for c in (+acc).values())
            replayed = reader.replay(lower, chunk.upper)
            assert _nan_equal(replayed.updates[output], chunk.updates[output])
            reader.committed(chunk.upper)
            lower = chunk.upper
        assert reader.poll(lower, now_millis=0) is None
        with pytest.raises(SourceError, match="no longer in replication slot"):
            reader.replay(snap.upper, lower)
    finally:
        reader.drop_upstream()
        reader.close()


def _nan_equal(a: pa.Table, b: pa.Table) -> bool:
    return Counter(map(repr, a.to_pylist())) == Counter(map(repr, b.to_pylist()))


def test_multi_table_snapshot_is_consistent_and_restart_rereads_changes(
    pg: psycopg.Connection, pg_logical_url: str, pg_name: str
) -> None:
    a, b = pg_name, f"{pg_name}_b"
    for t in (a, b):
        pg.execute(f"create table {t} (k int primary key, v int not null)")  # type: ignore[arg-type]
        pg.execute(f"alter table {t} replica identity full")  # type: ignore[arg-type]
        pg.execute(f"insert into {t} select g, g from generate_series(1, 50) g")  # type: ignore[arg-type]
    pg.execute(f"create publication {pg_name} for table {a}, {b}")  # type: ignore[arg-type]
    config = describe_source(pg_logical_url, publication=pg_name, slot=pg_name)
    assert [t.name for t in config.tables] == sorted([a, b])
    first = PostgresReader.from_connection(config, MemStash())
    try:
        snap = first.poll(0, now_millis=0)
        assert snap is not None
        assert snap.updates[f"public.{a}"].num_rows == 50
        assert snap.updates[f"public.{b}"].num_rows == 50
        first.committed(snap.upper)
        # One transaction moves a row from a to b.
        with pg.transaction():
            pg.execute(f"delete from {a} where k = 1")  # type: ignore[arg-type]
            pg.execute(f"insert into {b} values (1000, 1)")  # type: ignore[arg-type]
        chunk = first.poll(snap.upper, now_millis=0)
        assert chunk is not None
        assert chunk.updates[f"public.{a}"].to_pylist() == [{"k": 1, "v": 1, "_diff": -1}]
        assert chunk.updates[f"public.{b}"].to_pylist() == [{"k": 1000, "v": 1, "_diff": 1}]
        first.close()
        # A restarted reader that was not told the chunk is durable reads it again.
        second = PostgresReader.from_connection(config, MemStash())
        again = second.replay(snap.upper, chunk.upper)
        assert again.updates[f"public.{a}"].equals(chunk.updates[f"public.{a}"])
        second.close()
    finally:
        first.drop_upstream()
        first.close()


def test_leftover_slot_is_recreated(
    pg: psycopg.Connection, pg_logical_url: str, pg_name: str
) -> None:
    pg.execute(f"create table {pg_name} (k int primary key)")  # type: ignore[arg-type]
    pg.execute(f"alter table {pg_name} replica identity full")  # type: ignore[arg-type]
    pg.execute(f"insert into {pg_name} values (1)")  # type: ignore[arg-type]
    pg.execute(f"create publication {pg_name} for table {pg_name}")  # type: ignore[arg-type]
    config = describe_source(pg_logical_url, publication=pg_name, slot=pg_name)
    r1 = PostgresReader.from_connection(config, MemStash())
    assert r1.poll(0, now_millis=0) is not None  # crashed before the binding: slot left over
    r1.close()
    pg.execute(f"insert into {pg_name} values (2)")  # type: ignore[arg-type]
    r2 = PostgresReader.from_connection(config, MemStash())
    try:
        snap = r2.poll(0, now_millis=0)
        assert snap is not None
        assert sorted(snap.updates[f"public.{pg_name}"].column("k").to_pylist()) == [1, 2]
    finally:
        r2.drop_upstream()
        r2.close()
    left = pg.execute(
        "select count(*) from pg_replication_slots where slot_name = %s", (pg_name,)
    ).fetchone()
    assert left == (0,)


def test_validation_errors_name_the_problem_and_create_nothing(
    pg: psycopg.Connection, pg_logical_url: str, pg_name: str
) -> None:
    nopk, pk = f"{pg_name}_nopk", f"{pg_name}_pk"
    pg.execute(f"create table {nopk} (v int)")  # type: ignore[arg-type]
    pg.execute(f"create table {pk} (k int primary key, v int)")  # type: ignore[arg-type]
    pg.execute(f"create table {pg_name} (k int primary key, v numeric, w int[])")  # type: ignore[arg-type]
    pg.execute(f"alter table {pg_name} replica identity full")  # type: ignore[arg-type]
    pg.execute(f"create publication {pg_name} for table {nopk}, {pk}, {pg_name}")  # type: ignore[arg-type]

    def describe(*tables: str, publication: str = pg_name) -> object:
        return describe_source(
            pg_logical_url, publication=publication, slot=pg_name, tables=list(tables)
        )

    with pytest.raises(SourceError, match=f"table public.{nopk} has no primary key or replica"):
        describe(nopk)
    with pytest.raises(SourceError, match=r"REPLICA IDENTITY DEFAULT.*REPLICA IDENTITY FULL"):
        describe(pk)
    with pytest.raises(SourceError, match="column 'v': numeric without precision"):
        describe(pg_name)
    pg.execute(f"alter table {pg_name} alter column v type numeric(10,2)")  # type: ignore[arg-type]
    with pytest.raises(SourceError, match=r"column 'w': PostgreSQL type integer\[\]"):
        describe(pg_name)
    with pytest.raises(SourceError, match="does not exist upstream"):
        describe(f"{pg_name}_missing")
    with pytest.raises(SourceError, match="publication 'nope_pub' does not exist"):
        describe(pg_name, publication="nope_pub")
    with pytest.raises(SourceError, match="slot name"):
        describe_source(pg_logical_url, publication=pg_name, slot="Bad-Slot")
    pg.execute(f"alter table {pg_name} drop column w")  # type: ignore[arg-type]
    config = describe(pg_name)
    # The table changes after the source was described: the reader refuses before any slot.
    pg.execute(f"alter table {pg_name} add column extra int")  # type: ignore[arg-type]
    reader = PostgresReader.from_connection(config, MemStash())
    with pytest.raises(SourceError, match="changed upstream"):
        reader.poll(0, now_millis=0)
    reader.close()
    slots = pg.execute(
        "select count(*) from pg_replication_slots where slot_name = %s", (pg_name,)
    ).fetchone()
    assert slots == (0,)


def test_truncate_and_schema_change_stop_the_stream(
    pg: psycopg.Connection, pg_logical_url: str, pg_name: str
) -> None:
    pg.execute(f"create table {pg_name} (k int primary key)")  # type: ignore[arg-type]
    pg.execute(f"alter table {pg_name} replica identity full")  # type: ignore[arg-type]
    pg.execute(f"create publication {pg_name} for table {pg_name}")  # type: ignore[arg-type]
    config = describe_source(pg_logical_url, publication=pg_name, slot=pg_name)
    reader = PostgresReader.from_connection(config, MemStash())
    try:
        snap = reader.poll(0, now_millis=0)
        assert snap is not None
        reader.committed(snap.upper)
        pg.execute(f"insert into {pg_name} values (1)")  # type: ignore[arg-type]
        pg.execute(f"truncate {pg_name}")  # type: ignore[arg-type]
        with pytest.raises(SourceError, match="TRUNCATE"):
            reader.poll(snap.upper, now_millis=0)
    finally:
        reader.drop_upstream()
        reader.close()
