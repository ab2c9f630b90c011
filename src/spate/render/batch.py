"""Moving updates between Arrow, Parquet and Spark inside a dataflow.

A step's intermediate results are Spark DataFrames (:class:`Lazy`, ``None`` when known to be
empty, so that an idle step runs no Spark job at all). Where a result must be kept (arranged) or
shared, it is **materialized** into a :class:`Batch`: small results come back to the driver as
one Arrow table (``toArrow``), large ones (snapshots, hydration) are written by Spark as Parquet
files in the dataflow's scratch directory and never pass through Python. Either way a batch is
consolidated (one row per ``(data, _time)``, no zero ``_diff``), except a large import read at
hydration and what is picked from it (``Batch.consolidated`` false): consolidating a million
rows on the driver costs more than the rest of the read, and every operator sums diffs anyway,
so such a batch is consolidated only where a consumer asks for it (:meth:`Engine.materialize`).

All tables and DataFrames here are in the internal layout (:mod:`spate.render.layout`).
"""

from __future__ import annotations

import functools
import itertools
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from spate.render.ingest import ArrowIngest, arrow_ingest, without_empty_batches
from spate.render.layout import data_names, internal_schema, internal_struct
from spate.render.templates import PlanTemplates
from spate.repr.consolidate import consolidate
from spate.repr.desc import DIFF_COLUMN, TIME_COLUMN, RelationDesc

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType


@dataclass(frozen=True, slots=True)
class EngineSettings:
    """Tunables of a dataflow's Spark side."""

    small_rows: int = 20_000
    """Deltas up to this many rows travel as Arrow (``createDataFrame``/``toArrow``) and
    operators treat them as small (broadcast, one partition, driver-side lookups); larger ones
    travel as Parquet, which moves ~10× more rows per second on the machine measured. 0 sends
    every delta down the large paths (tests do, to cover them with small data)."""
    driver_rows: int = 1_000_000
    """Steps of joins and reduces whose rows (the delta and what it touches, looked up on the
    driver) are at most this many are computed on the driver with pyarrow where the operator
    allows it (:mod:`spate.render.operators.driver_reduce`, ``driver_join``): pyarrow groups
    and joins a million rows here in about the time of Spark's smallest job. 0: never."""


class Lazy:
    """A not yet computed delta: ``df`` (``None``: known to be empty); ``big`` when it derives
    from a large input, so that materializing it should go through Parquet.

    A lazy of an already materialized batch (:meth:`of_batch`) builds its DataFrame only when
    ``df`` is first asked for: an operator that takes the batch's rows on the driver (Project)
    then moves nothing into Spark.
    """

    __slots__ = ("_df", "_make", "batch", "big", "consolidated")

    def __init__(
        self,
        df: DataFrame | None,
        big: bool = False,
        batch: Batch | None = None,
        consolidated: bool = False,
    ) -> None:
        self._df = df
        self._make: Callable[[], DataFrame] | None = None
        self.big = big
        self.batch = batch
        """Set when ``df`` merely reads this already materialized batch (materializing it
        again would be a Spark job for nothing)."""
        self.consolidated = consolidated
        """``df`` has one row per ``(data, _time)`` and no zero ``_diff`` by construction (a
        large materialization then needs no consolidating shuffle)."""

    @staticmethod
    def of_batch(batch: Batch, make: Callable[[], DataFrame], *, big: bool) -> Lazy:
        """The rows of ``batch`` (not empty), its DataFrame built by ``make`` on first use."""
        lazy = Lazy(None, big=big, batch=batch)
        lazy._make = make
        return lazy

    @property
    def df(self) -> DataFrame | None:
        if self._df is None and self._make is not None:
            self._df = self._make()
            self._make = None
        return self._df

    @property
    def is_empty(self) -> bool:
        return self._df is None and self._make is None

    def frame(self) -> DataFrame:
        """``df`` of a lazy known not to be empty."""
        df = self.df
        if df is None:
            raise AssertionError("frame() of an empty Lazy")
        return df

    @staticmethod
    def empty() -> Lazy:
        return Lazy(None)


ROW_GROUP_ROWS: Final = 1 << 17
"""Rows per Parquet row group in the files spate writes: Spark splits a file between tasks only
at row-group boundaries, so a file of one big row group is read by one core."""


def write_parquet(table: pa.Table, path: Path, *, row_group_size: int = ROW_GROUP_ROWS) -> None:
    """Write ``table`` uncompressed (local scratch: CPU is dearer than disk), in row groups
    Spark can read in parallel (``row_group_size`` rows each).

    Dictionary encoding only where it pays: ``_time`` and ``_diff`` (few distinct values, a
    few bytes a row instead of eight) and variable-width columns. Fixed-width data columns are
    written plain: building their dictionaries took two thirds of the write (a million rows
    of four integer columns: 110 ms, 35 ms plain) for files ~10 % smaller."""
    dictionary = [
        f.name
        for f in table.schema
        if f.name in (TIME_COLUMN, DIFF_COLUMN)
        or pa.types.is_string(f.type)
        or pa.types.is_large_string(f.type)
        or pa.types.is_binary(f.type)
        or pa.types.is_large_binary(f.type)
    ]
    pq.write_table(
        table,
        path,
        compression="none",
        row_group_size=row_group_size,
        use_dictionary=dictionary,
    )


