"""Long flat chains in expressions (a 600-element ``IN`` list, a 2,000-term sum, 2,000 ``AND``
terms, 1,000 nested sums) are evaluated with PostgreSQL's results, not refused for Python's
stack depth; nesting beyond the configured depth is still 54001."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from spate.environment.api import Environment
from spate.errors import SpateError
from spate.plan.evaluation.scalar import compile_scalar
from spate.plan.expr import BinaryFunc, CallBinary, ColumnRef, Literal
from spate.repr.desc import Column
from spate.repr.types import INT64

VALUES = "(VALUES (1), (5), (599), (700), (NULL)) AS v(x)"
IN_LIST = ", ".join(str(i) for i in range(600))
QUERIES = [
    f"SELECT x, x IN ({IN_LIST}) FROM {VALUES}",
    f"SELECT x, x NOT IN ({IN_LIST}, NULL) FROM {VALUES}",
    "SELECT x, " + " + ".join(["x"] * 2000) + f" FROM {VALUES}",
    "SELECT " + " + ".join(map(str, range(2000))),
    "SELECT x, " + " AND ".join(f"x <> {i}" for i in range(2, 2002)) + f" FROM {VALUES}",
    "SELECT x, " + " OR ".join(f"x = {i}" for i in range(700, 100, -1)) + f" FROM {VALUES}",
    "SELECT " + "(1 + " * 1000 + "1" + ")" * 1000,
    "SELECT x, " + "(x - " * 1000 + "1" + ")" * 1000 + f" FROM {VALUES}",
    "SELECT " + "upper(" * 300 + "'a'" + ")" * 300,
]
OVERFLOWS = [  # int4 sums past 2^31: 22003 in both
    "SELECT " + " + ".join(["2000000"] * 2000),
]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Environment]:
    e = Environment.open(Path(tmp_path_factory.mktemp("chains")) / "data")
    try:
        yield e
    finally:
        e.close()


def _rows(table: object) -> list[tuple[object, ...]]:
    import pyarrow as pa

    assert isinstance(table, pa.Table)
    return sorted((tuple(r.values()) for r in table.to_pylist()), key=lambda r: [str(v) for v in r])


@pytest.mark.parametrize("i", range(len(QUERIES)))
def test_long_chains_answer_as_postgresql_does(env: Environment, postgres_url: str, i: int) -> None:
    import psycopg

    sql = QUERIES[i]
    with psycopg.connect(postgres_url, autocommit=True) as c:
        expected = sorted(c.execute(sql).fetchall(), key=lambda r: [str(v) for v in r])
    assert _rows(env.sql(sql)) == expected


@pytest.mark.parametrize("sql", OVERFLOWS)
def test_a_long_chain_fails_as_postgresql_does(
    env: Environment, postgres_url: str, sql: str
) -> None:
    import psycopg

    with psycopg.connect(postgres_url, autocommit=True) as c, pytest.raises(psycopg.Error) as pg:
        c.execute(sql)
    with pytest.raises(SpateError) as ours:
        env.sql(sql)
    assert getattr(ours.value, "sqlstate", None) == pg.value.sqlstate == "22003"


def test_nesting_beyond_the_limit_is_54001(env: Environment) -> None:
    with pytest.raises(SpateError) as e:
        env.sql("SELECT " + "(1 + " * 6000 + "1" + ")" * 6000)
    assert getattr(e.value, "sqlstate", None) == "54001"


def test_a_chain_of_5000_links_compiles_and_evaluates_in_a_loop() -> None:
    expr = ColumnRef(0)
    for i in range(5000):
        expr = CallBinary(BinaryFunc.ADD, expr, Literal(i % 3, INT64))
    f = compile_scalar(expr, [Column("a", INT64, nullable=True)])
    assert f((7,), 0) == 7 + sum(i % 3 for i in range(5000))
    assert f((None,), 0) is None


def test_messages_name_an_expression_over_a_huge_literal_without_printing_it() -> None:
    from spate.plan.evaluation.scalar import SHOWN_CHARS, shown
    from spate.plan.expr import CallUnary, UnaryFunc
    from spate.repr.types import TEXT

    huge = CallUnary(UnaryFunc.LENGTH, Literal("x" * 1_000_000, TEXT))
    assert shown(huge, []) == "(an expression over a literal of 1000000 characters)"
    long_sum = ColumnRef(0)
    for _ in range(200):
        long_sum = CallBinary(BinaryFunc.ADD, long_sum, Literal(1, INT64))
    text = shown(long_sum, ["a"])
    assert len(text) == SHOWN_CHARS and text.endswith("…")
