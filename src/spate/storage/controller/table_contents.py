"""A table's contents as the group committer knows them: for checking deletes and updates.

The contents are the sum of **Arrow chunks** (updates: the data columns and ``_diff``, not
consolidated with each other) and of **changes** given as Python rows (a ``Counter`` of diffs).
The committer adds every insert it writes as a chunk (:meth:`TableContents.append`: no row
becomes a Python object) and every derived change (a delete, an update) as rows; a table read
from persist (after a restart) adds its snapshot as one more chunk
(:meth:`~TableContents.add_base`).
Sums commute, so the order in which chunks and changes arrive does not matter.

Two forms, one interface (:meth:`TableContents.count`, :meth:`~TableContents.items`,
:meth:`~TableContents.apply`):

* **rows** — a ``Counter`` of every row; chunks are folded into it (made Python rows) before a
  lookup, or, once a row of the table was looked up, ahead of time by
  :meth:`~TableContents.prepare` on a worker thread (a table that never takes a delete or
  update keeps its rows as Arrow). Tables with
  columns that compare differently in Arrow and in Python (float, numeric, bytes, jsonb,
  interval) keep this form.
* **snapshot** — the chunks stay Arrow. Before a write asks about rows, the committer calls
  :meth:`~TableContents.prefetch` with them: one vectorised join of those rows with the chunks
  gives their counts. Meanwhile the full ``Counter`` may be built on a worker thread
  (:meth:`~TableContents.build`) and, once built, replaces the chunks
  (:meth:`~TableContents.settle`): later writes check rows with dictionary lookups again.
  Only rows without NULLs are looked up this way: a NULL makes the committer build the
  ``Counter`` first (:meth:`~TableContents.materialize`).

**Integer tables are indexed.** When every column is int64 or bool, the chunks are indexed
instead of joined (:class:`_RowIndex`: a 64-bit hash of each row, sorted): a lookup is a binary
search per index and a comparison of the candidates' columns, so no row ever becomes a Python
object. Each new chunk becomes an index of its own; an index at most twice the size of the
next is merged with it (as a binary counter), so there are O(log n) indexes and every row is
re-sorted O(log n) times; a merge sums equal rows and drops those whose updates cancel, so a
table taking updates keeps an index about its live size. Rows are looked up in hash order (the
binary searches of each index walk it forwards). :meth:`~TableContents.prepare` does that
work on a worker thread while the committer's append is in flight, so a lookup right after an
insert finds the insert indexed already. Changes given as rows are turned into a chunk of their
own once they are many.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from typing import Final

import numpy as np
import pyarrow as pa

from spate.repr.arrow import arrow_field, rows_to_table, table_to_rows
from spate.repr.desc import DIFF_COLUMN, RelationDesc
from spate.repr.types import Row, ScalarKind
from spate.storage.controller.table_keys import add_keys, key_deltas

K = ScalarKind
_LOOKUP_KINDS: Final = frozenset({K.BOOL, K.INT64, K.TEXT, K.DATE, K.TIMESTAMP})
_INDEX_KINDS: Final = frozenset({K.BOOL, K.INT64})
_INDEX: Final = "__i"
_QUICK_ROWS: Final = 5_000
_FOLD_CHANGES: Final = 50_000
"""Changes given as rows that :meth:`TableContents.prepare` turns into a chunk (snapshot form)."""
_QUICK_PREPARE_ROWS: Final = 4_096
"""At most this many rows folded or indexed (and merged) by a :meth:`TableContents.prepare`
that :meth:`TableContents.prepare_is_quick` calls quick."""


class TableContents:
    """A table's rows (row → count > 0) as of the writes before the one being derived.

    ``TableContents(rows)`` is the rows form from ``(row, count)`` pairs;
    :meth:`empty` the contents of a table with no rows yet, to which :meth:`append` adds
    Arrow updates (module docs)."""

    def __init__(self, rows: Iterable[tuple[Row, int]] = ()) -> None:
        self._desc: RelationDesc | None = None
        self._rows: Counter[Row] | None = Counter()
        self._chunks: list[pa.Table] = []
        """Arrow updates: the snapshot (snapshot form) or not yet folded into ``_rows``."""
        self._changes: Counter[Row] = Counter()
        """Diffs given as rows since the chunks (snapshot form)."""
        self._known: dict[Row, int] = {}
        """Counts in the chunks of the rows looked up since the last chunk was added."""
        self._built: tuple[Counter[Row], int] | None = None
        """The rows of the first so many chunks (:meth:`build`), not yet settled."""
        self._runs: list[_RowIndex] = []
        self._unindexed: list[pa.Table] = []
        """Chunks of an integer table not yet in an index (``_runs``)."""
        self.building = False
        """A :meth:`build` was started (on a worker thread, by the committer)."""
        self._asked = False
        """A row was looked up: from then on :meth:`prepare` folds chunks into the rows."""
        self._keys: dict[tuple[str, ...], dict[Row, int]] = {}
        """Count of each key (no NULL) of the unique keys asked for (:meth:`key_counts`),
        kept up to date with every change added since."""
        self.apply(rows)

    @classmethod
    def empty(cls, desc: RelationDesc) -> TableContents:
        """The contents of a table of ``desc`` without rows: the snapshot form when the
        table's columns allow it (module docs), else the rows form."""
        contents = cls()
        contents._desc = desc
        if all(c.type.kind in _LOOKUP_KINDS for c in desc.columns):
            contents._rows = None
        return contents

    @classmethod
    def of_snapshot(cls, desc: RelationDesc, snapshot: pa.Table) -> TableContents:
        """The contents of a table whose consolidated snapshot is ``snapshot``."""
        contents = cls.empty(desc)
        contents.append(snapshot)
        return contents

    @property
    def desc(self) -> RelationDesc:
        if self._desc is None:
            raise ValueError("contents made from rows have no description")
        return self._desc

    @property
    def settled(self) -> bool:
        """The rows form (every row is, or is about to become, a Python object)."""
        return self._rows is not None

    @property
    def indexed(self) -> bool:
        """The snapshot form of an integer table: :meth:`build` is needed only for
        :meth:`items`."""
        return self._rows is None and self._desc is not None and _indexable(self._desc)

    # -- adding ---------------------------------------------------------------------------------

    def append(self, updates: pa.Table) -> None:
        """Add Arrow updates: the table's data columns and ``_diff`` (other columns are
        ignored). Cheap: nothing is converted or indexed here (:meth:`prepare` does that)."""
        self.add_base(updates, None)

    def add_base(
        self, updates: pa.Table, index: _RowIndex | None, *, counted: bool = False
    ) -> None:
        """:meth:`append` with the index of ``updates`` (:meth:`index_of`) if built already;
        ``counted``: changes already in the key counts (:meth:`prepare`'s own chunk)."""
        desc = self._desc
        if desc is None:
            raise ValueError("the rows form without a description takes no Arrow updates")
        if updates.num_rows == 0:
            return
        chunk = updates.select([*(c.name for c in desc.columns), DIFF_COLUMN])
        chunk = chunk.cast(_chunk_schema(desc))
        if not counted:
            for columns, counts in self._keys.items():
                add_keys(counts, key_deltas(chunk, columns).items())
        self._chunks.append(chunk)
        self._known.clear()
        if self.indexed:
            if index is None:
                self._unindexed.append(chunk)
            else:
                self._runs.append(index)

    def index_of(self, updates: pa.Table) -> _RowIndex | None:
        """The index of ``updates`` for :meth:`add_base` (blocking, any thread: it reads only
        the description); ``None`` unless an integer table in the snapshot form."""
        if not self.indexed or self._desc is None:
            return None
        return _RowIndex.of_table(updates, [c.name for c in self._desc.columns])

    def apply(self, changes: Iterable[tuple[Row, int]]) -> None:
        """Add changes given as rows."""
        if self._keys:
            changes = list(changes)
            for columns, counts in self._keys.items():
                at = [self.desc.index_of(c) for c in columns]
                add_keys(counts, ((tuple(r[i] for i in at), d) for r, d in changes))
        if self._rows is not None:
            for row, diff in changes:
                _add(self._rows, row, diff)
        else:
            for row, diff in changes:
                self._changes[row] += diff

    def prepare(self) -> None:
        """Make the next lookups quick (blocking; any thread, while the committer waits):
        fold chunks into the rows (rows form), or index them (an integer table), turning many
        changes given as rows into a chunk first. A table whose rows were never looked up
        is left as it is (the rows form): most tables never take a delete or update."""
        if self._rows is not None:
            if self._asked:
                self._fold()
            return
        if len(self._changes) > _FOLD_CHANGES and self._desc is not None:
            rows = [(r, d) for r, d in self._changes.items() if d != 0]
            self._changes = Counter()
            table = rows_to_table(
                self._desc,
                [r for r, _d in rows],
                times=[0] * len(rows),
                diffs=[d for _r, d in rows],
            )
            self.add_base(table, None, counted=True)
        self._index_pending()

    def prepare_is_quick(self) -> bool:
        """Whether :meth:`prepare` would now fold, index and merge at most a few thousand rows
        (a small write's): the committer then runs it on its own thread rather than paying a
        worker-thread trip for it."""
        if self._rows is not None:
            return not self._asked or sum(c.num_rows for c in self._chunks) <= _QUICK_PREPARE_ROWS
        if len(self._changes) > _FOLD_CHANGES:
            return False
        if self._desc is None or not _indexable(self._desc):
            return True
        sizes = [r.size for r in self._runs]
        work = 0
        for chunk in self._unindexed:  # as _index_pending indexes and merges them
            work += chunk.num_rows
            sizes.append(chunk.num_rows)
            while len(sizes) >= 2 and _merge_due(sizes[-2], sizes[-1]):
                last = sizes.pop()
                sizes[-1] += last
                work += sizes[-1]
            if work > _QUICK_PREPARE_ROWS:
                return False
        return True

    # -- unique keys ------------------------------------------------------------------------------

    def key_counts(self, columns: tuple[str, ...]) -> dict[Row, int]:
        """How many rows hold each key (values of ``columns``, no NULL): counted once, from
        every change added so far (Arrow chunks grouped, not made rows), then kept up to
        date by every later change (event-loop thread)."""
        counts = self._keys.get(columns)
        if counts is None:
            counts = {}
            at = [self.desc.index_of(c) for c in columns]
            if self._rows is not None:
                add_keys(counts, ((tuple(r[i] for i in at), n) for r, n in self._rows.items()))
            for chunk in self._chunks:
                add_keys(counts, key_deltas(_grouped(chunk, columns), columns).items())
            add_keys(counts, ((tuple(r[i] for i in at), n) for r, n in self._changes.items()))
            self._keys[columns] = counts
        return counts

    # -- the rows form ----------------------------------------------------------------------------

    def build(self) -> None:
        """Make every row of the chunks a Python object (blocking; any thread)."""
        desc = self._desc
        if self._rows is not None or self._built is not None or desc is None:
            return
        n = len(self._chunks)
        rows: Counter[Row] = Counter()
        for chunk in self._chunks[:n]:
            _fold_into(rows, chunk, desc)
        self._built = (rows, n)

    def settle(self) -> bool:
        """Switch to the rows form if :meth:`build` is done (event-loop thread); whether it is
        in the rows form now."""
        if self._rows is None and self._built is not None:
            rows, n = self._built
            for row, diff in self._changes.items():
                _add(rows, row, diff)
            self._rows, self._chunks = rows, self._chunks[n:]
            self._built, self._changes, self._known = None, Counter(), {}
            self._runs, self._unindexed = [], []
        return self._rows is not None

    def materialize(self) -> None:
        """Switch to the rows form now, every chunk folded (blocking)."""
        self._asked = True
        self.build()
        self.settle()
        self._fold()

    def _fold(self) -> None:
        rows, desc = self._rows, self._desc
        if rows is None:
            return
        while self._chunks:
            assert desc is not None
            _fold_into(rows, self._chunks[0], desc)
            del self._chunks[0]

    # -- looking up -----------------------------------------------------------------------------

    def prefetch(self, rows: Iterable[Row]) -> bool:
        """Look ``rows`` up at once (blocking: any thread, while the committer waits); False
        when they cannot be (a NULL): :meth:`materialize` then."""
        self._asked = True
        if self._rows is not None:
            self._fold()
            return True
        desc = self._desc
        assert desc is not None
        wanted = list({r: None for r in rows if r not in self._known})
        if not wanted:
            return True
        if any(None in r for r in wanted):  # a row's own test, in C
            return False
        if not self._chunks:
            self._known.update(dict.fromkeys(wanted, 0))
            return True
        names = [c.name for c in desc.columns]
        if _indexable(desc):
            self._index_pending()
            cols = _int_rows(wanted, len(names))
            hashes = _hash(cols, len(wanted))
            # Looked up in hash order: each run's binary searches then walk it forwards
            order = np.argsort(hashes)
            cols, hashes = [c[order] for c in cols], hashes[order]
            counts = np.zeros(len(wanted), dtype=np.int64)
            for run in self._runs:
                counts += run.counts(cols, hashes)
            found = np.empty_like(counts)
            found[order] = counts
            self._known.update(zip(wanted, found.tolist(), strict=True))
            return True
        keys = rows_to_table(desc, wanted)
        keys = keys.append_column(_INDEX, pa.array(np.arange(len(wanted), dtype=np.int64)))
        snapshot = pa.concat_tables(self._chunks)
        found = snapshot.join(keys, keys=names, join_type="inner", use_threads=False)
        found_counts = dict.fromkeys(range(len(wanted)), 0)
        index = found.column(_INDEX).to_pylist()
        for i, n in zip(index, found.column(DIFF_COLUMN).to_pylist(), strict=True):
            found_counts[i] += n
        for i, row in enumerate(wanted):
            self._known[row] = found_counts[i]
        return True

    def quick_lookup(self, rows: int) -> bool:
        """Whether :meth:`prefetch` of ``rows`` rows takes about a millisecond (nothing to
        fold or index, and they are few), so it may run on the event loop."""
        if self._rows is not None:
            return not self._chunks
        return self.indexed and not self._unindexed and rows <= _QUICK_ROWS

    def count(self, row: Row) -> int:
        """How many times ``row`` is in the table."""
        self._asked = True
        if self._rows is not None:
            self._fold()
            return self._rows[row]
        if row not in self._known and not self.prefetch([row]):
            self.materialize()
            return self.count(row)
        return self._known[row] + self._changes[row]

    def counts(self, rows: Sequence[Row]) -> list[int]:
        """How many times each of ``rows`` is in the table: :meth:`count` of each, with one
        lookup of them all."""
        self._asked = True
        if self._rows is not None:
            self._fold()
            held = self._rows
            return [held[r] for r in rows]
        if not self.prefetch(rows):
            self.materialize()
            return self.counts(rows)
        known, changes = self._known, self._changes
        if not changes:
            return [known[r] for r in rows]
        return [known[r] + changes[r] for r in rows]

    def items(self) -> Iterator[tuple[Row, int]]:
        """Every row with its count."""
        self.materialize()
        assert self._rows is not None
        return ((r, n) for r, n in self._rows.items() if n > 0)

    def _index_pending(self) -> None:
        desc = self._desc
        if desc is None or not _indexable(desc):
            return
        names = [c.name for c in desc.columns]
        while self._unindexed:
            self._runs.append(_RowIndex.of_table(self._unindexed[0], names))
            del self._unindexed[0]
            while len(self._runs) >= 2 and _merge_due(self._runs[-2].size, self._runs[-1].size):
                last = self._runs.pop()
                self._runs[-1] = self._runs[-1].merged(last)


