"""Double precision arithmetic fails where PostgreSQL's does (22003): an infinity from finite
operands is an overflow, a zero product or quotient of nonzero operands an underflow. Both used
to give ``inf`` or ``0`` silently, so a view could hold values PostgreSQL refuses."""

from __future__ import annotations

import os
import random
import uuid

import pytest

from spate.errors import EvalError
from tests.sql._plan_engine import ReferenceEngine

SPECIAL = ("0", "-0", "1", "-1", "1e308", "-1e308", "1e-308", "5e-324", "'Infinity'", "'NaN'")


def _float(rng: random.Random) -> str:
    if rng.random() < 0.4:
        return rng.choice(SPECIAL)
    return repr(rng.choice([-1, 1]) * 10 ** rng.uniform(-320, 308))


def _postgres(postgres_url: str, query: str) -> tuple[str | None, list[tuple[object, ...]]]:
    import psycopg

    with psycopg.connect(postgres_url, autocommit=True) as conn:
        try:
            return None, conn.execute(query).fetchall()
        except psycopg.Error as e:
            return e.sqlstate, []


def _spate(query: str) -> tuple[str | None, list[tuple[object, ...]]]:
    try:
        return None, [tuple(r) for r in ReferenceEngine().rows(query)]
    except EvalError as e:
        return e.sqlstate, []


def test_double_precision_arithmetic_overflows_and_underflows_as_postgresql_does(
    postgres_url: str,
) -> None:
    seed = int(os.environ.get("SPATE_TEST_SEED", random.randrange(2**32)))
    print(f"seed {seed} (replay with SPATE_TEST_SEED={seed})")
    rng = random.Random(seed)
    fixed = [
        ("1e308", "*", "10"),
        ("1e308", "+", "1e308"),
        ("1e-300", "*", "1e-300"),
        ("1e-300", "/", "1e300"),
        ("1e300", "/", "1e-300"),
        ("'Infinity'", "*", "2"),
        ("1", "/", "'Infinity'"),
        ("0", "*", "1e-300"),
        ("-1e308", "-", "1e308"),
    ]
    cases = fixed + [(_float(rng), rng.choice("+-*/"), _float(rng)) for _ in range(150)]
    schema = f"frange_{uuid.uuid4().hex[:8]}"  # nothing is created; the name only labels
    for a, op, b in cases:
        query = f"SELECT ({a})::float8 {op} ({b})::float8 AS v"
        want, got = _postgres(postgres_url, query), _spate(query)
        if want[0] is None and got[0] is None:
            (w,), (g,) = want[1][0], got[1][0]
            assert (w != w and g != g) or w == g, (schema, query, want, got)
        else:
            assert want[0] == got[0], (query, want, got)


def test_an_overflowing_product_in_a_table_fails_with_its_message() -> None:
    engine = ReferenceEngine()
    engine.sql("CREATE TABLE t (x double precision)")
    engine.sql("INSERT INTO t VALUES (1e200), (2)")
    with pytest.raises(EvalError, match="value out of range: overflow") as caught:
        engine.rows("SELECT x * x FROM t")
    assert caught.value.sqlstate == "22003"
    assert sorted(engine.rows("SELECT x * x FROM t WHERE x < 10")) == [(4.0,)]
