"""What a dataflow reads: its imports' frontiers, snapshots and updates (``InputResolver``).

On a replica the resolver reads persist shards and the replica's own arrangements
(:class:`spate.compute.replica.inputs.ReplicaInputs`); in tests :class:`ArrowInputs` serves
update tables held in memory. Data comes in the external layout (the import's column names,
then ``_time`` and ``_diff``) either as an Arrow table (small: deltas) or as Parquet files
(large: snapshots), which Spark reads directly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

import pyarrow as pa
import pyarrow.compute as pc

from spate.frontier.antichain import Antichain, Frontier
from spate.ids import GlobalId
from spate.repr.consolidate import advance_times
from spate.repr.desc import DIFF_COLUMN, TIME_COLUMN


@dataclass(frozen=True, slots=True)
class ArrowInput:
    """Updates held in memory (external layout)."""

    table: pa.Table

    @property
    def rows(self) -> int:
        return int(self.table.num_rows)


@dataclass(frozen=True, slots=True)
class ParquetInput:
    """The updates in ``paths`` (external layout) with ``lower <= _time < upper``."""

    paths: tuple[Path, ...]
    lower: int
    upper: int

    def read(self, columns: Sequence[str] | None = None) -> pa.Table:
        """The updates, read with pyarrow (external layout, times in ``[lower, upper)``);
        only ``columns`` (and ``_time``, ``_diff``) when given."""
        import pyarrow.parquet as pq

        names = None if columns is None else [*columns, TIME_COLUMN, DIFF_COLUMN]
        tables = [pq.read_table(p, columns=names) for p in self.paths]
        if not tables:
            raise ValueError("a ParquetInput without files (use an empty ArrowInput)")
        table = pa.concat_tables(tables, promote_options="default")
        times = table.column(TIME_COLUMN)
        mask = pc.and_(pc.greater_equal(times, self.lower), pc.less(times, self.upper))
        return table.filter(mask)

    @property
    def rows(self) -> int:
        """An upper bound on the rows (from the files' metadata)."""
        import pyarrow.parquet as pq

        return sum(int(pq.ParquetFile(p).metadata.num_rows) for p in self.paths)


InputData = ArrowInput | ParquetInput


class InputResolver(Protocol):
    """The imports of one dataflow (source imports by id, index imports by index id)."""

    def since(self, id: GlobalId) -> Frontier: ...

    def upper(self, id: GlobalId) -> Frontier: ...

    def snapshot(self, id: GlobalId, *, as_of: int) -> InputData:
        """Every update with ``_time <= as_of`` (times need not be advanced)."""
        ...

    def updates(self, id: GlobalId, *, lower: int, upper: int) -> InputData:
        """The updates with ``lower <= _time < upper``."""
        ...


@runtime_checkable
class ImportedErrors(Protocol):
    """A resolver whose source imports may carry errors (a materialized view in error): the
    importing dataflow's error collection takes them on."""

    def imported_errors(
        self, id: GlobalId, *, lower: int, upper: int, first: bool
    ) -> pa.Table | None:
        """The error updates (:data:`~spate.render.errors.ERROR_SCHEMA`) of import ``id`` with
        ``lower <= _time < upper``; with ``first``, those at ``lower`` are its errors as of
        ``lower`` (times advanced to it). ``None``: the import carries no errors."""
        ...


@dataclass
class ArrowInputs:
    """An in-memory :class:`InputResolver` for tests and tools: whole update tables per id.

    ``append`` adds updates and advances the upper; ``compact`` advances the since (times below
    it are advanced, as persist would).
    """

    tables: dict[GlobalId, pa.Table]
    uppers: dict[GlobalId, int] = field(default_factory=dict)
    sinces: dict[GlobalId, int] = field(default_factory=dict)

    @classmethod
    def of(cls, tables: Mapping[GlobalId, pa.Table], *, upper: int = 0) -> ArrowInputs:
        return cls(dict(tables), dict.fromkeys(tables, upper), dict.fromkeys(tables, 0))

    def append(self, id: GlobalId, updates: pa.Table, upper: int) -> None:
        times = updates.column(TIME_COLUMN)
        if updates.num_rows and (
            pc.min(times).as_py() < self.uppers[id] or pc.max(times).as_py() >= upper
        ):
            raise ValueError(f"{id}: updates outside [{self.uppers[id]}, {upper})")
        self.tables[id] = pa.concat_tables([self.tables[id], updates.cast(self.tables[id].schema)])
        self.uppers[id] = upper

    def compact(self, id: GlobalId, since: int) -> None:
        self.sinces[id] = since
        self.tables[id] = advance_times(self.tables[id], since)

    def since(self, id: GlobalId) -> Frontier:
        return Antichain.of(self.sinces[id])

    def upper(self, id: GlobalId) -> Frontier:
        return Antichain.of(self.uppers[id])

    def snapshot(self, id: GlobalId, *, as_of: int) -> InputData:
        t = self.tables[id]
        return ArrowInput(t.filter(pc.less_equal(t.column(TIME_COLUMN), as_of)))

    def updates(self, id: GlobalId, *, lower: int, upper: int) -> InputData:
        t = self.tables[id]
        times = t.column(TIME_COLUMN)
        mask = pc.and_(pc.greater_equal(times, lower), pc.less(times, upper))
        return ArrowInput(t.filter(mask))