def _merge_due(older: int, newer: int) -> bool:
    """Whether the last two index runs (their sizes) are merged: the runs stay a geometric
    series, so a row is merged a logarithmic number of times."""
    return older <= 2 * newer


def _grouped(chunk: pa.Table, columns: Sequence[str]) -> pa.Table:
    """``chunk``'s net diff per key (fewer rows to make Python objects of); ``chunk`` itself
    where Arrow cannot group its key columns."""
    try:
        out = chunk.group_by(list(columns), use_threads=False).aggregate([(DIFF_COLUMN, "sum")])
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
        return chunk
    return out.select([*columns, f"{DIFF_COLUMN}_sum"]).rename_columns([*columns, DIFF_COLUMN])


def _add(rows: Counter[Row], row: Row, diff: int) -> None:
    # Counts may be negative for a while (a change added before the chunk it cancels).
    n = rows[row] + diff
    if n:
        rows[row] = n
    else:
        del rows[row]


def _fold_into(rows: Counter[Row], chunk: pa.Table, desc: RelationDesc) -> None:
    names = [c.name for c in desc.columns]
    diffs = chunk.column(DIFF_COLUMN).to_pylist()
    for row, diff in zip(table_to_rows(chunk, names), diffs, strict=True):
        _add(rows, row, diff)


