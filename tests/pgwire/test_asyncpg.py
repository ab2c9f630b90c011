"""asyncpg: untyped parameters (Describe infers them), binary results, cursors, cancel."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from decimal import Decimal

import asyncpg
import pytest

from spate.pgwire.server import ServerThread
from tests.pgwire.fake_engine import rows


def _url(server: ServerThread) -> str:
    return f"postgresql://tester@127.0.0.1:{server.port}/spate?sslmode=disable"


async def test_fetch_with_untyped_parameter_and_binary_results(server: ServerThread) -> None:
    conn = await asyncpg.connect(_url(server))
    try:
        got = await conn.fetch("SELECT * FROM t WHERE id = $1", 7)
        expected = rows()[7]
        assert len(got) == 1
        rec = dict(got[0])
        assert rec["id"] == 7 and rec["name"] == "name 7" and rec["price"] == 10.5
        assert rec["amount"] == Decimal("7.07") and rec["flag"] is False
        assert rec["day"] == dt.date(2020, 1, 8) and rec["ts"] == expected["ts"]
        assert rec["data"] == bytes([7, 0, 255]) and json.loads(rec["doc"]) == {"k": 7}
        assert await conn.fetchval("SELECT 42") == 42
    finally:
        await conn.close()


async def test_cursor_in_a_transaction_and_timeout_cancels(server: ServerThread) -> None:
    conn = await asyncpg.connect(_url(server))
    try:
        async with conn.transaction():
            ids = [r["id"] async for r in conn.cursor("SELECT * FROM t", prefetch=9)]
        assert ids == list(range(100))
        with pytest.raises(asyncio.TimeoutError):
            await conn.execute("SLEEP 5", timeout=0.3)
        assert await conn.fetchval("SELECT 1") == 1
    finally:
        await asyncio.wait_for(conn.close(), 5)


async def test_pool_reset_query_and_copy(server: ServerThread) -> None:
    pool = await asyncpg.create_pool(_url(server), min_size=2, max_size=2)
    try:
        for _ in range(3):
            async with pool.acquire() as conn:
                assert await conn.fetchval("SELECT 'x'") == "x"
        async with pool.acquire() as conn:
            import io

            buf = io.BytesIO()
            await conn.copy_from_query("SELECT * FROM t WHERE id = 1", output=buf)
            assert buf.getvalue().startswith(b"1\tname 1\t1.5\t")
    finally:
        await asyncio.wait_for(pool.close(), 10)
