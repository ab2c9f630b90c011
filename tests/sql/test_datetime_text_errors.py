"""A text that does not convert to a date or timestamp fails with PostgreSQL's SQLSTATE: 22008
where it is shaped as a date (and time) with a field out of range, 22007 where it is not a date
at all. Both used to be 22P02."""

from __future__ import annotations

import psycopg
import pytest

from spate.errors import EvalError
from spate.sql.errors import SqlError
from tests.sql._plan_engine import ReferenceEngine

CASTS = (
    "'abc'::date",
    "'2020-13-01'::date",
    "'2020-02-30'::date",
    "'2020-00-10'::date",
    "'2020/13/01'::date",
    "'2020-1-1x'::date",
    "''::date",
    "'2020-01-01 25:00'::timestamp",
    "'2020-01-01 10:61:00'::timestamp",
    "'2020-01-32 00:00:00'::timestamp",
    "'noon'::timestamp",
    "'2021-02-28'::date",
)


def _sqlstate_or_rows(run: object, query: str) -> tuple[str | None, object]:
    try:
        return None, run(query)  # type: ignore[operator]
    except (psycopg.Error, EvalError, SqlError) as e:
        return e.sqlstate, None


@pytest.mark.parametrize("cast", CASTS)
def test_a_bad_date_text_fails_with_postgresqls_sqlstate(postgres_url: str, cast: str) -> None:
    query = f"SELECT {cast} AS v"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        want = _sqlstate_or_rows(lambda q: conn.execute(q).fetchall(), query)
    got = _sqlstate_or_rows(ReferenceEngine().rows, query)
    assert got == want


def test_a_bad_date_in_a_column_fails_row_by_row() -> None:
    engine = ReferenceEngine()
    engine.sql("CREATE TABLE t (s text)")
    engine.sql("INSERT INTO t VALUES ('2020-01-01'), ('2020-13-01')")
    with pytest.raises(EvalError) as caught:
        engine.rows("SELECT s::date FROM t")
    assert caught.value.sqlstate == "22008"
    engine.sql("INSERT INTO t VALUES ('soon')")
    with pytest.raises(EvalError) as caught:
        engine.rows("SELECT s::date FROM t WHERE s <> '2020-13-01'")
    assert caught.value.sqlstate == "22007"
