"""Arrangements: a collection's updates kept as a spine of Parquet batches.

Every batch is a set of Parquet files in the arrangement's directory. Appending a batch
hard-links it (a batch Spark already wrote as part files, or a table the step already spilled
for Spark) or keeps it (an Arrow batch); then batches are merged logarithmically — while the
newest is at least half the size of the one before it, the two are merged with pyarrow (times
advanced to the since, consolidated) — so an arrangement of ``n`` updates has ``O(log n)``
files and each update is rewritten ``O(log n)`` times. Spark reads the files afresh at each
step (``spark.read.parquet``), so lineage never grows with the number of steps. A batch held in
driver memory (an appended Arrow batch, a merge's result) is written to its file only when
something needs the files: Spark reading the arrangement (:meth:`df`), or the batch leaving
memory (a large arrangement keeps only its small batches). A small step computed with Arrow
from a resident arrangement so writes no Parquet at all. When the engine defers merges
(:attr:`~spate.render.batch.Engine.defer_merges`: the replica merges while no dataflow can
step, after the step's output is on its way), an append leaves its merges to
:meth:`Arrangement.merge` unless ``MAX_DEFERRED_APPENDS`` appends in a row did; an unmerged
spine holds the same updates in more batches, so every read is the same.

While an arrangement holds at most ``LOOKUP_MAX_ROWS`` updates, its files' contents are also
kept in driver memory as Arrow, and it serves key lookups (:mod:`spate.render.lookup`): a step
asks for the touched keys' rows instead of having Spark scan every file. Large batches answer
one-column lookups through a sorted index (:mod:`spate.render.key_index`), so that a lookup
costs the keys asked, not the rows held. A larger arrangement keeps its large batches as sorted
runs (:mod:`spate.render.sorted_run`): sorted by the column its operator looks keys up by, so
that a lookup reads only the row groups that can hold the touched keys, and such an arrangement
serves lookups too (while the touched keys are few enough). An operator that declares the
column (:meth:`Arrangement.lookups_by`) gets its large batches appended in that form (the
hydration's snapshot included), so that no step pays for sorting or indexing them.

``since`` is the compaction frontier: reads at times ``>= since`` are exact; below it they fail
with an error naming both. An arrangement that only feeds operators (``internal``) needs no
history at all: its since follows its upper, and merges collapse its times.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

import pyarrow as pa
import pyarrow.parquet as pq

from spate.errors import ReadBeforeSince as ReadBeforeSince
from spate.errors import UsageError
from spate.frontier.antichain import Antichain, Frontier
from spate.render.batch import Batch, Engine, write_parquet
from spate.render.key_index import INDEX_MIN_ROWS, KeyIndex
from spate.render.layout import col_name, internal_schema
from spate.render.lookup import LOOKUP_MAX_ROWS, semi_join
from spate.render.sorted_run import SortedRun
from spate.repr.consolidate import advance_times, consolidate
from spate.repr.desc import RelationDesc

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

MAX_DEFERRED_APPENDS: Final = 8
"""With deferred merges, an append merges at once after this many appends left theirs undone
(a replica that never runs out of steps to take still merges)."""


@dataclass(frozen=True, slots=True)
class _Part:
    """One batch of the spine: the files of one append (Spark writes a batch as several part
    files) or of one merge."""

    paths: tuple[Path, ...]
    rows: int


class Arrangement:
    """The updates of one collection, as a spine of Parquet batches (module docs)."""

    def __init__(
        self, engine: Engine, desc: RelationDesc, name: str, *, as_of: int, internal: bool
    ) -> None:
        self.desc = desc
        self.name = name
        self.internal = internal
        self._engine = engine
        self._dir = engine.fresh(f"arr-{name}")
        self._dir.mkdir(parents=True)
        self._schema = internal_schema(desc)
        self._files: list[_Part] = []
        self._since = as_of
        self._upper = as_of
        self._cache: pa.Table | None = None
        self._tables: dict[_Part, pa.Table] = {}
        """The batches' contents, kept while the arrangement is small enough to serve
        lookups."""
        self._indexes: dict[tuple[_Part, str], KeyIndex | None] = {}
        """Key indexes of large batches by column, built at their first lookup
        (:mod:`spate.render.key_index`; ``None``: the column cannot be indexed)."""
        self._runs: dict[_Part, SortedRun] = {}
        """The batches kept as sorted runs (:mod:`spate.render.sorted_run`)."""
        self._unwritten: set[_Part] = set()
        """Batches whose files are not written yet: their contents are in ``_tables``
        (:meth:`_write_out` writes them)."""
        self._run_column: str | None = None
        """The column lookups of a large arrangement come by (set at the first): merges write
        large batches sorted by it."""
        self._dropped = False
        self._unmerged = 0
        """Appends since the last merge (deferred merges: :attr:`Engine.defer_merges`)."""

    # -- frontiers ----------------------------------------------------------------------------

    @property
    def since(self) -> Frontier:
        return Antichain.empty() if self._dropped else Antichain.of(self._since)

    @property
    def upper(self) -> Frontier:
        return Antichain.of(self._upper)

    @property
    def rows(self) -> int:
        return sum(f.rows for f in self._files)

    def allow_compaction(self, frontier: Frontier) -> None:
        """Reads below ``frontier`` may now fail; ``{}`` drops the contents."""
        if frontier.is_empty():
            self.drop()
            return
        (t,) = frontier.elements
        self._since = max(self._since, t)

    def lookups_by(self, column: int) -> None:
        """Lookups will come by data column ``column`` alone: a large batch is appended in the
        form they read (a sorted run, or resident with its key index), not at the first
        lookup (which a step would pay for)."""
        if self._run_column is None:
            self._run_column = col_name(column)

    # -- writes -------------------------------------------------------------------------------

    def append(self, batch: Batch, upper: int) -> None:
        """Add ``batch`` (times in ``[self.upper, upper)``) and advance the upper."""
        if self._dropped:
            return
        if not batch.is_empty:
            if batch.table is not None:
                table = batch.table
                if not table.schema.equals(self._schema):
                    table = table.cast(self._schema)
                path = self._next_path()
                run = self._sorted(table, path)
                spilled = self._engine.spilled(table)  # never a cast copy
                if run is None and spilled is not None:
                    os.link(spilled, path)  # Spark read the same table from this file
                part = _Part((path,), batch.rows)
                if run is not None:
                    self._runs[part] = run
                else:
                    if spilled is None:
                        self._unwritten.add(part)  # written when needed (module docs)
                    self._tables[part] = table
                    self._index_ahead(part, table)
            else:
                paths = []
                for p in batch.paths:
                    paths.append(self._next_path())
                    os.link(p, paths[-1])
                part = _Part(tuple(paths), batch.rows)
            self._files.append(part)
            self._cache = None
        self._upper = max(self._upper, upper)
        if self.internal:
            self._since = max(self._since, self._upper - 1)
        if self._engine.defer_merges and self._unmerged < MAX_DEFERRED_APPENDS:
            self._unmerged += 1
            self._engine.defer(id(self), self.merge)
        else:
            self.merge()

    def merge(self) -> None:
        """Merge the batches appends left unmerged (module docs)."""
        self._unmerged = 0
        if not self._dropped:
            self._merge()

    def _next_path(self) -> Path:
        return self._engine.fresh(f"{self._dir.name}/b").with_suffix(".parquet")

    def _merge(self) -> None:
        files = self._files
        while len(files) >= 2 and (
            files[-1].rows * 2 >= files[-2].rows
            # keep the file count low even when every batch is tiny
            or files[-1].rows + files[-2].rows <= self._engine.settings.small_rows // 4
        ):
            a, b = files[-2], files[-1]
            table = pa.concat_tables([self._table(f) for f in (a, b)])
            table = consolidate(advance_times(table, self._since))
            del files[-2:]  # (only now: a merge that raises loses no batch)
            if table.num_rows:
                path = self._next_path()
                run = self._sorted(table, path)
                merged = _Part((path,), int(table.num_rows))
                files.append(merged)
                self._tables[merged] = table
                if run is not None:
                    self._runs[merged] = run
                else:
                    self._unwritten.add(merged)
            for f in (a, b):
                self._forget(f)
            self._cache = None
        if self.rows > LOOKUP_MAX_ROWS:  # small batches stay: a lookup scans them
            for part in [p for p in self._tables if p.rows >= INDEX_MIN_ROWS]:
                self._write_out(part)
                del self._tables[part]
            self._indexes.clear()

    def _index_ahead(self, part: _Part, table: pa.Table) -> None:
        """Build the key index a lookup of a large resident batch will read (see
        :meth:`lookups_by`)."""
        name = self._run_column
        fits = self.rows + table.num_rows <= LOOKUP_MAX_ROWS
        if name is not None and fits and table.num_rows >= INDEX_MIN_ROWS:
            self._index(part, table, name)

    def _write_out(self, part: _Part) -> None:
        """Write ``part``'s file if it is not written yet (module docs)."""
        if part in self._unwritten:
            (path,) = part.paths
            write_parquet(self._tables[part], path)
            self._unwritten.discard(part)

    def _forget(self, part: _Part) -> None:
        """Delete a batch merged away or rewritten: its files and what is kept of it."""
        if part in self._unwritten:
            self._unwritten.discard(part)  # no file to delete
        else:
            for p in part.paths:
                p.unlink(missing_ok=True)
        self._tables.pop(part, None)
        run = self._runs.pop(part, None)
        if run is not None:
            run.unlink()
        self._forget_indexes(part)

    def _sorted(self, table: pa.Table, path: Path) -> SortedRun | None:
        """``table`` written to ``path`` as a sorted run when the arrangement is too large to
        be resident and lookups come by one column (else ``None``, nothing written)."""
        column = self._run_column
        large = self.rows + table.num_rows > LOOKUP_MAX_ROWS  # (the merged batches are out)
        if column is None or table.num_rows < INDEX_MIN_ROWS or not large:
            return None
        return SortedRun.write(table, path, column)

    def _forget_indexes(self, part: _Part) -> None:
        for key in [k for k in self._indexes if k[0] == part]:
            del self._indexes[key]

    # -- reads --------------------------------------------------------------------------------

    def df(self) -> DataFrame | None:
        """Every update as a Spark DataFrame (``None`` when there are none)."""
        if not self._files:
            return None
        for part in self._files:
            self._write_out(part)
        return self._engine.df_of_files(tuple(p for f in self._files for p in f.paths), self.desc)

    def updates(self) -> pa.Table:
        """Every update, as one Arrow table (internal layout; cached between appends)."""
        if self._cache is None:
            tables = [self._table(f) for f in self._files]
            self._cache = pa.concat_tables(tables) if tables else self._schema.empty_table()
        return self._cache

    def _table(self, part: _Part) -> pa.Table:
        table = self._tables.get(part)
        if table is None:
            run = self._runs.get(part)
            if run is not None:  # memory-mapped, not decoded
                table = run.table()
                return table if table.schema.equals(self._schema) else table.cast(self._schema)
            tables = [pq.read_table(p, schema=self._schema) for p in part.paths]
            table = pa.concat_tables(tables)
            if self.rows <= LOOKUP_MAX_ROWS or part.rows < INDEX_MIN_ROWS:
                self._tables[part] = table
        return table

    def lookup(self, columns: Sequence[int], keys: pa.Table, *, null_safe: bool) -> pa.Table | None:
        """Every update whose data columns ``columns`` equal a row of ``keys`` (a superset
        when :func:`~spate.render.lookup.lookup_columns` dropped some), or ``None`` when the
        arrangement is too large to serve lookups (Spark reads it instead)."""
        resident = self.resident()
        names = [col_name(c) for c in columns]
        if resident is None:
            return self._run_lookup(names, keys, null_safe=null_safe)
        if len(names) != 1 or not any(f.rows >= INDEX_MIN_ROWS for f in self._files):
            return semi_join(resident, names, keys, null_safe=null_safe)
        # Batch by batch: the large ones through their index (the scan would follow the state)
        (name,) = names
        found: list[pa.Table] = []
        for part in self._files:
            table = self._table(part)
            index = self._index(part, table, name) if part.rows >= INDEX_MIN_ROWS else None
            if index is None:
                piece = semi_join(table, names, keys, null_safe=null_safe)
                if piece is None:
                    return None
            else:
                try:
                    piece = table.take(index.rows(keys.column(0)))
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                    return None  # keys pyarrow cannot compare: Spark does the lookup
            found.append(piece)
        return pa.concat_tables(found)

    def _run_lookup(self, names: list[str], keys: pa.Table, *, null_safe: bool) -> pa.Table | None:
        """:meth:`lookup` of an arrangement too large to be resident: its large batches
        through their sorted runs (sorted at the first lookup unless appended so), the small
        ones scanned; ``None`` when the column cannot be laid out so."""
        if len(names) != 1 or self._run_column not in (None, names[0]):
            return None
        (name,) = names
        self._run_column = name
        found: list[pa.Table] = []
        for i, part in enumerate(self._files):
            if part.rows < INDEX_MIN_ROWS:
                piece = semi_join(self._table(part), names, keys, null_safe=null_safe)
            else:
                run = self._runs.get(part) or self._resort(i, part)
                if run is None:
                    return None
                try:
                    piece = run.lookup(keys.column(0), self._schema)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                    return None  # keys pyarrow cannot compare: Spark does the lookup
            if piece is None:
                return None
            found.append(piece)
        return pa.concat_tables(found) if found else self._schema.empty_table()

    def _resort(self, i: int, part: _Part) -> SortedRun | None:
        """Rewrite batch ``i`` (``part``) as a sorted run by the lookup column, in place."""
        assert self._run_column is not None
        path = self._next_path()
        run = SortedRun.write(self._table(part), path, self._run_column)
        if run is None:
            return None
        sorted_part = _Part((path,), part.rows)
        self._files[i] = sorted_part
        self._runs[sorted_part] = run
        self._forget(part)
        return run

    def _index(self, part: _Part, table: pa.Table, name: str) -> KeyIndex | None:
        key = (part, name)
        if key not in self._indexes:
            self._indexes[key] = KeyIndex.build(table.column(name))
        return self._indexes[key]

    def resident(self) -> pa.Table | None:
        """Every update (:meth:`updates`) when the arrangement is small enough to be kept in
        driver memory and serve lookups, else ``None``."""
        return self.updates() if self.rows <= LOOKUP_MAX_ROWS else None

    def check_readable(self, timestamp: int) -> None:
        """Raise unless a read at ``timestamp`` is exact here."""
        if self._dropped:
            raise ReadBeforeSince(f"arrangement {self.name}", since="{}", timestamp=None)
        if timestamp < self._since:
            raise ReadBeforeSince(
                f"arrangement {self.name}", since=f"{{{self._since}}}", timestamp=timestamp
            )
        if timestamp >= self._upper:
            raise UsageError(
                f"arrangement {self.name}: read at {timestamp} is not before its upper "
                f"{{{self._upper}}}"
            )

    def drop(self) -> None:
        self._dropped = True
        self._files = []
        self._cache = None
        self._tables.clear()
        self._indexes.clear()
        self._runs.clear()
        self._unwritten.clear()
        shutil.rmtree(self._dir, ignore_errors=True)
