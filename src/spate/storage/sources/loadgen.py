"""Load generators: deterministic sources whose resume point is an event count.

A load generator defines a pure function ``events(lower, upper) -> updates`` of event numbers
``[lower, upper)``; this module adds what every generator shares: the resume point (``offset``,
the number of events emitted), progress rows ``(offset)``, and pacing: ``per_tick`` events every
``tick_ms`` of wall-clock time (the first tick at the first poll), at most ``max_chunk`` events
per poll, optionally ``max_events`` in all. Determinism is by construction: no generator keeps
random state between events, so the pacing decides only *when* an event is emitted, never what
it holds.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Final

import pyarrow as pa

from spate.repr.desc import RelationDesc
from spate.repr.types import INT64
from spate.storage.sources.source import IntPoints, SourceChunk, SourceError

OFFSET_DESC: Final = RelationDesc.of(("offset", INT64, False))
"""The progress rows of a load generator: the number of events emitted."""


class LoadGenerator(IntPoints, ABC):
    """Base of the generator readers; subclasses implement :meth:`outputs` and :meth:`events`."""

    def __init__(
        self,
        *,
        tick_ms: int,
        per_tick: int,
        max_chunk: int,
        max_events: int | None,
    ) -> None:
        if tick_ms < 1:
            raise SourceError(f"load generator: tick_ms must be >= 1, got {tick_ms!r}")
        if per_tick < 0:
            raise SourceError(f"load generator: per_tick must be >= 0, got {per_tick!r}")
        if max_chunk < 1:
            raise SourceError(f"load generator: max_chunk must be >= 1, got {max_chunk!r}")
        if max_events is not None and max_events < 0:
            raise SourceError(f"load generator: max_events must be >= 0, got {max_events!r}")
        self._tick_ms = tick_ms
        self._per_tick = per_tick
        self._max_chunk = max_chunk
        self._max_events = max_events
        # Pacing: the first poll releases events from then on at `rate` per second.
        self._paced_from: tuple[int, int] | None = None  # (now_millis, offset) at the first poll

    # -- the generator ----------------------------------------------------------------------

    @property
    @abstractmethod
    def outputs(self) -> Mapping[str, RelationDesc]: ...

    @abstractmethod
    def events(self, lower: int, upper: int) -> dict[str, pa.Table]:
        """The updates of events ``[lower, upper)`` per output (data columns and ``_diff``)."""

    def initial_events(self) -> int:
        """Events released at once on the first poll (a snapshot), before pacing applies."""
        return 0

    # -- SourceReader[int] --------------------------------------------------------------------

    @property
    def progress_desc(self) -> RelationDesc:
        return OFFSET_DESC

    def due(self, lower: int, now_millis: int) -> int:
        """The resume point that pacing allows at ``now_millis`` (never below ``lower``)."""
        if self._paced_from is None:
            self._paced_from = (now_millis, max(lower, self.initial_events()))
        start_ms, start_offset = self._paced_from
        ticks = max(0, now_millis - start_ms) // self._tick_ms + 1
        target = start_offset + ticks * self._per_tick
        target = min(target, max(lower + self._max_chunk, self.initial_events()))
        if self._max_events is not None:
            target = min(target, self._max_events)
        return max(target, lower)

    def poll(self, lower: int, *, now_millis: int) -> SourceChunk[int] | None:
        upper = self.due(lower, now_millis)
        if upper <= lower:
            return None
        return SourceChunk(upper, self.events(lower, upper))

    def replay(self, lower: int, upper: int) -> SourceChunk[int]:
        if upper < lower:
            raise SourceError(f"load generator: replay [{lower}, {upper}) is not an interval")
        return SourceChunk(upper, self.events(lower, upper) if upper > lower else {})

    def committed(self, point: int) -> None:
        return None

    def close(self) -> None:
        return None
