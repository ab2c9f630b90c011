"""``COMMENT ON {TABLE|VIEW|MATERIALIZED VIEW|INDEX|COLUMN} … IS '…' | NULL``: kept in the
catalog (across a reopen, through a rename), dropped with the object, read back over the wire
with ``obj_description`` and ``col_description``; refusals with PostgreSQL's SQLSTATEs
(compared with PostgreSQL). No replica."""

from __future__ import annotations

import uuid
from pathlib import Path

import psycopg
import pytest

from spate.environment.api import Environment
from spate.pgwire.environment import EnvironmentEngine
from spate.pgwire.server import ServerConfig, ServerThread
from spate.sql import SqlError

SETUP = ("CREATE TABLE t (a int, b text)", "CREATE VIEW v AS SELECT a FROM t")
REFUSED = (
    "COMMENT ON VIEW t IS 'x'",  # 42809
    "COMMENT ON TABLE v IS 'x'",  # 42809
    "COMMENT ON INDEX v IS 'x'",  # 42809
    "COMMENT ON TABLE nope IS 'x'",  # 42P01
    "COMMENT ON COLUMN t.z IS 'x'",  # 42703
    "COMMENT ON COLUMN nope.z IS 'x'",  # 42P01
)


def _comments(env: Environment) -> dict[tuple[str, int | None], str]:
    state = env.runtime.catalog
    return {(state.by_id(c.id).name, c.column): c.text for c in state.comments}


def test_comments_are_durable_follow_renames_and_go_with_the_object(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Environment.open(data) as env:
        for sql in SETUP:
            env.sql(sql)
        env.sql("COMMENT ON TABLE t IS 'the table'; COMMENT ON COLUMN t.b IS 'bee'")
        env.sql("COMMENT ON VIEW v IS 'a view'; COMMENT ON COLUMN public.v.a IS 'ay'")
        env.sql("COMMENT ON TABLE t IS 'it''s the table'")  # replaces
        env.sql("ALTER TABLE t RENAME TO t2")
    with Environment.open(data) as env:
        assert _comments(env) == {
            ("t2", None): "it's the table",
            ("t2", 1): "bee",
            ("v", None): "a view",
            ("v", 0): "ay",
        }
        env.sql("COMMENT ON COLUMN t2.b IS NULL")
        env.sql("DROP VIEW v")
        assert _comments(env) == {("t2", None): "it's the table"}
        env.sql("DROP TABLE t2; CREATE TABLE t2 (a int)")
        assert _comments(env) == {}


@pytest.mark.parametrize("sql", REFUSED)
def test_refusals_as_postgres(env: Environment, postgres_url: str, sql: str) -> None:
    for s in SETUP:
        env.sql(s)
    with pytest.raises(SqlError) as e:
        env.sql(sql)
    schema = f"comment_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres_url, autocommit=True) as pg:
        pg.execute(f"CREATE SCHEMA {schema}; SET search_path = {schema}")
        try:
            for s in SETUP:
                pg.execute(s)
            with pytest.raises(psycopg.Error) as want:
                pg.execute(sql)
        finally:
            pg.execute(f"DROP SCHEMA {schema} CASCADE")
    assert e.value.sqlstate == want.value.sqlstate


def test_comments_over_the_wire(env: Environment) -> None:
    for sql in SETUP:
        env.sql(sql)
    server = ServerThread(EnvironmentEngine(env), ServerConfig(port=0))
    dsn = f"host=127.0.0.1 port={server.port} user=tester dbname=spate sslmode=disable"
    try:
        with psycopg.connect(dsn, autocommit=True) as c:
            assert c.execute("COMMENT ON TABLE t IS 'hello'").statusmessage == "COMMENT"
            c.execute("COMMENT ON COLUMN t.b IS 'bee'")
            got = c.execute("SELECT obj_description('t'::regclass, 'pg_class')").fetchall()
            assert got == [("hello",)]
            got = c.execute(
                "SELECT a.attname, pg_catalog.col_description(a.attrelid, a.attnum) "
                "FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c "
                "ON a.attrelid = c.oid WHERE c.relname = 't' AND a.attnum > 0"
            ).fetchall()
            assert got == [("a", None), ("b", "bee")]
    finally:
        server.close()
