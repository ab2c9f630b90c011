"""Result columns carry their PostgreSQL types: ``integer`` and ``smallint`` expressions (declared
columns, casts, their arithmetic) come out as int4/int2, ``real`` ones as float4, from
``Environment.sql`` (Arrow int32, int16, float32) and over the wire (OIDs 23, 21, 700, in text
and binary), for tables and views, in the catalog clients read and in SUBSCRIBE. Each answer is
compared with the same statements run on PostgreSQL, through the same clients. They used to be
bigint and double precision."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pyarrow as pa
import pytest

from spate.environment.api import Environment
from spate.pgwire.environment import EnvironmentEngine
from spate.pgwire.server import ServerConfig, ServerThread

pytestmark = [pytest.mark.integration]

SETUP = (
    "CREATE TABLE nums (i int, s smallint, b bigint, r real, d double precision)",
    "INSERT INTO nums VALUES (1, 2, 3, 0.1, 0.1), (-5, 7, 8, 1.5, 2.25), "
    "(2000000000, -16000, 9, 65504, 1e300), (NULL, NULL, NULL, NULL, NULL)",
    "INSERT INTO nums SELECT i + 1, s + 1, b, r * 3, d FROM nums WHERE i = 1",
    "CREATE VIEW nums_v AS SELECT i, s, i + s AS si, r, r * r AS rr, r + d AS rd, "
    "s::int AS wide FROM nums",
    "CREATE VIEW agg_v AS SELECT count(*)::int AS n, min(i) AS lo, max(s) AS hi, "
    "sum(r) AS total FROM nums WHERE r >= 1",
)
QUERIES = (
    "SELECT i, s, b, r, d FROM nums",
    "SELECT i + 1, s * 2, i + s, -s, i / 2, s % 3, abs(s) FROM nums",
    "SELECT 1::int, 2::smallint, 3::bigint, 0.1::real, 1.5::float4",
    "SELECT 0.1::real * 3, 0.1::real + 0.2::real, 1::real / 3::real, 0.1::real * 3::real",
    "SELECT r * 3, r + r, r * r, r / 3::real, r - 0.1::real, r + d, -r, abs(r) FROM nums "
    "WHERE r < 1e10",
    "SELECT r::text, (r * r)::text, r::double precision FROM nums",
    "SELECT count(*)::int, min(i), max(s), sum(i), sum(r) FILTER (WHERE r >= 1), max(r) FROM nums",
    "SELECT * FROM nums_v",
    "SELECT si + 1, rr, wide * 2 FROM nums_v",
    "SELECT * FROM agg_v",
    "SELECT coalesce(r, 0), coalesce(i, s), CASE WHEN i > 0 THEN s ELSE 0 END FROM nums",
)


def _run_all(run: Any) -> None:
    for statement in SETUP:
        run(statement)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Environment]:
    e = Environment.open(tmp_path_factory.mktemp("types") / "data")
    try:
        e.create_cluster("c", replicas=["r1"])
        e.sql("SET cluster = c")
        _run_all(e.sql)
        yield e
    finally:
        e.close()


@pytest.fixture(scope="module")
def server(env: Environment) -> Iterator[ServerThread]:
    s = ServerThread(EnvironmentEngine(env), ServerConfig(port=0))
    try:
        yield s
    finally:
        s.close()


@pytest.fixture(scope="module")
def dsn(server: ServerThread) -> str:
    return f"host=127.0.0.1 port={server.port} user=tester dbname=spate sslmode=disable"


@pytest.fixture(scope="module")
def pg(postgres_url: str) -> Iterator[str]:
    """A fresh schema on the PostgreSQL server holding the same objects: its connection URL."""
    schema = f"pgtypes_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(f"SET search_path = {schema}")
        _run_all(conn.execute)
        try:
            sep = "&" if "?" in postgres_url else "?"
            yield f"{postgres_url}{sep}options=-csearch_path%3D{schema}"
        finally:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def _fetch(url: str, query: str, binary: bool) -> tuple[list[int], list[tuple[Any, ...]]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(query, binary=binary)
        assert cur.description is not None
        oids = [c.type_code for c in cur.description]
        return oids, sorted(cur.fetchall(), key=repr)


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
@pytest.mark.parametrize("query", QUERIES)
def test_psycopg_sees_the_types_and_values_postgresql_gives(
    dsn: str, pg: str, query: str, binary: bool
) -> None:
    assert _fetch(dsn, query, binary) == _fetch(pg, query, binary)


_ARROW = {21: pa.int16(), 23: pa.int32(), 20: pa.int64(), 700: pa.float32(), 701: pa.float64()}


@pytest.mark.parametrize("query", QUERIES)
def test_environment_sql_returns_the_arrow_type_of_each_postgresql_type(
    env: Environment, pg: str, query: str
) -> None:
    oids, _ = _fetch(pg, query, binary=False)
    table = env.sql(query)
    assert isinstance(table, pa.Table)
    assert [_ARROW.get(o) for o in oids] == [
        t if o in _ARROW else None for t, o in zip(table.schema.types, oids, strict=True)
    ]


def test_asyncpg_reads_the_same_types_and_values(server: ServerThread, pg: str) -> None:
    import asyncpg

    async def run(url: str) -> list[Any]:
        conn = await asyncpg.connect(url)
        try:
            out: list[Any] = []
            for q in QUERIES:
                stmt = await conn.prepare(q)
                types = [a.type.name for a in stmt.get_attributes()]
                out.append((q, types, sorted(map(tuple, await stmt.fetch()), key=repr)))
            return out
        finally:
            await conn.close()

    spate = asyncio.run(run(f"postgresql://tester@127.0.0.1:{server.port}/spate?sslmode=disable"))
    want = asyncio.run(run(pg))
    assert spate == want


_CATALOG = (
    "SELECT table_name, column_name, data_type FROM information_schema.columns "
    "WHERE table_name IN ('nums', 'nums_v', 'agg_v') ORDER BY table_name, ordinal_position",
    "SELECT c.relname, a.attname, a.atttypid, format_type(a.atttypid, a.atttypmod) "
    "FROM pg_attribute a JOIN pg_class c ON a.attrelid = c.oid "
    "WHERE c.relname IN ('nums', 'nums_v', 'agg_v') AND a.attnum > 0 "
    "ORDER BY c.relname, a.attnum",
)


@pytest.mark.parametrize("query", _CATALOG)
def test_the_catalog_names_the_declared_and_computed_types(dsn: str, pg: str, query: str) -> None:
    with psycopg.connect(dsn) as c1, psycopg.connect(pg) as c2:
        got = [tuple(str(v) for v in r) for r in c1.execute(query).fetchall()]
        want = [tuple(str(v) for v in r) for r in c2.execute(query).fetchall()]
    assert got == want


def test_show_columns_names_the_types_of_tables_and_views(env: Environment) -> None:
    shown = {}
    for name in ("nums", "nums_v", "agg_v"):
        table = env.sql(f"SHOW COLUMNS FROM {name}")
        assert isinstance(table, pa.Table)
        shown[name] = [(r["name"], r["type"]) for r in table.to_pylist()]
    assert shown == {
        "nums": [
            ("i", "integer"),
            ("s", "smallint"),
            ("b", "bigint"),
            ("r", "real"),
            ("d", "double precision"),
        ],
        "nums_v": [
            ("i", "integer"),
            ("s", "smallint"),
            ("si", "integer"),
            ("r", "real"),
            ("rr", "real"),
            ("rd", "double precision"),
            ("wide", "integer"),
        ],
        "agg_v": [("n", "integer"), ("lo", "integer"), ("hi", "smallint"), ("total", "real")],
    }


def test_sqlalchemy_reflects_the_column_types_postgresql_reflects(
    server: ServerThread, pg: str
) -> None:
    import sqlalchemy as sa

    def reflect(url: str) -> dict[str, list[tuple[str, str]]]:
        engine = sa.create_engine(url)
        try:
            insp = sa.inspect(engine)
            out = {}
            for name in ("nums", "nums_v", "agg_v"):
                out[name] = [(c["name"], repr(c["type"])) for c in insp.get_columns(name)]
            with engine.connect() as conn:
                row = conn.execute(sa.text("SELECT i, s, r FROM nums WHERE i = 1")).one()
                out["row"] = [(type(v).__name__, repr(v)) for v in row]
            return out
        finally:
            engine.dispose()

    spate = reflect(f"postgresql+psycopg://tester@127.0.0.1:{server.port}/spate?sslmode=disable")
    want = reflect(pg.replace("postgresql://", "postgresql+psycopg://", 1))
    assert spate == want


def test_subscribe_describes_and_sends_int4_and_float4(env: Environment, dsn: str) -> None:
    env.sql("CREATE TABLE sub_n (i int, r real)")
    env.sql("INSERT INTO sub_n VALUES (7, 0.1)")
    with psycopg.connect(dsn) as c:
        c.execute("DECLARE s CURSOR FOR SUBSCRIBE (SELECT i, r, i + 1 AS j FROM sub_n)")
        seen: list[tuple[Any, ...]] = []
        deadline = time.monotonic() + 120
        while not seen and time.monotonic() < deadline:
            cur = c.execute("FETCH ALL s WITH (timeout = '5s')")
            seen += cur.fetchall()
        assert cur.description is not None
        assert [d.type_code for d in cur.description][2:] == [23, 700, 23]
        assert [row[2:] for row in seen] == [(7, 0.1, 8)]


def test_environment_sql_subscribe_names_and_types_rows_as_select_does(env: Environment) -> None:
    query = "SELECT count(*)::int AS n, max(s) AS hi, sum(r) AS total, min(i) + 1 FROM nums"
    table = env.sql(query)
    assert isinstance(table, pa.Table)
    stream = env.sql(f"SUBSCRIBE ({query})")
    try:
        seen: list[Any] = []
        while not seen:
            seen = [row for _, row, diff in next(stream) if diff > 0]
    finally:
        stream.close()  # type: ignore[attr-defined]
    assert getattr(stream, "schema", None) == table.schema
    assert [r._fields for r in seen] == [("n", "hi", "total", "_3")]  # ?column? is _3
    assert [tuple(r.values()) for r in table.to_pylist()] == [tuple(r) for r in seen]
    assert seen[0][:2] == (5, 7)
