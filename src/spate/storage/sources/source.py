"""The contract of a source: a deterministic, resumable reader of update batches.

A source turns an upstream system (a generator, a PostgreSQL publication, a directory of files)
into updates of one or more *outputs* (each a collection with its own ``RelationDesc``). Its
position is a *resume point* ``P``: an opaque value, ordered by :meth:`SourceReader.less_equal`,
such that everything upstream "before" ``P`` has been read.

The guarantee every source gives, and the reclocking in :mod:`spate.storage.sources.reclock`
relies on, is **determinism**: the updates between two resume points are a function of the two
points only. If ``poll(lower)`` returned a chunk with upper ``P``, then ``replay(lower, P)``
returns the same updates (as a multiset, per output) for as long as :meth:`committed` has not
been called with a point beyond ``lower``. So a restarted ingestion re-derives exactly the data
of any binding that was minted but not yet written, and never duplicates or skips.

A resume point is stored in the ingestion's *progress collection* as rows
(:meth:`progress_rows`; ``progress_desc`` is their schema) so that the progress collection's
contents at a time ``t`` name the resume point bound at ``t``.

Update tables have the output's data columns and ``_diff`` (int64); the reclocking adds
``_time``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

import pyarrow as pa

from spate.errors import SourceError as SourceError
from spate.errors import SourceUnavailable as SourceUnavailable
from spate.repr.arrow import arrow_field
from spate.repr.desc import DIFF_COLUMN, RelationDesc
from spate.repr.types import Row

P = TypeVar("P")


def diff_schema(desc: RelationDesc) -> pa.Schema:
    """The schema of a chunk's update table: data columns and ``_diff``."""
    return pa.schema(
        [arrow_field(c) for c in desc.columns] + [pa.field(DIFF_COLUMN, pa.int64(), nullable=False)]
    )


def empty_updates(desc: RelationDesc) -> pa.Table:
    return diff_schema(desc).empty_table()


@dataclass(frozen=True, slots=True)
class SourceChunk(Generic[P]):
    """Every update of the source between two resume points, per output.

    ``updates[name]`` has the data columns of output ``name`` plus ``_diff``; outputs without
    updates may be absent. ``upper`` is the resume point after the chunk.
    """

    upper: P
    updates: Mapping[str, pa.Table] = field(default_factory=dict)

    def num_updates(self) -> int:
        return sum(t.num_rows for t in self.updates.values())

    def num_bytes(self) -> int:
        return sum(t.nbytes for t in self.updates.values())


class SourceReader(Protocol[P]):
    """A running source. Methods may block (drivers call them off the event loop)."""

    @property
    def outputs(self) -> Mapping[str, RelationDesc]:
        """The output collections by name, in a fixed order."""
        ...

    @property
    def progress_desc(self) -> RelationDesc:
        """The schema of the rows that record a resume point."""
        ...

    def minimum(self) -> P:
        """The resume point before any data."""
        ...

    def less_equal(self, a: P, b: P) -> bool:
        """``a`` is at or before ``b``."""
        ...

    def progress_rows(self, point: P) -> list[Row]:
        """The progress collection's contents that record ``point``."""
        ...

    def point_from_rows(self, rows: Sequence[Row]) -> P:
        """Inverse of :meth:`progress_rows` (an empty list is :meth:`minimum`)."""
        ...

    def poll(self, lower: P, *, now_millis: int) -> SourceChunk[P] | None:
        """New updates after ``lower`` that are due by ``now_millis``; ``None`` if none yet."""
        ...

    def replay(self, lower: P, upper: P) -> SourceChunk[P]:
        """Exactly the updates between ``lower`` and ``upper`` (``upper`` from an earlier poll)."""
        ...

    def committed(self, point: P) -> None:
        """Everything up to ``point`` is durable downstream: upstream MAY release it."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class ReportsCoverage(Protocol):
    """A source that knows how far upstream it has ingested everything, beyond its resume
    point when the upstream moved on without anything for it (PostgreSQL's WAL)."""

    def covered_offset(self) -> int: ...


@runtime_checkable
class ReportsFailedOutputs(Protocol):
    """A source some of whose outputs can stop for good while the others go on (a MySQL table
    changed upstream): ``failed_outputs(point)`` names each output that stopped at or before
    ``point``, with why. An output, once named, stays named at every later point."""

    def failed_outputs(self, point: Any) -> Mapping[str, str]: ...


@runtime_checkable
class RestoresFromOutputs(Protocol):
    """A source whose state at a point (an UPSERT source's: what each key holds) is a function
    of its outputs' contents there, so that it resumes from them rather than from upstream's
    beginning. Before replaying from ``point``, an ingestion whose reader
    ``needs_outputs(point)`` hands :meth:`restore` each output's contents at ``point`` (data
    columns and ``_diff``, by output name); ``restore`` answers ``False`` when that is not
    enough (the reader then rebuilds its state some other way)."""

    def needs_outputs(self, point: Any) -> bool: ...

    def restore(self, point: Any, outputs: Mapping[str, pa.Table]) -> bool: ...


class IntPoints:
    """The resume-point half of a :class:`SourceReader` whose points are counters (an event
    count, an LSN): ``0`` is the minimum, the order is ``<=``, and a point ``p > 0`` is recorded
    as the single progress row ``(p,)``."""

    POINT_NAME = "offset"

    def minimum(self) -> int:
        return 0

    def less_equal(self, a: int, b: int) -> bool:
        return a <= b

    def progress_rows(self, point: int) -> list[Row]:
        return [(point,)] if point > 0 else []

    def point_from_rows(self, rows: Sequence[Row]) -> int:
        if not rows:
            return 0
        if len(rows) != 1 or len(rows[0]) != 1 or not isinstance(rows[0][0], int):
            raise SourceError(
                f"{type(self).__name__}: progress must be one ({self.POINT_NAME}) row, got {rows!r}"
            )
        return rows[0][0]
