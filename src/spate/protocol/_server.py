"""What every replica endpoint shares (TCP and in-memory): the epoch gate, counters, and
running one handler task per authenticated connection."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Final, Generic, Self, TypeVar

from spate.errors import ProtocolError
from spate.protocol.connection import (
    AUTH_FAILURES,
    PROTOCOL_ERRORS,
    Connection,
    TransportStats,
)
from spate.protocol.epochs import EpochGate
from spate.protocol.errors import ConnectionClosed, EpochRefused
from spate.protocol.handshake import Role

_log: Final = logging.getLogger("spate.protocol.transport")

C = TypeVar("C", bound=Connection)

Handler = Callable[[Connection], Awaitable[None]]
"""Awaited once per authenticated connection; the connection is closed when it returns."""


class ServerBase(Generic[C]):
    """Epoch gate, counters and handler tasks of one listening replica endpoint."""

    def __init__(self, *, role: Role, handler: Handler) -> None:
        self._role: Role = role
        self._handler = handler
        self._gate: EpochGate[C] = EpochGate()
        self._stats = TransportStats()
        self._tasks: set[asyncio.Task[None]] = set()
        self._host = ""
        self._port = 0

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self._role}, {self._host}:{self._port}, "
            f"epoch={self._gate.epoch})"
        )

    @property
    def host(self) -> str:
        return self._host

    @property
    def port(self) -> int:
        return self._port

    @property
    def stats(self) -> TransportStats:
        return self._stats

    @property
    def epoch(self) -> int | None:
        """The newest controller epoch accepted."""
        return self._gate.epoch

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the current connection and wait for every handler to finish."""
        current = self._gate.connection
        if current is not None:
            await current.close()
        tasks = [t for t in self._tasks if t is not asyncio.current_task()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _spawn(self, work: Coroutine[object, object, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _auth_failed(self, peer: str, why: object) -> None:
        self._stats.auth_failures += 1
        AUTH_FAILURES.labels(self._role).inc()
        _log.warning("%s replica: handshake with %s failed: %s", self._role, peer, why)

    def _check_epoch(self, epoch: int, peer: str) -> None:
        """Raise (and count) ``EpochRefused`` unless ``epoch`` is newer than every accepted."""
        try:
            self._gate.check(epoch, peer)
        except EpochRefused:
            self._stats.epochs_refused += 1
            raise

    def _admit(self, epoch: int, conn: C, peer: str) -> C | None:
        """Admit ``conn`` through the epoch gate; return the connection it replaces."""
        self._check_epoch(epoch, peer)
        old = self._gate.admit(epoch, conn, peer)
        self._stats.authenticated += 1
        if old is not None:
            self._stats.replaced += 1
            _log.info(
                "%s replica: epoch %d replaces epoch %d (%s)",
                self._role,
                epoch,
                old.epoch,
                old.peer,
            )
        return old

    async def _run_handler(self, conn: C) -> None:
        """Await the handler; a protocol error closes the connection, the server goes on."""
        peer = conn.peer
        _log.info("%s replica: controller %s connected, epoch=%d", self._role, peer, conn.epoch)
        try:
            await self._handler(conn)
        except ProtocolError as e:
            self._stats.protocol_errors += 1
            PROTOCOL_ERRORS.labels(self._role).inc()
            _log.warning("%s replica: protocol error from %s, closing: %s", self._role, peer, e)
        except ConnectionClosed as e:
            _log.info("%s replica: connection from %s closed: %s", self._role, peer, e)
        except asyncio.CancelledError:
            raise
        except Exception:
            _log.exception("%s replica: handler for %s failed", self._role, peer)
        finally:
            self._gate.release(conn)
            await conn.close()
