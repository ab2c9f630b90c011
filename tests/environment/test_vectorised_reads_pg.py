"""Reads the vectorised evaluator answers, against PostgreSQL: random small tables (NULLs,
texts whose order is by code point), random SELECTs with filters, arithmetic, joins,
aggregates, DISTINCT and subqueries, run in an environment without clusters (every read is
evaluated here) and in PostgreSQL; the same rows, and most of them answered column at a time."""

from __future__ import annotations

import os
import random
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest

from spate.environment import small_reads
from spate.environment.api import Environment

_TEXTS = ["", "a", "B", "b", "ab", "é", "Z", "a b", "zz"]


def _value(rng: random.Random, nullable: bool) -> str:
    if nullable and rng.random() < 0.15:
        return "NULL"
    return str(rng.randint(-20, 20))


def _text(rng: random.Random) -> str:
    if rng.random() < 0.15:
        return "NULL"
    return "'" + rng.choice(_TEXTS) + "'"


def _schema(rng: random.Random) -> list[str]:
    t = [
        f"({_value(rng, True)}, {_value(rng, False)}, {_text(rng)})"
        for _ in range(rng.randint(1, 60))
    ]
    u = [f"({_value(rng, True)}, {_text(rng)})" for _ in range(rng.randint(1, 30))]
    return [
        "CREATE TABLE t (a bigint, b bigint NOT NULL, s text)",
        "CREATE TABLE u (k bigint, w text)",
        f"INSERT INTO t VALUES {', '.join(t)}",
        f"INSERT INTO u VALUES {', '.join(u)}",
    ]


def _queries(rng: random.Random) -> list[str]:
    def n() -> int:
        return rng.randint(-15, 15)

    def op() -> str:
        return rng.choice(["=", "<>", "<", "<=", ">", ">="])

    def txt() -> str:
        return "'" + rng.choice(_TEXTS) + "'"

    return [
        "SELECT * FROM t",
        f"SELECT a, b FROM t WHERE a {op()} {n()} AND s {op()} {txt()}",
        f"SELECT a, b * 2 + a, -b FROM t WHERE s IS NULL OR a {op()} {n()}",
        f"SELECT s FROM t WHERE NOT (b {op()} {n()}) OR a IS NULL",
        "SELECT a, count(*), sum(b), min(s), max(s), count(a) FROM t GROUP BY a",
        "SELECT s, avg(b), sum(a), min(a), max(b) FROM t GROUP BY s",
        "SELECT count(*), sum(b), avg(a) FROM t",
        f"SELECT t.a, t.s, u.w FROM t JOIN u ON t.a = u.k WHERE t.b {op()} {n()}",
        "SELECT t.b, u.k FROM t JOIN u ON t.s = u.w",
        "SELECT DISTINCT s FROM t",
        "SELECT DISTINCT a, s FROM t WHERE b > 0",
        "SELECT s FROM t WHERE s IN (SELECT w FROM u)",
        "SELECT a FROM t WHERE a NOT IN (SELECT k FROM u WHERE k IS NOT NULL)",
        f"SELECT count(*) FROM t WHERE b {op()} (SELECT avg(k) FROM u)",
        "SELECT u.w, count(*) FROM t JOIN u ON t.a = u.k GROUP BY u.w",
        f"SELECT coalesce(a, {n()}), b FROM t WHERE coalesce(a, b) {op()} {n()}",
        "SELECT a, b, s FROM t ORDER BY s DESC NULLS LAST, a, b",
        f"SELECT s, a FROM t ORDER BY a NULLS FIRST, s DESC LIMIT {rng.randint(0, 9)} OFFSET 2",
        "SELECT a, count(*) FROM t GROUP BY a ORDER BY 2 DESC, 1",
    ]


def _normal(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """Decimals to 10 places: spate's avg has 16 (numeric(38,16)), PostgreSQL's 20 here."""
    return tuple(v.quantize(Decimal("1e-10")) if isinstance(v, Decimal) else v for v in row)


@pytest.fixture
def pg(postgres_url: str) -> Iterator[psycopg.Connection[Any]]:
    schema = f"vr_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(f"SET search_path = {schema}")
        try:
            yield conn
        finally:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def test_vectorised_reads_agree_with_postgres(
    tmp_path: Path, pg: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    seed = int(os.environ.get("SPATE_TEST_SEED", random.randrange(2**32)))
    print(f"seed {seed}")
    rng = random.Random(seed)
    answered: list[bool] = []
    real = small_reads.evaluate_arrow

    def counting(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        answered.append(True)
        return out

    monkeypatch.setattr(small_reads, "evaluate_arrow", counting)
    collation = pg.execute(
        "SELECT datcollate FROM pg_database WHERE datname = current_database()"
    ).fetchone()
    # text ORDER BY compared only where PostgreSQL orders text by code point, as spate does
    code_point_order = collation is not None and collation[0] in ("C", "POSIX", "C.UTF-8", "C.utf8")
    for round in range(3):
        with Environment.open(tmp_path / f"data{round}") as env:
            pg.execute("DROP TABLE IF EXISTS t, u")
            for stmt in _schema(rng):
                env.sql(stmt)
                pg.execute(stmt)
            for sql in _queries(rng):
                if "ORDER BY" in sql and not code_point_order:
                    continue
                got = env.sql(sql)
                assert got is not None and not isinstance(got, int)
                ordered = "ORDER BY" in sql  # rows in order (total: ties are equal rows)
                mine = [
                    _normal(r) for r in zip(*(c.to_pylist() for c in got.columns), strict=False)
                ]
                theirs = [_normal(r) for r in pg.execute(sql).fetchall()]
                if not ordered:
                    mine, theirs = sorted(mine, key=repr), sorted(theirs, key=repr)
                assert mine == theirs, f"seed {seed}: {sql}"
    assert len(answered) >= 30  # of 57 reads: most went column at a time


def test_explain_says_which_reads_go_column_at_a_time(env: Environment) -> None:
    env.sql("CREATE TABLE t (a bigint, b bigint NOT NULL, s text); CREATE TABLE f (x float8)")

    def plan(sql: str) -> list[str]:
        return [str(r["Optimized Plan"]) for r in env.sql(f"EXPLAIN {sql}").to_pylist()]

    columnar = "column at a time"
    assert any(columnar in line for line in plan("SELECT a, count(*) FROM t GROUP BY a"))
    assert any(columnar in line for line in plan("SELECT a FROM t WHERE s < 'b'"))
    assert not any(columnar in line for line in plan("SELECT a / 2 FROM t"))  # division
    assert not any(columnar in line for line in plan("SELECT x FROM f WHERE x < 1"))  # floats


def test_a_plan_read_again_is_compiled_once() -> None:
    from spate.ids import GlobalId
    from spate.plan.builder import col
    from spate.plan.relation import Get
    from spate.repr.desc import RelationDesc
    from spate.repr.types import INT64

    desc = RelationDesc.of(("a", INT64, True))

    def plan() -> Any:  # planned anew each time, as a statement is
        return Get(GlobalId.user(7), desc).filter(col("a") < 3)

    first = small_reads.vectorised(plan())
    assert first is not None
    assert small_reads.vectorised(plan()) is first
    other = Get(GlobalId.user(7), desc).filter(col("a") < 4)
    assert small_reads.vectorised(other) is not first
