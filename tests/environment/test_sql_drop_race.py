"""A statement planned over an object another session drops before the statement runs fails
as PostgreSQL's statement over a missing table does: 42P01 ``relation "t" does not exist`` (it
was 22023 naming the object's id)."""

from __future__ import annotations

from typing import Any

import pytest

from spate.environment import sql as environment_sql
from spate.environment.api import Environment
from spate.sql.errors import SqlError


def _drop_after_planning(env: Environment, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    plan = environment_sql.plan_statement

    def planned_then_dropped(*args: Any, **kwargs: Any) -> Any:
        stmt = plan(*args, **kwargs)
        env.drop(name)  # another session's DROP TABLE, between planning and running
        return stmt

    monkeypatch.setattr(environment_sql, "plan_statement", planned_then_dropped)


@pytest.mark.parametrize(
    "sql",
    [
        "CREATE VIEW v AS SELECT x FROM race_t",
        "SELECT x + 1 FROM race_t WHERE x > 0 UNION SELECT 2",
    ],
)
def test_a_statement_over_a_table_dropped_meanwhile_is_undefined_table(
    env: Environment, monkeypatch: pytest.MonkeyPatch, postgres_url: str, sql: str
) -> None:
    import psycopg

    env.sql("CREATE TABLE race_t (x bigint)")
    _drop_after_planning(env, monkeypatch, "race_t")
    with pytest.raises(SqlError) as caught:
        env.sql(sql)
    # no race_t there: what PostgreSQL says of a missing table
    with (
        psycopg.connect(postgres_url, autocommit=True) as conn,
        pytest.raises(psycopg.Error) as expected,
    ):
        conn.execute(sql)
    assert caught.value.sqlstate == expected.value.sqlstate == "42P01"
    assert caught.value.message == expected.value.diag.message_primary
    assert "v" not in env.names()
