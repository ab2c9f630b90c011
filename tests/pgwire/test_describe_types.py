"""Describe from the planner: parameter types as their contexts demand them and result
columns as planned, side by side with PostgreSQL through asyncpg and psycopg (prepared
statements, binary results).

A parameter takes the type of the column an INSERT writes, of the column it is compared
with, of the other items of an ``IN`` list, or of its cast; one no context types is ``text``.
Result columns of ``interval``, ``timestamptz`` and ``numeric`` are described with their own
OIDs and sent in binary as described.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import asyncpg
import psycopg
import pytest

from spate.environment.api import Environment
from spate.pgwire.environment import EnvironmentEngine
from spate.pgwire.server import ServerConfig, ServerThread

pytestmark = pytest.mark.integration

COLUMNS = "k integer, s text, ts timestamptz, n numeric(10,2), iv interval"

ROWS = [
    (1, "a", dt.datetime(2024, 1, 1, 12, 30, tzinfo=dt.UTC), Decimal("1.25"), dt.timedelta(days=1, seconds=3)),
    (2, "b", dt.datetime(2024, 1, 2, tzinfo=dt.UTC), Decimal("-2.50"), dt.timedelta(hours=5)),
    (3, None, None, None, None),
]  # fmt: skip

PREPARED = [
    "INSERT INTO {t} VALUES ($1, $2, $3, $4, $5)",
    "INSERT INTO {t} (s, k) VALUES ($1,$2)",
    "SELECT k FROM {t} WHERE k IN ($1,$2)",
    "SELECT * FROM {t} WHERE s = $1 AND $2 < k",
    "SELECT k FROM {t} WHERE ts >= $1 AND n <> $2 AND iv = $3",
    "SELECT $1::int + 1",
    "SELECT $1",
    "SELECT $1::interval, $2::timestamptz, $3::numeric",
    "SELECT '1 day'::interval, '2024-01-01 00:00:00+00'::timestamptz, 1.5::numeric(5,2)",
    "UPDATE {t} SET s = $1 WHERE k = $2",
    "DELETE FROM {t} WHERE n > $1",
    "SELECT k FROM {t} ORDER BY k LIMIT $1 OFFSET $2",
    "SELECT $1 + 1, $2 || 'x', $3 LIKE 'a%'",
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    env = Environment.open(tmp_path_factory.mktemp("describe") / "data")
    s = ServerThread(EnvironmentEngine(env), ServerConfig(port=0))
    try:
        yield s
    finally:
        s.close()
        env.close()


@pytest.fixture
def dsns(server: ServerThread, postgres_url: str) -> dict[str, str]:
    return {"spate": f"postgresql://tester@127.0.0.1:{server.port}/spate", "postgres": postgres_url}


async def _asyncpg_run(dsn: str, table: str) -> dict[str, Any]:
    c = await asyncpg.connect(dsn)
    out: dict[str, Any] = {}
    try:
        await c.execute(f"CREATE TABLE {table} ({COLUMNS})")
        for q in PREPARED:
            st = await c.prepare(q.format(t=table))
            out[q] = (
                [t.name for t in st.get_parameters()],
                [a.type.name for a in st.get_attributes()],
            )
        await c.executemany(f"INSERT INTO {table} VALUES ($1,$2,$3,$4,$5)", ROWS)
        rows = await c.fetch(f"SELECT * FROM {table} WHERE k IN ($1,$2) ORDER BY k", 1, 2)
        out["in"] = [tuple(r) for r in rows]
        rows = await c.fetch(
            f"SELECT k FROM {table} WHERE ts = $1 AND n = $2 AND iv = $3", *ROWS[0][2:]
        )
        out["typed where"] = [tuple(r) for r in rows]
        out["all"] = [tuple(r) for r in await c.fetch(f"SELECT * FROM {table} ORDER BY k")]
        out["constants"] = tuple(
            await c.fetchrow(
                "SELECT '1 day 02:00:03.5'::interval, "
                "'2024-03-04 05:06:07.25+00'::timestamptz, 12345.678::numeric(9,3), "
                "$1::interval, $2::timestamptz, $3::numeric",
                dt.timedelta(days=-2, microseconds=7),
                dt.datetime(1999, 12, 31, 23, 59, tzinfo=dt.UTC),
                Decimal("-0.000123"),
            )
        )
    finally:
        await c.execute(f"DROP TABLE IF EXISTS {table}")
        await c.close()
    return out


def test_asyncpg_typed_parameters_and_binary_results_as_postgres(dsns: dict[str, str]) -> None:
    table = f"d_{uuid.uuid4().hex[:8]}"
    got = {name: asyncio.run(_asyncpg_run(dsn, table)) for name, dsn in dsns.items()}
    for key, expected in got["postgres"].items():
        assert got["spate"][key] == expected, key
    assert got["spate"]["in"] == [r for r in ROWS if r[0] in (1, 2)]
    assert got["spate"]["typed where"] == [(1,)]


def test_psycopg_prepared_binary_as_postgres(dsns: dict[str, str]) -> None:
    table = f"d_{uuid.uuid4().hex[:8]}"
    got: dict[str, list[Any]] = {}
    for name, dsn in dsns.items():
        out: list[Any] = []
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute(f"CREATE TABLE {table} ({COLUMNS})")
            try:
                cur = c.cursor(binary=True)
                cur.executemany(
                    f"INSERT INTO {table} VALUES (%s, %s, %s, %s, %s)", ROWS[:2], returning=False
                )
                for _ in range(2):  # the second run uses the prepared statement
                    cur.execute(
                        f"SELECT k, ts, n, iv FROM {table} WHERE k = %s OR s = %s ORDER BY k",
                        (1, "b"),
                        prepare=True,
                    )
                    assert cur.description is not None
                    out.append([d.type_code for d in cur.description])
                    out.append(cur.fetchall())
                cur.execute(
                    "SELECT %s::interval, %s::timestamptz, %s::numeric",
                    (dt.timedelta(days=3, seconds=1), ROWS[0][2], Decimal("9.99")),
                    prepare=True,
                )
                assert cur.description is not None
                out.append([d.type_code for d in cur.description])
                out.append(cur.fetchall())
            finally:
                c.execute(f"DROP TABLE IF EXISTS {table}")
        got[name] = out
    assert got["spate"] == got["postgres"]
    assert got["spate"][0] == [23, 1184, 1700, 1186]


def test_planner_types_parameters_without_running() -> None:
    """The SQL layer alone: ``$n`` next to another ``$`` is a parameter (not a dollar quote),
    a dollar-quoted string still is one, an unknown one is text, a declared one is kept, and
    a parameter outside a description is refused with 42P02."""
    from spate.repr.desc import RelationDesc
    from spate.repr.types import INT64, TEXT
    from spate.sql import MemoryCatalog, plan_statements
    from spate.sql.describe import describe
    from spate.sql.errors import UndefinedFunction, UndefinedParameter
    from spate.sql.parse import tokenize
    from spate.sql.types import INT8

    catalog = MemoryCatalog()
    catalog.add("t", RelationDesc.of(("k", INT64), ("s", TEXT)))
    d = describe("SELECT $1||$2, k FROM t WHERE k IN ($3,$4)", catalog)
    assert [t.name for t in d.params] == ["text", "text", "int8", "int8"]
    assert d.columns is not None and d.columns.names == ["?column?", "k"]
    quoted = [t.text for t in tokenize("SELECT $x$a$1$x$, $$b$$", 0, "postgres")]
    assert quoted == ["SELECT", "a$1", ",", "b"]
    d = describe("SELECT k FROM t ORDER BY k LIMIT $1 OFFSET $2", catalog)
    assert [t.name for t in d.params] == ["int8", "int8"]  # as PostgreSQL types them
    d = describe("SELECT $1, $2 FROM t", catalog, [INT8])
    assert [t.name for t in d.params] == ["int8", "text"]
    with pytest.raises(UndefinedFunction):  # as PostgreSQL: text = bigint does not exist
        describe("SELECT s FROM t WHERE s = $1", catalog, [INT8])
    with pytest.raises(UndefinedParameter) as e:
        plan_statements("SELECT k FROM t WHERE k = $1", catalog)
    assert e.value.sqlstate == "42P02"


OBJECT_IDS = [
    "SELECT c.oid, c.oid::regclass, c.reltype::regtype FROM pg_class c WHERE c.relname = '{t}'",
    "SELECT '{t}'::regclass, 'int4'::regtype, 'numeric'::regtype, '{t}'::regclass::oid",
    "SELECT a.attname, a.atttypid::regtype, a.atttypid, a.attnum::oid FROM pg_attribute a "
    "WHERE a.attrelid = '{t}'::regclass AND a.attnum > 0 ORDER BY a.attnum",
    "SELECT t.oid, t.typname FROM pg_type t WHERE t.oid = 'interval'::regtype",
]


def test_object_identifier_columns_as_postgres(dsns: dict[str, str]) -> None:
    """Result columns of type ``regclass``, ``regtype`` and ``oid`` (a cast, a catalog
    column) are described with PostgreSQL's OIDs (2205, 2206, 26) and sent, in the text
    format, as PostgreSQL sends them: the object's name, the number. (A relation's own oid
    differs between the two servers: compared by where it appears.)"""
    table = f"d_{uuid.uuid4().hex[:8]}"
    got: dict[str, list[Any]] = {}
    for name, dsn in dsns.items():
        out: list[Any] = []
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute(f"CREATE TABLE {table} ({COLUMNS})")
            try:
                relation = c.execute(f"SELECT '{table}'::regclass::oid").fetchone()
                assert relation is not None
                for q in OBJECT_IDS:
                    cur = c.execute(q.format(t=table))  # type: ignore[call-overload]
                    assert cur.description is not None
                    out.append([d.type_code for d in cur.description])
                    rows = cur.fetchall()
                    out.append([tuple("R" if v == relation[0] else v for v in r) for r in rows])
            finally:
                c.execute(f"DROP TABLE IF EXISTS {table}")
        got[name] = out
    assert got["spate"] == got["postgres"]
    assert got["spate"][0] == [26, 2205, 2206]
    assert got["spate"][1] == [("R", table, table)]


def test_a_regclass_result_in_binary_is_refused(dsns: dict[str, str]) -> None:
    """spate holds a displayed ``regclass`` as the name: asked for the binary format (the
    object id), it says so (``0A000``) rather than send other bytes; the session goes on."""
    with psycopg.connect(dsns["spate"], autocommit=True) as c:
        with pytest.raises(psycopg.errors.FeatureNotSupported, match="regclass"):
            c.cursor(binary=True).execute("SELECT 'pg_class'::regclass")
        assert c.execute("SELECT 'pg_class'::regclass").fetchone() == ("pg_class",)
