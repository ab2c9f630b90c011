"""``spate serve`` as a process: serves an environment's SQL, stops on SIGTERM, refuses a
public address without a password."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

pytestmark = pytest.mark.integration


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _serve(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "spate", "serve", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ, **(env or {})),
    )  # fmt: skip


def _connect(dsn: str, proc: subprocess.Popen[bytes]) -> psycopg.Connection[tuple[object, ...]]:
    deadline = time.monotonic() + 120
    while True:
        try:
            return psycopg.connect(dsn, autocommit=True)
        except psycopg.OperationalError as e:
            if "password" in str(e):
                raise
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else b""
            assert time.monotonic() < deadline
            time.sleep(0.5)


def test_serve_answers_sql_and_stops_on_sigterm(tmp_path: Path) -> None:
    port = _free_port()
    proc = _serve(
        str(tmp_path / "data"), "--listen", f"127.0.0.1:{port}", "--statement-timeout", "45000"
    )
    try:
        dsn = f"host=127.0.0.1 port={port} user=me dbname=spate sslmode=disable"
        with _connect(dsn, proc) as conn:
            assert conn.execute("SELECT 1 + 1").fetchone() == (2,)
            assert conn.execute("SHOW statement_timeout").fetchone() == ("45s",)
            conn.execute("CREATE TABLE made_over_the_wire (a bigint NOT NULL)")
            names = conn.execute(  # pg_catalog's tables are visible too, as in PostgreSQL
                "SELECT c.relname FROM pg_catalog.pg_class c WHERE c.relkind = 'r' "
                "AND pg_catalog.pg_table_is_visible(c.oid) AND c.relname !~ '^pg_'"
            ).fetchall()
            assert names == [("made_over_the_wire",)]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_serve_refuses_a_public_address_without_password(tmp_path: Path) -> None:
    proc = _serve(str(tmp_path / "data"), "--listen", f"0.0.0.0:{_free_port()}")
    try:
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    assert b"needs a password" in err
    assert not (tmp_path / "data").exists()  # refused before the environment was opened


def test_serve_refuses_a_statement_timeout_postgresql_would_not_accept(tmp_path: Path) -> None:
    proc = _serve(str(tmp_path / "data"), "--statement-timeout", "5 parsecs")
    try:
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    assert b'invalid value for parameter "statement_timeout": "5 parsecs"' in err
    assert not (tmp_path / "data").exists()


def test_serve_with_a_password_from_the_environment(tmp_path: Path) -> None:
    port = _free_port()
    proc = _serve(
        str(tmp_path / "data"), "--listen", f"127.0.0.1:{port}", "--password-env", "SPATE_T_PW",
        env={"SPATE_T_PW": "pw-from-env"},
    )  # fmt: skip
    try:
        dsn = f"host=127.0.0.1 port={port} user=me dbname=spate sslmode=disable"
        with _connect(dsn + " password=pw-from-env", proc) as conn:
            assert conn.execute("SELECT 3").fetchone() == (3,)
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            psycopg.connect(dsn + " password=wrong")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_sqlalchemy_inspects_indexes_and_keys_and_dml_counts_rows(tmp_path: Path) -> None:
    import sqlalchemy as sa

    port = _free_port()
    proc = _serve(str(tmp_path / "data"), "--listen", f"127.0.0.1:{port}")
    try:
        dsn = f"host=127.0.0.1 port={port} user=me dbname=spate sslmode=disable"
        with _connect(dsn, proc) as conn:
            conn.execute("CREATE CLUSTER c REPLICAS ()")
            conn.execute("CREATE TABLE items (id bigint NOT NULL, name text)")
            conn.execute("CREATE MATERIALIZED VIEW items_mv IN CLUSTER c AS SELECT * FROM items")
            conn.execute("CREATE INDEX items_by_id IN CLUSTER c ON items_mv (id)")
            cur = conn.execute("INSERT INTO items VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd')")
            assert cur.rowcount == 4
            cur = conn.execute("UPDATE items SET name = 'x' WHERE id >= 2")
            assert (cur.rowcount, cur.statusmessage) == (3, "UPDATE 3")
            cur = conn.execute("DELETE FROM items WHERE id IN (1, 2)")
            assert (cur.rowcount, cur.statusmessage) == (2, "DELETE 2")
            assert conn.execute("UPDATE items SET name = 'y' WHERE id > 100").rowcount == 0
            objects = conn.execute(
                "SELECT name, type FROM spate_catalog.objects WHERE name = 'items_by_id'"
            ).fetchall()
            assert objects == [("items_by_id", "index")]
            schemas = conn.execute("SELECT nspname FROM pg_catalog.pg_namespace").fetchall()
            assert ("spate_catalog",) in schemas
        engine = sa.create_engine(f"postgresql+psycopg://me@127.0.0.1:{port}/spate?sslmode=disable")
        try:
            insp = sa.inspect(engine)
            assert "spate_catalog" in insp.get_schema_names()
            (index,) = insp.get_indexes("items_mv")
            assert (index["name"], index["unique"], index["column_names"]) == (
                "items_by_id",
                False,
                ["id"],
            )
            assert insp.get_indexes("items") == []
            pk = insp.get_pk_constraint("items")
            assert (pk["name"], pk["constrained_columns"]) == (None, [])
            with engine.begin() as c:  # a write block (Materialize's rules: no reads in it)
                result = c.execute(sa.text("UPDATE items SET name = 'z' WHERE id = 3"))
                assert result.rowcount == 1
            with engine.connect() as c:
                assert c.execute(sa.text("SELECT name FROM items WHERE id = 3")).scalar() == "z"
        finally:
            engine.dispose()
    finally:
        proc.kill()
        proc.wait()
