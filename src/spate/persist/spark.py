"""A shard's contents at ``as_of`` as a Spark DataFrame, read from explicit Parquet files.

Spark reads the verified files that :meth:`ReadHandle.live_batches` names — never a directory
glob, which would pick up blobs that compaction replaced — then filters ``_time <= as_of``,
advances times to ``as_of`` and consolidates, in one plan. Non-file blob stores are staged to
local files first (Spark here cannot read S3).

The DataFrame is lazy: the files must stay valid until it is evaluated. They do until the
reader's next ``downgrade_since``/``heartbeat``/``expire`` (which also removes staged copies).
Collect, ``.cache()`` or ``.localCheckpoint(eager=True)`` before that.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spate.persist.read import LiveBatches, ReadHandle
from spate.repr.desc import DIFF_COLUMN, TIME_COLUMN
from spate.repr.spark import updates_struct

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def live_batches_frame(spark: SparkSession, live: LiveBatches) -> DataFrame:
    """The contents at ``live.as_of`` of the files in ``live``: data, ``_time``, ``_diff``."""
    from pyspark.sql import functions as F

    schema = updates_struct(live.desc)
    if not live.paths:
        return spark.createDataFrame([], schema)
    data_cols = [c.name for c in live.desc.columns]
    df = spark.read.schema(schema).parquet(*live.paths)
    df = df.where(F.col(TIME_COLUMN) <= F.lit(live.as_of))
    grouped = df.groupBy(*data_cols) if data_cols else df.groupBy()
    out = grouped.agg(F.sum(DIFF_COLUMN).cast("long").alias(DIFF_COLUMN)).where(
        F.col(DIFF_COLUMN) != 0
    )
    return out.select(
        *data_cols, F.lit(live.as_of).cast("long").alias(TIME_COLUMN), F.col(DIFF_COLUMN)
    )


def spark_snapshot(
    spark: SparkSession, reader: ReadHandle, as_of: int, *, timeout: float | None = None
) -> DataFrame:
    """A DataFrame of the shard's contents at ``as_of`` (data columns, ``_time``, ``_diff``).

    Valid until the reader's next ``downgrade_since``/``heartbeat``/``expire`` (see the module
    docs).
    """
    return live_batches_frame(spark, reader.live_batches(as_of, timeout=timeout))
