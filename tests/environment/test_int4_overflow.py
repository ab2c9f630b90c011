"""``integer`` and ``smallint`` arithmetic overflows at 32 and 16 bits as in PostgreSQL
(22003 "integer out of range" / "smallint out of range"); it used to be 64-bit, so
``2147483647::int + 1`` was 2147483648. PostgreSQL is the oracle for the reads; a maintained
view keeps the overflowing rows as errors until they are deleted (a real replica runs it)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from spate.environment.api import Environment
from spate.errors import EvaluationFailed

QUERIES = [
    "SELECT 2147483647::int + 1",
    "SELECT 2147483646::int + 1",
    "SELECT -2147483647::int - 2",
    "SELECT 46341 * 46341",
    "SELECT 46340 * 46340",
    "SELECT (-2147483647 - 1) / -1",
    "SELECT (-2147483647 - 1) % -1",
    "SELECT abs(-2147483647 - 1)",
    "SELECT 32767::int2 + 1::int2",
    "SELECT 32767::int2 + 1",
    "SELECT -(-32767::int2 - 1::int2)",
    "SELECT 100::int2 * 400::int2",
    "SELECT 3000000000::bigint::int",
    "SELECT 40000::int::int2",
    "SELECT 3e9::int",
    "SELECT 2147483647.4::int",
    "SELECT 32767.5::int2",
    "SELECT 1e10::float8::int",
    "SELECT x::int + 1 FROM {t}",
    "SELECT x::int * 2 FROM {t}",
    "SELECT -x::int FROM {t}",
    "SELECT y::int2 + y::int2 FROM {t}",
    "SELECT y::int2 + 1 FROM {t}",
    "SELECT x::int / 2 FROM {t}",
    "SELECT x::int % 7 FROM {t}",
    "SELECT (x - 10)::int + 10 FROM {t}",
]


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Environment]:
    with Environment.open(tmp_path / "data") as e:
        yield e


def _outcome(run: object) -> object:
    try:
        return ("rows", sorted(run(), key=repr))  # type: ignore[operator]
    except Exception as e:
        return ("error", getattr(e, "sqlstate", type(e).__name__))


def test_narrow_integer_arithmetic_overflows_as_postgresql(
    env: Environment, postgres_url: str
) -> None:
    import psycopg

    t = f"narrow_{uuid.uuid4().hex[:8]}"
    env.sql(f"CREATE TABLE {t} (x bigint, y bigint)")
    env.sql(f"INSERT INTO {t} VALUES (2147483647, 16384), (-5, 3), (NULL, NULL)")
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {t} (x bigint, y bigint)")
        try:
            conn.execute(f"INSERT INTO {t} VALUES (2147483647, 16384), (-5, 3), (NULL, NULL)")
            for q in QUERIES:
                sql = q.format(t=t)
                want = _outcome(lambda sql=sql: [tuple(r) for r in conn.execute(sql).fetchall()])
                got = _outcome(
                    lambda sql=sql: [tuple(r.values()) for r in env.sql(sql).to_pylist()]
                )
                assert got == want, sql
        finally:
            conn.execute(f"DROP TABLE {t}")
    assert _outcome(lambda: env.sql("SELECT 2147483647::int + 1")) == ("error", "22003")


@pytest.mark.integration
@pytest.mark.timeout(900)
def test_view_keeps_integer_overflow_as_error_until_deleted(env: Environment) -> None:
    env.sql("CREATE CLUSTER c (REPLICAS (r1))")
    env.sql("CREATE TABLE t (k bigint, x bigint)")
    env.sql("INSERT INTO t VALUES (1, 5), (2, 7)")
    env.sql("CREATE MATERIALIZED VIEW v IN CLUSTER c AS SELECT k, x::int * 1000 AS y FROM t")
    env.sql("SET cluster = c")
    assert sorted(env.sql("SELECT * FROM v").to_pylist(), key=repr) == [
        {"k": 1, "y": 5000},
        {"k": 2, "y": 7000},
    ]
    env.sql("INSERT INTO t VALUES (3, 3000000)")  # 3e9 does not fit an integer
    with pytest.raises(EvaluationFailed) as caught:
        env.sql("SELECT * FROM v")
    assert caught.value.sqlstate == "22003"
    assert "integer out of range" in str(caught.value) and "k=3" in str(caught.value)
    env.sql("DELETE FROM t WHERE k = 3")
    assert sorted(env.sql("SELECT * FROM v").to_pylist(), key=repr) == [
        {"k": 1, "y": 5000},
        {"k": 2, "y": 7000},
    ]
