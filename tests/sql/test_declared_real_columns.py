"""Columns declared ``real`` behave as in PostgreSQL although spate stores them as float64:
a value written to one is rounded to single precision, real arithmetic is single-precision
(real with another numeric type is double precision), and a real prints its shortest
single-precision digits. They used to be read and computed as double precision."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest

from spate.sql import parse, plan_statement
from spate.sql import statements as st
from tests.sql._plan_engine import ReferenceEngine

CREATE = "CREATE TABLE t (r real, d double precision, i integer, s smallint)"
ROWS = "(0.1, 0.1, 3, 2), (1.1, 2.5, -7, 300), (3.3, 1e10, 2000000000, -16000), (NULL, 1, NULL, 1)"
QUERIES = (
    "SELECT r::text FROM t",
    "SELECT (r + r)::text, (r * r)::text, (r / 3::real)::text, (r - 0.3::real)::text FROM t",
    "SELECT (r * 3)::text, (r + d)::text, (r + i)::text, (r * s)::text FROM t",
    "SELECT (-r)::text, abs(r)::text, (r * 2.5)::text FROM t",
    "SELECT (0.1::real * 3)::text, (0.1::real + 0.2::real)::text, (1::real / 3::real)::text",
    "SELECT coalesce(r, 0)::text, coalesce(r, d)::text FROM t",
    "SELECT max(r)::text, min(r)::text FROM t",
    "SELECT (sum(r) OVER ())::text, (sum(r) OVER (ORDER BY i))::text FROM t",
    "SELECT r = 0.1, r = 0.1::real, r < 1.1::real, r = 3.3::double precision FROM t",
)
TYPES = (
    "SELECT r, r + r, r * 3, r + d, r * 2.5, -r, 1::real / 3::real FROM t",
    "SELECT max(r), sum(r), avg(r), count(*)::int FROM t",
    "SELECT sum(r) OVER (), avg(r) OVER (), max(r) OVER () FROM t",
    "SELECT coalesce(r, 0), coalesce(r, d), coalesce(i, s) FROM t",
    "SELECT sign(i), sign(r), sign(s), log(100), log(abs(i) + 1), log(100::numeric) FROM t",
)


@pytest.fixture
def pg(postgres_url: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    schema = f"declreal_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        try:
            conn.execute(f"SET search_path = {schema}")
            conn.execute(CREATE)
            conn.execute(f"INSERT INTO t VALUES {ROWS}")
            yield conn
        finally:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def _engine() -> ReferenceEngine:
    engine = ReferenceEngine()
    engine.sql(CREATE)
    engine.sql(f"INSERT INTO t VALUES {ROWS}")
    return engine


@pytest.mark.parametrize("query", QUERIES)
def test_real_values_and_arithmetic_print_as_in_postgresql(
    pg: psycopg.Connection[tuple[object, ...]], query: str
) -> None:
    want = sorted(pg.execute(query).fetchall(), key=repr)
    assert sorted(_engine().rows(query), key=repr) == want


@pytest.mark.parametrize("query", TYPES)
def test_result_types_are_postgresqls(
    pg: psycopg.Connection[tuple[object, ...]], query: str
) -> None:
    cur = pg.execute(query)
    assert cur.description is not None
    names = {700: "float4", 701: "float8", 23: "int4", 20: "int8", 1700: "numeric"}
    want = tuple(names.get(d.type_code, "?") for d in cur.description)
    engine = _engine()
    stmt = plan_statement(parse(query)[0], engine.catalog)
    assert isinstance(stmt, st.Select)
    assert stmt.types == want


def test_a_view_keeps_the_types_of_its_columns() -> None:
    engine = _engine()
    engine.sql("CREATE VIEW v AS SELECT r, r * r AS rr, i + s AS si, s, r + d AS rd FROM t")
    shown = [(r[0], r[2]) for r in engine.rows("SHOW COLUMNS FROM v")]
    assert shown == [
        ("r", "real"),
        ("rr", "real"),
        ("si", "integer"),
        ("s", "smallint"),
        ("rd", "double precision"),
    ]
    stmt = plan_statement(parse("SELECT rr + r, si + 1, s FROM v")[0], engine.catalog)
    assert isinstance(stmt, st.Select) and stmt.types == ("float4", "int4", "int2")


def test_float_with_a_precision_up_to_24_is_real() -> None:
    engine = ReferenceEngine()
    engine.sql("CREATE TABLE f (a float(10), b float(24), c float(25), d float)")
    shown = [(r[0], r[2]) for r in engine.rows("SHOW COLUMNS FROM f")]
    assert shown == [
        ("a", "real"),
        ("b", "real"),
        ("c", "double precision"),
        ("d", "double precision"),
    ]
