"""An identifier longer than 63 bytes is truncated to 63 (never inside a character) with
``NOTICE 42622 identifier "…" will be truncated to "…"`` for each occurrence, as PostgreSQL
does; spate used to refuse the name. Each statement's notices, columns and rows over the wire
are compared with PostgreSQL's for the same statement."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from spate.environment.api import Environment
from spate.pgwire.environment import EnvironmentEngine
from spate.pgwire.server import ServerConfig, ServerThread

LONG = "Long_" + "a" * 65  # unquoted: folded to lower case, then truncated
WIDE = "é" * 40  # 80 bytes: cut before the 32nd character, not inside it

STATEMENTS = (
    f"CREATE TABLE {LONG} (x bigint, {LONG}_column bigint)",
    f"INSERT INTO {LONG} VALUES (1, 2)",
    f"SELECT x AS {LONG}_b, {LONG}_column FROM {LONG.lower()}",
    f'SELECT 1 AS "{WIDE}", 2 AS "{LONG}"',
    f"DROP TABLE {LONG}",
)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerThread]:
    env = Environment.open(tmp_path / "data")
    s = ServerThread(EnvironmentEngine(env), ServerConfig(port=0))
    try:
        yield s
    finally:
        s.close()
        env.close()


def _run(conn: psycopg.Connection[Any], sql: str) -> tuple[Any, ...]:
    notices: list[tuple[str | None, str | None, str | None]] = []
    handler = lambda d: notices.append((d.severity, d.sqlstate, d.message_primary))  # noqa: E731
    conn.add_notice_handler(handler)
    try:
        cur = conn.execute(sql)
        names = [c.name for c in cur.description] if cur.description else None
        rows = cur.fetchall() if cur.description else None
    finally:
        conn.remove_notice_handler(handler)
    return sql, notices, names, rows


def test_long_identifiers_are_truncated_with_postgres_notices(
    server: ServerThread, postgres_url: str
) -> None:
    schema = f"trunc_{uuid.uuid4().hex[:8]}"
    dsn = f"host=127.0.0.1 port={server.port} user=tester dbname=spate sslmode=disable"
    with (
        psycopg.connect(postgres_url, autocommit=True) as pg,
        psycopg.connect(dsn, autocommit=True) as spate,
    ):
        pg.execute(f"CREATE SCHEMA {schema}")
        try:
            pg.execute(f"SET search_path = {schema}")
            for sql in STATEMENTS:
                expected = _run(pg, sql)
                assert expected[1], f"PostgreSQL raised no notice for {sql}"
                assert _run(spate, sql) == expected
        finally:
            pg.execute(f"DROP SCHEMA {schema} CASCADE")
