"""A table's contents as the group committer knows them: for checking deletes and updates.

Two forms, one interface (:meth:`TableContents.count`, :meth:`~TableContents.items`,
:meth:`~TableContents.apply`):

* **rows** — a ``Counter`` of every row (what :class:`TableContents` is built from rows);
* **snapshot** (:meth:`TableContents.of_snapshot`) — the table's consolidated snapshot as Arrow,
  plus the changes applied since (a ``Counter`` of diffs). Reading a million-row table into
  Python rows takes seconds; its Arrow snapshot a fraction of one. Before a write asks about
  rows, the committer calls :meth:`~TableContents.prefetch` with them: one vectorised join of
  those rows with the snapshot gives their counts, so the first update of a large table does
  not wait for every row to become a Python object. Meanwhile the full ``Counter`` is built on
  a worker thread (:meth:`~TableContents.build`) and, once built, replaces the snapshot
  (:meth:`~TableContents.settle`): later writes check rows with dictionary lookups again.

Only tables whose columns compare alike in Arrow and in Python (bool, int64, text, date,
timestamp) take the snapshot form, and only rows without NULLs are looked up in it: anything
else builds the ``Counter`` first (:meth:`~TableContents.materialize`).

**Integer tables keep the snapshot form.** When every column is int64 or bool, the snapshot is
indexed instead (:class:`_RowIndex`: a 64-bit hash of each row, sorted, built with numpy once):
a lookup is a binary search and a comparison of the candidates' columns, so no row of the
snapshot ever becomes a Python object and no ``Counter`` of the whole table is built.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spate.repr.arrow import rows_to_table, table_to_rows
from spate.repr.desc import DIFF_COLUMN, RelationDesc
from spate.repr.types import Row, ScalarKind

K = ScalarKind
_LOOKUP_KINDS: Final = frozenset({K.BOOL, K.INT64, K.TEXT, K.DATE, K.TIMESTAMP})
_INDEX_KINDS: Final = frozenset({K.BOOL, K.INT64})
_INDEX: Final = "__i"
_QUICK_ROWS: Final = 5_000


class TableContents:
    """A table's rows (row → count > 0) as of the writes before the one being derived."""

    def __init__(self, rows: Iterable[tuple[Row, int]] = ()) -> None:
        self._rows: Counter[Row] | None = Counter()
        self._desc: RelationDesc | None = None
        self._snapshot: pa.Table | None = None
        self._changes: Counter[Row] = Counter()
        """Diffs applied since the snapshot (snapshot form)."""
        self._known: dict[Row, int] = {}
        """Snapshot counts of the rows looked up so far."""
        self._built: Counter[Row] | None = None
        self._index: _RowIndex | None = None
        self.apply(rows)

    @classmethod
    def of_snapshot(cls, desc: RelationDesc, snapshot: pa.Table) -> TableContents:
        """The contents of a table whose consolidated snapshot is ``snapshot`` (data columns
        and ``_diff``; rows of a positive count only); the snapshot form when the table's
        columns allow it (module docs)."""
        contents = cls()
        names = [c.name for c in desc.columns]
        snapshot = snapshot.select([*names, DIFF_COLUMN])
        if all(c.type.kind in _LOOKUP_KINDS for c in desc.columns):
            contents._rows, contents._desc, contents._snapshot = None, desc, snapshot
        else:
            contents._rows = _counter(snapshot, names)
        return contents

    @property
    def settled(self) -> bool:
        """Every row is a Python object already (the rows form)."""
        return self._rows is not None

    @property
    def indexed(self) -> bool:
        """The snapshot form is kept (an integer table: module docs); :meth:`build` is needed
        only for :meth:`items`."""
        return self._rows is None and self._desc is not None and _indexable(self._desc)

    def build(self) -> None:
        """Make every row of the snapshot a Python object (blocking; any thread)."""
        snapshot, desc = self._snapshot, self._desc
        if snapshot is not None and desc is not None and self._built is None:
            self._built = _counter(snapshot, [c.name for c in desc.columns])

    def settle(self) -> bool:
        """Switch to the rows form if :meth:`build` is done (event-loop thread); whether it is
        in the rows form now."""
        if self._rows is None and self._built is not None:
            rows, self._built = self._built, None
            for row, diff in self._changes.items():
                _add(rows, row, diff)
            self._rows, self._snapshot, self._changes, self._known = rows, None, Counter(), {}
            self._index = None
        return self._rows is not None

    def materialize(self) -> None:
        """Switch to the rows form now (blocking)."""
        self.build()
        self.settle()

    def prefetch(self, rows: Iterable[Row]) -> bool:
        """Look ``rows`` up in the snapshot at once (blocking: any thread, while the committer
        waits); False when they cannot be (a NULL): :meth:`materialize` then."""
        if self._rows is not None or self._snapshot is None or self._desc is None:
            return True
        wanted = list({r: None for r in rows if r not in self._known})
        if not wanted:
            return True
        if any(v is None for r in wanted for v in r):
            return False
        names = [c.name for c in self._desc.columns]
        keys = rows_to_table(self._desc, wanted)
        if _indexable(self._desc):
            if self._index is None:
                self._index = _RowIndex(self._snapshot, names)
            for row, n in zip(wanted, self._index.counts(keys), strict=True):
                self._known[row] = n
            return True
        keys = keys.append_column(_INDEX, pa.array(np.arange(len(wanted), dtype=np.int64)))
        found = self._snapshot.join(keys, keys=names, join_type="inner", use_threads=False)
        counts = dict.fromkeys(range(len(wanted)), 0)
        index = found.column(_INDEX).to_pylist()
        for i, n in zip(index, found.column(DIFF_COLUMN).to_pylist(), strict=True):
            counts[i] += n
        for i, row in enumerate(wanted):
            self._known[row] = counts[i]
        return True

    def quick_lookup(self, rows: int) -> bool:
        """Whether :meth:`prefetch` of ``rows`` rows takes about a millisecond (the index of
        an integer table is built and they are few), so it may run on the event loop."""
        return self._index is not None and rows <= _QUICK_ROWS

    def count(self, row: Row) -> int:
        """How many times ``row`` is in the table."""
        if self._rows is not None:
            return self._rows[row]
        if row not in self._known and not self.prefetch([row]):
            self.materialize()
            return self.count(row)
        return self._known[row] + self._changes[row]

    def items(self) -> Iterator[tuple[Row, int]]:
        """Every row with its count."""
        self.materialize()
        assert self._rows is not None
        return iter(self._rows.items())

    def apply(self, changes: Iterable[tuple[Row, int]]) -> None:
        if self._rows is not None:
            for row, diff in changes:
                _add(self._rows, row, diff)
        else:
            for row, diff in changes:
                self._changes[row] += diff


