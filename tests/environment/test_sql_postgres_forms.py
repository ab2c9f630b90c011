"""SQL written for PostgreSQL that spate used to refuse: a repeated GROUP BY column,
parenthesized joins, DROP TABLE of a table with its own indexes (and 2BP01 for other
dependents), index keys with ASC/DESC/NULLS; each answer checked against PostgreSQL. A fresh
environment runs them with no cluster created (small reads are evaluated here)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from spate.environment.api import Environment

SETUP = [
    "CREATE TABLE t1 (a int, b int)",
    "CREATE TABLE t2 (c int, d text)",
    "INSERT INTO t1 VALUES (1, 2), (1, 3), (2, 2)",
    "INSERT INTO t2 VALUES (2, 'x'), (3, 'y')",
]

QUERIES = [
    "SELECT a, count(*) FROM t1 GROUP BY a, a",
    "SELECT a, b, count(*) FROM t1 GROUP BY a, b, a",
    "SELECT count(*) FROM (t1 AS x CROSS JOIN t2 AS y)",
    "SELECT x.a, y.d FROM (t1 AS x JOIN t2 AS y ON x.b = y.c)",
    "SELECT x.a, z.d FROM (t1 x CROSS JOIN t2 y) JOIN t2 z ON z.c = x.b AND y.c = 3",
    "SELECT x.a, y.d, z.c FROM t1 x JOIN (t2 y JOIN t2 z ON y.c = z.c) ON x.b = y.c",
    "SELECT x.a, y.d FROM (t1 x LEFT JOIN t2 y ON x.b = y.c AND y.c = 3)",
]


def _pg(url: str, statements: list[str], query: str) -> list[tuple[Any, ...]]:
    import psycopg

    schema = f"forms_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        try:
            conn.execute(f"SET search_path = {schema}")
            for s in statements:
                conn.execute(s)
            return sorted(conn.execute(query).fetchall(), key=repr)
        finally:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def test_queries_answer_as_in_postgresql(env: Environment, postgres_url: str) -> None:
    for s in SETUP:
        env.sql(s)
    for q in QUERIES:
        got = sorted((tuple(r.values()) for r in _rows(env.sql(q))), key=repr)
        assert got == _pg(postgres_url, SETUP, q), q
    assert env.runtime.catalog.clusters == ()  # nothing here needed a cluster


def _rows(table: Any) -> list[dict[str, Any]]:
    # columns of one name (x.a, z.a) would collapse in to_pylist
    cols = [table.column(i).to_pylist() for i in range(table.num_columns)]
    return [{str(i): c[r] for i, c in enumerate(cols)} for r in range(table.num_rows)]


def test_drop_table_takes_its_own_indexes_and_refuses_other_dependents(
    env: Environment, postgres_url: str
) -> None:
    import psycopg

    from spate.sql.errors import DependentObjects

    env.sql("CREATE TABLE t (a int, b int)")
    env.sql("CREATE VIEW v AS SELECT a FROM t")
    schema = f"forms_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        try:
            conn.execute(f"SET search_path = {schema}")
            conn.execute("CREATE TABLE t (a int, b int)")
            conn.execute("CREATE VIEW v AS SELECT a FROM t")
            with pytest.raises(psycopg.Error) as pg:
                conn.execute("DROP TABLE t")
        finally:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
    with pytest.raises(DependentObjects) as e:
        env.sql("DROP TABLE t")
    assert e.value.sqlstate == pg.value.diag.sqlstate == "2BP01"
    assert e.value.message == pg.value.diag.message_primary
    assert e.value.detail == pg.value.diag.message_detail
    assert e.value.hint == pg.value.diag.message_hint
    env.sql("DROP VIEW v")
    # an index of the table's own goes with it (no cluster is started for this: the index
    # is only in the catalog until a replica would build it)
    env.create_cluster("c", replicas=0)
    env.sql("CREATE INDEX t_a_idx IN CLUSTER c ON t (a DESC NULLS LAST, b ASC)")
    assert "t_a_idx" in env.names()
    env.sql("DROP TABLE t")
    assert "t" not in env.names() and "t_a_idx" not in env.names()
