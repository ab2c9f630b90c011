"""Reading the bindings of a remap (progress) collection: which resume point at which time.

An ingestion's remap collection holds, at every time ``t``, the rows of the source's resume
point bound at ``t`` (:meth:`~spate.storage.sources.source.SourceReader.progress_rows`). Its
history is a sequence of *bindings* ``(t, point)``: the times at which the point changed.
:func:`binding_history` turns a snapshot and the listened updates into that sequence.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa

from spate.repr.arrow import table_to_updates
from spate.repr.types import Row
from spate.soft_assert import soft_assert


@dataclass(frozen=True, slots=True)
class Binding:
    """From ``time`` on, the source is read up to ``point``."""

    time: int
    rows: tuple[Row, ...]


def rows_of(contents: Counter[Row]) -> tuple[Row, ...]:
    """The rows of a consolidated multiset (each must have multiplicity one), sorted."""
    for row, n in contents.items():
        soft_assert(n == 1, f"remap row {row!r} has multiplicity {n}")
    return tuple(sorted((r for r, n in contents.items() if n > 0), key=repr))


def contents_of(snapshot: pa.Table) -> Counter[Row]:
    out: Counter[Row] = Counter()
    for row, _time, diff in table_to_updates(snapshot):
        out[row] += diff
    return +out


def binding_history(
    start: Counter[Row], updates: Iterable[pa.Table], *, below: int
) -> list[Binding]:
    """The bindings after ``start`` (the contents before the first update), in time order.

    ``updates`` are listened remap updates; only times ``< below`` count.
    """
    by_time: dict[int, list[tuple[Row, int]]] = {}
    for table in updates:
        for row, time, diff in table_to_updates(table):
            if time < below:
                by_time.setdefault(time, []).append((row, diff))
    contents = Counter(start)
    out: list[Binding] = []
    for time in sorted(by_time):
        for row, diff in by_time[time]:
            contents[row] += diff
        contents = +contents
        out.append(Binding(time, rows_of(contents)))
    return out
