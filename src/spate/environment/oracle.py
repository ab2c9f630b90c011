"""The timestamp oracle: durable, monotonic timestamps for writes and strict-serializable reads.

* ``write_ts()`` returns a timestamp strictly greater than every timestamp this oracle (or any
  earlier oracle on the same consensus, before a restart) ever returned from ``write_ts`` or
  ``read_ts``, and at least the wall clock.
* ``apply_write(ts)`` records that the write at ``ts`` is acknowledged: ``read_ts() >= ts``
  from then on.
* ``read_ts()`` is the latest applied write timestamp: a read at it observes every acknowledged
  write (strict serializability), and read timestamps never go back.

Durability without a consensus write per timestamp: the oracle persists a *ceiling* and hands
out timestamps strictly below it from memory; when a timestamp would reach the ceiling, it first
commits a new ceiling ``ts + window``. After a restart, the oracle starts at the persisted
ceiling, which is beyond everything handed out before, so time never goes back. Reads after a
restart start at ``ceiling - 1``, which is at or beyond every acknowledged write.

The owner MAY raise the ceiling ahead of need, off its own thread: :meth:`TimestampOracle.
reserve_ahead` (blocking, consensus I/O) raises it once less than half a window is left, so
that ``write_ts`` on the owner's thread finds it raised instead of waiting for a consensus
read and compare-and-set (behind the process's other consensus writes) once a window.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Final

from spate.clock import Clock
from spate.environment.durable import DurableDocument
from spate.errors import UsageError
from spate.persist.location import Consensus
from spate.wire import wire

DEFAULT_WINDOW_MS: Final = 1_000


@wire("environment.oracle_state")
@dataclass(frozen=True, slots=True)
class OracleState:
    """Every timestamp ever handed out is strictly below ``ceiling``."""

    ceiling: int


class TimestampOracle:
    """See the module docs. Not thread-safe: one owner (the environment's event loop), except
    :meth:`reserve_ahead`, which any thread may call."""

    def __init__(
        self,
        consensus: Consensus,
        clock: Clock,
        *,
        key: str = "environment/oracle",
        window_ms: int = DEFAULT_WINDOW_MS,
    ) -> None:
        if window_ms < 1:
            raise UsageError(f"oracle window must be >= 1 ms, got {window_ms}")
        self._doc = DurableDocument(consensus, key, OracleState)
        self._reserving = threading.Lock()
        """Held while the durable ceiling is read or raised (the owner's ``write_ts`` and a
        :meth:`reserve_ahead` on another thread)."""
        self._clock = clock
        self._window = window_ms
        state = self._doc.load()
        ceiling = state.ceiling if state is not None else 0
        # Everything below the old ceiling may have been handed out: start beyond it.
        self._ceiling = ceiling
        self._last_write = ceiling - 1 if ceiling > 0 else -1
        self._read = max(self._last_write, 0)
        self._reserve(max(self._clock.now_millis(), self._last_write + 1))

    def _reserve(self, ts: int) -> None:
        """Make sure ``ts`` is below the durable ceiling."""
        with self._reserving:
            if ts < self._ceiling:
                return
            target = ts + self._window

            def raise_ceiling(current: OracleState | None) -> OracleState:
                old = current.ceiling if current is not None else 0
                return OracleState(max(old, target))

            self._ceiling = self._doc.update(raise_ceiling).ceiling

    def write_ts(self) -> int:
        """A fresh write timestamp: beyond every earlier one, and at least the wall clock."""
        ts = max(self._clock.now_millis(), self._last_write + 1, self._read + 1)
        if ts >= self._ceiling:
            self._reserve(ts)
        self._last_write = ts
        return ts

    def needs_reserve(self) -> bool:
        """Whether less than half a window is left below the ceiling: :meth:`reserve_ahead`
        would raise it."""
        return self.peek_write_ts() + self._window // 2 >= self._ceiling

    def reserve_ahead(self) -> None:
        """Raise the durable ceiling now if less than half a window is left below it (module
        docs). Blocks (consensus I/O); any thread. Timestamps handed out meanwhile stay below
        the ceiling they were handed out under, which only rises."""
        self._reserve(self.peek_write_ts() + self._window // 2)

    def peek_write_ts(self) -> int:
        """What ``write_ts`` would return now, without taking it."""
        return max(self._clock.now_millis(), self._last_write + 1, self._read + 1)

    def apply_write(self, ts: int) -> None:
        """The write at ``ts`` is acknowledged; reads from now on observe it."""
        if ts > self._last_write:
            raise UsageError(f"apply_write({ts}): no write timestamp {ts} was handed out")
        self._read = max(self._read, ts)

    def read_ts(self) -> int:
        """A timestamp at which every acknowledged write is visible; never decreases."""
        return self._read

    @property
    def ceiling(self) -> int:
        return self._ceiling
