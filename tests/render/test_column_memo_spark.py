"""ColumnMemo's select and group_agg: what ``select`` / ``groupBy().agg`` give, with the
columns built once and reused by every later step's DataFrames."""

from __future__ import annotations

from typing import TYPE_CHECKING

from spate.render.operators.node import ColumnMemo

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession


def _rows(df: DataFrame) -> list[tuple[object, ...]]:
    return sorted(tuple(r) for r in df.collect())


def test_select_and_group_agg_match_the_dataframe_api_and_build_once(
    spark: SparkSession,
) -> None:
    from pyspark.sql import functions as F

    memo = ColumnMemo()
    built = {"select": 0, "keys": 0, "aggs": 0}

    def columns() -> list[Column]:
        built["select"] += 1
        return [(F.col("k") * 10).alias("k10"), F.col("v")]

    def keys() -> list[Column]:
        built["keys"] += 1
        return [F.col("k")]

    def aggs() -> list[Column]:
        built["aggs"] += 1
        return [F.sum("v").alias("s"), F.count("*").alias("n"), F.max("v").alias("m")]

    for step in range(3):  # each step a new DataFrame, as a dataflow's steps are
        df = spark.createDataFrame([(k % 3, k + step) for k in range(10)], "k long, v long")
        assert _rows(memo.select(df, "s", columns)) == _rows(df.select(*columns()))
        got = memo.group_agg(df, "g", keys, aggs)
        assert got.columns == ["k", "s", "n", "m"]
        assert _rows(got) == _rows(df.groupBy("k").agg(*aggs()))
    # Built once by the memo (plus once per step by the comparisons above).
    assert built == {"select": 1 + 3, "keys": 1, "aggs": 1 + 3}