def _chunk_schema(desc: RelationDesc) -> pa.Schema:
    return pa.schema(
        [arrow_field(c) for c in desc.columns] + [pa.field(DIFF_COLUMN, pa.int64(), nullable=False)]
    )


def _indexable(desc: RelationDesc) -> bool:
    return all(c.type.kind in _INDEX_KINDS for c in desc.columns)


_MIX: Final = np.uint64(0x9E3779B97F4A7C15)


class _RowIndex:
    """Counts of rows of integer updates, found by a 64-bit hash of each row: the rows (their
    columns, diffs and hashes) are kept sorted by hash.

    Rows with a NULL are left out: a looked-up row has none (``prefetch`` refuses them)."""

    def __init__(self, hashes: np.ndarray, cols: list[np.ndarray], diffs: np.ndarray) -> None:
        self._hashes = hashes
        self._cols = cols
        self._diffs = diffs

    @classmethod
    def of_table(cls, table: pa.Table, names: list[str]) -> _RowIndex:
        cols = _int_columns(table, names)
        diffs = _int_column(table.column(DIFF_COLUMN))
        if any(table.column(n).null_count for n in names):
            valid = np.ones(table.num_rows, dtype=bool)
            for n in names:
                valid &= np.asarray(table.column(n).is_valid())
            cols = [c[valid] for c in cols]
            diffs = diffs[valid]
        hashes = _hash(cols, len(diffs))
        order = np.argsort(hashes)
        return cls(hashes[order], [c[order] for c in cols], diffs[order])

    @property
    def size(self) -> int:
        return len(self._diffs)

    def merged(self, other: _RowIndex) -> _RowIndex:
        """One index of both: a merge of two sorted runs (linear, no sort), consolidated
        (:meth:`_consolidated`)."""
        # Where each of ``other``'s rows goes (its rows are sorted: so are these), found once
        # for every array (np.insert would sort the positions and mask again for each).
        n, m = len(self._hashes), len(other._hashes)
        theirs = np.searchsorted(self._hashes, other._hashes, side="right")
        theirs += np.arange(m)
        ours = np.ones(n + m, dtype=bool)
        ours[theirs] = False

        def merge(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            out = np.empty(n + m, dtype=a.dtype)
            out[ours] = a
            out[theirs] = b
            return out

        cols = [merge(a, b) for a, b in zip(self._cols, other._cols, strict=True)]
        hashes = merge(self._hashes, other._hashes)
        return _RowIndex(hashes, cols, merge(self._diffs, other._diffs))._consolidated()

    def _consolidated(self) -> _RowIndex:
        """This index with neighbouring equal rows summed and rows of diff 0 dropped: a
        retraction merged with the insert it cancels leaves nothing, so a table taking updates
        keeps an index about its live size rather than every update it ever took. (Equal rows
        are neighbours unless a row of another value with the same hash lies between them;
        :meth:`counts` adds up every candidate, so those stay right unconsolidated.)"""
        hashes, diffs = self._hashes, self._diffs
        if len(hashes) < 2:
            return self
        same = hashes[1:] == hashes[:-1]
        if not same.any():
            return self
        for c in self._cols:
            same &= c[1:] == c[:-1]
        starts = np.flatnonzero(np.concatenate(([True], ~same)))
        if len(starts) == len(hashes) and diffs.all():
            return self
        sums = np.add.reduceat(diffs, starts)
        keep = starts[sums != 0]
        return _RowIndex(hashes[keep], [c[keep] for c in self._cols], sums[sums != 0])

    def counts(self, wanted: list[np.ndarray], hashes: np.ndarray) -> np.ndarray:
        """The count of each row given by its columns ``wanted`` (no NULL) and their
        ``hashes`` (:func:`_hash`)."""
        size = self.size
        if not size:
            return np.zeros(len(hashes), dtype=np.int64)
        lo = np.searchsorted(self._hashes, hashes, side="left")
        # The usual case, one candidate (or none) per row, compared column by column at once;
        # rows whose hash several indexed rows share, one by one.
        candidate = np.minimum(lo, size - 1)
        same = self._hashes[candidate] == hashes
        several = same & (candidate + 1 < size)
        several[several] = self._hashes[candidate[several] + 1] == hashes[several]
        same &= ~several
        for c, w in zip(self._cols, wanted, strict=True):
            same &= c[candidate] == w
        out = np.where(same, self._diffs[candidate], 0).astype(np.int64)
        for i in np.flatnonzero(several).tolist():
            n = 0
            j = int(lo[i])
            while j < size and self._hashes[j] == hashes[i]:
                if all(c[j] == w[i] for c, w in zip(self._cols, wanted, strict=True)):
                    n += int(self._diffs[j])
                j += 1
            out[i] = n
        return out


def _int_columns(table: pa.Table, names: list[str]) -> list[np.ndarray]:
    return [_int_column(table.column(n)) for n in names]


def _int_column(column: pa.ChunkedArray) -> np.ndarray:
    if column.type == pa.int64() and not column.null_count:  # as it is (no cast, no fill)
        return np.asarray(column.to_numpy(), dtype=np.int64)
    return np.asarray(column.cast(pa.int64()).fill_null(0), dtype=np.int64)


def _int_rows(rows: list[Row], width: int) -> list[np.ndarray]:
    """The columns of rows of ints and bools (no NULL) as :func:`_int_columns` gives them (a
    bool as 0 or 1), without an Arrow table in between."""
    matrix = np.array(rows, dtype=np.int64).reshape(len(rows), width)
    return [np.ascontiguousarray(matrix[:, i]) for i in range(width)]


def _hash(columns: list[np.ndarray], n: int) -> np.ndarray:
    h = np.full(n, 0xCBF29CE484222325, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for c in columns:
            h ^= c.view(np.uint64)
            h *= _MIX
            h ^= h >> np.uint64(29)
    return h
