"""The psql binary and SQLAlchemy against the server (catalog emulation, errors, COPY)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time

import pytest
import sqlalchemy as sa

from spate.pgwire.server import ServerThread

PSQL = shutil.which("psql")
# psql writes COPY data through stdio: unbuffered, its first row arrives as soon as it is sent.
STDBUF = ["stdbuf", "-o0"] if shutil.which("stdbuf") else []
needs_psql = pytest.mark.skipif(PSQL is None, reason="the psql binary is not installed")


def psql(
    server: ServerThread, command: str, *, timeout: float = 20
) -> subprocess.CompletedProcess[str]:
    assert PSQL is not None
    env = dict(os.environ, PGSSLMODE="disable", PGCONNECT_TIMEOUT="5")
    return subprocess.run(
        [PSQL, "-X", "-h", "127.0.0.1", "-p", str(server.port), "-U", "tester", "-d", "spate",
         "-v", "VERBOSITY=verbose", "-c", command],
        capture_output=True, text=True, timeout=timeout, env=env, check=False,
    )  # fmt: skip


@needs_psql
def test_psql_query_and_error(server: ServerThread) -> None:
    out = psql(server, "SELECT * FROM t WHERE id = 5")
    assert out.returncode == 0, out.stderr
    assert (
        "  5 | name 5 |   7.5 |   5.07 | f    | 2020-01-06 | 2021-02-03 04:05:11.1234 |"
        in out.stdout
    )
    err = psql(server, "SELECT * FROM nope")
    assert err.returncode == 1 and 'ERROR:  42P01: relation "nope" does not exist' in err.stderr
    # An error that points into the statement: psql draws the caret from the position field.
    located = psql(server, "SELECT 1; SELECT prise FROM t")
    assert 'ERROR:  42703: column "prise" does not exist' in located.stderr, located.stderr
    caret = " " * len("LINE 1: SELECT 1; SELECT ") + "^"
    assert f"LINE 1: SELECT 1; SELECT prise FROM t\n{caret}\n" in located.stderr
    assert "HINT:  check the column name" in located.stderr


@needs_psql
def test_psql_describe_commands(server: ServerThread) -> None:
    listing = psql(server, r"\d")
    assert listing.returncode == 0, listing.stderr
    lines = [line.split("|") for line in listing.stdout.splitlines() if "|" in line]
    assert [[c.strip() for c in line] for line in lines[1:]] == [
        ["public", "t", "table", "tester"],
        ["public", "v", "materialized view", "tester"],
    ]
    dt = psql(server, r"\dt")
    assert " t    | table " in dt.stdout and " v " not in dt.stdout
    table = psql(server, r"\d t")
    assert table.returncode == 0, table.stderr
    assert 'Table "public.t"' in table.stdout
    for line in (
        " id     | bigint  ",
        " amount | numeric(10,2) ",
        " ts     | timestamp without time zone ",
    ):
        assert line in table.stdout, table.stdout
    assert "not null" in table.stdout.splitlines()[3]
    mv = psql(server, r"\d v")
    assert 'Materialized view "public.v"' in mv.stdout
    assert 'Indexes:\n    "v_by_id" arrangement (id)' in mv.stdout, mv.stdout
    di = psql(server, r"\di")
    assert [c.strip() for c in di.stdout.splitlines()[3].split("|")] == [
        "public", "v_by_id", "index", "tester", "v",
    ]  # fmt: skip
    # spate_catalog is off the search path, as pg_catalog's own tables are to \d: named, it lists
    # and describes its relations, and "t" alone is still the user's table.
    system = psql(server, r"\dt spate_catalog.*")
    rows = [[c.strip() for c in line.split("|")] for line in system.stdout.splitlines()[3:-2]]
    assert rows == [["spate_catalog", "replicas", "table", "tester"],
                    ["spate_catalog", "t", "table", "tester"]], system.stdout  # fmt: skip
    replicas = psql(server, r"\d spate_catalog.replicas")
    assert 'Table "spate_catalog.replicas"' in replicas.stdout, replicas.stderr
    assert " replica | text    |           | not null |" in replicas.stdout, replicas.stdout
    assert " healthy | boolean |" in replicas.stdout
    assert 'Table "spate_catalog.t"' in psql(server, r"\d spate_catalog.t").stdout
    for cmd in (r"\l", r"\dn", r"\du", r"\di", r"\dv", r"\d+ t", r"\df"):
        out = psql(server, cmd)
        assert out.returncode == 0 and "ERROR" not in out.stderr, (cmd, out.stderr)


@needs_psql
def test_psql_copy_subscribe_streams_until_interrupted(server: ServerThread) -> None:
    assert PSQL is not None
    env = dict(os.environ, PGSSLMODE="disable")
    proc = subprocess.Popen(
        [*STDBUF, PSQL, "-X", "-h", "127.0.0.1", "-p", str(server.port), "-U", "tester", "-d",
         "spate", "-c", "COPY (SUBSCRIBE t) TO STDOUT"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        started = time.monotonic()
        first = proc.stdout.readline()
        assert first == b"1000\t1\t0\n"
        assert time.monotonic() - started < 10
        time.sleep(0.2)
        proc.send_signal(signal.SIGINT)  # psql sends a CancelRequest
        proc.wait(timeout=10)
        assert proc.returncode in (0, 1)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_sqlalchemy_reflects_tables_and_queries(server: ServerThread) -> None:
    engine = sa.create_engine(
        f"postgresql+psycopg://tester@127.0.0.1:{server.port}/spate?sslmode=disable"
    )
    try:
        insp = sa.inspect(engine)
        assert insp.get_table_names() == ["t"]
        assert insp.get_table_names(schema="spate_catalog") == ["replicas", "t"]
        assert "spate_catalog" in insp.get_schema_names()
        system = {c["name"]: c for c in insp.get_columns("replicas", schema="spate_catalog")}
        assert list(system) == ["replica", "healthy"] and not system["replica"]["nullable"]
        assert insp.get_materialized_view_names() == ["v"]
        cols = {c["name"]: c for c in insp.get_columns("t")}
        assert list(cols) == ["id", "name", "price", "amount", "flag", "day", "ts", "data", "doc"]
        assert isinstance(cols["amount"]["type"], sa.Numeric) and cols["amount"]["type"].scale == 2
        assert cols["id"]["nullable"] is False and cols["name"]["nullable"] is True
        table = sa.Table("t", sa.MetaData(), autoload_with=engine)
        assert isinstance(table.c.ts.type, sa.TIMESTAMP)
        with engine.connect() as conn:
            got = conn.execute(sa.text("SELECT * FROM t WHERE id = :i"), {"i": 4}).one()
            assert got.id == 4 and got.name == "name 4"
    finally:
        engine.dispose()
