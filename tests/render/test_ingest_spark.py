"""ArrowIngest builds the DataFrame ``createDataFrame`` builds, in fewer py4j calls."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from spate.render.batch import Engine, EngineSettings
from spate.render.ingest import ArrowIngest, arrow_ingest, without_empty_batches
from spate.render.layout import internal_struct, to_internal
from spate.repr import BOOL, BYTES, DATE, FLOAT64, INT64, JSONB, TEXT, TIMESTAMP, RelationDesc
from spate.repr.arrow import updates_to_table
from spate.repr.types import numeric

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

DESC = RelationDesc.of(
    ("b", BOOL, True),
    ("i", INT64, True),
    ("f", FLOAT64, True),
    ("n", numeric(12, 3), True),
    ("s", TEXT, True),
    ("y", BYTES, True),
    ("d", DATE, True),
    ("t", TIMESTAMP, True),
    ("j", JSONB, True),
)


def _table(rows: int) -> pa.Table:
    updates = []
    for k in range(rows):
        if k % 7 == 3:
            row: tuple[object, ...] = (None,) * DESC.arity
        else:
            row = (
                k % 2 == 0,
                k - rows // 2,
                k / 4 if k % 5 else float("nan"),
                Decimal(k) / 1000,
                f"s{k}é",
                bytes([k % 256]),
                dt.date(2020, 1, 1) + dt.timedelta(days=k),
                dt.datetime(2024, 3, 10, 1, 30) + dt.timedelta(minutes=37 * k),
                f'{{"k": {k}}}',
            )
        updates.append((row, k % 3, 1 - 2 * (k % 2)))
    return to_internal(updates_to_table(DESC, updates), DESC)


def _rows(df: DataFrame) -> str:
    """The rows in order, NaN equal to NaN (``repr``)."""
    return repr(df.toArrow().to_pylist())


def _ingest(spark: SparkSession) -> ArrowIngest:
    ingest = arrow_ingest(spark)
    # The pinned PySpark has the internals: the fast path is the one steps take.
    assert isinstance(ingest, ArrowIngest)
    return ingest


def test_ingest_equals_create_data_frame_with_a_schema(spark: SparkSession) -> None:
    ingest = _ingest(spark)
    struct = internal_struct(DESC)
    # More rows than one Arrow batch (one partition per batch) in the second case.
    chunk = int(spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch") or 10_000)
    for rows in (0, 50, chunk + 5):
        table = _table(rows)
        want = spark.createDataFrame(table, schema=struct)
        got = ingest.frame(table, struct)
        assert got.schema == want.schema
        assert got.count() == rows
        assert _rows(got) == _rows(want), rows


def test_ingest_without_a_schema_types_as_create_data_frame(spark: SparkSession) -> None:
    ingest = _ingest(spark)
    table = _table(20)
    want = spark.createDataFrame(table)
    got = ingest.frame(table)
    assert got.schema == want.schema
    assert _rows(got) == _rows(want)
    # the frame is usable in plans like any other
    assert got.where("c1 > 0").count() == want.where("c1 > 0").count() > 0


def test_tables_with_empty_batches_lose_no_rows(spark: SparkSession, tmp_path: Path) -> None:
    """Spark's Arrow stream readers stop at an empty record batch: a table whose columns are
    chunked differently (a consolidation's output) splits into batches some of them empty, and
    the rows after them were dropped."""
    schema = pa.schema([("c0", pa.int64()), ("c1", pa.int64())])

    def chunked(*parts: list[int]) -> pa.ChunkedArray:
        return pa.chunked_array([pa.array(p, pa.int64()) for p in parts], pa.int64())

    table = pa.Table.from_arrays(
        [chunked([], [], [1, 2]), chunked([], [3], [], [4])], schema=schema
    )
    assert [b.num_rows for b in table.to_batches()] == [0, 0, 1, 0, 1]
    want = [{"c0": 1, "c1": 3}, {"c0": 2, "c1": 4}]
    assert without_empty_batches(table).to_pylist() == want
    assert _ingest(spark).frame(table).toArrow().to_pylist() == want
    engine = Engine(spark, tmp_path / "engine", EngineSettings())
    assert engine.spark_of_arrow(table).toArrow().to_pylist() == want
