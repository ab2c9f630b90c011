"""What a table write (``insert``, ``update``, ``delete``) answers."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class WriteResult:
    """A table write that took effect.

    ``timestamp`` is the time the write happened at: every read that starts after the call
    returned observes it, and ``select(..., as_of=timestamp)`` shows the table just after it.
    ``rows`` counts the rows written: inserted, deleted, or replaced (each ``(old, new)`` pair
    of an update counts once). A delete that matched nothing took no time of its own: its
    ``timestamp`` is the current read time and ``rows`` is 0.
    """

    timestamp: int
    rows: int
