"""substring with a negative length fails as PostgreSQL's does (22011) instead of giving NULL;
the Spark dialect keeps Spark's empty string."""

from __future__ import annotations

import psycopg
import pytest

from spate.errors import EvalError
from tests.sql._plan_engine import ReferenceEngine

QUERIES = (
    "SELECT substr('hello', 2, 3) AS v",
    "SELECT substr('hello', 2, 0) AS v",
    "SELECT substring('hello' FROM 2 FOR 10) AS v",
    "SELECT substr('hello', 1, -1) AS v",
    "SELECT substring('hello' FROM 3 FOR -2) AS v",
    "SELECT substr('hello', -3, 5) AS v",
)


@pytest.mark.parametrize("query", QUERIES)
def test_substring_lengths_behave_as_in_postgresql(postgres_url: str, query: str) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        try:
            want: tuple[str | None, object] = (None, conn.execute(query).fetchall())
        except psycopg.Error as e:
            want = (e.sqlstate, None)
    try:
        got: tuple[str | None, object] = (None, ReferenceEngine().rows(query))
    except EvalError as e:
        got = (e.sqlstate, None)
    assert got == want


def test_a_negative_length_in_the_spark_dialect_is_an_empty_string() -> None:
    assert ReferenceEngine().rows("SELECT substr('hello', 1, -1) AS v", dialect="spark") == [("",)]
