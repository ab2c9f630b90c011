"""The generic replica client, without sockets: a fake connection of two queues, an injected
sleep and a manual clock."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from spate.clock import ManualClock
from spate.protocol.errors import ConnectFailed
from spate.protocol.replica_client import Backoff, ClientConnection, ReplicaClient

_CLOSED = object()


@dataclass
class FakeConnection:
    """The controller's end: what it sends lands in ``sent``; ``deliver`` plays the replica."""

    sent: list[str] = field(default_factory=list)
    inbox: asyncio.Queue[object] = field(default_factory=asyncio.Queue)
    closed: bool = False
    fail_send: bool = False

    async def send(self, message: str) -> None:
        if self.fail_send:
            raise ConnectionResetError("send failed")
        self.sent.append(message)

    async def recv(self) -> object:
        message = await self.inbox.get()
        if message is _CLOSED:
            raise ConnectionResetError("closed by the replica")
        return message

    async def close(self) -> None:
        self.closed = True

    def deliver(self, message: object) -> None:
        self.inbox.put_nowait(message)


@dataclass
class Recorder:
    reports: list[object] = field(default_factory=list)

    def connected(self) -> None:
        self.reports.append("connected")

    def response(self, response: int) -> None:
        self.reports.append(response)

    def failed(self, reason: str) -> None:
        self.reports.append(("failed", reason))


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


def test_backoff_doubles_up_to_its_cap() -> None:
    delays = Backoff(0.25, 1.0).delays()
    assert [next(delays) for _ in range(5)] == [0.25, 0.5, 1.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="backoff"):
        Backoff(2.0, 1.0)


async def test_retries_with_backoff_then_sends_queued_commands_in_order() -> None:
    clock = ManualClock()
    delays: list[float] = []
    conn = FakeConnection()
    attempts = 0

    async def sleep(delay: float) -> None:
        delays.append(delay)
        clock.advance(int(delay * 1000))

    async def open() -> ClientConnection[str]:
        nonlocal attempts
        attempts += 1
        if attempts < 4:
            raise ConnectFailed("refused")
        return conn

    rec = Recorder()
    client: ReplicaClient[str, int] = ReplicaClient(
        name="test",
        open=open,
        responses=(int,),
        listener=rec,
        backoff=Backoff(0.1, 0.3),
        sleep=sleep,
        clock=clock,
    )
    client.send("a")  # before the connection is up: queued, not lost
    client.send("b")
    await settle()
    assert rec.reports == ["connected"]
    assert delays == [0.1, 0.2, 0.3]
    assert client.connect_attempts == 4
    assert client.connected_after_s == pytest.approx(0.6)
    client.send("c")
    conn.deliver(7)
    conn.deliver(8)
    await settle()
    assert conn.sent == ["a", "b", "c"]
    assert rec.reports == ["connected", 7, 8]
    client.close()
    await client.wait_closed()
    assert conn.closed and client.done()


@pytest.mark.parametrize("how", ["replica closes", "not a response", "send fails"])
async def test_the_first_error_is_reported_once_and_ends_the_client(how: str) -> None:
    conn = FakeConnection(fail_send=how == "send fails")

    async def open() -> ClientConnection[str]:
        return conn

    rec = Recorder()
    client: ReplicaClient[str, int] = ReplicaClient(
        name="test", open=open, responses=(int,), listener=rec
    )
    await settle()
    if how == "replica closes":
        conn.deliver(_CLOSED)
    elif how == "not a response":
        conn.deliver("a command, not a response")
    else:
        client.send("x")
    await client.wait_closed()
    conn.deliver(9)  # nothing is reported after the failure
    client.send("y")
    await settle()
    assert rec.reports[0] == "connected" and len(rec.reports) == 2
    kind, reason = rec.reports[1]  # type: ignore[misc]
    assert kind == "failed"
    expected = {
        "replica closes": "closed by the replica",
        "not a response": "not a response of this protocol: str",
        "send fails": "send failed",
    }[how]
    assert expected in reason
    assert conn.closed


async def test_a_closed_client_reports_nothing_and_closes_a_late_connection() -> None:
    conn = FakeConnection()
    gate = asyncio.Event()

    async def open() -> ClientConnection[str]:
        await gate.wait()
        return conn

    rec = Recorder()
    client: ReplicaClient[str, int] = ReplicaClient(
        name="test", open=open, responses=(int,), listener=rec
    )
    await settle()
    client.close()
    await client.wait_closed()
    assert rec.reports == [] and client.done()
