"""A float assigned to a numeric column by INSERT … SELECT or UPDATE: NaN and infinities are
refused naming the column (spate's numeric has no such values; PostgreSQL keeps NaN and
refuses infinities), a value beyond the column's precision fails with 22003 as in PostgreSQL;
each used to be stored as NULL without a word. The table is left unchanged."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from spate.environment.api import Environment
from spate.errors import SpateError


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Environment]:
    with Environment.open(tmp_path / "data") as e:
        e.sql("CREATE TABLE n (k bigint, d numeric(10,2), f double precision)")
        e.sql("INSERT INTO n VALUES (1, 1.5, 'NaN'), (2, 2, 'Infinity'), (3, 3, 1e20)")
        yield e


@pytest.mark.parametrize(
    ("statement", "sqlstate", "words"),
    [
        ("INSERT INTO n SELECT k, f, f FROM n WHERE k = 1", "0A000", 'column "d"'),
        ("INSERT INTO n SELECT k, f, f FROM n WHERE k = 2", "22003", 'column "d"'),
        ("INSERT INTO n SELECT k, f, f FROM n WHERE k = 3", "22003", "numeric field overflow"),
        ("UPDATE n SET d = f WHERE k = 1", "0A000", "NaN"),
        ("UPDATE n SET d = -f WHERE k = 2", "22003", "infinite"),
    ],
)
def test_float_into_numeric_column_fails_instead_of_null(
    env: Environment, statement: str, sqlstate: str, words: str
) -> None:
    before = sorted(env.sql("SELECT k, d FROM n").to_pylist(), key=repr)
    with pytest.raises(SpateError) as caught:
        env.sql(statement)
    assert getattr(caught.value, "sqlstate", None) == sqlstate
    assert words in str(caught.value)
    assert sorted(env.sql("SELECT k, d FROM n").to_pylist(), key=repr) == before


def test_finite_float_into_numeric_column_is_rounded(env: Environment) -> None:
    env.sql("INSERT INTO n SELECT 4, 12.345::float8, 0")
    env.sql("UPDATE n SET d = 0.125::float8 WHERE k = 3")
    got = sorted(env.sql("SELECT k, d FROM n WHERE k >= 3").to_pylist(), key=repr)
    assert got == [{"k": 3, "d": Decimal("0.13")}, {"k": 4, "d": Decimal("12.35")}]
