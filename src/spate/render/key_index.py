"""A sorted index on one key column of an arrangement's batch, for lookups.

A lookup by scanning (:func:`spate.render.lookup.semi_join`) costs a pass over every row the
arrangement holds: 15 ms for a million rows and 57 ms for four million, whatever the number of
keys asked, so a step's cost would follow the state. A :class:`KeyIndex` keeps the column's
values sorted and the row order that sorts them; a lookup of ``k`` keys is then two binary
searches per key and a gather of the matching rows (0.5 ms for 1k keys in 1M rows). Building
one sorts the column once (~70 ms per million rows); the arrangement builds it on the first
lookup of a batch large enough to be worth it and keeps it as long as the batch.

Only columns whose values are integers underneath (``int64``, dates, timestamps) and that hold
no NULL are indexed; others are scanned.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
import pyarrow as pa

from spate.repr.arrow import integers_under

INDEX_MIN_ROWS: Final = 1 << 16
"""Batches with fewer rows are scanned: a scan of them costs less than a millisecond."""


def as_int64(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The integers under ``values`` (no NULLs), as int64."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    values = integers_under(values)
    return np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.int64)


def indexable(column: pa.ChunkedArray | pa.Array) -> bool:
    t = column.type
    integer_like = (
        pa.types.is_signed_integer(t)
        or pa.types.is_date32(t)
        or pa.types.is_date64(t)
        or pa.types.is_timestamp(t)
    )
    return integer_like and int(column.null_count) == 0


@dataclass(frozen=True, slots=True)
class KeyIndex:
    """One column's values in sorted order (``keys``) and the row of each (``order``)."""

    keys: np.ndarray
    order: np.ndarray
    type: pa.DataType

    @staticmethod
    def build(column: pa.ChunkedArray | pa.Array) -> KeyIndex | None:
        """The index of ``column``, ``None`` when it cannot be indexed (:func:`indexable`)."""
        if not indexable(column):
            return None
        values = as_int64(column)
        order = np.argsort(values, kind="quicksort")
        return KeyIndex(values[order], order, column.type)

    def rows(self, wanted: pa.Array | pa.ChunkedArray) -> np.ndarray:
        """The positions of the rows whose value is among ``wanted`` (NULLs among them match
        nothing: the column has none), in no particular order.

        Raises what pyarrow raises when ``wanted`` does not cast to the column's type.
        """
        cast = wanted.cast(self.type)
        if isinstance(cast, pa.ChunkedArray):
            cast = cast.combine_chunks()
        cast = cast.drop_null()
        if len(cast) == 0:
            return np.empty(0, dtype=np.int64)
        asked = np.unique(as_int64(cast))
        lo = np.searchsorted(self.keys, asked, side="left")
        hi = np.searchsorted(self.keys, asked, side="right")
        lengths = hi - lo
        total = int(lengths.sum())
        if total == 0:
            return np.empty(0, dtype=np.int64)
        # positions lo[i] .. hi[i]-1 of every asked key, as one array
        starts = np.repeat(lo - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
        positions = starts + np.arange(total)
        return np.asarray(self.order[positions], dtype=np.int64)
