"""Moving updates between Arrow, Parquet and Spark inside a dataflow.

A step's intermediate results are Spark DataFrames (:class:`Lazy`, ``None`` when known to be
empty, so that an idle step runs no Spark job at all). Where a result must be kept (arranged) or
shared, it is **materialized** into a :class:`Batch`: small results come back to the driver as
one Arrow table (``toArrow``), large ones (snapshots, hydration) are written by Spark as Parquet
files in the dataflow's scratch directory and never pass through Python. Either way a batch is
consolidated (one row per ``(data, _time)``, no zero ``_diff``).

All tables and DataFrames here are in the internal layout (:mod:`spate.render.layout`).
"""

from __future__ import annotations

import itertools
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

import pyarrow as pa
import pyarrow.parquet as pq

from spate.render.layout import data_names, internal_schema, internal_struct
from spate.repr.consolidate import consolidate
from spate.repr.desc import DIFF_COLUMN, TIME_COLUMN, RelationDesc

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

SMALL_ROWS: Final = 20_000
"""Deltas up to this many rows travel as Arrow (``createDataFrame``/``toArrow``); larger ones
as Parquet, which moves ~10× more rows per second here (spark-performance.md)."""


@dataclass(frozen=True)
class Lazy:
    """A not yet computed delta: ``df`` (``None``: known to be empty); ``big`` when it derives
    from a large input, so that materializing it should go through Parquet."""

    df: DataFrame | None
    big: bool = False
    batch: Batch | None = None
    """Set when ``df`` merely reads this already materialized batch (materializing it again
    would be a Spark job for nothing)."""
    consolidated: bool = False
    """``df`` has one row per ``(data, _time)`` and no zero ``_diff`` by construction (a large
    materialization then needs no consolidating shuffle)."""

    @staticmethod
    def empty() -> Lazy:
        return Lazy(None)


@dataclass(frozen=True)
class Batch:
    """A materialized, consolidated delta: an Arrow table, or Parquet files written by Spark."""

    desc: RelationDesc
    table: pa.Table | None = None
    paths: tuple[Path, ...] = ()
    rows: int = 0

    @property
    def is_empty(self) -> bool:
        return self.rows == 0

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

    def __init__(self, spark: SparkSession, scratch: Path) -> None:
        self.spark = spark
        self.scratch = scratch
        # Left over from an earlier process (a replica restarted on the same scratch): garbage.
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir(parents=True)
        self._ids = itertools.count()
        self.actions = 0
        self._temporary: list[Path] = []
        """Spark actions run so far (materializations)."""

    def fresh(self, what: str) -> Path:
        """A path in the scratch directory never used before (Spark caches file listings)."""
        return self.scratch / f"{what}-{next(self._ids):06d}"

    def temporary(self, what: str) -> Path:
        """A fresh path removed by :meth:`end_step` (arrangements keep hard links to what they
        adopt)."""
        path = self.fresh(what)
        self._temporary.append(path)
        return path

    def end_step(self) -> None:
        """Remove the step's temporary files (every action of the step has run)."""
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

    def spark_of_arrow(self, table: pa.Table, schema: StructType | None = None) -> DataFrame:
        """A DataFrame of an Arrow table (``schema``: the Spark schema to read it with; default
        its own), via a temporary Parquet file when large."""
        if table.num_rows > SMALL_ROWS:
            path = self.temporary("in.parquet")
            pq.write_table(table, path, compression="none")
            reader = self.spark.read if schema is None else self.spark.read.schema(schema)
            return reader.parquet(str(path))
        if schema is None:
            return self.spark.createDataFrame(table)
        return self.spark.createDataFrame(table, schema=schema)

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
        return Lazy(self.df_of_batch(batch), big=batch.rows > SMALL_ROWS, batch=batch)

    # -- out of Spark -------------------------------------------------------------------------

    def materialize(self, lazy: Lazy, desc: RelationDesc, *, consolidated: bool = True) -> Batch:
        """Run ``lazy`` (one Spark action) into a batch, consolidated unless it is large and
        ``consolidated=False`` (operators that sum diffs themselves skip the shuffle)."""
        if lazy.df is None:
            return Batch(desc, table=internal_schema(desc).empty_table())
        if lazy.batch is not None:
            return lazy.batch
        self.actions += 1
        if not lazy.big:
            table = lazy.df.toArrow()
            table = consolidate(_conform(table, desc))
            return Batch(desc, table=table, rows=int(table.num_rows))
        from pyspark.sql import functions as F

        keys = [*data_names(desc.arity), TIME_COLUMN]
        result = lazy.df
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
        if rows <= SMALL_ROWS:
            table = _conform(
                pa.concat_tables([pq.read_table(p) for p in paths])
                if paths
                else internal_schema(desc).empty_table(),
                desc,
            )
            shutil.rmtree(out, ignore_errors=True)
            return Batch(desc, table=table, rows=int(table.num_rows))
        return Batch(desc, paths=paths, rows=rows)

    def batch_of_table(self, table: pa.Table, desc: RelationDesc) -> Batch:
        """A batch of an internal-layout table (consolidated here)."""
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
