"""Sorted runs: a large batch of an arrangement laid out by key, so that a lookup reads only
the parts of the file that can hold the keys asked.

An arrangement too large to keep in driver memory (:data:`~spate.render.lookup.LOOKUP_MAX_ROWS`)
could not serve lookups, so every step of an operator over it had Spark read all of its files.
Its large batches are now kept as **sorted runs**: the batch's rows sorted by the one column
the arrangement's operator looks keys up by, written as Parquet in row groups of
:data:`RUN_GROUP_ROWS` rows, with each row group's first and last key held in memory (the
run's manifest). A lookup of the sorted, distinct keys ``K`` reads the row groups ``g`` with
``K ∩ [low_g, high_g] ≠ ∅`` — a binary search per row group — and keeps the rows whose key is
in ``K``. Every row with a key in ``K`` lies in such a row group, so the lookup is exact; it
reads ``O(|K| · RUN_GROUP_ROWS)`` rows at most, whatever the run's size.

Only columns whose values are integers underneath and hold no NULL are laid out this way
(:func:`spate.render.key_index.indexable`); the order of a batch's rows carries no meaning, so
sorting changes no read.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from spate.render.batch import write_parquet
from spate.render.key_index import _as_int64, indexable

RUN_GROUP_ROWS: Final = 4096
"""Rows per row group of a sorted run: the granularity of a lookup's reads. Smaller groups
read fewer rows a key but make the footer (kept in memory) and the read calls more."""

RUN_READ_MAX_FRACTION: Final = 0.5
"""A lookup whose keys fall in more than this fraction of a run's row groups is declined
(``None``): the keys are spread over most of the run, and Spark reading it is no worse."""


@dataclass(frozen=True, slots=True)
class SortedRun:
    """One batch written sorted by ``column``, and its row groups' key ranges."""

    path: Path
    column: str
    type: pa.DataType
    lows: np.ndarray
    """The first key of each row group (ascending)."""
    highs: np.ndarray
    """The last key of each row group."""
    metadata: pq.FileMetaData

    @property
    def rows(self) -> int:
        return int(self.metadata.num_rows)

    @staticmethod
    def write(table: pa.Table, path: Path, column: str) -> SortedRun | None:
        """Write ``table`` to ``path`` sorted by ``column``; ``None`` (nothing written) when
        the column cannot be laid out so (module docs)."""
        values = table.column(column)
        if not indexable(values):
            return None
        keys = _as_int64(values)
        order = np.argsort(keys, kind="stable")
        write_parquet(table.take(order), path, row_group_size=RUN_GROUP_ROWS)
        keys = keys[order]
        metadata = pq.read_metadata(path)
        sizes = np.array(
            [metadata.row_group(g).num_rows for g in range(metadata.num_row_groups)],
            dtype=np.int64,
        )
        ends = np.cumsum(sizes)
        starts = ends - sizes
        return SortedRun(path, column, values.type, keys[starts], keys[ends - 1], metadata)

    def groups(self, asked: np.ndarray) -> np.ndarray:
        """The row groups that may hold a key of ``asked`` (sorted, distinct)."""
        first = np.searchsorted(asked, self.lows, side="left")
        after = np.searchsorted(asked, self.highs, side="right")
        return np.flatnonzero(first < after)

    def lookup(self, wanted: pa.Array | pa.ChunkedArray, schema: pa.Schema) -> pa.Table | None:
        """The rows whose key is among ``wanted`` (NULLs match nothing), or ``None`` when they
        are spread over too much of the run (:data:`RUN_READ_MAX_FRACTION`).

        Raises what pyarrow raises when ``wanted`` does not cast to the column's type."""
        cast = wanted.cast(self.type)
        if isinstance(cast, pa.ChunkedArray):
            cast = cast.combine_chunks()
        asked = np.unique(_as_int64(cast.drop_null()))
        groups = self.groups(asked)
        if len(groups) == 0:
            return schema.empty_table()
        if len(groups) > RUN_READ_MAX_FRACTION * max(1, len(self.lows)):
            return None
        read = pq.ParquetFile(self.path, metadata=self.metadata).read_row_groups(
            groups.tolist(), use_threads=False
        )
        keys = _as_int64(read.column(self.column))  # ascending: the groups are in order
        lo = np.searchsorted(keys, asked, side="left")
        hi = np.searchsorted(keys, asked, side="right")
        lengths = hi - lo
        total = int(lengths.sum())
        if total == 0:
            return schema.empty_table()
        starts = np.repeat(lo - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
        found = read.take(pa.array(starts + np.arange(total)))
        return found if found.schema.equals(schema) else found.cast(schema)
