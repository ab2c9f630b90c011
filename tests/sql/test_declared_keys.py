"""The planner uses the keys declared in CREATE TABLE (spate.plan.keys): a DISTINCT or a
GROUP BY over columns that hold a PRIMARY KEY, or a UNIQUE key on NOT NULL columns, is
dropped from the plan (EXPLAIN shows it gone), through projections, filters and joins, its
aggregates computed from each group's one row; one over a nullable UNIQUE key or over
non-key columns stays, and so does an avg of numeric (PostgreSQL's avg of an integer). The answers are compared
with PostgreSQL's on seeded random data (the reference evaluator runs the simplified plans)."""

from __future__ import annotations

import random
import uuid
from collections import Counter
from collections.abc import Iterator

import psycopg
import pytest

from spate.plan.relation import Distinct, Reduce, RelationExpr
from spate.sql import parse, plan_statement
from spate.sql import statements as st
from tests.sql._plan_engine import ReferenceEngine

TABLES = (
    "CREATE TABLE {s}.t (k int PRIMARY KEY, v text, u int UNIQUE, w int NOT NULL UNIQUE)",
    "CREATE TABLE {s}.p (a int, b int, c text, PRIMARY KEY (a, b))",
)

DROPPED = [
    "SELECT DISTINCT k, v FROM t",
    "SELECT DISTINCT v, k FROM t WHERE v <> 'x'",
    "SELECT DISTINCT w, v FROM t",
    "SELECT DISTINCT k + 1 AS k1, k FROM t",
    "SELECT k, v FROM t GROUP BY k, v",
    "SELECT a, b, c FROM p GROUP BY a, b, c",
    "SELECT DISTINCT x.k, y.k FROM t x JOIN t y ON x.v = y.v",
    "SELECT DISTINCT x.k, y.v FROM t x JOIN t y ON x.k = y.k",
    "SELECT DISTINCT p.a, p.b, t.v FROM p JOIN t ON p.a = t.k",
    "SELECT DISTINCT a, b FROM (SELECT a, b, c FROM p WHERE c IS NOT NULL) s",
    "SELECT k, count(*), count(v), count(DISTINCT u), min(v), max(u), sum(u), sum(w) FROM t"
    " GROUP BY k",
    "SELECT w, v, string_agg(v, ','), bool_and(u > 45), bool_or(u IS NULL) FROM t GROUP BY w, v",
    "SELECT a, b, max(c), count(c), sum(a * 2.5), avg(b * 1.5::float8) FROM p GROUP BY a, b",
    "SELECT x.k, y.k, count(*), sum(y.w) FROM t x JOIN t y ON x.v = y.v GROUP BY x.k, y.k",
    "SELECT k, sum(u) + 1 AS s FROM t GROUP BY k HAVING count(v) = 1",
]
KEPT = [
    "SELECT DISTINCT v FROM t",
    "SELECT DISTINCT u, v FROM t",
    "SELECT DISTINCT a FROM p",
    "SELECT a, c FROM p GROUP BY a, c",
    "SELECT DISTINCT x.k FROM t x JOIN t y ON x.v = y.v",
    "SELECT DISTINCT p.a, t.v FROM p JOIN t ON p.b = t.k",
    "SELECT v, count(*), sum(w) FROM t GROUP BY v",
    "SELECT u, count(*) FROM t GROUP BY u",
    "SELECT k, avg(u) FROM t GROUP BY k",
    "SELECT a, count(*), min(c) FROM p GROUP BY a",
]


def _plan(engine: ReferenceEngine, query: str) -> RelationExpr:
    (parsed,) = parse(query)
    stmt = plan_statement(parsed, engine.catalog)
    assert isinstance(stmt, st.Select)
    return stmt.plan


def _has(plan: RelationExpr, kind: type) -> bool:
    return any(isinstance(n, kind) for n in plan.walk())


@pytest.fixture
def engine() -> ReferenceEngine:
    e = ReferenceEngine()
    for ddl in TABLES:
        e.sql(ddl.format(s="public").replace("public.", ""))
    return e


@pytest.mark.parametrize("query", DROPPED)
def test_key_makes_the_operator_free(engine: ReferenceEngine, query: str) -> None:
    plan = _plan(engine, query)
    assert not _has(plan, Distinct) and not _has(plan, Reduce), plan.explain()
    explained = engine.rows(f"EXPLAIN {query}")
    assert not any("Distinct" in r[0] or "Reduce" in r[0] for r in explained)


@pytest.mark.parametrize("query", KEPT)
def test_without_a_key_the_operator_stays(engine: ReferenceEngine, query: str) -> None:
    plan = _plan(engine, query)
    assert _has(plan, Distinct) or _has(plan, Reduce), plan.explain()