@dataclass(frozen=True)
class Batch:
    """A materialized delta, consolidated unless ``consolidated`` says otherwise: an Arrow
    table, or Parquet files written by Spark."""

    desc: RelationDesc
    table: pa.Table | None = None
    paths: tuple[Path, ...] = ()
    rows: int = 0
    consolidated: bool = True
    """One row per ``(data, _time)`` and no zero ``_diff`` (module docs for when not)."""

    @property
    def is_empty(self) -> bool:
        return self.rows == 0

    def min_diff(self) -> int | None:
        """The least ``_diff`` (from the Parquet footers' statistics for files), ``None`` when
        empty or unknown."""
        if self.table is not None:
            low = pc.min(self.table.column(DIFF_COLUMN)).as_py()
            return None if low is None else int(low)
        lows: list[int] = []
        for p in self.paths:
            meta = pq.ParquetFile(p).metadata
            idx = meta.schema.to_arrow_schema().get_field_index(DIFF_COLUMN)
            for g in range(meta.num_row_groups):
                stats = meta.row_group(g).column(idx).statistics
                if stats is None or not stats.has_min_max:
                    return None
                lows.append(int(stats.min))
        return min(lows) if lows else None

    def arrow(self) -> pa.Table:
        """The updates as one Arrow table (reads the files of a Parquet batch)."""
        if self.table is not None:
            return self.table
        schema = internal_schema(self.desc)
        if not self.paths:
            return schema.empty_table()
        return pa.concat_tables([pq.read_table(p, schema=schema) for p in self.paths])


