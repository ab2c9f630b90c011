"""Spark reads spate's Parquet format with exactly the schema spate maps to."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow.parquet as pq

from spate.repr import (
    BOOL,
    BYTES,
    DATE,
    FLOAT64,
    INT64,
    JSONB,
    TEXT,
    TIMESTAMP,
    RelationDesc,
    numeric,
)
from spate.repr.arrow import table_to_updates, updates_to_table
from spate.repr.spark import updates_struct


def test_spark_reads_the_physical_format(spark, tmp_path) -> None:
    desc = RelationDesc.of(
        ("id", INT64, False),
        ("ok", BOOL),
        ("x", FLOAT64),
        ("p", numeric(10, 2)),
        ("s", TEXT),
        ("b", BYTES),
        ("d", DATE),
        ("at", TIMESTAMP),
        ("j", JSONB),
    )
    updates = [
        (
            (
                1,
                True,
                1.5,
                Decimal("3.25"),
                "a",
                b"\x00",
                dt.date(2024, 2, 29),
                dt.datetime(2024, 2, 29, 23, 59, 59, 123456),
                "[1]",
            ),
            7,
            1,
        ),
        ((2, None, None, None, None, None, None, None, None), 8, -2),
    ]
    table = updates_to_table(desc, updates)
    path = tmp_path / "batch.parquet"
    pq.write_table(table, path, coerce_timestamps="us")
    df = spark.read.parquet(str(path))
    assert [(f.name, f.dataType, f.nullable) for f in df.schema.fields] == [
        (f.name, f.dataType, True) for f in updates_struct(desc).fields
    ]
    back = df.orderBy("id").toArrow()
    assert table_to_updates(back) == updates
