"""A shard upper the replica learns from its own write (a materialized view's append) wakes
the dataflows and peeks waiting on that shard at once, without waiting for a poll."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid
from pathlib import Path

from spate.compute.replica.uppers import ShardUppers
from spate.frontier import Antichain
from spate.ids import ShardId
from spate.persist.consensus_sqlite import SqliteConsensus


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


async def test_a_commit_by_another_process_is_polled_at_once_through_the_change_probe(
    tmp_path: Path,
) -> None:
    """A real SQLite consensus written by another connection: the probe (``data_version``)
    cuts the wait between polls short, so the new upper is learnt long before the interval
    (here 5 s) would have polled it; without the probe it is not learnt in that time."""
    db = tmp_path / "consensus.db"
    ours, theirs = SqliteConsensus(db), SqliteConsensus(db)
    shard = ShardId(uuid.UUID(int=9))
    key = "upper"

    def fetch(shard: ShardId) -> Antichain[int]:
        head = ours.head(key)
        return Antichain.of(0 if head is None else int(head.data))

    for probe in (ours.change_token, None):
        uppers = ShardUppers(fetch, min_interval=5.0, max_interval=5.0, probe=probe)
        uppers.register(shard)
        task = asyncio.ensure_future(uppers.run())
        try:
            await asyncio.sleep(0.05)  # the first poll is done: the poller waits 5 s now
            head = theirs.head(key)
            assert theirs.compare_and_set(key, None if head is None else head.seqno, b"7")
            deadline = asyncio.get_running_loop().time() + 1.0
            while uppers.upper(shard) != Antichain.of(7):
                if asyncio.get_running_loop().time() > deadline:
                    break
                await asyncio.sleep(0.005)
            learnt = uppers.upper(shard) == Antichain.of(7)
            assert learnt == (probe is not None), probe
            theirs.compare_and_set(key, theirs.head(key).seqno, b"0")  # type: ignore[union-attr]
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    ours.close()
    theirs.close()


def test_the_change_token_moves_on_another_connections_commit_only(tmp_path: Path) -> None:
    db = tmp_path / "consensus.db"
    ours, theirs = SqliteConsensus(db), SqliteConsensus(db)
    before = ours.change_token()
    assert ours.compare_and_set("k", None, b"1")
    assert ours.change_token() == before  # our own commit
    assert theirs.compare_and_set("k", theirs.head("k").seqno, b"2")  # type: ignore[union-attr]
    assert ours.change_token() != before
    ours.close()
    theirs.close()


async def test_the_first_upper_that_moved_wakes_its_waiters_before_the_other_shards_are_read() -> (
    None
):
    """A poll reads every shard in turn; a dataflow waiting on the first need not wait for a
    slow read of another."""
    fast, slow = ShardId(uuid.UUID(int=1)), ShardId(uuid.UUID(int=2))
    release = threading.Event()

    def fetch(s: ShardId) -> Antichain[int]:
        if s == slow:
            release.wait(10)
        return Antichain.of(5)

    uppers = ShardUppers(fetch)
    uppers.register(fast, Antichain.of(1))
    uppers.register(slow, Antichain.of(1))
    poller = asyncio.create_task(uppers.run())
    try:
        assert await asyncio.wait_for(uppers.wait_past(fast, 3), 5) == Antichain.of(5)
        assert uppers.upper(slow) == Antichain.of(1)  # its read is still under way
    finally:
        release.set()
        poller.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await poller


async def test_with_a_probe_the_shards_are_not_read_on_the_short_interval() -> None:
    """With a change probe that does not move, the poller reads the shards only at its floor
    (``probe_poll_interval``), not every ``min_interval``: the probe reports other processes'
    commits and ``observe`` this one's."""
    shard = ShardId(uuid.UUID(int=11))
    polls: list[ShardId] = []

    def fetch(s: ShardId) -> Antichain[int]:
        polls.append(s)
        return Antichain.of(1)

    uppers = ShardUppers(
        fetch, min_interval=0.005, max_interval=0.01, probe=lambda: 0, probe_poll_interval=0.2
    )
    uppers.register(shard, Antichain.of(1))
    poller = asyncio.create_task(uppers.run())
    try:
        await asyncio.sleep(0.5)
    finally:
        poller.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await poller
    assert 1 <= len(polls) <= 4, len(polls)  # the first poll, then one every 0.2 s


async def test_a_shard_registered_without_an_upper_is_read_at_once_by_a_probing_poller() -> None:
    """A new shard whose upper is not known does not wait for the poller's floor."""
    known, new = ShardId(uuid.UUID(int=12)), ShardId(uuid.UUID(int=13))

    def fetch(s: ShardId) -> Antichain[int]:
        return Antichain.of(4)

    uppers = ShardUppers(fetch, probe=lambda: 0, probe_poll_interval=30.0)  # (ended on cancel)
    uppers.register(known, Antichain.of(1))
    poller = asyncio.create_task(uppers.run())
    try:
        await asyncio.sleep(0.1)  # the first poll is done: the next one is 30 s away
        uppers.register(new)
        deadline = asyncio.get_running_loop().time() + 2.0
        while uppers.upper(new) != Antichain.of(4):
            assert asyncio.get_running_loop().time() < deadline, uppers.upper(new)
            await asyncio.sleep(0.005)
    finally:
        poller.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await poller
