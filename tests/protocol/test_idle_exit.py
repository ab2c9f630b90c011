"""A replica's grace period: the stop event is set only after the period passes unheld."""

from __future__ import annotations

import asyncio

import pytest

from spate.protocol.connection import Connection
from spate.protocol.idle import IdleExit


async def test_stop_is_set_after_the_grace_period_without_a_held_connection() -> None:
    stop = asyncio.Event()
    idle = IdleExit(0.4, stop)
    release = asyncio.Event()

    async def handler(conn: Connection) -> None:
        await release.wait()

    held = idle.wrap(handler)
    watch = asyncio.create_task(idle.run())
    conn = asyncio.create_task(held(None))  # type: ignore[arg-type]
    await asyncio.sleep(0.8)  # twice the grace period, held throughout
    assert not stop.is_set()
    assert idle.held == 1 and idle.idle_for() == 0.0
    release.set()
    await conn
    assert idle.held == 0
    await asyncio.sleep(0.2)
    assert not stop.is_set()  # the period restarts when the last connection closes
    await asyncio.wait_for(watch, 2.0)
    assert stop.is_set()


async def test_the_period_starts_at_start_and_must_be_positive() -> None:
    stop = asyncio.Event()
    await asyncio.wait_for(IdleExit(0.2, stop).run(), 2.0)
    assert stop.is_set()
    with pytest.raises(ValueError, match="positive"):
        IdleExit(0, asyncio.Event())
