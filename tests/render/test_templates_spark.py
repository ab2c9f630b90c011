"""Plan templates (spate.render.templates): a plan over slots is built once and each run reads
the slots' current contents, also for a new set of templates on the same directory (a
restarted dataflow on its old scratch), whose slot listings Spark must not serve stale."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spate.render.batch import write_parquet
from spate.render.templates import PlanTemplates


def _table(keys: list[int]) -> pa.Table:
    return pa.table(
        {"k": pa.array(keys, pa.int64()), "v": pa.array([k * 10 for k in keys], pa.int64())}
    )


def _sums(templates: PlanTemplates, df: DataFrame) -> dict[int, int]:
    out = templates.runnable(df).toArrow().to_pylist()
    return {r["k"]: r["s"] for r in out}


def _plan(templates: PlanTemplates, a: DataFrame, b: DataFrame) -> DataFrame:
    def build() -> DataFrame:
        joined = a.join(b.select(F.col("k").alias("k2")), F.col("k") == F.col("k2"))
        return joined.groupBy("k").agg(F.sum("v").alias("s"))

    return templates.template(("sums",), [a, b], build)


def test_a_template_reads_its_slots_current_contents(spark: SparkSession, tmp_path: Path) -> None:
    templates = PlanTemplates(spark, tmp_path / "slots", write_parquet)
    assert templates.enabled
    steps = [([1, 2, 2, 3], [2, 3]), ([4, 4, 5], [4, 5, 9]), ([], [1]), ([7], [7])]
    for left, right in steps:
        a = templates.slot("a", _table(left))
        b = templates.slot("b", _table(right))
        assert a is not None and b is not None
        want: dict[int, int] = {}
        for k in left:
            if k in right:
                want[k] = want.get(k, 0) + k * 10 * right.count(k)
        assert _sums(templates, _plan(templates, a, b)) == want
    assert templates.builds == 1, "one plan, built once, run at every step"

    # a restart: the directory is wiped and new templates write the same slots anew
    shutil.rmtree(tmp_path / "slots")
    again = PlanTemplates(spark, tmp_path / "slots", write_parquet)
    a = again.slot("a", _table([8, 8]))
    b = again.slot("b", _table([8]))
    assert a is not None and b is not None
    assert _sums(again, _plan(again, a, b)) == {8: 160}


def test_a_plan_over_other_inputs_is_not_a_template(spark: SparkSession, tmp_path: Path) -> None:
    templates = PlanTemplates(spark, tmp_path / "slots", write_parquet)
    plain = spark.createDataFrame(_table([1, 2]))
    built = [templates.template(("x",), [plain], lambda: plain.select("k")) for _ in range(2)]
    assert built[0] is not built[1] and templates.builds == 0
    assert templates.runnable(built[0]) is built[0]
