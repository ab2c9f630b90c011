"""Deeply nested statements plan at PostgreSQL's depths, or fail with 54001, never as an
internal error (the parser and the planner recurse)."""

from __future__ import annotations

import sys

import pytest

from spate.sql import MemoryCatalog, plan_statements
from spate.sql.depth import MAX_NESTING
from spate.sql.errors import SqlError


def _plan(sql: str) -> None:
    plan_statements(sql, MemoryCatalog())


@pytest.mark.parametrize(
    "sql",
    [
        pytest.param("SELECT " + "(" * 49 + "1" + ")" * 49, id="49 parentheses"),
        pytest.param("SELECT " + "(" * 5000 + "1" + ")" * 5000, id="5000 parentheses"),
        pytest.param("SELECT " + "(1 + " * 1000 + "1" + ")" * 1000, id="1000 nested sums"),
        pytest.param(
            "SELECT 1 WHERE 1 IN (" + ", ".join(map(str, range(600))) + ")", id="IN of 600"
        ),
        pytest.param("SELECT " + " + ".join(map(str, range(2000))), id="2000 terms"),
    ],
)
def test_deep_statements_plan(sql: str) -> None:
    limit = sys.getrecursionlimit()
    _plan(sql)
    assert sys.getrecursionlimit() == limit  # raised only while the deep run lasted


def test_beyond_the_nesting_limit_is_54001_with_a_position() -> None:
    sql = "SELECT " + "(" * (MAX_NESTING + 1) + "1" + ")" * (MAX_NESTING + 1)
    with pytest.raises(SqlError) as e:
        _plan(sql)
    assert e.value.sqlstate == "54001"
    assert e.value.position == len("SELECT ") + MAX_NESTING + 1
    assert "statement too complex" in str(e.value)


def test_too_deep_for_the_deep_stack_is_54001(monkeypatch: pytest.MonkeyPatch) -> None:
    from spate.sql import depth

    monkeypatch.setattr(depth, "DEEP_FRAMES", 1500)
    limit = sys.getrecursionlimit()
    with pytest.raises(SqlError) as e:
        _plan("SELECT " + "(" * 2000 + "1" + ")" * 2000)
    assert e.value.sqlstate == "54001"
    assert sys.getrecursionlimit() == limit
