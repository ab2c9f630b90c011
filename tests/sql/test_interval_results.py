"""Intervals as result columns of one-off SELECTs: ``timestamp - timestamp``, ``interval * n``,
``age(a, b)`` and interval constants give PostgreSQL's months, days and microseconds, printed as
PostgreSQL prints them, through ``Environment.sql`` and the wire server (text and binary);
checked against the PostgreSQL at ``SPATE_TEST_POSTGRES_URL`` on random values; tables hold
interval columns (``Interval`` values in, Arrow ``month_day_nano_interval`` out)."""

from __future__ import annotations

import datetime as dt
import random
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.adapt import Loader
from psycopg.pq import Format

from spate.environment.api import Environment
from spate.errors import EvaluationFailed
from spate.pgwire.environment import EnvironmentEngine
from spate.pgwire.server import ServerConfig, ServerThread
from spate.repr.arrow import interval_datum
from spate.repr.interval import Interval
from spate.sql.errors import DatatypeMismatch, SqlError


class _RawText(Loader):
    def load(self, data: Any) -> str:
        return bytes(data).decode()


class _RawBinary(Loader):
    format = Format.BINARY

    def load(self, data: Any) -> tuple[int, int, int]:
        micros, days, months = struct.unpack("!qii", bytes(data))
        return months, days, micros


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Environment]:
    e = Environment.open(tmp_path / "data")
    yield e
    e.close()


def _texts(table: Any) -> list[tuple[object, ...]]:
    def shown(v: object) -> object:
        v = interval_datum(v)
        return v.text() if isinstance(v, Interval) else v

    columns = [[shown(v) for v in c.to_pylist()] for c in table.columns]
    return list(zip(*columns, strict=True))


FIXED = [
    ("SELECT interval '1 day' * 2", "2 days"),
    ("SELECT interval '1.5 weeks 3 microseconds'", "10 days 12:00:00.000003"),
    ("SELECT interval '1 year 2 mons 3 days 25 hours'", "1 year 2 mons 3 days 25:00:00"),
    ("SELECT interval '-36 hours' * 3", "-108:00:00"),
    (
        "SELECT timestamp '2024-03-01 00:00:00.5' - timestamp '2023-01-31 10:00'",
        "394 days 14:00:00.5",
    ),
    (
        "SELECT timestamp '2023-01-31 10:00' - timestamp '2024-03-01 00:00:00.5'",
        "-394 days -14:00:00.5",
    ),
    ("SELECT age(timestamp '2024-03-01', timestamp '2023-01-31 10:00')", "1 year 1 mon 14:00:00"),
    (
        "SELECT age(timestamp '2023-01-31 10:00', timestamp '2024-03-01')",
        "-1 years -1 mons -14:00:00",
    ),
]


@pytest.mark.parametrize(("query", "text"), FIXED)
def test_interval_results_print_as_postgres(env: Environment, query: str, text: str) -> None:
    assert _texts(env.sql(query)) == [(text,)]  # type: ignore[attr-defined]


def test_interval_results_order_by_span(env: Environment) -> None:
    env.sql("CREATE TABLE t (id bigint, a timestamp, b timestamp)")  # type: ignore[attr-defined]
    env.sql(  # type: ignore[attr-defined]
        "INSERT INTO t VALUES (1, '2024-03-01', '2024-01-31'), (2, '2024-03-01', '2024-02-29 12:00'),"
        " (3, '2024-01-01', '2024-03-01')"
    )
    got = _texts(env.sql("SELECT id, age(a, b) AS g FROM t ORDER BY g"))  # type: ignore[attr-defined]
    assert got == [(3, "-2 mons"), (2, "12:00:00"), (1, "1 mon 1 day")]


def test_intervals_in_views_and_plans_over_subqueries_are_planned(env: Environment) -> None:
    env.sql("CREATE TABLE t (a timestamp, b timestamp, n bigint)")  # type: ignore[attr-defined]
    env.sql("CREATE VIEW v AS SELECT a - b AS d FROM t")  # type: ignore[attr-defined]
    env.sql(  # type: ignore[attr-defined]
        "INSERT INTO t VALUES ('2024-01-02 00:00:00', '2024-01-01 00:00:00', 1),"
        " ('2024-01-03 12:00:00', '2024-01-01 00:00:00', 2)"
    )
    query = "SELECT d FROM (SELECT a - b AS d FROM t) s WHERE d > interval '1 day'"
    got = _texts(env.sql(query))  # type: ignore[attr-defined]
    assert got == [("2 days 12:00:00",)]
    with pytest.raises(DatatypeMismatch, match="cannot convert interval to bigint"):
        env.sql("INSERT INTO t (n) VALUES (interval '1 day')")  # type: ignore[attr-defined]
    assert env.sql("SELECT * FROM t").num_rows == 2  # type: ignore[attr-defined]


