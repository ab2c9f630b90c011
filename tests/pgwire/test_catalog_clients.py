"""Real clients' catalog calls against spate and PostgreSQL 15, side by side: pgjdbc's
DatabaseMetaData (a small Java program compiled here, Debian's libpostgresql-jdbc-java), psql's
``\\dt``/``\\dv``/``\\di``/``\\dn``/``\\l``/``\\du`` and ``\\d view``, and SQLAlchemy's reflection.
The same objects are made in spate (in ``public``) and in a scratch schema of PostgreSQL; the
answers, with the schema's and the owner's names replaced, must be equal.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa

from spate.environment.api import Environment
from spate.pgwire.environment import EnvironmentEngine
from spate.pgwire.server import ServerConfig, ServerThread
from tests.pgwire._pg_scratch import pg_scratch

pytestmark = [pytest.mark.integration]

PG_URL = os.environ.get("SPATE_TEST_POSTGRES_URL")
DEBIAN_JAR = Path("/usr/share/java/postgresql.jar")
JDBC_CACHE = Path.home() / ".cache" / "spate-test" / "jdbc"
JAVAC, JAVA, PSQL = shutil.which("javac"), shutil.which("java"), shutil.which("psql")
PROBE = Path(__file__).parent / "jdbc" / "CatalogProbe.java"

DDL = [
    "CREATE TABLE items (id integer PRIMARY KEY, name varchar(20) NOT NULL DEFAULT 'x',"
    " price numeric(10,2), qty bigint, note text, CONSTRAINT items_qty_check CHECK (qty > 0),"
    " UNIQUE (name))",
    "CREATE TABLE events (k bigint NOT NULL, at timestamp, ok boolean)",
    "CREATE VIEW items_v AS SELECT id, note FROM items",
    "COMMENT ON TABLE items IS 'the items'",
    "COMMENT ON COLUMN items.price IS 'in euros'",
]


@pytest.fixture(scope="module")
def spate_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    env = Environment.open(tmp_path_factory.mktemp("catalog_clients") / "data")
    try:
        for statement in DDL:
            env.sql(statement)  # type: ignore[attr-defined]
        server = ServerThread(EnvironmentEngine(env), ServerConfig(port=0))
        try:
            yield server.port
        finally:
            server.close()
    finally:
        env.close()


@pytest.fixture(scope="module")
def pg_schema() -> Iterator[str]:
    with pg_scratch(DDL, "catc") as schema:
        yield schema


def _pg() -> psycopg.conninfo.ConnectionInfo | dict[str, str]:
    assert PG_URL is not None
    return psycopg.conninfo.conninfo_to_dict(PG_URL)  # type: ignore[return-value]


# --- JDBC ------------------------------------------------------------------------------------


def _jdbc_jar() -> Path | None:
    """pgjdbc: Debian's libpostgresql-jdbc-java where it is installed, else its package
    fetched from Debian's registry with ``apt-get download`` (no root needed) and unpacked
    into a cache; ``None`` on a machine without apt."""
    if DEBIAN_JAR.exists():
        return DEBIAN_JAR
    found = sorted(JDBC_CACHE.glob("usr/share/java/postgresql*.jar"))
    if found:
        return found[0]
    apt, dpkg = shutil.which("apt-get"), shutil.which("dpkg-deb")
    if apt is None or dpkg is None:
        return None
    JDBC_CACHE.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [apt, "download", "libpostgresql-jdbc-java"], cwd=JDBC_CACHE, check=True, timeout=300
    )
    (deb,) = JDBC_CACHE.glob("libpostgresql-jdbc-java_*.deb")
    subprocess.run([dpkg, "-x", str(deb), str(JDBC_CACHE)], check=True, timeout=120)
    found = sorted(JDBC_CACHE.glob("usr/share/java/postgresql*.jar"))
    return found[0] if found else None


@pytest.fixture(scope="module")
def jdbc_jar() -> Path:
    jar = _jdbc_jar()
    if JAVAC is None or JAVA is None or jar is None:
        pytest.skip("needs javac and java (a JDK) and pgjdbc (Debian's libpostgresql-jdbc-java)")
    return jar


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory, jdbc_jar: Path) -> Path:
    assert JAVAC is not None
    out = tmp_path_factory.mktemp("jdbc")
    subprocess.run([JAVAC, "-d", str(out), str(PROBE)], check=True, timeout=120)
    return out


def _jdbc(probe: Path, jar: Path, url: str, user: str, schema: str) -> str:
    assert JAVA is not None
    done = subprocess.run(
        [JAVA, "-cp", f"{probe}:{jar}", "CatalogProbe", url, user, schema, "items"],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return done.stdout


def test_jdbc_database_metadata_equals_postgres(
    probe: Path, jdbc_jar: Path, spate_port: int, pg_schema: str
) -> None:
    url = f"jdbc:postgresql://127.0.0.1:{spate_port}/spate"
    ours = _jdbc(probe, jdbc_jar, url, "tester", "public")
    pg = _pg()
    theirs = _jdbc(
        probe,
        jdbc_jar,
        f"jdbc:postgresql://{pg['host']}:{pg.get('port', '5432')}/{pg['dbname']}",
        str(pg.get("user", "postgres")),
        pg_schema,
    )
    assert "ERROR" not in ours, ours
    assert ours == theirs.replace(pg_schema, "public"), f"spate:\n{ours}\npostgres:\n{theirs}"
    for call in ("getTables", "getColumns", "getPrimaryKeys", "getIndexInfo"):
        section = ours.split(f"## {call}\n")[1].split("##")[0]
        assert len(section.strip().splitlines()) > 1, (call, section)  # rows, not just a header


# --- psql ------------------------------------------------------------------------------------


def _psql(port: int | str, user: str, db: str, command: str, schema: str | None) -> str:
    assert PSQL is not None
    env = dict(os.environ, PGSSLMODE="disable", PGCONNECT_TIMEOUT="5")
    if schema is not None:
        env["PGOPTIONS"] = f"-c search_path={schema}"
    done = subprocess.run(
        [PSQL, "-X", "-h", "127.0.0.1", "-p", str(port), "-U", user, "-d", db, "-c", command],
        capture_output=True, text=True, timeout=60, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, (command, done.stderr)
    return done.stdout


@pytest.mark.skipif(PSQL is None, reason="the psql binary is not installed")
@pytest.mark.parametrize(
    "command",
    [
        r"\dt",
        r"\dv",
        r"\di",
        r"\d items_v",
        r"\d items",
        r"\d+ items",
        r"\d+ events",
        r"\df",
        r"\df+",
    ],
)
def test_psql_describe_commands_equal_postgres(
    spate_port: int, pg_schema: str, command: str
) -> None:
    pg = _pg()
    user = str(pg.get("user", "postgres"))
    ours = _psql(spate_port, "tester", "spate", command, None)
    theirs = _psql(pg.get("port", "5432"), user, str(pg["dbname"]), command, pg_schema)
    assert _cells(ours, "public", "tester") == _cells(theirs, pg_schema, user), (
        f"{ours}\n---\n{theirs}"
    )


def _cells(output: str, schema: str, owner: str) -> list[list[str]]:
    """psql's table as cells (its column widths follow the names), the schema and the owner
    named alike."""
    out = []
    for line in output.splitlines():
        if not line.strip() or set(line.strip()) <= {"-", "+"}:
            continue
        cells = [c.strip() for c in line.replace(schema, "<schema>").split("|")]
        out.append(["<owner>" if c == owner else c for c in cells])
    return out


@pytest.mark.skipif(PSQL is None, reason="the psql binary is not installed")
def test_psql_lists_schemas_databases_roles(spate_port: int) -> None:
    assert "public" in _psql(spate_port, "tester", "spate", r"\dn", None)
    assert " spate " in _psql(spate_port, "tester", "spate", r"\l", None)
    assert " tester " in _psql(spate_port, "tester", "spate", r"\du", None)


# --- SQLAlchemy --------------------------------------------------------------------------------


def test_sqlalchemy_reflection_equals_postgres(spate_port: int, pg_schema: str) -> None:
    assert PG_URL is not None
    ours_engine = sa.create_engine(
        f"postgresql+psycopg://tester@127.0.0.1:{spate_port}/spate?sslmode=disable"
    )
    theirs_engine = sa.create_engine(PG_URL.replace("postgresql://", "postgresql+psycopg://"))
    try:

        def reflect(engine: sa.Engine, schema: str) -> dict[str, object]:
            insp = sa.inspect(engine)
            cols = insp.get_columns("items", schema=schema)
            return {
                "tables": sorted(insp.get_table_names(schema=schema)),
                "views": sorted(insp.get_view_names(schema=schema)),
                "columns": [(c["name"], str(c["type"]), c["nullable"], c["default"]) for c in cols],
                "pk": insp.get_pk_constraint("items", schema=schema),
                "unique": insp.get_unique_constraints("items", schema=schema),
                "indexes": insp.get_indexes("items", schema=schema),
                "checks": insp.get_check_constraints("items", schema=schema),
                "comment": insp.get_table_comment("items", schema=schema),
            }

        ours = reflect(ours_engine, "public")
        theirs = reflect(theirs_engine, pg_schema)
        assert ours == theirs
    finally:
        ours_engine.dispose()
        theirs_engine.dispose()