class Engine:
    """The Spark side of one dataflow: its session, scratch directory and file names."""

    def __init__(
        self, spark: SparkSession, scratch: Path, settings: EngineSettings | None = None
    ) -> None:
        self.spark = spark
        self.scratch = scratch
        self.settings = settings or EngineSettings()
        # Left over from an earlier process (a replica restarted on the same scratch): garbage.
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir(parents=True)
        self._ids = itertools.count()
        self.actions = 0
        """Spark actions run so far (materializations)."""
        self._temporary: list[Path] = []
        self.templates = PlanTemplates(spark, scratch / "slots", write_parquet)
        """Step plans built once and reused (:mod:`spate.render.templates`)."""
        self._spilled: dict[int, tuple[pa.Table, Path]] = {}
        """Large tables of this step written to a temporary file for Spark (by ``id``; the
        table is kept so that the id stays its own)."""
        self.defer_merges = False
        """Whether arrangements leave their merges for :meth:`run_deferred` (a caller that
        calls it between steps: the replica, while no dataflow can step) rather than merging
        as they append (:mod:`spate.render.arrangement`)."""
        self._deferred: dict[int, Callable[[], None]] = {}

    def defer(self, key: int, work: Callable[[], None]) -> None:
        """Run ``work`` at the next :meth:`run_deferred` (once per ``key``)."""
        self._deferred[key] = work

    def run_deferred(self) -> bool:
        """Run one piece of deferred work; False when none was left."""
        if not self._deferred:
            return False
        key = next(iter(self._deferred))
        self._deferred.pop(key)()
        return True

    def fresh(self, what: str) -> Path:
        """A path in the scratch directory never used before (Spark caches file listings)."""
        return self.scratch / f"{what}-{next(self._ids):06d}"

    def temporary(self, what: str) -> Path:
        """A fresh path removed by :meth:`end_step` (arrangements keep hard links to what they
        adopt)."""
        path = self.fresh(what)
        self._temporary.append(path)
        return path

    def spilled(self, table: pa.Table) -> Path | None:
        """The temporary file this step wrote ``table`` to for Spark, if it did."""
        entry = self._spilled.get(id(table))
        return entry[1] if entry is not None and entry[0] is table else None

    def end_step(self) -> None:
        """Remove the step's temporary files (every action of the step has run)."""
        self._spilled.clear()
        for path in self._temporary:
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        self._temporary = []

    # -- into Spark ---------------------------------------------------------------------------

    def df_of_table(self, table: pa.Table, desc: RelationDesc) -> DataFrame:
        """A DataFrame of an internal-layout Arrow table (via Parquet when large)."""
        return self.spark_of_arrow(table, internal_struct(desc))

    @functools.cached_property
    def _ingest(self) -> ArrowIngest | None:
        return arrow_ingest(self.spark)

    def spark_of_arrow(self, table: pa.Table, schema: StructType | None = None) -> DataFrame:
        """A DataFrame of an Arrow table (``schema``: the Spark schema to read it with; default
        its own), via a temporary Parquet file when large."""
        if table.num_rows > self.settings.small_rows:
            path = self.spilled(table)
            if path is None:
                path = self.temporary("in.parquet")
                write_parquet(table, path)
                self._spilled[id(table)] = (table, path)
            reader = self.spark.read if schema is None else self.spark.read.schema(schema)
            return reader.parquet(str(path))
        table = without_empty_batches(table)
        if self._ingest is not None:
            return self._ingest.frame(table, schema)
        if schema is None:
            return self.spark.createDataFrame(table)
        return self.spark.createDataFrame(table, schema=schema)

    def slot_of_table(self, name: str, table: pa.Table, desc: RelationDesc | None) -> DataFrame:
        """The DataFrame of an internal-layout table of ``desc`` (``None``: the table is in no
        relation's layout, read with its own schema) through the slot ``name``
        (:mod:`spate.render.templates`), so that plans over it can be reused; a plain
        DataFrame of the table when slots are not available."""
        schema = None if desc is None else internal_struct(desc)
        if desc is not None and not table.schema.equals(internal_schema(desc)):
            table = _conform(table, desc)
        df = self.templates.slot(name, table, schema)
        if df is not None:
            return df
        return self.spark_of_arrow(table, schema)

    def df_of_files(self, paths: tuple[Path, ...], desc: RelationDesc) -> DataFrame:
        if not paths:
            return self.spark.createDataFrame([], schema=internal_struct(desc))
        return self.spark.read.schema(internal_struct(desc)).parquet(*(str(p) for p in paths))

    def df_of_batch(self, batch: Batch) -> DataFrame:
        if batch.table is not None:
            return self.df_of_table(batch.table, batch.desc)
        return self.df_of_files(batch.paths, batch.desc)

    def lazy_of_batch(self, batch: Batch) -> Lazy:
        if batch.is_empty:
            return Lazy.empty()
        return Lazy.of_batch(
            batch,
            functools.partial(self.df_of_batch, batch),
            big=batch.rows > self.settings.small_rows,
        )

    # -- out of Spark -------------------------------------------------------------------------

    def materialize(self, lazy: Lazy, desc: RelationDesc, *, consolidated: bool = True) -> Batch:
        """Run ``lazy`` (one Spark action) into a batch, consolidated unless it is large and
        ``consolidated=False`` (operators that sum diffs themselves skip the shuffle)."""
        if lazy.is_empty:
            return Batch(desc, table=internal_schema(desc).empty_table())
        batch = lazy.batch
        if batch is not None and (batch.consolidated or not consolidated):
            return batch
        if batch is not None and batch.table is not None:
            return self.batch_of_table(batch.table, desc)
        self.actions += 1
        if not lazy.big:
            table = self.templates.runnable(lazy.frame()).toArrow()
            table = consolidate(_conform(table, desc))
            return Batch(desc, table=table, rows=int(table.num_rows))
        from pyspark.sql import functions as F

        keys = [*data_names(desc.arity), TIME_COLUMN]
        result = self.templates.runnable(lazy.frame())
        if consolidated and not lazy.consolidated:
            result = (
                result.groupBy(*keys)
                .agg(F.sum(DIFF_COLUMN).alias(DIFF_COLUMN))
                .where(F.col(DIFF_COLUMN) != 0)
            )
        out = self.temporary("batch")
        result.write.mode("error").parquet(str(out))
        paths = tuple(sorted(out.glob("*.parquet")))
        rows = sum(int(pq.ParquetFile(p).metadata.num_rows) for p in paths)
        if rows <= self.settings.small_rows:
            table = _conform(
                pa.concat_tables([pq.read_table(p) for p in paths])
                if paths
                else internal_schema(desc).empty_table(),
                desc,
            )
            shutil.rmtree(out, ignore_errors=True)
            return Batch(desc, table=table, rows=int(table.num_rows))
        return Batch(desc, paths=paths, rows=rows)

    def batch_of_table(
        self, table: pa.Table, desc: RelationDesc, *, consolidated: bool = True
    ) -> Batch:
        """A batch of an internal-layout table, consolidated here unless ``consolidated`` is
        false and the table is large (module docs)."""
        if not consolidated and table.num_rows > self.settings.small_rows:
            return Batch(
                desc, table=_conform(table, desc), rows=int(table.num_rows), consolidated=False
            )
        table = consolidate(_conform(table, desc))
        return Batch(desc, table=table, rows=int(table.num_rows))

    def close(self) -> None:
        shutil.rmtree(self.scratch, ignore_errors=True)


def _conform(table: pa.Table, desc: RelationDesc) -> pa.Table:
    """Cast a table coming out of Spark to the internal schema (Spark may widen string types
    or mark columns nullable)."""
    schema = internal_schema(desc)
    arrays = [table.column(i).cast(schema.field(i).type) for i in range(len(schema))]
    return pa.Table.from_arrays(arrays, schema=schema)
