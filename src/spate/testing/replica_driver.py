"""A minimal controller-side driver of one compute replica, for tests and benchmarks.

Not the compute controller (``spate.compute.controller``): it holds no read holds and makes no
decisions. It sends commands (recording them in a :class:`ComputeCommandHistory`, like the
controller, so a test can replay the reduced history to another replica), collects responses
in the background, and checks the replica's obligations as they arrive
(:class:`~spate.testing.replica_checks.ResponseChecker`); broken ones are collected in
:attr:`ComputeDriver.violations` (tests assert it stays empty).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Final

import pyarrow as pa

from spate.frontier.antichain import Frontier
from spate.ids import GlobalId, PeekId
from spate.plan.finishing import RowSetFinishing
from spate.protocol.common import PROTOCOL_VERSION, Hello
from spate.protocol.compute import (
    CancelPeek,
    ComputeCommand,
    CreateInstance,
    IndexTarget,
    InitializationComplete,
    InstanceConfig,
    Peek,
    PeekResponse,
    PersistTarget,
)
from spate.protocol.connection import Connection
from spate.protocol.errors import ConnectionClosed
from spate.protocol.history import ComputeCommandHistory
from spate.protocol.transport import connect_retrying
from spate.repr.desc import RelationDesc
from spate.repr.types import Row
from spate.testing.replica_checks import Observed, ResponseChecker

DEFAULT_TIMEOUT_S: Final = 60.0


class ComputeDriver:
    """Drives one replica connection (module docs)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.history = ComputeCommandHistory()
        self.checker = ResponseChecker()
        self._changed = asyncio.Condition()
        self._closed: BaseException | None = None
        self._reader = asyncio.create_task(self._read(), name="compute-driver-recv")

    @classmethod
    async def connect(
        cls,
        host: str,
        port: int,
        *,
        epoch: int,
        secret: object = None,
        timeout: float = DEFAULT_TIMEOUT_S,
    ) -> ComputeDriver:
        conn = await connect_retrying(
            host, port, role="compute", epoch=epoch, secret=secret, give_up_after=timeout
        )
        return cls(conn)

    @property
    def observed(self) -> Observed:
        return self.checker.observed

    @property
    def violations(self) -> list[str]:
        return self.checker.violations

    # -- sending ------------------------------------------------------------------------------

    async def send(self, *commands: ComputeCommand) -> None:
        for c in commands:
            self.checker.sent(c)
            if not isinstance(c, Hello):
                self.history.push(c)
            await self.conn.send(c)

    async def start(
        self, commands: Iterable[ComputeCommand] = (), *, config: InstanceConfig | None = None
    ) -> None:
        """``Hello``, ``CreateInstance``, ``commands``, ``InitializationComplete``."""
        await self.send(Hello(PROTOCOL_VERSION, self.conn.epoch, secrets.token_bytes(16)))
        await self.send(CreateInstance(config or InstanceConfig()))
        await self.send(*commands)
        await self.send(InitializationComplete())

    async def replay(self, commands: Sequence[ComputeCommand]) -> None:
        """Send a (reduced) history from another driver, with this connection's ``Hello``."""
        await self.send(Hello(PROTOCOL_VERSION, self.conn.epoch, secrets.token_bytes(16)))
        await self.send(*(c for c in commands if not isinstance(c, Hello)))

    async def close(self) -> None:
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._reader
        await self.conn.close()

    # -- receiving ----------------------------------------------------------------------------

    async def _read(self) -> None:
        try:
            while True:
                msg = await self.conn.recv()
                self.checker.received(msg, at=time.monotonic())
                async with self._changed:
                    self._changed.notify_all()
        except (ConnectionClosed, asyncio.CancelledError) as e:
            self._closed = e
            async with self._changed:
                self._changed.notify_all()

    async def wait_for(
        self, predicate: Callable[[], bool], *, timeout: float = DEFAULT_TIMEOUT_S
    ) -> None:
        """Wait until ``predicate()`` holds (re-checked after every response)."""

        async def until() -> None:
            async with self._changed:
                while not predicate():
                    if self._closed is not None:
                        raise ConnectionClosed(f"replica connection closed: {self._closed!r}")
                    await self._changed.wait()

        await asyncio.wait_for(until(), timeout)

    async def wait_frontier(
        self, id: GlobalId, beyond: int, *, kind: str = "output", timeout: float = DEFAULT_TIMEOUT_S
    ) -> Frontier:
        """Wait until ``id``'s ``kind`` frontier is beyond ``beyond`` (or ``{}``)."""

        def current() -> Frontier | None:
            f: Frontier | None = getattr(self.observed.frontiers[id], kind)
            return f

        def reached() -> bool:
            f = current()
            return f is not None and not f.less_equal(beyond)

        await self.wait_for(reached, timeout=timeout)
        f = current()
        assert f is not None
        return f

    # -- peeks --------------------------------------------------------------------------------

    def new_peek(
        self,
        target: IndexTarget | PersistTarget,
        timestamp: int,
        result_desc: RelationDesc,
        *,
        finishing: RowSetFinishing | None = None,
        literal_constraints: tuple[Row, ...] | None = None,
    ) -> Peek:
        return Peek(
            target,
            PeekId(uuid.uuid4()),
            timestamp,
            finishing or RowSetFinishing(),
            result_desc,
            literal_constraints,
        )

    async def peek(
        self, peek: Peek, *, timeout: float = DEFAULT_TIMEOUT_S, finish: bool = True
    ) -> PeekResponse:
        """Send ``peek``, wait for its one response; then (like the controller) ``CancelPeek``."""
        await self.send(peek)
        await self.wait_for(lambda: peek.uuid in self.observed.peeks, timeout=timeout)
        if finish:
            await self.send(CancelPeek(peek.uuid))
        return self.observed.peeks[peek.uuid]


def rows_of(response: PeekResponse) -> list[tuple[Row, int]]:
    """The sorted ``(row, multiplicity)`` pairs of a ``PeekRows`` answer (AssertionError else)."""
    from spate.protocol.compute import PeekRows

    assert isinstance(response.response, PeekRows), f"not rows: {response.response}"
    table: pa.Table = response.response.rows
    data = [c for c in table.column_names if c != "_diff"]
    cols = [table.column(c).to_pylist() for c in data]
    diffs = table.column("_diff").to_pylist()
    out = [(tuple(vals), d) for *vals, d in zip(*cols, diffs, strict=True)]
    return sorted(out, key=repr)
