"""``ALTER TABLE|VIEW|MATERIALIZED VIEW|INDEX [IF EXISTS] name RENAME TO new`` and ``ALTER …
OWNER TO``, as PostgreSQL runs them (the same statements run there, compared): dependents keep
reading the renamed object, stored texts name it by its new name, the rename survives a reopen,
and the refusals have PostgreSQL's SQLSTATEs. No replica."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from spate.environment.api import Environment
from spate.sql import SqlError

SETUP = (
    "CREATE TABLE t (a int NOT NULL DEFAULT 7, b varchar(3))",
    "INSERT INTO t VALUES (1, 'x')",
    "CREATE VIEW v AS SELECT t.a, b FROM t WHERE a > 0",
    "CREATE VIEW w AS SELECT a FROM v",
)
CASES = (
    # (statement, SQLSTATE or None)
    ("ALTER VIEW t RENAME TO t2", "42809"),
    ("ALTER MATERIALIZED VIEW v RENAME TO v3", "42809"),
    ("ALTER TABLE t RENAME TO v", "42P07"),
    ("ALTER TABLE t RENAME TO t", "42P07"),
    ("ALTER TABLE nope RENAME TO x", "42P01"),
    ("ALTER VIEW nope RENAME TO x", "42P01"),
    ("ALTER TABLE IF EXISTS nope RENAME TO x", None),
    ("ALTER TABLE v RENAME TO v2", None),  # ALTER TABLE renames any relation
    ("ALTER INDEX v2 RENAME TO v", None),
    ("ALTER VIEW v RENAME TO v2", None),
    ("ALTER TABLE t RENAME TO t2", None),
    ("ALTER TABLE t2 OWNER TO postgres", None),
    ("ALTER VIEW t2 OWNER TO postgres", "42809"),
    ("ALTER VIEW v2 OWNER TO postgres", None),
)


def _spate(env: Environment, sql: str) -> str | None:
    try:
        env.sql(sql)
    except SqlError as e:
        return e.sqlstate
    return None


def _postgres(conn: psycopg.Connection[tuple[object, ...]], sql: str) -> str | None:
    try:
        conn.execute(sql)
    except psycopg.Error as e:
        return e.sqlstate
    return None


@pytest.fixture
def pg(postgres_url: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    schema = f"rename_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(f"SET search_path = {schema}")
        try:
            yield conn
        finally:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def test_rename_statements_answer_as_postgres(
    env: Environment, pg: psycopg.Connection[tuple[object, ...]]
) -> None:
    for sql in SETUP:
        env.sql(sql)
        pg.execute(sql)
    for sql, _ in CASES:
        assert (_spate(env, sql), sql) == (_postgres(pg, sql), sql)
    got = env.sql("SELECT * FROM w").to_pylist()
    want = pg.execute("SELECT * FROM w").fetchall()
    assert [tuple(r.values()) for r in got] == want == [(1,)]


def test_expected_sqlstates(env: Environment) -> None:
    for sql in SETUP:
        env.sql(sql)
    for sql, state in CASES:
        assert (_spate(env, sql), sql) == (state, sql)


def test_dependents_keep_reading_and_texts_name_the_new_name(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Environment.open(data) as env:
        for sql in SETUP:
            env.sql(sql)
        env.sql("ALTER TABLE t RENAME TO t2")
        env.sql("ALTER VIEW v RENAME TO v2")
        assert env.sql("SELECT * FROM w").to_pylist() == [{"a": 1}]
        # the table's CREATE text (its DEFAULT, its varchar(3)) goes with it
        env.sql("INSERT INTO t2 (b) VALUES ('yy')")
        with pytest.raises(SqlError) as e:
            env.sql("INSERT INTO t2 (b) VALUES ('long')")
        assert e.value.sqlstate == "22001"
    with Environment.open(data) as env:  # durable
        assert sorted(i.name for i in env.runtime.catalog) == ["t2", "v2", "w"]
        assert env.sql("SELECT a FROM w ORDER BY a").to_pylist() == [{"a": 1}, {"a": 7}]
        shown = {
            n: env.sql(f"SHOW CREATE {k} {n}").to_pylist()[0]["create_sql"]
            for k, n in (("TABLE", "t2"), ("VIEW", "v2"), ("VIEW", "w"))
        }
        assert shown == {
            "t2": "CREATE TABLE t2 (a int NOT NULL DEFAULT 7, b varchar(3))",
            "v2": "CREATE VIEW v2 AS SELECT t2.a, b FROM t2 WHERE a > 0",
            "w": "CREATE VIEW w AS SELECT a FROM v2",
        }
        # the old names are free again
        env.sql("CREATE TABLE t (z bigint)")
        assert env.sql("SELECT count(*) AS n FROM t").to_pylist() == [{"n": 0}]


def test_renamed_index_and_unique_constraint(env: Environment) -> None:
    env.sql("CREATE TABLE k (id bigint); CREATE UNIQUE INDEX k_id ON k (id)")
    env.sql("ALTER INDEX k_id RENAME TO k_by_id")
    assert env.sql("SHOW CREATE INDEX k_by_id").to_pylist()[0]["create_sql"] == (
        "CREATE UNIQUE INDEX k_by_id ON k (id)"
    )
    env.sql("INSERT INTO k VALUES (1)")
    with pytest.raises(Exception, match="k_by_id"):
        env.sql("INSERT INTO k VALUES (1)")
    env.sql("DROP INDEX k_by_id")  # the constraint goes with it
    env.sql("INSERT INTO k VALUES (1)")


def test_quoted_names_and_aliases() -> None:
    from spate.sql.renaming import renamed_own, renamed_reference

    assert renamed_own('CREATE TABLE "T" (a int)', "T", "New") == 'CREATE TABLE "New" (a int)'
    assert renamed_reference(
        "CREATE VIEW v AS SELECT t.a, t FROM u, t JOIN (SELECT 1 FROM public.t) x ON t = 1",
        "t",
        "T2",
    ) == (
        'CREATE VIEW v AS SELECT "T2".a, t FROM u, "T2" JOIN (SELECT 1 FROM public."T2") x ON t = 1'
    )
    # old.col names an alias here: only the relation is renamed
    assert renamed_reference("CREATE VIEW v AS SELECT t.a FROM t AS t", "t", "q") == (
        "CREATE VIEW v AS SELECT t.a FROM q AS t"
    )
    assert renamed_reference("CREATE INDEX i ON t (a)", "t", "q") == "CREATE INDEX i ON q (a)"
    cte = "CREATE VIEW v AS WITH t AS (SELECT 1 AS a) SELECT a FROM t"
    assert renamed_reference(cte, "t", "q") == cte  # t is the WITH query there
    quoted = 'CREATE VIEW v AS SELECT "from" t FROM u'  # a column "from" aliased t
    assert renamed_reference(quoted, "t", "q") == quoted


def test_materialized_view_and_its_index_renamed(env: Environment) -> None:
    env.create_cluster("c", replicas=0)  # no process: the catalog is all this test needs
    env.sql("CREATE TABLE t (a int)")
    env.sql("CREATE MATERIALIZED VIEW mv IN CLUSTER c AS SELECT a FROM t")
    env.sql("CREATE INDEX mv_a IN CLUSTER c ON mv (a)")
    env.sql("CREATE VIEW over AS SELECT mv.a FROM mv")
    with pytest.raises(SqlError) as e:
        env.sql("ALTER VIEW mv RENAME TO mv2")
    assert e.value.sqlstate == "42809"
    env.sql("ALTER MATERIALIZED VIEW mv RENAME TO mv2")
    env.sql("ALTER INDEX mv_a RENAME TO mv2_a")
    shown = {
        n: env.sql(f"SHOW CREATE {k} {n}").to_pylist()[0]["create_sql"]
        for k, n in (("MATERIALIZED VIEW", "mv2"), ("INDEX", "mv2_a"), ("VIEW", "over"))
    }
    assert shown == {
        "mv2": "CREATE MATERIALIZED VIEW mv2 IN CLUSTER c AS SELECT a FROM t",
        "mv2_a": "CREATE INDEX mv2_a IN CLUSTER c ON mv2 (a)",
        "over": "CREATE VIEW over AS SELECT mv2.a FROM mv2",
    }
    index = env.runtime.catalog.get("mv2_a")
    assert env.runtime.catalog.by_id(index.on).name == "mv2"  # type: ignore[union-attr]
    with pytest.raises(SqlError) as e:
        env.sql("CREATE SECRET s AS 'x'; ALTER TABLE s RENAME TO s2")
    assert e.value.sqlstate == "0A000"


def test_view_definition_over_the_wire_names_the_new_name(env: Environment) -> None:
    from spate.pgwire.environment import EnvironmentEngine
    from spate.pgwire.server import ServerConfig, ServerThread

    env.sql("CREATE TABLE t (a int); CREATE VIEW v AS SELECT t.a AS b FROM t WHERE (a > 0)")
    server = ServerThread(EnvironmentEngine(env), ServerConfig(port=0))
    dsn = f"host=127.0.0.1 port={server.port} user=tester dbname=spate sslmode=disable"
    try:
        with psycopg.connect(dsn, autocommit=True) as c:
            assert c.execute("ALTER TABLE t RENAME TO t2").statusmessage == "ALTER TABLE"
            want = "SELECTt2.aASbFROMt2WHERE(a>0)"  # (whitespace aside: PostgreSQL indents)
            (got,) = c.execute("SELECT pg_get_viewdef('v'::regclass)").fetchone()
            assert _squeezed(got) == want
            got = c.execute(
                "SELECT c.relname, pg_catalog.pg_get_viewdef(c.oid, true) "
                "FROM pg_catalog.pg_class c WHERE c.relname = 'v'"
            ).fetchall()
            assert [(n, _squeezed(d)) for n, d in got] == [("v", want)]
            (oid,) = c.execute("SELECT oid FROM pg_catalog.pg_class WHERE relname = 'v'").fetchone()
            (got,) = c.execute(  # as psql's \d+ asks
                f"SELECT pg_catalog.pg_get_viewdef('{oid}'::pg_catalog.oid, true)"
            ).fetchone()
            assert _squeezed(got) == want
    finally:
        server.close()


def test_python_object_renamed_over_stale_definitions(env: Environment) -> None:
    from spate.repr import INT64, RelationDesc

    env.sql("CREATE TABLE gone (a int DEFAULT 5)")
    env.drop("gone")  # through Python: SQL's kept definition of "gone" is not forgotten
    env.create_table("py", RelationDesc.of(("z", INT64)))
    env.sql("ALTER TABLE py RENAME TO gone")
    assert env.sql("SHOW CREATE TABLE gone").to_pylist()[0]["create_sql"] == (
        "CREATE TABLE gone (z bigint)"
    )


def _squeezed(text: str) -> str:
    return "".join(text.split()).rstrip(";")


def test_refresh_of_what_is_not_a_materialized_view_fails_as_in_postgres(
    env: Environment, pg: psycopg.Connection[tuple[object, ...]]
) -> None:
    """``REFRESH MATERIALIZED VIEW`` changes nothing in spate (its materialized views are
    always current; the dbt test refreshes one), but checks its name as PostgreSQL does."""
    for sql in SETUP:
        env.sql(sql)
        pg.execute(sql)
    for sql in (
        "REFRESH MATERIALIZED VIEW v",
        "REFRESH MATERIALIZED VIEW t WITH DATA",
        "REFRESH MATERIALIZED VIEW nope",
        "REFRESH MATERIALIZED VIEW CONCURRENTLY w",
        "REFRESH MATERIALIZED VIEW",
    ):
        assert (_spate(env, sql), sql) == (_postgres(pg, sql), sql)
