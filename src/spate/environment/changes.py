"""What a subscribe yields: the changes of one closed interval, rows named by their columns.

Each batch is a :class:`Changes` (a ``list``) of :class:`Change` ``(time, row, diff)`` sorted
by time, where ``row`` is a named tuple of the relation's columns (``row.auction``; a column
whose name is not an identifier is reachable by position, or by ``_N`` as
:func:`collections.namedtuple` renames it). ``Changes.upper`` is the interval's end: every
change before it has been delivered (``None`` once the subscribe is complete). Both are plain
tuples and lists to code that compares them as such.
"""

from __future__ import annotations

import collections
from itertools import repeat
from typing import Any, NamedTuple, cast

import pyarrow as pa

from spate.repr.arrow import interval_of
from spate.repr.desc import DIFF_COLUMN, TIME_COLUMN, RelationDesc
from spate.repr.types import Row, ScalarKind


class Change(NamedTuple):
    """One change: ``row`` was added (``diff > 0``) or retracted (``diff < 0``) at ``time``."""

    time: int
    row: Row
    diff: int


class Changes(list[Change]):
    """The changes of one closed interval ``[.., upper)``, sorted by time."""

    upper: int | None

    def __init__(self, changes: list[Change], upper: int | None) -> None:
        super().__init__(changes)
        self.upper = upper


def row_type(desc: RelationDesc) -> type[tuple[Any, ...]]:
    """The named-tuple type of ``desc``'s rows (invalid or duplicate names become ``_N``)."""
    return collections.namedtuple("Row", list(desc.names), rename=True)


def changes_of(
    updates: pa.Table | None, desc: RelationDesc, named: type[tuple[Any, ...]], upper: int | None
) -> Changes:
    """The changes in ``updates`` (data columns plus ``_time`` and ``_diff``) as named rows."""
    if updates is None or updates.num_rows == 0:
        return Changes([], upper)
    cols = [_values(updates.column(n)) for n in desc.names]
    for i, c in enumerate(desc.columns):
        if c.type.kind is ScalarKind.INTERVAL:
            cols[i] = [interval_of(v) for v in cols[i]]
    # Named tuples made by mapping tuple.__new__ over the columns (in C: a named tuple's own
    # constructor is a Python call per row); sorted by time only when not already (a step's
    # changes usually share one time).
    new = tuple.__new__
    values = zip(*cols, strict=True) if cols else repeat((), updates.num_rows)
    rows = list(map(new, repeat(named), values))
    times = _values(updates.column(TIME_COLUMN))
    diffs = _values(updates.column(DIFF_COLUMN))
    out = cast("list[Change]", list(map(new, repeat(Change), zip(times, rows, diffs, strict=True))))
    if any(map(int.__gt__, times, times[1:])):
        out.sort(key=lambda u: u.time)
    return Changes(out, upper)


def _values(column: pa.ChunkedArray) -> list[Any]:
    """``column.to_pylist()``; an int64 column without NULLs through numpy (the same ints,
    several times faster)."""
    if column.type == pa.int64() and not column.null_count:
        values: list[Any] = column.to_numpy().tolist()
        return values
    listed: list[Any] = column.to_pylist()
    return listed
