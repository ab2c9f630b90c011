"""``trunc`` and ``round`` of numbers give PostgreSQL's values, scales and types.

``trunc(d, n)`` stepped half a unit toward zero from zero itself, so ``trunc(0.000, 1)`` was
-0.1 (and values within a unit of zero gave -0.0); ``trunc(d, -n)`` ignored the sign of ``n``;
``trunc(i, n)`` and ``round(i, n)`` of an integer kept the integer where PostgreSQL answers a
numeric of scale ``n``."""

from __future__ import annotations

import os
import random
from decimal import Decimal

from tests.pgwire._pg_scratch import pg_scratch
from tests.sql._plan_engine import ReferenceEngine

CREATE = "CREATE TABLE t (id bigint, d numeric(12,4), i bigint)"
CALLS = (
    "trunc(d)", "trunc(d, 0)", "trunc(d, 1)", "trunc(d, 2)", "trunc(d, 6)", "trunc(d, -1)",
    "trunc(d, -2)", "round(d)", "round(d, 1)", "round(d, -1)", "trunc(i, 2)", "trunc(i, -1)",
    "round(i, 1)", "round(i, -2)", "trunc(i)", "round(i)",
)  # fmt: skip


def _rows(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    rows = []
    for k in range(n):
        if rng.random() < 0.1:
            d = "NULL"
        else:
            digits = rng.choice([1, 2, 3, 5, 8])  # many values within a unit of zero
            d = str(Decimal(rng.randrange(-(10**digits) + 1, 10**digits)).scaleb(-4))
        i = rng.choice(["NULL", "0", str(rng.randrange(-(10**6), 10**6))])
        rows.append(f"({k}, {d}, {i})")
    rows += ["(1000, 0.0000, 0)", "(1001, -0.0700, -7)", "(1002, 0.0400, 15)"]
    return rows


def _text(rows: list[tuple[object, ...]]) -> list[tuple[str, ...]]:
    def show(v: object) -> str:
        return "NULL" if v is None else f"{type(v).__name__}:{v}"

    return sorted(tuple(show(v) for v in r) for r in rows)


def test_trunc_and_round_answer_as_postgresql_does(postgres_url: str) -> None:
    import psycopg

    seed = int(os.environ.get("SPATE_TEST_SEED", random.randrange(2**32)))
    print(f"seed {seed} (replay with SPATE_TEST_SEED={seed})")
    rows = _rows(seed, 80)
    ddl = [CREATE, f"INSERT INTO t VALUES {', '.join(rows)}"]
    query = f"SELECT id, {', '.join(CALLS)} FROM t"
    engine = ReferenceEngine()
    for statement in ddl:
        engine.sql(statement)
    with pg_scratch(ddl, "trunc") as schema, psycopg.connect(postgres_url) as conn:
        conn.execute(f"SET search_path = {schema}")
        expected = conn.execute(query).fetchall()
    assert _text(engine.rows(query)) == _text(expected)
