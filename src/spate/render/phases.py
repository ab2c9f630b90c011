"""Wall-clock times of the phases of one piece of work, for logging (``PhaseTimes``).

A hydration reads its imports, runs its operators and writes its exports; how long each took
is logged at INFO so where a slow hydration's time goes can be read from a replica's log.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator


class PhaseTimes:
    """Named durations, in the order they were first recorded (a name seen twice adds up)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def timed(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - started)

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    def summary(self) -> str:
        """``"a 0.12 s, b 1.50 s (total 1.62 s)"``."""
        parts = [f"{name} {s:.2f} s" for name, s in self.seconds.items()]
        return f"{', '.join(parts)} (total {sum(self.seconds.values()):.2f} s)"
