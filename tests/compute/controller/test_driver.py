"""End to end: the asyncio driver and replica clients over a real transport (in-memory and TCP
loopback), against a scripted replica that speaks the real protocol.

Covers: connecting and authenticating, the replayed history passing the replica's stage checks,
hydration, peeks answered through futures, a replica crash detected and rehydrated with the next
epoch, a targeted peek failing with the replica, an untargeted one surviving it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import pytest

from spate.compute.controller import (
    ERROR_TARGET_REPLICA_FAILED,
    ClientConnector,
    ComputeController,
    ComputeControllerResponse,
    PeekNotification,
    PeekSuccess,
    ReplicaConfig,
    ReplicaLocation,
)
from spate.compute.controller.replica_client import transport_opener
from spate.ids import GlobalId, InstanceId, PeekId, ReplicaId, SeededIdGen
from spate.protocol.common import Hello
from spate.protocol.compute import (
    CreateDataflow,
    CreateInstance,
    IndexTarget,
    InitializationComplete,
    Peek,
    PeekError,
    PeekRows,
    Schedule,
)
from spate.protocol.memory import InMemoryTransport
from spate.protocol.transport import TcpTransport, Transport

from .fake_replica import ScriptedReplica, rows_at
from .harness import D, index_dataflow
from .storage_double import FakeStorage

SECRET = b"s" * 32
I1, R1 = InstanceId(1), ReplicaId(1)
S, IDX = GlobalId.user(1), GlobalId.user(2)


async def eventually(cond: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


@dataclass
class World:
    controller: ComputeController
    replica: ScriptedReplica
    storage: FakeStorage
    responses: list[ComputeControllerResponse]
    ids: SeededIdGen


@pytest.fixture(params=["memory", "tcp"])
async def world(request: pytest.FixtureRequest) -> AsyncIterator[World]:
    transport: Transport = InMemoryTransport() if request.param == "memory" else TcpTransport()
    replica = ScriptedReplica(upper=0)
    server = await transport.serve(
        "127.0.0.1", 0, role="compute", handler=replica.handle, secret=SECRET
    )
    storage = FakeStorage()
    storage.add_collection(S, D, since=0, upper=10)
    connector = ClientConnector(
        transport_opener(transport, secret=SECRET), backoff_initial_s=0.01, backoff_max_s=0.2
    )
    ids = SeededIdGen(3)
    controller = ComputeController(
        storage, connector=connector, ids=ids, maintenance_interval_ms=50
    )
    responses: list[ComputeControllerResponse] = []

    async def drive() -> None:
        while True:
            await controller.ready()
            r = await controller.process()
            if r is not None:
                responses.append(r)

    driver = asyncio.create_task(drive())
    controller.create_instance(I1)
    controller.initialization_complete()
    config = ReplicaConfig(ReplicaLocation(server.host, server.port))
    controller.add_replica_to_instance(I1, R1, config)
    try:
        yield World(controller, replica, storage, responses, ids)
    finally:
        driver.cancel()
        controller.shutdown()
        await connector.close()
        await server.close()
        assert replica.errors == [], f"the controller broke the protocol: {replica.errors}"


async def test_peeks_are_answered_through_the_driver(world: World) -> None:
    c = world.controller
    c.create_dataflow(I1, index_dataflow(S, IDX, 5))
    await eventually(lambda: c.replica_info(I1, R1).health == "connected", "connection")
    assert not c.collection_hydrated(I1, IDX)
    await world.replica.advance(8)
    await eventually(lambda: c.collection_hydrated(I1, IDX), "hydration")
    assert c.collection_frontiers(IDX).write_frontier.as_option() == 8

    uuid = PeekId.new(world.ids)
    result = await asyncio.wait_for(c.peek(I1, IndexTarget(IDX), uuid, 6, result_desc=D), 10)
    assert result == rows_at(6)
    await eventually(
        lambda: any(isinstance(r, PeekNotification) for r in world.responses), "notification"
    )
    note = next(r for r in world.responses if isinstance(r, PeekNotification))
    assert isinstance(result, PeekRows)
    assert note.uuid == uuid
    assert note.outcome == PeekSuccess(rows=7, result_size=result.rows.nbytes)

    session = world.replica.current
    assert session is not None and session.epoch == 1
    kinds = [type(x) for x in session.commands]
    assert kinds[:4] == [Hello, CreateInstance, InitializationComplete, CreateDataflow]
    assert Schedule in kinds and Peek in kinds


async def test_replica_crash_is_detected_and_rehydrated(world: World) -> None:
    c = world.controller
    c.create_dataflow(I1, index_dataflow(S, IDX, 5))
    await world.replica.advance(8)
    await eventually(lambda: c.collection_hydrated(I1, IDX), "hydration")
    first_epoch = c.replica_info(I1, R1).epoch

    # Two peeks wait for the upper to pass 20: one targeted at the replica, one not.
    targeted = c.peek(
        I1, IndexTarget(IDX), PeekId.new(world.ids), 20, result_desc=D, target_replica=R1
    )
    untargeted = c.peek(I1, IndexTarget(IDX), PeekId.new(world.ids), 20, result_desc=D)
    await eventually(lambda: len(world.replica._waiting) == 2, "peeks at the replica")

    await world.replica.kill()
    assert await asyncio.wait_for(targeted, 10) == PeekError(ERROR_TARGET_REPLICA_FAILED)
    await eventually(
        lambda: (
            c.replica_info(I1, R1).epoch == first_epoch + 1
            and c.replica_info(I1, R1).health == "connected"
        ),
        "rehydration with the next epoch",
    )
    info = c.replica_info(I1, R1)
    assert info.failures == 1 and info.last_error is not None
    assert not untargeted.done()

    # The new connection replays the reduced history: the live peek, not the failed one.
    session = world.replica.current
    assert session is not None and session.epoch == first_epoch + 1
    await eventually(
        lambda: any(isinstance(x, InitializationComplete) for x in session.commands), "replay"
    )
    replayed = [x for x in session.commands if isinstance(x, Peek)]
    assert [p.timestamp for p in replayed] == [20]
    hello = session.commands[0]
    assert isinstance(hello, Hello) and hello.epoch == first_epoch + 1

    await world.replica.advance(25)
    assert await asyncio.wait_for(untargeted, 10) == rows_at(20)
    await eventually(
        lambda: c.collection_frontiers(IDX).write_frontier.as_option() == 25, "new frontiers"
    )
