"""``CREATE TABLE t AS query [WITH [NO] DATA]`` and ``CREATE TABLE IF NOT EXISTS … AS``: the
query's column names and types, its rows at one timestamp, PostgreSQL's command tags and
SQLSTATEs (compared with PostgreSQL where it answers). No replica."""

from __future__ import annotations

import uuid
from decimal import Decimal

import psycopg
import pytest

from spate.environment.api import Environment
from spate.errors import SpateError
from spate.sql import SqlError, parse
from spate.sql.tags import command_tag

SETUP = "CREATE TABLE src (a int NOT NULL, b text); INSERT INTO src VALUES (1, 'x'), (2, 'y')"


def test_create_table_as_copies_rows_names_and_types(env: Environment) -> None:
    s = env.sql_session()
    s.sql(SETUP)
    sql = "CREATE TABLE c AS SELECT a, a * 2 AS twice, b, 'lit' AS l, 1.5 AS n FROM src"
    s.sql(sql)
    assert s.session.tag == "SELECT 2"
    assert s.sql("SELECT * FROM c ORDER BY a").to_pylist() == [
        {"a": 1, "twice": 2, "b": "x", "l": "lit", "n": Decimal("1.5")},
        {"a": 2, "twice": 4, "b": "y", "l": "lit", "n": Decimal("1.5")},
    ]
    columns = s.sql("SHOW COLUMNS FROM c").to_pylist()
    assert [(c["name"], c["nullable"], c["type"]) for c in columns] == [
        ("a", True, "integer"),  # int4 as in the query, and nullable, as PostgreSQL makes it
        ("twice", True, "integer"),
        ("b", True, "text"),
        ("l", True, "text"),
        ("n", True, "numeric(2,1)"),
    ]
    # a table like any other: int4 arithmetic, writes
    with pytest.raises(SqlError) as e:
        s.sql("INSERT INTO c (a) VALUES (3000000000)")
    assert e.value.sqlstate == "22003"
    s.sql("INSERT INTO c (a) VALUES (3)")
    assert s.sql("SELECT count(*) AS n FROM c").to_pylist() == [{"n": 3}]


def test_with_no_data_and_if_not_exists(env: Environment) -> None:
    s = env.sql_session()
    s.sql(SETUP)
    sql = "CREATE TABLE e AS SELECT a, b FROM src WITH NO DATA"
    s.sql(sql)
    assert s.session.tag == "CREATE TABLE AS"
    assert s.sql("SELECT * FROM e").num_rows == 0
    sql = "CREATE TABLE IF NOT EXISTS e AS SELECT 1 AS z"
    s.sql(sql)
    assert s.session.tag == "CREATE TABLE AS"
    assert [n.message for n in s.session.notices] == ['relation "e" already exists, skipping']
    assert s.sql("SHOW COLUMNS FROM e").column("name").to_pylist() == ["a", "b"]
    s.sql("CREATE TABLE f AS SELECT a FROM src WITH DATA")
    assert s.sql("SELECT count(*) AS n FROM f").to_pylist() == [{"n": 2}]


@pytest.mark.parametrize(
    "sql",
    [
        "CREATE TABLE src AS SELECT 1 AS z",  # 42P07
        "CREATE TABLE d AS SELECT a, a FROM src",  # 42701
        "CREATE TABLE d AS SELECT 1 / 0 AS z",  # 22012
        "CREATE TABLE d AS SELECT nope FROM src",  # 42703
    ],
)
def test_refusals_as_postgres(env: Environment, postgres_url: str, sql: str) -> None:
    env.sql(SETUP)
    with pytest.raises(SpateError) as e:  # SqlError, or EvaluationFailed for 22012
        env.sql(sql)
    assert env.runtime.catalog.find("d") is None  # a failing query creates nothing
    schema = f"ctas_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres_url, autocommit=True) as pg:
        pg.execute(f"CREATE SCHEMA {schema}; SET search_path = {schema}")
        try:
            for stmt in SETUP.split(";"):
                pg.execute(stmt)
            with pytest.raises(psycopg.Error) as want:
                pg.execute(sql)
        finally:
            pg.execute(f"DROP SCHEMA {schema} CASCADE")
    assert getattr(e.value, "sqlstate", None) == want.value.sqlstate


def test_command_tags() -> None:
    def tag(sql: str, rows: int | None) -> str:
        return command_tag(parse(sql)[0], rows)

    assert tag('CREATE TABLE "A b" AS SELECT 1', 1) == "SELECT 1"
    assert tag("create table if not exists x as select 1", None) == "CREATE TABLE AS"
    assert tag("CREATE TABLE x (a int)", None) == "CREATE TABLE"