def _stamp(rng: random.Random) -> dt.datetime:
    base = dt.datetime(1995, 1, 1)
    return base + dt.timedelta(
        days=rng.randrange(0, 40 * 366),
        microseconds=rng.choice([0, rng.randrange(86_400_000_000), rng.randrange(1000) * 1000]),
    )


def _constant(rng: random.Random, months: bool) -> str:
    units = ["days", "hours", "minutes", "seconds", "microseconds", "weeks"]
    parts = []
    for u in rng.sample(units, rng.randint(1, 3)):
        n = rng.randint(-300, 300)
        if u in ("days", "weeks", "hours") and rng.random() < 0.3:
            parts.append(f"{n}.{rng.randint(0, 9)} {u}")
        else:
            parts.append(f"{n} {u}")
    if months:
        parts.append(f"{rng.randint(-40, 40)} mons")
    return " ".join(parts)


def test_random_interval_results_match_postgres(
    env: Environment, postgres_url: str, seed: int
) -> None:
    print(f"seed {seed}")
    rng = random.Random(seed)
    rows = [(i, _stamp(rng), _stamp(rng), rng.randint(-1000, 1000)) for i in range(60)]
    constants = [_constant(rng, months=False) for _ in range(6)]
    with_months = [_constant(rng, months=True) for _ in range(6)]
    queries = ["SELECT id, a - b, age(a, b), b - a, age(b, a) FROM t ORDER BY id"]
    queries += [
        f"SELECT id, interval '{c}' * k, k * interval '{c}' FROM t ORDER BY id" for c in constants
    ]
    queries += [f"SELECT interval '{c}'" for c in constants + with_months]

    env.sql("CREATE TABLE t (id bigint, a timestamp, b timestamp, k bigint)")  # type: ignore[attr-defined]
    env.insert("t", rows)
    server = ServerThread(EnvironmentEngine(env), ServerConfig(port=0))
    schema = f"spate_interval_{seed}"
    dsn = f"host=127.0.0.1 port={server.port} user=tester dbname=spate sslmode=disable"
    try:
        with (
            psycopg.connect(postgres_url, autocommit=True) as pg,
            psycopg.connect(dsn, autocommit=True) as wire,
        ):
            pg.execute(f"CREATE SCHEMA {schema}")
            try:
                pg.execute(f"SET search_path = {schema}")
                pg.execute("SET IntervalStyle = postgres")
                pg.execute("CREATE TABLE t (id bigint, a timestamp, b timestamp, k bigint)")
                with pg.cursor() as cur:
                    cur.executemany("INSERT INTO t VALUES (%s, %s, %s, %s)", rows)
                for conn in (pg, wire):
                    conn.adapters.register_loader("interval", _RawText)
                    conn.adapters.register_loader("interval", _RawBinary)
                for q in queries:
                    want = [tuple(r) for r in pg.execute(q).fetchall()]
                    assert [tuple(r) for r in wire.execute(q).fetchall()] == want, q
                    assert _texts(env.sql(q)) == want, q  # type: ignore[attr-defined]
                    want_binary = pg.cursor(binary=True).execute(q).fetchall()
                    got_binary = wire.cursor(binary=True).execute(q).fetchall()
                    assert got_binary == want_binary, q
            finally:
                pg.execute(f"DROP SCHEMA {schema} CASCADE")
    finally:
        server.close()