def test_a_unique_index_key_is_not_relied_on() -> None:
    """A CREATE UNIQUE INDEX's constraint can be dropped with the index (and did not hold
    for the table's earlier history): only CREATE TABLE's keys count."""
    e = ReferenceEngine()
    e.sql("CREATE TABLE q (k int NOT NULL, v text)")
    assert _has(_plan(e, "SELECT DISTINCT k, v FROM q"), Distinct)


@pytest.fixture
def pg(postgres_url: str) -> Iterator[tuple[psycopg.Connection[tuple[object, ...]], str]]:
    schema = f"keys_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        try:
            yield conn, schema
        finally:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def test_answers_equal_postgresql(
    engine: ReferenceEngine,
    pg: tuple[psycopg.Connection[tuple[object, ...]], str],
    seed: int,
) -> None:
    conn, schema = pg
    for ddl in TABLES:
        conn.execute(ddl.format(s=schema))
    rng = random.Random(seed)
    texts = [None, "x", "y", "z"]
    keys = rng.sample(range(30), 12)
    ws = rng.sample(range(100), 12)
    us = [rng.choice([None, *range(40, 60)]) for _ in keys]
    seen_u: set[object] = set()
    t_rows = []
    for k, w, u in zip(keys, ws, us, strict=True):
        if u is not None and u in seen_u:
            u = None
        seen_u.add(u)
        t_rows.append((k, rng.choice(texts), u, w))
    p_rows = {(rng.randrange(6), rng.randrange(4)): rng.choice(texts) for _ in range(15)}
    inserts = [
        ("t", "(k, v, u, w)", t_rows),
        ("p", "(a, b, c)", [(a, b, c) for (a, b), c in p_rows.items()]),
    ]
    for table, cols, rows in inserts:
        for row in rows:
            values = ", ".join("NULL" if x is None else repr(x) for x in row)
            engine.sql(f"INSERT INTO {table} {cols} VALUES ({values})")
            conn.execute(f"INSERT INTO {schema}.{table} {cols} VALUES ({values})")
    conn.execute(f"SET search_path TO {schema}")
    for query in DROPPED + KEPT:
        want = Counter(tuple(r) for r in conn.execute(query).fetchall())
        assert engine.bag(query) == want, (seed, query)


TEXTS = ("NULL", "'x'", "'y'")
MAINTAINED = (
    "SELECT k, count(*) AS n, count(v) AS nv, sum(u) AS s, min(v) AS lo, max(w) AS hi"
    " FROM t GROUP BY k"
)


def test_a_maintained_group_by_a_key_answers_as_postgresql(
    tmp_path_factory: pytest.TempPathFactory,
    pg: tuple[psycopg.Connection[tuple[object, ...]], str],
    seed: int,
) -> None:
    """The GROUP BY of a primary key made a Map, as a materialized view with an index (kept by
    the replica's dataflow) under random inserts, updates and deletes: after each round it
    holds PostgreSQL's answer to its query."""
    from spate.environment.api import Environment

    conn, schema = pg
    ddl = TABLES[0]
    conn.execute(ddl.format(s=schema))
    conn.execute(f"SET search_path TO {schema}")
    rng = random.Random(seed)
    with Environment.open(tmp_path_factory.mktemp("keys") / "data") as env:
        env.sql(ddl.replace("{s}.", ""))
        env.sql(f"CREATE MATERIALIZED VIEW m AS {MAINTAINED}")
        env.sql("CREATE INDEX m_k ON m (k)")
        plan = env.sql(f"EXPLAIN {MAINTAINED}").column(0).to_pylist()
        assert not any("Reduce" in line for line in plan), plan
        present: set[int] = set()
        for _ in range(3):
            keys = rng.sample(range(20), 8)
            gone = [k for k in keys if k in present and rng.random() < 0.4]
            changed = [k for k in keys if k in present and k not in gone]
            new = [k for k in keys if k not in present]
            rows = [
                f"({k}, {rng.choice(TEXTS)},"
                f" {rng.choice(['NULL', str(k + 100)])}, {rng.randrange(1000) * 100 + k})"
                for k in new
            ]  # w unique: k + a multiple of 100, and updates add 100000
            statements = [
                f"DELETE FROM t WHERE k IN ({', '.join(map(str, gone))})" if gone else "",
                f"UPDATE t SET v = 'z', u = NULL, w = w + 100000 WHERE k IN"
                f" ({', '.join(map(str, changed))})"
                if changed
                else "",
                f"INSERT INTO t VALUES {', '.join(rows)}" if rows else "",
            ]
            present = (present - set(gone)) | set(new)
            for sql in filter(None, statements):
                env.sql(sql)
                conn.execute(sql)
            want = Counter(tuple(r) for r in conn.execute(MAINTAINED).fetchall())
            got = Counter(tuple(r.values()) for r in env.sql("SELECT * FROM m").to_pylist())
            assert got == want, (seed, statements)
