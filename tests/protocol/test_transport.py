"""The TCP transport: authenticated connections, epochs, framing limits, keepalive, retries."""

from __future__ import annotations

import asyncio
import socket

import pytest

from spate.frontier import Antichain
from spate.ids import GlobalId
from spate.protocol.common import Hello
from spate.protocol.compute import CreateInstance, Frontiers, InstanceConfig
from spate.protocol.connection import Connection, TransportOptions
from spate.protocol.epochs import EpochGate, compose_epoch
from spate.protocol.errors import (
    AuthenticationFailed,
    ConnectFailed,
    ConnectionClosed,
    EpochRefused,
    InsecureBind,
)
from spate.protocol.storage import FrontierUpper
from spate.protocol.transport import check_bind, connect, connect_retrying, serve

HELLO = Hello(version=1, epoch=1, nonce=b"n" * 16)


class Recorder:
    """A replica handler that records every command and answers Hello with a Frontiers."""

    def __init__(self) -> None:
        self.commands: list[object] = []
        self.errors: list[BaseException] = []
        self.connections: list[Connection] = []

    async def __call__(self, conn: Connection) -> None:
        self.connections.append(conn)
        try:
            while True:
                msg = await conn.recv()
                self.commands.append(msg)
                if isinstance(msg, Hello) and conn.role == "compute":
                    await conn.send(Frontiers(GlobalId.user(1), write_frontier=Antichain.of(5)))
                elif isinstance(msg, Hello):
                    await conn.send(FrontierUpper(GlobalId.user(1), Antichain.of(5)))
        except Exception as e:
            self.errors.append(e)
            raise


async def test_round_trip_over_tcp(secret: bytes) -> None:
    rec = Recorder()
    async with await serve("127.0.0.1", 0, role="compute", secret=secret, handler=rec) as server:
        conn = await connect("127.0.0.1", server.port, role="compute", epoch=7, secret=secret)
        assert conn.epoch == 7 and conn.role == "compute"
        await conn.send(HELLO)
        reply = await conn.recv()
        assert reply == Frontiers(GlobalId.user(1), write_frontier=Antichain.of(5))
        assert rec.connections[0].epoch == 7
        assert server.epoch == 7
        assert server.stats.authenticated == 1 and server.stats.auth_failures == 0
        await conn.close()
        await conn.close()  # idempotent
        with pytest.raises(ConnectionClosed):
            await conn.send(HELLO)


async def test_sides_may_only_send_their_own_messages(secret: bytes) -> None:
    rec = Recorder()
    async with await serve("127.0.0.1", 0, role="compute", secret=secret, handler=rec) as server:
        conn = await connect("127.0.0.1", server.port, role="compute", epoch=1, secret=secret)
        with pytest.raises(TypeError, match="a compute controller cannot send Frontiers"):
            await conn.send(Frontiers(GlobalId.user(1)))
        with pytest.raises(TypeError, match="cannot send FrontierUpper"):
            await conn.send(FrontierUpper(GlobalId.user(1), Antichain.of(1)))
        await conn.send(HELLO)  # still open
        assert isinstance(await conn.recv(), Frontiers)
        await conn.close()


async def test_wrong_role_is_refused(secret: bytes) -> None:
    rec = Recorder()
    async with await serve("127.0.0.1", 0, role="storage", secret=secret, handler=rec) as server:
        with pytest.raises(AuthenticationFailed, match="storage replica, not compute"):
            await connect("127.0.0.1", server.port, role="compute", epoch=1, secret=secret)
    assert rec.connections == []


async def test_newer_epoch_replaces_older_is_refused(secret: bytes) -> None:
    rec = Recorder()
    async with await serve("127.0.0.1", 0, role="compute", secret=secret, handler=rec) as server:
        first = await connect("127.0.0.1", server.port, role="compute", epoch=5, secret=secret)
        await first.send(HELLO)
        await first.recv()
        second = await connect("127.0.0.1", server.port, role="compute", epoch=6, secret=secret)
        # The old connection is closed by the replica: its controller end sees the close.
        with pytest.raises(ConnectionClosed):
            await asyncio.wait_for(first.recv(), 2)
        assert isinstance(rec.errors[0], ConnectionClosed)
        await second.send(HELLO)
        assert isinstance(await second.recv(), Frontiers)
        for stale in (5, 6, 1):
            with pytest.raises(EpochRefused, match=f"epoch {stale} refused.*accepted epoch 6"):
                await connect("127.0.0.1", server.port, role="compute", epoch=stale, secret=secret)
        assert server.stats.epochs_refused == 3 and server.stats.replaced == 1
        # The refused attempts did not disturb the current connection.
        await second.send(HELLO)
        assert isinstance(await second.recv(), Frontiers)
        assert len(rec.connections) == 2
        await second.close()


