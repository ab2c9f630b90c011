"""A scripted compute replica that speaks the real protocol over a real ``Connection``.

It is a test double of the compute replica: no Spark, no dataflows. It checks every
command it receives against the protocol stages, keeps a log per connection, and answers from a
script: indexes report frontiers as the test advances a global ``upper``; a peek at a time below
the upper is answered at once with ``rows_at(timestamp)``, a later one when the upper passes it;
``AllowCompaction({})`` makes it report every frontier of the collection as ``{}``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pyarrow as pa

from spate.frontier import Antichain
from spate.ids import GlobalId, PeekId
from spate.protocol.compute import (
    AllowCompaction,
    CancelPeek,
    CreateDataflow,
    Frontiers,
    Peek,
    PeekCanceled,
    PeekResponse,
    PeekRows,
)
from spate.protocol.connection import Connection
from spate.protocol.errors import ConnectionClosed
from spate.protocol.stages import ReplicaStages


def rows_at(timestamp: int) -> PeekRows:
    """The deterministic answer of every peek at ``timestamp``."""
    n = timestamp % 7 + 1
    return PeekRows(pa.table({"k": list(range(n)), "v": ["x"] * n, "_diff": [1] * n}))


@dataclass
class Session:
    epoch: int
    conn: Connection
    commands: list[object] = field(default_factory=list)


class ScriptedReplica:
    def __init__(self, upper: int = 0) -> None:
        self.upper = upper
        self.sessions: list[Session] = []
        self.errors: list[str] = []
        self._indexes: dict[GlobalId, Antichain[int]] = {}
        self._waiting: dict[PeekId, Peek] = {}
        self.connected = asyncio.Event()

    @property
    def current(self) -> Session | None:
        return self.sessions[-1] if self.sessions else None

    async def handle(self, conn: Connection) -> None:
        session = Session(conn.epoch, conn)
        self.sessions.append(session)
        self._indexes, self._waiting = {}, {}
        stages = ReplicaStages("compute", epoch=conn.epoch)
        self.connected.set()
        try:
            while True:
                command = await conn.recv()
                session.commands.append(command)
                try:
                    stages.observe(command)
                except Exception as e:
                    self.errors.append(str(e))
                    raise
                await self._apply(conn, command)
        except ConnectionClosed:
            return

    async def _apply(self, conn: Connection, command: object) -> None:
        if isinstance(command, CreateDataflow):
            df = command.dataflow
            assert df.as_of is not None
            for e in df.index_exports:
                self._indexes[e.id] = df.as_of
                await self._report(conn, e.id)
        elif isinstance(command, AllowCompaction) and command.frontier.is_empty():
            if self._indexes.pop(command.id, None) is not None:
                empty = Antichain.empty()
                await conn.send(Frontiers(command.id, empty, empty, empty))
        elif isinstance(command, Peek):
            if command.timestamp < self.upper:
                await conn.send(PeekResponse(command.uuid, rows_at(command.timestamp)))
            else:
                self._waiting[command.uuid] = command
        elif isinstance(command, CancelPeek) and command.uuid in self._waiting:
            del self._waiting[command.uuid]
            await conn.send(PeekResponse(command.uuid, PeekCanceled()))

    async def _report(self, conn: Connection, id: GlobalId) -> None:
        as_of = self._indexes[id].as_option()
        assert as_of is not None
        upper = Antichain.of(max(self.upper, as_of))
        await conn.send(Frontiers(id, upper, upper, upper))

    async def advance(self, upper: int) -> None:
        """Move every index to ``upper`` and answer the peeks that became answerable."""
        self.upper = upper
        session = self.current
        if session is None or session.conn.closed:
            return
        for id in list(self._indexes):
            await self._report(session.conn, id)
        for uuid, peek in list(self._waiting.items()):
            if peek.timestamp < upper:
                del self._waiting[uuid]
                await session.conn.send(PeekResponse(uuid, rows_at(peek.timestamp)))

    async def kill(self) -> None:
        """Drop the current connection, as a crashed replica process would."""
        session = self.current
        if session is not None:
            await session.conn.close()
