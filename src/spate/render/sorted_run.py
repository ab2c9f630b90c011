"""Sorted runs: a large batch of an arrangement laid out by key, so that a lookup reads only
the rows of the keys asked.

An arrangement too large to keep in driver memory (:data:`~spate.render.lookup.LOOKUP_MAX_ROWS`)
could not serve lookups, so every step of an operator over it had Spark read all of its files.
Its large batches are now kept as **sorted runs**: the batch's rows sorted by the one column
the arrangement's operator looks keys up by, written twice —

* as Parquet (:data:`RUN_GROUP_ROWS` rows a row group), the file Spark reads;
* as an uncompressed Arrow IPC file beside it (the **lookup copy**), with the key column's
  integers as one more int64 column ``_key``, in one record batch.

A lookup maps the lookup copy into memory (nothing is read or copied up front), finds each
asked key's rows by binary search on ``_key`` and takes them: it touches the pages of the
matching rows and ``O(log n)`` pages of keys per key asked, whatever the run's size, and holds
nothing in driver memory between lookups (the operating system's page cache keeps what is hot).
(Reading Parquet row groups instead cost ``RUN_GROUP_ROWS`` rows per key asked: a thousand
keys spread over a 10M-row run read a third of it.)

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

from spate.render.batch import write_parquet
from spate.render.key_index import as_int64, indexable

RUN_GROUP_ROWS: Final = 4096
"""Rows per row group of a sorted run: the granularity of a lookup's reads. Smaller groups
read fewer rows a key but make the footer (kept in memory) and the read calls more."""

_KEY: Final = "_key"


@dataclass(frozen=True, slots=True)
class SortedRun:
    """One batch written sorted by ``column`` (Parquet at ``path``, its lookup copy at
    ``copy``)."""

    path: Path
    copy: Path
    column: str
    type: pa.DataType
    rows: int

    @staticmethod
    def write(table: pa.Table, path: Path, column: str) -> SortedRun | None:
        """Write ``table`` to ``path`` sorted by ``column``, and its lookup copy beside it;
        ``None`` (nothing written) when the column cannot be laid out so (module docs)."""
        values = table.column(column)
        if not indexable(values):
            return None
        keys = as_int64(values)
        order = np.argsort(keys, kind="stable")
        ordered = table.take(order)
        write_parquet(ordered, path, row_group_size=RUN_GROUP_ROWS)
        copy = path.with_suffix(".arrow")
        keyed = ordered.append_column(_KEY, pa.array(keys[order], pa.int64())).combine_chunks()
        with pa.OSFile(str(copy), "wb") as sink, pa.ipc.new_file(sink, keyed.schema) as writer:
            writer.write_table(keyed, max_chunksize=max(1, keyed.num_rows))
        return SortedRun(path, copy, column, values.type, int(table.num_rows))

    def table(self) -> pa.Table:
        """The run's rows, memory-mapped (no copy; the key column left out)."""
        return self._mapped().drop_columns([_KEY])

    def _mapped(self) -> pa.Table:
        return pa.ipc.open_file(pa.memory_map(str(self.copy))).read_all()

    def unlink(self) -> None:
        """Delete the lookup copy (the arrangement deletes the Parquet file)."""
        self.copy.unlink(missing_ok=True)

    def lookup(self, wanted: pa.Array | pa.ChunkedArray, schema: pa.Schema) -> pa.Table:
        """The rows whose key is among ``wanted`` (NULLs match nothing).

        Raises what pyarrow raises when ``wanted`` does not cast to the column's type."""
        cast = wanted.cast(self.type)
        if isinstance(cast, pa.ChunkedArray):
            cast = cast.combine_chunks()
        asked = np.unique(as_int64(cast.drop_null()))
        if len(asked) == 0 or self.rows == 0:
            return schema.empty_table()
        mapped = self._mapped()
        column = mapped.column(_KEY)
        keys = column.chunk(0).to_numpy() if column.num_chunks == 1 else as_int64(column)
        lo = np.searchsorted(keys, asked, side="left")
        hi = np.searchsorted(keys, asked, side="right")
        lengths = hi - lo
        total = int(lengths.sum())
        if total == 0:
            return schema.empty_table()
        starts = np.repeat(lo - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
        found = mapped.drop_columns([_KEY]).take(pa.array(starts + np.arange(total)))
        return found if found.schema.equals(schema) else found.cast(schema)
