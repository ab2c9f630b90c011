"""``CAST`` in the Spark dialect is Spark 4's (ANSI mode, its default): a value that does not
convert fails the statement; ``TRY_CAST`` gives NULL. Spark itself is the oracle: the same texts
in the test's SparkSession either fail or give the same rows."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from spate.errors import EvalError
from spate.sql.errors import SqlError
from tests.sql._plan_engine import ReferenceEngine

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

CASES = (
    ("SELECT CAST('a' AS INT) AS v", None),
    ("SELECT CAST('1.5' AS INT) AS v", None),
    ("SELECT CAST(' 7 ' AS INT) AS v", [(7,)]),
    ("SELECT CAST('12' AS BIGINT) AS v", [(12,)]),
    ("SELECT CAST('x' AS DOUBLE) AS v", None),
    ("SELECT TRY_CAST('a' AS INT) AS v", [(None,)]),
    ("SELECT TRY_CAST('12' AS INT) AS v", [(12,)]),
    ("SELECT CAST(v AS INT) AS v FROM VALUES ('3'), ('b') AS t(v)", None),
    ("SELECT TRY_CAST(v AS INT) AS v FROM VALUES ('3'), ('b') AS t(v)", [(3,), (None,)]),
)


def _spate(text: str) -> list[tuple[object, ...]] | str:
    """The rows, or the SQLSTATE of the statement's failure (planning a constant cast, or
    evaluating a column's)."""
    try:
        return sorted(ReferenceEngine().rows(text, dialect="spark"), key=repr)
    except (EvalError, SqlError) as e:
        return e.sqlstate


@pytest.mark.parametrize(("text", "want"), CASES)
def test_spark_cast_fails_where_spark_fails(text: str, want: object) -> None:
    assert _spate(text) == ("22P02" if want is None else want)


@pytest.mark.parametrize(("text", "want"), CASES)
def test_the_cases_are_what_spark_answers(spark: SparkSession, text: str, want: object) -> None:
    try:
        got: object = sorted((tuple(r) for r in spark.sql(text).collect()), key=repr)
    except Exception as e:  # Spark's own error: the cast is refused
        got = "CAST_INVALID_INPUT" if "CAST_INVALID_INPUT" in str(e) else e
    assert got == ("CAST_INVALID_INPUT" if want is None else want)
