"""Clocks, injected so that core code never reads the wall clock itself.

Core code (controllers, persist state, replica state) receives a :class:`Clock`. Production
uses :class:`SystemClock`; tests and simulations use :class:`ManualClock`, which only moves when
told to.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Final, Protocol

_EPOCH: Final = dt.datetime(1970, 1, 1)


def format_ms(ms: int) -> str:
    """A time (milliseconds since the Unix epoch, UTC) as people read it:
    ``2026-11-24 13:37:16.181``. spate's timestamps are such numbers; this is only display."""
    t = _EPOCH + dt.timedelta(milliseconds=ms)
    return f"{t:%Y-%m-%d %H:%M:%S}.{ms % 1000:03d}"


class Clock(Protocol):
    """Milliseconds since the Unix epoch (wall clock) and a monotonic reading in seconds."""

    def now_millis(self) -> int: ...

    def monotonic(self) -> float: ...


class SystemClock:
    """The machine's clocks."""

    def now_millis(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()


class ManualClock:
    """A clock that moves only when ``advance`` or ``set`` is called."""

    def __init__(self, now_millis: int = 0) -> None:
        if now_millis < 0:
            raise ValueError(f"clock cannot start before the epoch: {now_millis}")
        self._now = now_millis

    def now_millis(self) -> int:
        return self._now

    def monotonic(self) -> float:
        return self._now / 1000.0

    def advance(self, millis: int) -> None:
        if millis < 0:
            raise ValueError(f"a clock does not go back: advance({millis})")
        self._now += millis

    def set(self, now_millis: int) -> None:
        if now_millis < self._now:
            raise ValueError(f"a clock does not go back: {now_millis} < {self._now}")
        self._now = now_millis
