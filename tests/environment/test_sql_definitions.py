"""What SQL keeps about an object (its CREATE text, a view's PostgreSQL column types, secrets,
connections) is in the fenced catalog, committed with the object: it survives a reopen, goes
with a DROP, follows a RENAME, is never left by a failed CREATE, and an environment fenced out
by a newer one cannot change it. A data directory of the older format (``sql/
definitions.json``) is moved into the catalog once, at open. No replica."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from spate.environment.api import Environment
from spate.environment.catalog_store import EnvironmentFenced
from spate.environment.definitions import ConnectionEntry, secret_value
from spate.pgwire.environment import EnvironmentEngine
from spate.pgwire.server import ServerConfig, ServerThread
from spate.protocol.secret import Secret
from spate.repr import FLOAT64, INT64, RelationDesc
from spate.sql import SqlError
from spate.storage.controller.errors import ControllerFenced
from spate.storage.secrets import SecretsDir

SETUP = (
    "CREATE TABLE t (a int NOT NULL DEFAULT 7, b real)",
    "INSERT INTO t VALUES (1, 0.5)",
    "CREATE VIEW v AS SELECT a AS x, b AS y FROM t WHERE a > 0",
    "CREATE SECRET s AS 'hunter2'",
    "CREATE CONNECTION c TO POSTGRES (HOST 'db', PORT 5433, PASSWORD SECRET s)",
)
CONNECTION = "CREATE CONNECTION c TO POSTGRES (HOST 'db', PORT 5433, PASSWORD SECRET s)"


def _show_create(env: Environment, kind: str, name: str) -> str:
    rows = env.sql(f"SHOW CREATE {kind} {name}").to_pylist()  # type: ignore[union-attr]
    return str(rows[0]["create_sql"])


def _names(env: Environment, what: str) -> list[str]:
    return sorted(r["name"] for r in env.sql(f"SHOW {what}").to_pylist())  # type: ignore[union-attr]


def _secret_files(data: Path) -> list[str]:
    directory = data / "secrets"
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """A data directory holding the objects of SETUP (closed)."""
    d = tmp_path / "data"
    with Environment.open(d) as env:
        for statement in SETUP:
            env.sql(statement)
    return d


@pytest.fixture
def wire(data: Path) -> Iterator[tuple[Environment, str]]:
    """The reopened environment and a pgwire server on it (its psycopg conninfo)."""
    with Environment.open(data) as env:
        server = ServerThread(EnvironmentEngine(env), ServerConfig(port=0))
        try:
            yield env, f"host=127.0.0.1 port={server.port} user=tester dbname=spate sslmode=disable"
        finally:
            server.close()


def test_a_reopened_environment_keeps_texts_types_secrets_and_connections(
    wire: tuple[Environment, str],
) -> None:
    env, dsn = wire
    assert _show_create(env, "TABLE", "t") == SETUP[0]
    assert _show_create(env, "VIEW", "v") == SETUP[2]
    assert (_names(env, "SECRETS"), _names(env, "CONNECTIONS")) == (["s"], ["c"])
    assert _show_create(env, "CONNECTION", "c") == CONNECTION
    state = env.runtime.catalog
    assert state.connection("c") == ConnectionEntry(
        "c", CONNECTION, "postgres", (("host", "db"), ("port", "5433")), "s"
    )
    assert secret_value(state.secrets, env.runtime.layout.secrets(), "s") == "hunter2"
    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute("SELECT x, y FROM v")
        assert cur.description is not None
        assert [c.type_code for c in cur.description] == [23, 700]  # int4, float4
        assert cur.fetchall() == [(1, 0.5)]
        defaults = conn.execute(
            "SELECT column_name, column_default, data_type FROM information_schema.columns "
            "WHERE table_name = 't' ORDER BY ordinal_position"
        ).fetchall()
        assert defaults == [("a", "7", "integer"), ("b", None, "real")]
        viewdef = conn.execute("SELECT pg_get_viewdef('v'::regclass)").fetchone()
        assert viewdef is not None and "FROM t" in str(viewdef[0])


def test_drop_removes_them_with_the_object(data: Path) -> None:
    with Environment.open(data) as env:
        with pytest.raises(SqlError) as refused:
            env.sql("DROP SECRET s")  # connection c uses it
        assert refused.value.sqlstate == "2BP01"
        assert _names(env, "SECRETS") == ["s"]
        env.sql("DROP VIEW v")
        env.sql("DROP CONNECTION c")
        env.sql("DROP SECRET s")
        assert _secret_files(data) == []  # the value went with it
        with pytest.raises(SqlError):
            _show_create(env, "VIEW", "v")
        assert [d.create_sql for d in env.runtime.catalog.definitions] == [SETUP[0]]
        env.sql("DROP TABLE t")
        assert env.runtime.catalog.definitions == ()
        env.sql("CREATE VIEW t AS SELECT 1 AS one")  # a new object of a dropped one's name
    with Environment.open(data) as env:
        assert (_names(env, "SECRETS"), _names(env, "CONNECTIONS")) == ([], [])
        assert _show_create(env, "VIEW", "t") == "CREATE VIEW t AS SELECT 1 AS one"
        assert len(env.runtime.catalog.definitions) == 1


def test_rename_keeps_them_under_the_new_name_and_renames_the_readers_texts(
    data: Path,
) -> None:
    with Environment.open(data) as env:
        env.sql("ALTER TABLE t RENAME TO t2")
        env.sql("BEGIN; ALTER VIEW v RENAME TO v2; COMMIT")
    with Environment.open(data) as env:
        assert _show_create(env, "TABLE", "t2") == SETUP[0].replace("TABLE t ", "TABLE t2 ")
        assert _show_create(env, "VIEW", "v2") == (
            "CREATE VIEW v2 AS SELECT a AS x, b AS y FROM t2 WHERE a > 0"
        )
        table = env.sql("SELECT * FROM v2")
        assert [str(f.type) for f in table.schema] == ["int32", "float"]  # type: ignore[union-attr]


def test_a_failed_create_leaves_no_definition(tmp_path: Path) -> None:
    with Environment.open(tmp_path / "data") as env:
        with pytest.raises(Exception, match="nope"):  # found missing by the operation
            env.sql("CREATE SOURCE f (a bigint) FROM FILES (PATH '/nope/nowhere', FORMAT 'csv')")
        env.sql("CREATE SECRET s AS 'x'")
        with pytest.raises(SqlError):  # refused: the name is a secret's
            env.sql("CREATE VIEW s AS SELECT 1 AS one")
        state = env.runtime.catalog
        assert (state.items, state.definitions) == ((), ())


def test_a_fenced_out_environment_cannot_write_a_definition(data: Path) -> None:
    a = Environment.open(data)
    try:
        secrets_before = _secret_files(data)
        with Environment.open(data) as b:
            fenced = (
                "CREATE VIEW w AS SELECT 1 AS one",
                "CREATE SECRET s2 AS 'other'",
                "CREATE CONNECTION c2 TO POSTGRES (HOST 'elsewhere')",
                "ALTER TABLE t RENAME TO t2",
                "DROP SECRET s CASCADE",
                "DROP VIEW v",
                "BEGIN; CREATE VIEW w AS SELECT 2 AS two; COMMIT",
            )
            for statement in fenced:
                # (refused by the catalog's epoch check, or first by the fenced controllers)
                with pytest.raises((EnvironmentFenced, ControllerFenced), match="fenced"):
                    a.sql(statement)
            assert _secret_files(data) == secrets_before  # no value left, none deleted
            assert b.names() == ["t", "v"]
            assert _show_create(b, "TABLE", "t") == SETUP[0]
            assert _show_create(b, "VIEW", "v") == SETUP[2]
            assert (_names(b, "SECRETS"), _names(b, "CONNECTIONS")) == (["s"], ["c"])
            assert secret_value(b.runtime.catalog.secrets, b.runtime.layout.secrets(), "s") == (
                "hunter2"
            )
    finally:
        a.close()


def test_an_older_data_directory_is_migrated_once(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Environment.open(data) as env:  # objects of an older version: no SQL kept with them
        env.create_table("t", RelationDesc.of(("a", INT64, False), ("b", FLOAT64)))
        env.create_view("v", env.get("t"))
        ref = SecretsDir(data / "secrets").put(Secret("hunter2"))
        assert env.runtime.catalog.definitions == ()
    legacy = data / "sql" / "definitions.json"
    legacy.parent.mkdir()
    doc = {
        "definitions": {
            "t": "CREATE TABLE t (a int NOT NULL, b real)",
            "v": "CREATE VIEW v AS SELECT * FROM t",
            "gone": "CREATE VIEW gone AS SELECT 1",  # dropped long ago: left out
            "s": "CREATE SECRET s AS '********'",
            "c": CONNECTION,
        },
        "types": {"v": ["int4", "float4"]},
        "secrets": {"s": ref.id},
        "connections": {
            "c": {"kind": "postgres", "options": {"host": "db", "port": "5433"}, "secret": "s"}
        },
    }
    legacy.write_text(json.dumps(doc))
    for _ in range(2):  # the second open finds nothing to migrate and changes nothing
        with Environment.open(data) as env:
            assert not legacy.exists()
            assert json.loads(legacy.with_name("definitions.json.migrated").read_text()) == doc
            assert _show_create(env, "TABLE", "t") == "CREATE TABLE t (a int NOT NULL, b real)"
            assert _show_create(env, "VIEW", "v") == "CREATE VIEW v AS SELECT * FROM t"
            table = env.sql("SELECT * FROM v")
            assert [str(f.type) for f in table.schema] == ["int32", "float"]  # type: ignore[union-attr]
            state = env.runtime.catalog
            assert len(state.definitions) == 2
            assert state.connection("c") == ConnectionEntry(
                "c", CONNECTION, "postgres", (("host", "db"), ("port", "5433")), "s"
            )
            assert secret_value(state.secrets, env.runtime.layout.secrets(), "s") == "hunter2"
            env.sql("CREATE VIEW w AS SELECT 1 AS one")  # written to the catalog only
            env.sql("DROP VIEW w")
            assert not legacy.exists()


def test_nothing_writes_the_definitions_file() -> None:
    """The only module naming the old file is the migration, which reads and renames it."""
    src = Path(__file__).resolve().parents[2] / "src" / "spate"
    naming = sorted(
        str(p.relative_to(src)) for p in src.rglob("*.py") if "definitions.json" in p.read_text()
    )
    assert naming == ["environment/definitions_migration.py"]
    text = (src / "environment" / "definitions_migration.py").read_text()
    assert not re.search(r"write_text|write_bytes|json\.dump|open\(|\.write\(", text)
