"""A replica's grace period: exit once no controller has held it for a while.

A replica serves controllers; one that no controller holds (no authenticated connection) for
``grace_s`` seconds is orphaned: its environment was closed without stopping it, or the
script that opened it died. :class:`IdleExit` counts a replica's authenticated connections
(wrap the transport handler with :meth:`IdleExit.wrap`) and sets the replica's stop event once
none has been open for the grace period. The period starts when the replica starts, so an
environment reopened within it adopts the replica (its controller connects again).
Unauthenticated connections (port probes, strangers) hold nothing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Final

from spate.protocol.connection import Connection

_log: Final = logging.getLogger("spate.protocol.idle")

Handler = Callable[[Connection], Awaitable[None]]


class IdleExit:
    """Sets ``stop`` after ``grace_s`` seconds without a held connection (module docs)."""

    def __init__(
        self,
        grace_s: float,
        stop: asyncio.Event,
        *,
        name: str = "replica",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not grace_s > 0:
            raise ValueError(f"the grace period must be positive, got {grace_s!r}")
        self._grace = grace_s
        self._stop = stop
        self._name = name
        self._clock = clock
        self._held = 0
        self._since = clock()

    @property
    def held(self) -> int:
        """How many authenticated connections are open now."""
        return self._held

    def idle_for(self) -> float:
        """Seconds since the last connection closed (or the start); 0 while one is held."""
        return 0.0 if self._held else self._clock() - self._since

    def wrap(self, handler: Handler) -> Handler:
        """``handler``, counting the connections it serves."""

        async def held(conn: Connection) -> None:
            self._held += 1
            try:
                await handler(conn)
            finally:
                self._held -= 1
                if self._held == 0:
                    self._since = self._clock()

        return held

    async def run(self) -> None:
        """Watch until the grace period passes unheld; then set ``stop`` and return."""
        tick = min(1.0, self._grace / 4)
        while not self._stop.is_set():
            idle = self.idle_for()
            if idle >= self._grace:
                _log.warning(
                    "%s: no controller has held this replica for %.0f s (grace period); exiting",
                    self._name,
                    idle,
                )
                self._stop.set()
                return
            await asyncio.sleep(min(tick, self._grace - idle) if idle else tick)
