"""Hypothesis strategies for small values and for input update streams of oracle tests.

* :func:`small_datums` / :func:`small_rows` — values from small domains so that joins match,
  groups collide and temporal bounds fall inside the times tested (timestamps are a few
  milliseconds after 1970-01-01, some with sub-millisecond parts);
* :func:`update_streams` / :func:`input_streams` — ``(row, time, diff)`` insertions **and
  retractions** whose accumulation is a multiset (never negative) at every time.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from decimal import Decimal
from typing import Final

from hypothesis import strategies as st

from spate.ids import GlobalId
from spate.repr.desc import RelationDesc
from spate.repr.types import Datum, Row, ScalarKind, ScalarType

K = ScalarKind
EPOCH: Final = dt.datetime(1970, 1, 1)


def small_datums(t: ScalarType) -> st.SearchStrategy[Datum]:
    """Non-NULL values of ``t`` from a small domain (collisions are the point)."""
    k = t.kind
    if k is K.BOOL:
        return st.booleans()
    if k is K.INT64:
        return st.integers(-3, 12)
    if k is K.FLOAT64:
        return st.sampled_from([-1.5, 0.0, 0.25, 1.0, 2.5])
    if k is K.NUMERIC:
        assert t.scale is not None and t.precision is not None
        scale = t.scale
        bound = 10 ** min(t.precision, 2) - 1
        return st.integers(-bound, bound).map(lambda n: Decimal(n).scaleb(-scale))
    if k is K.TEXT:
        return st.sampled_from(["", "a", "b", "ab", "B", "a,b", "ba%", "Abc"])
    if k is K.BYTES:
        return st.sampled_from([b"", b"a", b"\x00", b"ab"])
    if k is K.DATE:
        return st.integers(0, 3).map(lambda d: dt.date(1970, 1, 1) + dt.timedelta(days=d))
    if k is K.TIMESTAMP:
        return st.tuples(st.integers(0, 12), st.sampled_from([0, 0, 500])).map(
            lambda p: EPOCH + dt.timedelta(milliseconds=p[0], microseconds=p[1])
        )
    return st.sampled_from(["1", '{"a": 1}', "[]", "null"])


def small_rows(desc: RelationDesc) -> st.SearchStrategy[Row]:
    found = _ROW_CACHE.get(desc)
    if found is None:
        parts = [
            st.one_of(st.none(), small_datums(c.type)) if c.nullable else small_datums(c.type)
            for c in desc.columns
        ]
        found = _ROW_CACHE[desc] = st.tuples(*parts)
    return found


_ROW_CACHE: dict[RelationDesc, st.SearchStrategy[Row]] = {}


@st.composite
def update_streams(
    draw: st.DrawFn, desc: RelationDesc, *, max_time: int = 8, max_updates: int = 16
) -> list[tuple[Row, int, int]]:
    """Insertions and retractions over times ``0..max_time``, in time order; at every time the
    accumulated multiplicity of every row is ``>= 0``."""
    rows = small_rows(desc)
    n = draw(st.integers(0, max_updates))
    times = sorted(draw(st.lists(st.integers(0, max_time), min_size=n, max_size=n)))
    present: dict[Row, int] = {}
    out: list[tuple[Row, int, int]] = []
    for time in times:
        live = [r for r, m in present.items() if m > 0]
        if live and draw(st.integers(0, 2)) == 0:
            row = live[draw(st.integers(0, len(live) - 1))]
            diff = -draw(st.integers(1, present[row]))
        else:
            row = draw(rows)
            diff = draw(_INSERT_DIFFS)
        present[row] = present.get(row, 0) + diff
        out.append((row, time, diff))
    return out


_INSERT_DIFFS = st.sampled_from([1, 1, 1, 2])


def input_streams(
    inputs: Mapping[GlobalId, RelationDesc], *, max_time: int = 8, max_updates: int = 16
) -> st.SearchStrategy[dict[GlobalId, list[tuple[Row, int, int]]]]:
    """One update stream per input collection."""
    return st.fixed_dictionaries(
        {
            id: update_streams(desc, max_time=max_time, max_updates=max_updates)
            for id, desc in inputs.items()
        }
    )