def test_tables_with_interval_columns_hold_interval_values(env: Environment) -> None:
    from spate.repr.desc import RelationDesc
    from spate.repr.types import INT64, INTERVAL

    env.create_table("t", RelationDesc.of(("k", INT64), ("d", INTERVAL)))
    env.insert("t", [(1, Interval(1, 2, 3)), (2, Interval(0, 30, 0)), (3, None)])
    env.delete("t", [(2, Interval(0, 30, 0))])
    table = env.select("t", order_by=["k"])
    assert str(table.schema.field("d").type) == "month_day_nano_interval"
    assert [interval_datum(v) for v in table.column("d").to_pylist()] == [
        Interval(1, 2, 3),
        None,
    ]
    assert _texts(env.sql("SELECT d FROM t WHERE k = 1")) == [("1 mon 2 days 00:00:00.000003",)]  # type: ignore[attr-defined]
    from spate.errors import SchemaMismatch

    with pytest.raises(SchemaMismatch, match=r"column 'd'.*out of range for interval"):
        env.insert("t", [(4, Interval(2**31, 0, 0))])
    with pytest.raises(SchemaMismatch, match="column 'd': expected interval, got str"):
        env.insert("t", [(4, "1 day")])
    with pytest.raises(SqlError, match="invalid input syntax for type interval") as bad:
        env.sql("UPDATE t SET d = 'soon' WHERE k = 1")  # type: ignore[attr-defined]
    assert bad.value.sqlstate == "22007"
    with pytest.raises(EvaluationFailed, match="interval out of range") as over:
        env.sql("UPDATE t SET d = d * 1e10 WHERE k = 1")  # type: ignore[attr-defined]
    assert over.value.sqlstate == "22008"


def test_interval_results_over_a_dataflow_match_postgres(
    tmp_path: Path, postgres_url: str, seed: int
) -> None:
    """A join and a grouping run as a dataflow; the intervals computed over their result (the
    maps above them) are computed in process."""
    print(f"seed {seed}")
    rng = random.Random(seed)
    rows = [(i % 7, _stamp(rng), _stamp(rng), rng.randint(-50, 50)) for i in range(40)]
    queries = [
        "SELECT x.id, x.a - y.b AS d, age(x.a, y.b) FROM t x JOIN t y ON x.k = y.k "
        "WHERE x.id < 3 ORDER BY d, 1",
        "SELECT id, max(a) - min(b), interval '1 day 3 hours' * count(*) FROM t GROUP BY id "
        "ORDER BY id",
    ]
    schema = f"spate_interval_df_{seed}"
    with Environment.open(tmp_path / "data") as env:
        env.create_cluster("c", replicas=1)
        env.sql("CREATE TABLE t (id bigint, a timestamp, b timestamp, k bigint)")  # type: ignore[attr-defined]
        env.insert("t", rows)
        with psycopg.connect(postgres_url, autocommit=True) as pg:
            pg.execute(f"CREATE SCHEMA {schema}")
            try:
                pg.execute(f"SET search_path = {schema}")
                pg.execute("SET IntervalStyle = postgres")
                pg.execute("CREATE TABLE t (id bigint, a timestamp, b timestamp, k bigint)")
                with pg.cursor() as cur:
                    cur.executemany("INSERT INTO t VALUES (%s, %s, %s, %s)", rows)
                pg.adapters.register_loader("interval", _RawText)
                for q in queries:
                    want = [tuple(r) for r in pg.execute(q).fetchall()]
                    assert _texts(env.sql(q)) == want, q  # type: ignore[attr-defined]
            finally:
                pg.execute(f"DROP SCHEMA {schema} CASCADE")


def test_interval_columns_over_the_wire(env: Environment) -> None:
    """Parameters bound as text and as binary (OID 1186) are stored exactly; the column reads
    back as ``interval`` in both formats."""
    env.sql("CREATE TABLE w (k bigint, d interval)")  # type: ignore[attr-defined]
    server = ServerThread(EnvironmentEngine(env), ServerConfig(port=0))
    dsn = f"host=127.0.0.1 port={server.port} user=tester dbname=spate sslmode=disable"
    try:
        with psycopg.connect(dsn, autocommit=True) as wire:
            wire.execute("INSERT INTO w VALUES (1, %s::interval)", ("1 mon -2 days 03:00:00",))
            wire.execute(
                "INSERT INTO w VALUES (%b, %b)", (2, dt.timedelta(days=-1, microseconds=5))
            )
            wire.adapters.register_loader("interval", _RawText)
            text = wire.execute("SELECT k, d FROM w ORDER BY k").fetchall()
            assert text == [(1, "1 mon -2 days +03:00:00"), (2, "-1 days +00:00:00.000005")]
            wire.adapters.register_loader("interval", _RawBinary)
            cur = wire.cursor(binary=True)
            got = cur.execute("SELECT d FROM w ORDER BY k").fetchall()
            assert got == [((1, -2, 10_800_000_000),), ((0, -1, 5),)]
    finally:
        server.close()


