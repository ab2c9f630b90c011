"""Cursors (FETCH and MOVE: asyncpg's cursors with prefetch and ``forward``) and SQL prepared
statements (PREPARE with parameter types, EXECUTE, DEALLOCATE), each run against spate and
the local PostgreSQL and compared: rows, command tags and SQLSTATEs."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import asyncpg
import psycopg
import pytest

from spate.environment.api import Environment
from spate.pgwire.environment import EnvironmentEngine
from spate.pgwire.server import ServerConfig, ServerThread

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    env = Environment.open(tmp_path_factory.mktemp("cursors") / "data")
    s = ServerThread(EnvironmentEngine(env), ServerConfig(port=0))
    try:
        yield s
    finally:
        s.close()
        env.close()


@pytest.fixture
def dsns(server: ServerThread, postgres_url: str) -> dict[str, str]:
    return {"spate": f"postgresql://tester@127.0.0.1:{server.port}/spate", "postgres": postgres_url}


async def _asyncpg_cursors(dsn: str, table: str) -> list[Any]:
    c = await asyncpg.connect(dsn)
    out: list[Any] = []
    try:
        await c.execute(f"CREATE TABLE {table} (k integer, s text)")
        await c.executemany(
            f"INSERT INTO {table} VALUES ($1, $2)", [(i, f"r{i}") for i in range(10)]
        )
        query = f"SELECT k, s FROM {table} WHERE k >= $1 ORDER BY k"
        async with c.transaction():
            out.append([tuple(r) async for r in c.cursor(query, 1, prefetch=3)])
            cur = await c.cursor(query, 2)
            out.append(await cur.forward(3))  # MOVE FORWARD 3
            out.append([tuple(r) for r in await cur.fetch(2)])
            row = await cur.fetchrow()
            out.append(None if row is None else tuple(row))
            out.append(await cur.forward(100))
            out.append(await cur.fetch(5))
    finally:
        await c.execute(f"DROP TABLE IF EXISTS {table}")
        await c.close()
    return out


def test_asyncpg_cursors_with_prefetch_and_forward_as_postgres(dsns: dict[str, str]) -> None:
    table = f"cur_{uuid.uuid4().hex[:8]}"
    got = {name: asyncio.run(_asyncpg_cursors(dsn, table)) for name, dsn in dsns.items()}
    assert got["spate"] == got["postgres"]
    assert got["spate"][1] == 3 and got["spate"][2] == [(5, "r5"), (6, "r6")]


def _script(c: psycopg.Connection[tuple[Any, ...]], table: str) -> list[Any]:
    out: list[Any] = []

    def run(sql: str) -> None:
        try:
            cur = c.execute(sql)
        except psycopg.Error as e:
            out.append((sql, "error", e.sqlstate))
            return
        rows = cur.fetchall() if cur.description is not None else None
        types = [d.type_code for d in cur.description] if cur.description else None
        out.append((sql, cur.statusmessage, types, rows))

    run(f"CREATE TABLE {table} (k integer, s text, n numeric(6,2))")
    run(f"PREPARE ins (integer, text) AS INSERT INTO {table} VALUES ($1, $2, $3)")
    run("EXECUTE ins (1, 'one', 1.5)")
    run("EXECUTE ins (2, 'it''s', 2)")
    run("EXECUTE ins (3, NULL, NULL)")
    run("EXECUTE ins (4)")  # too few: 42601
    run(f"PREPARE sel AS SELECT k, s, n FROM {table} WHERE k > $1 AND s <> $2 ORDER BY k")
    run("EXECUTE sel (0, 'x')")
    run("EXECUTE sel ('1', 'one')")
    run("EXECUTE sel (k, 'one')")  # 42703: an argument has no columns, not the query's k
    run("EXECUTE sel ((SELECT 1), 'one')")  # 0A000
    run("EXECUTE sel (count(*), 'one')")  # 42803
    run("EXECUTE sel (1 + 1, 'o' || 'ne')")
    run("PREPARE sel AS SELECT 1")  # 42P05
    run("DEALLOCATE sel")
    run("EXECUTE sel (0, 'x')")  # 26000
    run("DEALLOCATE PREPARE ins")
    run("DEALLOCATE ALL")
    run("DEALLOCATE nothing")  # 26000
    run("BEGIN")
    run(f"DECLARE c CURSOR FOR SELECT k FROM {table} ORDER BY k")
    run("MOVE 1 IN c")
    run("FETCH 1 FROM c")
    run("MOVE ALL IN c")
    run("FETCH 1 FROM c")
    run("CLOSE c")
    run("COMMIT")
    run(f"DROP TABLE {table}")
    return out


def test_sql_prepare_execute_deallocate_and_move_as_postgres(dsns: dict[str, str]) -> None:
    table = f"prep_{uuid.uuid4().hex[:8]}"
    got: dict[str, list[Any]] = {}
    for name, dsn in dsns.items():
        with psycopg.connect(dsn, autocommit=True) as c:
            try:
                got[name] = _script(c, table)
            finally:
                c.execute(f"DROP TABLE IF EXISTS {table}")
    for mine, theirs in zip(got["spate"], got["postgres"], strict=True):
        assert mine == theirs
