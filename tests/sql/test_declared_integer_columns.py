"""Columns declared ``integer`` or ``smallint`` in SQL behave as in PostgreSQL although spate
stores them as int64: values outside their range are refused on INSERT and UPDATE (22003), and
arithmetic on them is 32- or 16-bit. They used to take any int64 and compute at 64 bits."""

from __future__ import annotations

import uuid

import psycopg
import pytest

from spate.errors import SpateError
from tests.sql._plan_engine import ReferenceEngine

CREATE = "CREATE TABLE t (a integer, b smallint, c bigint)"
ROWS = "(2000000000, 30000, 5000000000), (-7, -32768, 1), (NULL, 2, NULL)"
STATEMENTS = (
    "INSERT INTO t VALUES (3000000000, 1, 1)",
    "INSERT INTO t VALUES (1, 40000, 1)",
    "INSERT INTO t VALUES (1, -32769, 1)",
    "INSERT INTO t SELECT c, 1, 1 FROM t WHERE c > 2147483647",
    "INSERT INTO t SELECT a, a, a FROM t WHERE a = -7",
    "UPDATE t SET a = a * 2 WHERE a > 0",
    "UPDATE t SET b = b - 1 WHERE b = -32768",
    "UPDATE t SET a = c WHERE c = 1",
)
QUERIES = (
    "SELECT a + a FROM t",
    "SELECT a + 1 FROM t",
    "SELECT b * 2 FROM t",
    "SELECT b + b FROM t",
    "SELECT -b FROM t",
    "SELECT a::bigint + a FROM t",
    "SELECT a * c FROM t",
    "SELECT abs(b) FROM t WHERE b > -32768",
)


def _outcome(run: object, sql: str) -> tuple[str | None, object]:
    try:
        out = run(sql)  # type: ignore[operator]
    except (psycopg.Error, SpateError) as e:
        return getattr(e, "sqlstate", None), None
    return None, sorted(out, key=repr) if out is not None else None


@pytest.fixture
def pg(postgres_url: str):  # type: ignore[no-untyped-def]
    schema = f"declint_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        try:
            conn.execute(f"SET search_path = {schema}")
            yield conn
        finally:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def _fresh(pg: psycopg.Connection[tuple[object, ...]]) -> ReferenceEngine:
    pg.execute("DROP TABLE IF EXISTS t")
    pg.execute(CREATE)
    pg.execute(f"INSERT INTO t VALUES {ROWS}")
    engine = ReferenceEngine()
    engine.sql(CREATE)
    engine.sql(f"INSERT INTO t VALUES {ROWS}")
    return engine


@pytest.mark.parametrize("statement", STATEMENTS)
def test_a_write_to_a_declared_integer_column_is_range_checked_as_in_postgresql(
    pg: psycopg.Connection[tuple[object, ...]], statement: str
) -> None:
    engine = _fresh(pg)
    want = _outcome(lambda s: pg.execute(s) and None, statement)
    got = _outcome(lambda s: engine.sql(s) and None, statement)
    assert got[0] == want[0], (statement, want, got)
    after = "SELECT a, b, c FROM t"
    assert sorted(engine.rows(after), key=repr) == sorted(pg.execute(after).fetchall(), key=repr)


@pytest.mark.parametrize("query", QUERIES)
def test_arithmetic_on_declared_integer_columns_is_as_wide_as_in_postgresql(
    pg: psycopg.Connection[tuple[object, ...]], query: str
) -> None:
    engine = _fresh(pg)
    want = _outcome(lambda q: pg.execute(q).fetchall(), query)
    got = _outcome(engine.rows, query)
    assert got == want, query


def test_show_columns_names_the_declared_types() -> None:
    engine = ReferenceEngine()
    engine.sql(CREATE)
    shown = engine.rows("SHOW COLUMNS FROM t")
    assert [(r[0], r[2]) for r in shown] == [("a", "integer"), ("b", "smallint"), ("c", "bigint")]