def test_a_view_casting_text_to_interval_recovers_when_the_bad_text_is_deleted(
    tmp_path: Path,
) -> None:
    """A dataflow that reads ``text::interval`` records a bad text's failure as an error (capture
    mode) and drops it when the row goes. The failure conditions were built inside the lambda
    that binds the text's groups once, so the error record named the lambda's variable outside
    it: Spark failed the step (``UNRESOLVED_COLUMN … x_14``) instead of recording the error."""
    with Environment.open(tmp_path / "data") as env:
        env.create_cluster("c", replicas=1)
        env.sql("CREATE TABLE ivt (id bigint NOT NULL, t text)")  # type: ignore[attr-defined]
        env.insert("ivt", [(1, "36 hours"), (2, "1 day"), (3, None)])
        env.sql(  # type: ignore[attr-defined]
            "CREATE MATERIALIZED VIEW v IN CLUSTER c AS SELECT id, justify_hours(t::interval), "
            "extract(epoch FROM t::interval) FROM ivt WHERE t::interval > '1 day'"
        )
        env.sql("CREATE DEFAULT INDEX IN CLUSTER c ON v")  # type: ignore[attr-defined]
        want = [(1, "1 day 12:00:00", 129600)]
        assert [(r[0], r[1], int(r[2])) for r in _texts(env.sql("SELECT * FROM v"))] == want  # type: ignore[attr-defined]
        env.insert("ivt", [(4, "a")])
        with pytest.raises(EvaluationFailed, match="invalid input syntax for type interval") as e:
            env.sql("SELECT * FROM v")  # type: ignore[attr-defined]
        assert e.value.sqlstate == "22007"
        env.delete("ivt", [(4, "a")])
        assert [(r[0], r[1], int(r[2])) for r in _texts(env.sql("SELECT * FROM v"))] == want  # type: ignore[attr-defined]


def test_intervals_of_equal_span_are_different_rows(tmp_path: Path) -> None:
    """'1 day' and '24:00:00' compare equal but are two rows, as in PostgreSQL: deleting one
    leaves the other, and a view over them retracts what was written. Merged by span, the
    deletes of three '24:00:00' rows were written as retractions of '1 day' (a negative
    multiplicity in the view's reduce)."""
    day, hours = Interval(0, 1, 0), Interval(0, 0, 24 * 3600 * 10**6)
    with Environment.open(tmp_path / "data") as env:
        env.create_cluster("c", replicas=1)
        env.sql("CREATE TABLE ib (id bigint NOT NULL, i interval)")  # type: ignore[attr-defined]
        env.insert("ib", [(1, day), (1, hours), (1, hours), (1, hours), (5, hours)])
        env.sql(  # type: ignore[attr-defined]
            "CREATE MATERIALIZED VIEW v IN CLUSTER c AS "
            "SELECT id > 3 AS big, sum(i), count(*) FROM ib GROUP BY id > 3"
        )
        env.sql("CREATE DEFAULT INDEX IN CLUSTER c ON v")  # type: ignore[attr-defined]

        def rows(q: str) -> list[tuple[object, ...]]:
            return sorted(_texts(env.sql(q)), key=repr)  # type: ignore[attr-defined]

        assert rows("SELECT * FROM v") == [(False, "1 day 72:00:00", 4), (True, "24:00:00", 1)]
        env.delete("ib", [(1, hours), (1, hours), (1, hours)])
        assert rows("SELECT i FROM ib WHERE id = 1") == [("1 day",)]
        assert rows("SELECT * FROM v") == [(False, "1 day", 1), (True, "24:00:00", 1)]
        env.update("ib", [((1, day), (1, hours))])
        assert rows("SELECT i FROM ib WHERE id = 1") == [("24:00:00",)]
        assert rows("SELECT * FROM v") == [(False, "24:00:00", 1), (True, "24:00:00", 1)]
        env.insert("ib", [(1, day)])
        assert rows("SELECT count(*) FROM ib WHERE i = '1 day'") == [(3,)]
        env.sql("CREATE INDEX ib_i IN CLUSTER c ON ib (i)")  # type: ignore[attr-defined]
        assert rows("SELECT id FROM ib WHERE i = '24:00:00'") == [(1,), (1,), (5,)]
        assert rows("SELECT id FROM ib WHERE i = '1 day'") == [(1,), (1,), (5,)]
        assert len(rows("SELECT DISTINCT i FROM ib")) == 1
        env.delete("ib", where={"id": 1})
        assert rows("SELECT * FROM v") == [(True, "24:00:00", 1)]
