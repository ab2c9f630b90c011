"""A shard upper the replica learns from its own write (a materialized view's append) wakes
the dataflows and peeks waiting on that shard at once, without waiting for a poll."""

from __future__ import annotations

import asyncio
import uuid

from spate.compute.replica.uppers import ShardUppers
from spate.frontier import Antichain
from spate.ids import ShardId


async def test_an_observed_upper_wakes_waiters_and_the_scheduler_without_a_poll() -> None:
    shard = ShardId(uuid.UUID(int=7))
    polls: list[ShardId] = []
    woken: list[int] = []

    def fetch(s: ShardId) -> Antichain[int]:
        polls.append(s)
        return Antichain.of(1)

    uppers = ShardUppers(fetch, on_change=lambda: woken.append(1))  # no poller runs
    uppers.register(shard, Antichain.of(1))
    waiting = asyncio.ensure_future(uppers.wait_past(shard, 5))
    await asyncio.sleep(0)
    assert not waiting.done()
    assert uppers.observe(shard, Antichain.of(7))  # our own write moved it
    assert not uppers.observe(shard, Antichain.of(3))  # never regresses
    uppers.notify()
    assert await asyncio.wait_for(waiting, 1) == Antichain.of(7)
    assert woken == [1] and polls == []
    assert uppers.upper(shard) == Antichain.of(7)
