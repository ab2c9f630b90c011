"""Every Transport (TCP and in-memory) passes the same suite: STYLE.md habit 10."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from spate.frontier import Antichain
from spate.ids import GlobalId
from spate.protocol.common import Hello
from spate.protocol.compute import Frontiers
from spate.protocol.connection import Connection
from spate.protocol.errors import (
    AuthenticationFailed,
    ConnectFailed,
    ConnectionClosed,
    EpochRefused,
    InsecureBind,
)
from spate.protocol.memory import InMemoryTransport, memory_pair
from spate.protocol.storage import AllowWrites, FrontierUpper
from spate.protocol.transport import TcpTransport, Transport, connect_retrying
from tests.protocol.test_transport import HELLO, Recorder

TRANSPORTS: dict[str, Callable[[], Transport]] = {
    "tcp": TcpTransport,
    "memory": InMemoryTransport,
}


@pytest.fixture(params=sorted(TRANSPORTS))
def transport(request: pytest.FixtureRequest) -> Transport:
    return TRANSPORTS[request.param]()


async def test_commands_and_responses_flow(transport: Transport, secret: bytes) -> None:
    rec = Recorder()
    server = await transport.serve("127.0.0.1", 0, role="compute", handler=rec, secret=secret)
    try:
        conn = await transport.connect(
            "127.0.0.1", server.port, role="compute", epoch=2, secret=secret
        )
        for _ in range(3):
            await conn.send(HELLO)
            assert await conn.recv() == Frontiers(GlobalId.user(1), write_frontier=Antichain.of(5))
        assert rec.commands == [HELLO] * 3
        assert conn.epoch == 2 and rec.connections[0].epoch == 2
        await conn.close()
        assert conn.closed
        with pytest.raises(ConnectionClosed):
            await conn.recv()
    finally:
        await server.close()


async def test_wrong_or_missing_secret_executes_nothing(
    transport: Transport, secret: bytes
) -> None:
    rec = Recorder()
    server = await transport.serve("127.0.0.1", 0, role="compute", handler=rec, secret=secret)
    try:
        for wrong in (b"x" * 32, None):
            with pytest.raises(AuthenticationFailed):
                await transport.connect(
                    "127.0.0.1", server.port, role="compute", epoch=1, secret=wrong
                )
        assert server.stats.auth_failures == 2
        assert rec.connections == [] and rec.commands == []
    finally:
        await server.close()


async def test_replica_without_secret_is_not_trusted_by_a_controller_with_one(
    transport: Transport, secret: bytes
) -> None:
    rec = Recorder()
    server = await transport.serve("127.0.0.1", 0, role="compute", handler=rec)
    try:
        with pytest.raises(AuthenticationFailed, match="did not prove knowledge"):
            await transport.connect(
                "127.0.0.1", server.port, role="compute", epoch=1, secret=secret
            )
        assert rec.commands == []
    finally:
        await server.close()


async def test_epochs(transport: Transport, secret: bytes) -> None:
    rec = Recorder()
    server = await transport.serve("127.0.0.1", 0, role="storage", handler=rec, secret=secret)
    try:
        old = await transport.connect(
            "127.0.0.1", server.port, role="storage", epoch=10, secret=secret
        )
        new = await transport.connect(
            "127.0.0.1", server.port, role="storage", epoch=11, secret=secret
        )
        with pytest.raises(ConnectionClosed):
            await asyncio.wait_for(old.recv(), 2)
        with pytest.raises(EpochRefused) as refused:
            await transport.connect(
                "127.0.0.1", server.port, role="storage", epoch=10, secret=secret
            )
        assert refused.value.epoch == 10 and refused.value.current == 11
        await new.send(AllowWrites())
        await new.send(Hello(version=1, epoch=11, nonce=b""))
        await asyncio.wait_for(new.recv(), 2)  # the recorder answers Hello
        assert rec.commands[-2:] == [AllowWrites(), Hello(version=1, epoch=11, nonce=b"")]
        assert server.epoch == 11
        await new.close()
    finally:
        await server.close()


async def test_unknown_address_and_insecure_bind(transport: Transport) -> None:
    with pytest.raises(ConnectFailed):
        await transport.connect("127.0.0.1", 1, role="compute", epoch=1)
    with pytest.raises(InsecureBind):
        await transport.serve("192.0.2.1", 0, role="compute", handler=Recorder())


async def test_retrying_through_a_transport(transport: Transport, secret: bytes) -> None:
    rec = Recorder()
    server = await transport.serve("127.0.0.1", 0, role="compute", handler=rec, secret=secret)
    try:
        conn = await connect_retrying(
            "127.0.0.1",
            server.port,
            role="compute",
            epoch=1,
            secret=secret,
            transport=transport,
        )
        await conn.send(HELLO)
        assert isinstance(await conn.recv(), Frontiers)
        await conn.close()
    finally:
        await server.close()


async def test_memory_pair_speaks_the_wire() -> None:
    controller, replica = memory_pair(role="storage")
    await controller.send(AllowWrites())
    assert await replica.recv() == AllowWrites()
    await replica.send(FrontierUpper(GlobalId.user(3), Antichain.empty()))
    assert await controller.recv() == FrontierUpper(GlobalId.user(3), Antichain.empty())
    with pytest.raises(TypeError):
        await replica.send(AllowWrites())
    await replica.close()
    with pytest.raises(ConnectionClosed):
        await controller.recv()
    with pytest.raises(ConnectionClosed):
        await controller.send(AllowWrites())


async def test_large_messages_cross_intact(transport: Transport, secret: bytes) -> None:
    """A multi-megabyte peek response (Arrow, zero-copy on both ends) arrives intact."""
    import numpy as np
    import pyarrow as pa

    from spate.ids import PeekId, SeededIdGen
    from spate.protocol.compute import PeekResponse, PeekRows

    n = 150_000
    table = pa.table(
        {
            "k": np.arange(n, dtype=np.int64),
            "v": pa.array([f"row {i}" for i in range(n)]),
            "_diff": np.ones(n, dtype=np.int64),
        }
    )
    response = PeekResponse(PeekId.new(SeededIdGen(5)), PeekRows(table))

    async def replica(conn: Connection) -> None:
        while True:
            await conn.recv()
            for _ in range(3):
                await conn.send(response)

    server = await transport.serve("127.0.0.1", 0, role="compute", handler=replica, secret=secret)
    try:
        conn = await transport.connect(
            "127.0.0.1", server.port, role="compute", epoch=1, secret=secret
        )
        await conn.send(HELLO)
        for _ in range(3):
            got = await asyncio.wait_for(conn.recv(), 10)
            assert got == response
        await conn.close()
    finally:
        await server.close()
