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
from typing import Any, NamedTuple

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
    cols = [updates.column(n).to_pylist() for n in desc.names]
    for i, c in enumerate(desc.columns):
        if c.type.kind is ScalarKind.INTERVAL:
            cols[i] = [interval_of(v) for v in cols[i]]
    make = named._make  # type: ignore[attr-defined]
    rows = [make(r) for r in zip(*cols, strict=True)] if cols else [()] * updates.num_rows
    times = updates.column(TIME_COLUMN).to_pylist()
    diffs = updates.column(DIFF_COLUMN).to_pylist()
    out = [Change(t, r, d) for t, r, d in zip(times, rows, diffs, strict=True)]
    out.sort(key=lambda u: u.time)
    return Changes(out, upper)