def _add(rows: Counter[Row], row: Row, diff: int) -> None:
    n = rows[row] + diff
    if n > 0:
        rows[row] = n
    else:
        del rows[row]


def _counter(snapshot: pa.Table, names: list[str]) -> Counter[Row]:
    positive = snapshot.filter(pc.greater(snapshot.column(DIFF_COLUMN), 0))
    rows = table_to_rows(positive, names)
    return Counter(dict(zip(rows, positive.column(DIFF_COLUMN).to_pylist(), strict=True)))


def _indexable(desc: RelationDesc) -> bool:
    return all(c.type.kind in _INDEX_KINDS for c in desc.columns)


_MIX: Final = np.uint64(0x9E3779B97F4A7C15)


class _RowIndex:
    """Counts of rows of an integer snapshot, found by a sorted 64-bit hash of each row.

    Rows with a NULL are left out: a looked-up row has none (``prefetch`` refuses them)."""

    def __init__(self, snapshot: pa.Table, names: list[str]) -> None:
        self._cols = _int_columns(snapshot, names)
        self._diffs = np.asarray(snapshot.column(DIFF_COLUMN).fill_null(0), dtype=np.int64)
        if any(snapshot.column(n).null_count for n in names):
            valid = np.ones(snapshot.num_rows, dtype=bool)
            for n in names:
                valid &= np.asarray(snapshot.column(n).is_valid())
            self._cols = [c[valid] for c in self._cols]
            self._diffs = self._diffs[valid]
        hashes = _hash(self._cols)
        self._order = np.argsort(hashes)
        self._sorted = hashes[self._order]

    def counts(self, keys: pa.Table) -> list[int]:
        """The count of each row of ``keys`` (same columns, no NULL) in the snapshot."""
        names = keys.column_names
        wanted = _int_columns(keys, names)
        hashes = _hash(wanted)
        lo = np.searchsorted(self._sorted, hashes, side="left")
        hi = np.searchsorted(self._sorted, hashes, side="right")
        # The usual case, one candidate (or none) per row, compared column by column at once;
        # rows whose hash several snapshot rows share, one by one.
        single = hi - lo == 1
        candidate = self._order[np.where(single, lo, 0)] if len(self._order) else lo
        same = single.copy()
        for c, w in zip(self._cols, wanted, strict=True):
            if len(c):
                same &= c[candidate] == w
        counts = np.where(same, self._diffs[candidate] if len(self._diffs) else 0, 0)
        out: list[int] = counts.tolist()
        for i in np.flatnonzero(hi - lo > 1).tolist():
            n = 0
            for j in self._order[lo[i] : hi[i]]:
                if all(c[j] == w[i] for c, w in zip(self._cols, wanted, strict=True)):
                    n += int(self._diffs[j])
            out[i] = n
        return out


def _int_columns(table: pa.Table, names: list[str]) -> list[np.ndarray]:
    return [
        np.asarray(table.column(n).cast(pa.int64()).fill_null(0), dtype=np.int64) for n in names
    ]


def _hash(columns: list[np.ndarray]) -> np.ndarray:
    n = len(columns[0]) if columns else 0
    h = np.full(n, 0xCBF29CE484222325, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for c in columns:
            h ^= c.view(np.uint64)
            h *= _MIX
            h ^= h >> np.uint64(29)
    return h
