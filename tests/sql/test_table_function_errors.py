"""generate_series with step 0 fails as PostgreSQL's does (22023), row by row, so that a view
keeps such a row in its error collection; with a NULL argument it gives no rows, as
PostgreSQL's strict function does. (It used to give no rows.)"""

from __future__ import annotations

import uuid

import pytest

from spate.errors import EvalError
from tests.sql._plan_engine import ReferenceEngine

CREATE = "CREATE TABLE t (a bigint, b bigint, s bigint)"
QUERY = "SELECT a, g FROM t, generate_series(a, b, s) AS g"


def _postgres(postgres_url: str, rows: str) -> tuple[str | None, list[tuple[object, ...]]]:
    import psycopg

    schema = f"gs_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        try:
            conn.execute(f"SET search_path = {schema}")
            conn.execute(CREATE)
            conn.execute(f"INSERT INTO t VALUES {rows}")
            try:
                return None, sorted(conn.execute(QUERY).fetchall(), key=repr)
            except psycopg.Error as e:
                return e.sqlstate, []
        finally:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def test_generate_series_with_step_zero_fails_as_postgresql_does(postgres_url: str) -> None:
    engine = ReferenceEngine()
    engine.sql(CREATE)
    good = "(1, 3, 1), (1, NULL, 0), (NULL, 3, 0)"  # NULL arguments with step 0: no rows
    engine.sql(f"INSERT INTO t VALUES {good}")
    assert _postgres(postgres_url, good) == (None, sorted(engine.rows(QUERY), key=repr))
    engine.sql("INSERT INTO t VALUES (2, 5, 0)")
    wanted, _ = _postgres(postgres_url, f"{good}, (2, 5, 0)")
    assert wanted == "22023"
    with pytest.raises(EvalError, match="step size cannot equal zero") as caught:
        engine.rows(QUERY)
    assert caught.value.sqlstate == wanted
