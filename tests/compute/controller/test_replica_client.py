"""The replica client: connect with backoff, ordered sending, epoch-tagged events, failure."""

from __future__ import annotations

import asyncio

from spate.compute.controller import (
    ReplicaClient,
    ReplicaConnected,
    ReplicaEvent,
    ReplicaFailed,
    ReplicaResponse,
)
from spate.compute.controller.replica_client import ReplicaConnection
from spate.frontier import Antichain
from spate.ids import GlobalId, InstanceId, ReplicaId
from spate.protocol.compute import Frontiers, InitializationComplete, Schedule
from spate.protocol.errors import ConnectFailed, EpochRefused
from spate.protocol.memory import MemoryConnection, memory_pair

from .harness import CONFIG

I1, R1 = InstanceId(1), ReplicaId(1)
X = GlobalId.user(5)


async def wait_for(events: list[ReplicaEvent], n: int) -> None:
    async with asyncio.timeout(5):
        while len(events) < n:
            await asyncio.sleep(0.005)


async def test_connects_with_capped_backoff_and_sends_queued_commands_in_order() -> None:
    attempts: list[int] = []
    delays: list[float] = []
    ends: list[MemoryConnection] = []

    async def sleep(delay: float) -> None:
        delays.append(delay)
        await asyncio.sleep(0)

    async def open(config: object, epoch: int) -> ReplicaConnection:
        attempts.append(epoch)
        if len(attempts) == 1:
            raise EpochRefused(epoch, epoch + 1)  # logged loudly, still retried
        if len(attempts) < 6:
            raise ConnectFailed("refused")
        controller, replica = memory_pair(epoch=epoch)
        ends.append(replica)
        return controller

    events: list[ReplicaEvent] = []
    client = ReplicaClient(
        I1,
        R1,
        7,
        CONFIG,
        open,
        events.append,
        backoff_initial_s=0.25,
        backoff_max_s=1.0,
        sleep=sleep,
    )
    client.send(Schedule(X))  # before the connection is up: queued, not lost
    client.send(InitializationComplete())
    await wait_for(events, 1)
    assert events == [ReplicaConnected(I1, R1, 7)]
    assert attempts == [7] * 6  # always the client's own epoch, never bumped
    assert delays == [0.25, 0.5, 1.0, 1.0, 1.0]  # exponential, capped at 1 s
    replica = ends[0]
    assert await replica.recv() == Schedule(X)
    assert await replica.recv() == InitializationComplete()
    await replica.send(Frontiers(X, write_frontier=Antichain.of(3)))
    await wait_for(events, 2)
    assert events[1] == ReplicaResponse(I1, R1, 7, Frontiers(X, write_frontier=Antichain.of(3)))
    client.close()
    await client.wait_closed()


async def test_a_lost_connection_is_reported_once_and_a_closed_client_reports_nothing() -> None:
    ends: list[MemoryConnection] = []

    async def open(config: object, epoch: int) -> ReplicaConnection:
        controller, replica = memory_pair(epoch=epoch)
        ends.append(replica)
        return controller

    events: list[ReplicaEvent] = []
    client = ReplicaClient(I1, R1, 2, CONFIG, open, events.append)
    await wait_for(events, 1)
    await ends[0].close()
    await wait_for(events, 2)
    assert isinstance(events[1], ReplicaFailed) and events[1].epoch == 2
    assert "ConnectionClosed" in events[1].reason
    await client.wait_closed()
    await asyncio.sleep(0.02)
    assert len(events) == 2

    quiet: list[ReplicaEvent] = []
    other = ReplicaClient(I1, R1, 3, CONFIG, open, quiet.append)
    await wait_for(quiet, 1)
    other.close()
    await other.wait_closed()
    await ends[-1].close()
    await asyncio.sleep(0.02)
    assert quiet == [ReplicaConnected(I1, R1, 3)]