def test_epoch_gate_and_composition() -> None:
    gate: EpochGate[str] = EpochGate()
    assert gate.admit(3, "a") is None
    assert gate.admit(4, "b") == "a"
    with pytest.raises(EpochRefused):
        gate.admit(4, "c")
    gate.release("b")
    assert gate.connection is None and gate.epoch == 4
    assert compose_epoch(2, 1) > compose_epoch(1, 2**32 - 1) > compose_epoch(1, 7)
    with pytest.raises(ValueError, match="out of range"):
        compose_epoch(1, 2**32)


async def test_insecure_bind_is_refused(secret: bytes) -> None:
    async def handler(conn: Connection) -> None:
        pass

    with pytest.raises(InsecureBind, match="without a secret or TLS"):
        await serve("0.0.0.0", 0, role="compute", handler=handler)
    with pytest.raises(InsecureBind):
        check_bind("10.1.2.3", secret=None, tls=None)
    check_bind("10.1.2.3", secret=secret, tls=None)
    check_bind("::1", secret=None, tls=None)
    check_bind("localhost", secret=None, tls=None)
    with pytest.raises(ValueError, match="at least 32 required"):
        await serve("127.0.0.1", 0, role="compute", handler=handler, secret=b"short")


async def test_idle_connection_survives_on_keepalives_and_silent_peer_times_out(
    secret: bytes,
) -> None:
    rec = Recorder()
    fast = TransportOptions(keepalive_interval=0.05, read_timeout=0.3)
    async with await serve(
        "127.0.0.1", 0, role="compute", secret=secret, handler=rec, options=fast
    ) as server:
        conn = await connect(
            "127.0.0.1", server.port, role="compute", epoch=1, secret=secret, options=fast
        )
        # Idle for longer than the read timeout: keepalives keep both ends open.
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(conn.recv(), 0.8)
        assert rec.errors == [] and not rec.connections[0].closed
        await conn.close()
    # A replica that sends nothing (not even keepalives) is dropped after the read timeout.
    quiet = TransportOptions(keepalive_interval=10, read_timeout=20)
    async with await serve(
        "127.0.0.1", 0, role="compute", secret=secret, handler=rec, options=quiet
    ) as server:
        conn = await connect(
            "127.0.0.1", server.port, role="compute", epoch=1, secret=secret, options=fast
        )
        with pytest.raises(ConnectionClosed, match=r"no frame from .* for 0.3 s"):
            await asyncio.wait_for(conn.recv(), 3)
        assert conn.closed


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_connect_retrying_waits_for_a_starting_replica(secret: bytes) -> None:
    port = _free_port()
    with pytest.raises(ConnectFailed, match="cannot connect"):
        await connect("127.0.0.1", port, role="compute", epoch=1, secret=secret)
    with pytest.raises(ConnectFailed):
        await connect_retrying(
            "127.0.0.1", port, role="compute", epoch=1, secret=secret, give_up_after=0.3
        )
    rec = Recorder()

    async def start_later() -> None:
        await asyncio.sleep(0.4)
        servers.append(await serve("127.0.0.1", port, role="compute", secret=secret, handler=rec))

    servers: list[object] = []
    starter = asyncio.create_task(start_later())
    loop = asyncio.get_running_loop()
    begin = loop.time()
    conn = await connect_retrying("127.0.0.1", port, role="compute", epoch=1, secret=secret)
    assert loop.time() - begin < 2.0  # backoff never exceeds 1 s
    await starter
    await conn.send(HELLO)
    assert isinstance(await conn.recv(), Frontiers)
    await conn.close()
    await servers[0].close()  # type: ignore[attr-defined]


async def test_connect_retrying_does_not_retry_authentication_failures(secret: bytes) -> None:
    rec = Recorder()
    async with await serve("127.0.0.1", 0, role="compute", secret=secret, handler=rec) as server:
        with pytest.raises(AuthenticationFailed):
            await connect_retrying(
                "127.0.0.1", server.port, role="compute", epoch=1, secret=b"w" * 32
            )
        assert server.stats.auth_failures == 1


async def test_create_instance_round_trips_over_tcp(secret: bytes) -> None:
    rec = Recorder()
    async with await serve("127.0.0.1", 0, role="compute", secret=secret, handler=rec) as server:
        conn = await connect("127.0.0.1", server.port, role="compute", epoch=1, secret=secret)
        await conn.send(CreateInstance(InstanceConfig(logging_interval_ms=7)))
        await conn.send(HELLO)
        await conn.recv()
        assert rec.commands == [CreateInstance(InstanceConfig(logging_interval_ms=7)), HELLO]
        await conn.close()
