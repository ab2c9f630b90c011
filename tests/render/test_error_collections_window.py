"""A window aggregate whose running value leaves its type (``sum(x) OVER (PARTITION BY k ORDER
BY x)`` of int64 or numeric(38,0) passing the type's range) is an error as data: reads fail
with SQLSTATE 22003 naming the view (the reference evaluator fails on the same contents), the
dataflow goes on stepping, and once the row is retracted reads equal the reference's answer.
(It used to fail the whole step, for good.) Small deltas and large ones (every step in Spark)
both."""

from __future__ import annotations

from collections import Counter
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spate.plan import avg, col, sum_
from spate.plan.relation import Get
from spate.repr import INT64, RelationDesc
from spate.repr.types import numeric
from tests.render.test_error_collections_ops import SRC, T, _run

LARGE = pytest.mark.parametrize("large", [False, True], ids=["small", "large"])
BIG = 2**63 - 3


@LARGE
def test_an_overflowing_running_sum_fails_reads_until_retracted(
    spark: SparkSession, tmp_path: Path, large: bool
) -> None:
    """sum(x) over (partition by k order by x), with a row that takes k=1's sum past 2**63."""
    plan = SRC.window(["k"], order_by=["x"], total=sum_(col("x")))
    _run(
        plan,
        {T: Counter({(1, 5): 1, (1, 2): 1, (2, 1): 1})},
        (T, (1, BIG)),
        name="running",
        sqlstate="22003",
        large=large,
        spark=spark,
        scratch=tmp_path,
        later=(T, (2, 10)),
    )


@LARGE
def test_an_overflowing_window_sum_without_order_fails_reads_until_retracted(
    spark: SparkSession, tmp_path: Path, large: bool
) -> None:
    """sum(x), avg(x) over (partition by k): the whole partition's sum passes 2**63 (the avg
    is exact: it does not fail)."""
    plan = SRC.window(["k"], total=sum_(col("x")), mean=avg(col("x")))
    _run(
        plan,
        {T: Counter({(1, 5): 1, (1, 2): 1, (2, 1): 1})},
        (T, (1, BIG)),
        name="totals",
        sqlstate="22003",
        large=large,
        spark=spark,
        scratch=tmp_path,
        later=(T, (2, 10)),
    )


NUM = RelationDesc.of(("k", INT64, False), ("x", numeric(38, 0), False))
HUGE = Decimal(9 * 10**37)


@LARGE
def test_an_overflowing_numeric_running_sum_fails_reads_until_retracted(
    spark: SparkSession, tmp_path: Path, large: bool
) -> None:
    """sum(x) over (partition by k order by x) of numeric(38,0), past 38 digits."""
    plan = Get(T, NUM).window(["k"], order_by=["x"], total=sum_(col("x")))
    _run(
        plan,
        {T: Counter({(1, HUGE): 1, (1, Decimal(2)): 1, (2, Decimal(1)): 1})},
        (T, (1, HUGE)),
        name="bigsums",
        sqlstate="22003",
        large=large,
        spark=spark,
        scratch=tmp_path,
        later=(T, (2, Decimal(10))),
        descs={T: NUM},
    )


@LARGE
def test_a_numeric_window_average_beyond_its_type_fails_reads_until_retracted(
    spark: SparkSession, tmp_path: Path, large: bool
) -> None:
    """avg(x) over (partition by k) of numeric(38,0) is numeric(38,16): 22 integer digits."""
    plan = Get(T, NUM).window(["k"], mean=avg(col("x")))
    _run(
        plan,
        {T: Counter({(1, Decimal(4)): 1, (1, Decimal(2)): 1, (2, Decimal(1)): 1})},
        (T, (1, Decimal(10**25))),
        name="means",
        sqlstate="22003",
        large=large,
        spark=spark,
        scratch=tmp_path,
        later=(T, (2, Decimal(10))),
        descs={T: NUM},
    )
