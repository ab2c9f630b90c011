"""A translated dataset's query, evaluated by spate, equals Spark's answer to the same
DataFrame on the same files (the query read at once from its input table, no dataflow)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spate.pipelines import load_pipeline
from spate.pipelines.file_frontier import FileFrontier
from spate.pipelines.inputs import input_desc, sync_input
from tests.pipelines._example import normalized

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def _spark_rows(df: DataFrame) -> list[tuple[object, ...]]:
    return normalized([r.asDict() for r in df.collect()])


@pytest.mark.parametrize(
    ("query", "spark_query"),
    [
        # a number column missing on the right: its NULLs are numbers, as in Spark
        (
            'd.unionByName(d.select("v"), allowMissingColumns=True)',
            lambda d: d.unionByName(d.select("v"), allowMissingColumns=True),
        ),
        # missing on the left: the right's extra column comes last
        (
            'd.select("v").unionByName(d, allowMissingColumns=True)',
            lambda d: d.select("v").unionByName(d, allowMissingColumns=True),
        ),
    ],
)
def test_union_by_name_with_missing_columns_equals_spark(
    tmp_path: Path, spark: SparkSession, query: str, spark_query: object
) -> None:
    from spate.environment.api import Environment

    (tmp_path / "t").mkdir()
    (tmp_path / "data").mkdir()
    pq.write_table(
        pa.table({"k": pa.array([1, 2], pa.int64()), "v": ["a", "b"]}),
        tmp_path / "data" / "f.parquet",
    )
    (tmp_path / "t" / "defs.py").write_text(
        textwrap.dedent(f"""\
        from pyspark import pipelines as dp
        from pyspark.sql import SparkSession
        spark = SparkSession.active()

        @dp.materialized_view
        def u():
            d = spark.read.parquet("data")
            return {query}
        """)
    )
    spec = tmp_path / "pipeline.yml"
    spec.write_text(
        f"name: p\nstorage: {tmp_path.as_uri()}/s\nlibraries:\n  - glob:\n      include: t/**\n"
    )
    pipeline = load_pipeline(spec)
    (inp,) = pipeline.inputs.values()
    want = spark_query(spark.read.parquet(str(tmp_path / "data")))  # type: ignore[operator]
    env = Environment.open(tmp_path / "env")
    try:
        env.create_table(inp.table, input_desc(inp))
        sync_input(env, inp, FileFrontier(tmp_path / "env"))
        got = env.sql(pipeline.dataset("u").sql, dialect="spark")
        assert isinstance(got, pa.Table)
        assert got.column_names == want.columns == pipeline.dataset("u").columns
        assert normalized(got.to_pylist()) == _spark_rows(want)
    finally:
        env.close()
