"""Transaction blocks of several DDL statements, as dbt sends them: one DDL statement first,
then renames, comments and views, carried out at COMMIT with the renames in one catalog commit
(all or none). dbt's view and table models end to end through psycopg (not autocommit, as dbt
runs), the same statements against PostgreSQL compared. No replica."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from spate.environment.api import Environment
from spate.pgwire.environment import EnvironmentEngine
from spate.pgwire.server import ServerConfig, ServerThread
from spate.sql import SqlError

Conn = psycopg.Connection[tuple[Any, ...]]


@pytest.fixture
def spate_conn(env: Environment) -> Iterator[Conn]:
    server = ServerThread(EnvironmentEngine(env), ServerConfig(port=0))
    dsn = f"host=127.0.0.1 port={server.port} user=tester dbname=spate sslmode=disable"
    try:
        with psycopg.connect(dsn) as conn:
            yield conn
    finally:
        server.close()


@pytest.fixture
def pg_conn(postgres_url: str) -> Iterator[Conn]:
    schema = f"dbt_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres_url) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(f"SET search_path = {schema}")
        conn.commit()
        try:
            yield conn
        finally:
            conn.rollback()
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
            conn.commit()


def _exists(conn: Conn, name: str) -> bool:
    found = conn.execute(
        "SELECT c.relname FROM pg_catalog.pg_class c "
        "WHERE c.relname = %s AND pg_catalog.pg_table_is_visible(c.oid)",  # (the shared database)
        (name,),
    ).fetchall()
    conn.commit()
    return bool(found)


def _dbt_view(conn: Conn, model: str, sql: str) -> None:
    """dbt's view materialization: build the intermediate, move the old one out of the way,
    move the new one in, document it, commit; then drop the backup."""
    existing = _exists(conn, model)
    conn.execute(f'CREATE VIEW "{model}__dbt_tmp" AS (\n{sql}\n)')  # psycopg sends BEGIN first
    if existing:
        conn.execute(f'ALTER VIEW "{model}" RENAME TO "{model}__dbt_backup"')
    conn.execute(f'ALTER VIEW "{model}__dbt_tmp" RENAME TO "{model}"')
    conn.execute(f"COMMENT ON VIEW \"{model}\" IS 'the {model} model'")
    conn.commit()
    conn.execute(f'DROP VIEW IF EXISTS "{model}__dbt_backup" CASCADE')
    conn.commit()


def _dbt_table(conn: Conn, model: str, sql: str) -> None:
    existing = _exists(conn, model)
    conn.execute(f'CREATE TABLE "{model}__dbt_tmp" AS (\n{sql}\n)')
    if existing:
        conn.execute(f'ALTER TABLE "{model}" RENAME TO "{model}__dbt_backup"')
    conn.execute(f'ALTER TABLE "{model}__dbt_tmp" RENAME TO "{model}"')
    conn.commit()
    conn.execute(f'DROP TABLE IF EXISTS "{model}__dbt_backup" CASCADE')
    conn.commit()


def _state(conn: Conn) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], list[Any]]:
    view = conn.execute("SELECT * FROM m ORDER BY 1").fetchall()
    table = conn.execute("SELECT * FROM t ORDER BY 1").fetchall()
    comment = conn.execute("SELECT obj_description('m'::regclass, 'pg_class')").fetchall()
    conn.commit()
    return view, table, comment


def test_dbt_runs_as_on_postgres(spate_conn: Conn, pg_conn: Conn) -> None:
    results = []
    for conn in (spate_conn, pg_conn):
        conn.execute("CREATE TABLE src (a int)")
        conn.commit()  # a block does DDL or writes, not both (Materialize's rule)
        conn.execute("INSERT INTO src VALUES (1), (2)")
        conn.commit()
        _dbt_view(conn, "m", "SELECT a FROM src")  # first run: no m yet
        _dbt_table(conn, "t", "SELECT a, a * 10 AS b FROM src")
        first = _state(conn)
        _dbt_view(conn, "m", "SELECT a + 1 AS c FROM src")  # second run: m replaced
        _dbt_table(conn, "t", "SELECT c * 100 AS d FROM m")
        results.append((first, _state(conn)))
        assert not _exists(conn, "m__dbt_backup") and not _exists(conn, "t__dbt_tmp")
    assert results[0] == results[1]
    assert results[0][1] == ([(2,), (3,)], [(200,), (300,)], [("the m model",)])


def test_renames_of_a_block_are_one_commit(env: Environment) -> None:
    s = env.sql_session()
    s.sql("CREATE TABLE src (a int); INSERT INTO src VALUES (1)")
    s.sql("CREATE VIEW a AS SELECT a AS x FROM src; CREATE VIEW b AS SELECT a + 1 AS x FROM src")
    s.sql("BEGIN; ALTER VIEW a RENAME TO tmp; ALTER VIEW b RENAME TO a; ALTER VIEW tmp RENAME TO b")
    assert env.runtime.catalog.find("tmp") is None  # nothing happens before COMMIT
    s.sql("COMMIT")
    assert s.sql("SELECT x FROM a").to_pylist() == [{"x": 2}]
    assert s.sql("SELECT x FROM b").to_pylist() == [{"x": 1}]
    assert s.sql("SHOW CREATE VIEW a").to_pylist()[0]["create_sql"] == (
        "CREATE VIEW a AS SELECT a + 1 AS x FROM src"
    )

    # a statement of the block that fails: COMMIT rolls all of it back
    s.sql("BEGIN; ALTER VIEW a RENAME TO c")
    with pytest.raises(SqlError) as e:
        s.sql("ALTER VIEW b RENAME TO c")
    assert e.value.sqlstate == "42P07"
    s.sql("COMMIT")
    assert sorted(i.name for i in env.runtime.catalog) == ["a", "b", "src"]

    # another session changed a name meanwhile: COMMIT fails, and changes nothing
    s.sql("BEGIN; ALTER VIEW a RENAME TO c; ALTER VIEW b RENAME TO a")
    env.sql_session().sql("ALTER VIEW b RENAME TO d")
    with pytest.raises(SqlError) as e:
        s.sql("COMMIT")
    assert e.value.sqlstate == "40001"
    assert sorted(i.name for i in env.runtime.catalog) == ["a", "d", "src"]


def test_what_a_ddl_block_refuses(env: Environment) -> None:
    s = env.sql_session()
    s.sql("CREATE VIEW a AS SELECT 1 AS x")
    for block, state in (
        ("BEGIN; CREATE TABLE x (a int); CREATE TABLE y (a int)", "25000"),
        ("BEGIN; ALTER VIEW a RENAME TO b; CREATE TABLE y (a int)", "25000"),
        ("BEGIN; ALTER VIEW a RENAME TO b; INSERT INTO y VALUES (1)", "42P01"),
        ("BEGIN; CREATE TABLE x (a int); CREATE VIEW y AS SELECT a FROM x", "0A000"),
    ):
        with pytest.raises(SqlError) as e:
            s.sql(block)
        assert (e.value.sqlstate, block) == (state, block)
        s.sql("ROLLBACK")
    assert sorted(i.name for i in env.runtime.catalog) == ["a"]
    # savepoints restore the block's statements
    s.sql("BEGIN; ALTER VIEW a RENAME TO b; SAVEPOINT p; ALTER VIEW b RENAME TO c")
    s.sql("ROLLBACK TO p; COMMIT")
    assert sorted(i.name for i in env.runtime.catalog) == ["b"]


def test_statements_that_change_nothing_may_precede_the_first(env: Environment) -> None:
    """dbt drops leftovers with ``DROP … IF EXISTS`` in the block that then builds the model."""
    s = env.sql_session()
    s.sql("CREATE TABLE src (a int); INSERT INTO src VALUES (4)")
    s.sql(
        "BEGIN; DROP TABLE IF EXISTS t__dbt_tmp CASCADE; ALTER TABLE IF EXISTS t OWNER TO me;"
        "CREATE TABLE t__dbt_tmp AS SELECT a FROM src; ALTER TABLE t__dbt_tmp RENAME TO t; COMMIT"
    )
    assert s.sql("SELECT a FROM t").to_pylist() == [{"a": 4}]
    with pytest.raises(SqlError) as e:  # a drop that drops something still goes first only
        s.sql("BEGIN; DROP TABLE IF EXISTS t; CREATE TABLE u (a int)")
    assert e.value.sqlstate == "25000"
    s.sql("ROLLBACK")


def test_a_view_of_the_block_reads_an_object_renamed_before_it(env: Environment) -> None:
    s = env.sql_session()
    s.sql("CREATE TABLE t (a int); INSERT INTO t VALUES (5)")
    s.sql("BEGIN; ALTER TABLE t RENAME TO t2; CREATE VIEW v AS SELECT a FROM t2")
    with pytest.raises(SqlError) as e:  # planned against the block's catalog: t is gone
        s.sql("CREATE VIEW w AS SELECT a FROM t")
    assert e.value.sqlstate == "42P01"
    s.sql("ROLLBACK")
    s.sql("BEGIN; ALTER TABLE t RENAME TO t2; CREATE VIEW v AS SELECT a FROM t2; COMMIT")
    assert s.sql("SELECT a FROM v").to_pylist() == [{"a": 5}]
    assert s.sql("SHOW CREATE VIEW v").to_pylist()[0]["create_sql"] == (
        "CREATE VIEW v AS SELECT a FROM t2"
    )
