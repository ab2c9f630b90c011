"""A MySQL subsource has a status of its own: an incompatible ALTER of one upstream table makes
that table's subsource ``ceased`` in ``spate_catalog.source_statistics`` (SQL and pgwire), with
the error naming the table, while the other subsource stays ``running`` and the source's row
says which subsource ceased."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
import pytest

from spate.environment.api import Environment
from spate.pgwire.environment import EnvironmentEngine
from spate.pgwire.server import ServerConfig, ServerThread
from tests._mariadb import MariaDB

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

_QUERY = (
    "SELECT name, status, last_error FROM spate_catalog.source_statistics "
    "WHERE name IN ('shop', 'shop_orders', 'shop_notes') ORDER BY name"
)


def _statuses(env: Environment) -> dict[str, tuple[Any, Any]]:
    result = env.sql(_QUERY)
    assert isinstance(result, pa.Table)
    return {r["name"]: (r["status"], r["last_error"]) for r in result.to_pylist()}


def _count(env: Environment, name: str) -> int:
    result = env.sql(f"SELECT count(*) AS n FROM {name}")
    assert isinstance(result, pa.Table)
    return int(result.to_pylist()[0]["n"])


def test_an_incompatible_alter_ceases_only_its_subsource(mariadb: MariaDB, tmp_path: Path) -> None:
    db = f"s{uuid.uuid4().hex[:8]}"
    conn: Any = mariadb.connect()

    def run(sql: str) -> None:
        with conn.cursor() as cur:
            cur.execute(sql)

    run(f"create database {db}")
    run(f"create table {db}.orders (id int primary key, qty int not null)")
    run(f"create table {db}.notes (id int primary key, body text)")
    run(f"insert into {db}.orders values (1, 2)")
    run(f"insert into {db}.notes values (1, 'n')")
    try:
        with Environment.open(tmp_path / "data") as env:
            env.sql(
                f"CREATE CONNECTION my TO MYSQL (HOST '{mariadb.host}', PORT {mariadb.port}, "
                f"USER '{mariadb.user}')"
            )
            env.sql(
                f"CREATE SOURCE shop FROM MYSQL CONNECTION my "
                f"FOR TABLES ({db}.orders, {db}.notes AS shop_notes)"
            )
            deadline = time.monotonic() + 120
            while _count(env, "shop_notes") != 1 or _count(env, "shop_orders") != 1:
                assert time.monotonic() < deadline, "no snapshot"
                time.sleep(0.5)
            run(f"alter table {db}.orders add column note text")
            run(f"insert into {db}.orders values (2, 1, 'new')")
            run(f"insert into {db}.notes values (2, 'after')")
            deadline = time.monotonic() + 120
            statuses = _statuses(env)
            while time.monotonic() < deadline:
                statuses = _statuses(env)
                if statuses["shop_orders"][0] == "ceased" and statuses["shop_notes"][0]:
                    break
                time.sleep(0.5)
            status, error = statuses["shop_orders"]
            assert status == "ceased", statuses
            assert f"table {db}.orders changed upstream" in error and "note" in error
            assert statuses["shop_notes"] == ("running", None)
            source_status, source_error = statuses["shop"]
            assert source_status == "running"
            assert source_error.startswith("subsource shop_orders ceased: ")
            # The same rows over pgwire.
            server = ServerThread(EnvironmentEngine(env), ServerConfig(port=0))
            try:
                dsn = f"host=127.0.0.1 port={server.port} user=u dbname=spate sslmode=disable"
                with psycopg.connect(dsn, autocommit=True) as pg:
                    rows = pg.execute(_QUERY).fetchall()
                assert [(n, s) for n, s, _ in rows] == [
                    ("shop", "running"),
                    ("shop_notes", "running"),
                    ("shop_orders", "ceased"),
                ]
                assert rows[2][2] == error
            finally:
                server.close()
    finally:
        run(f"drop database {db}")
        conn.close()
