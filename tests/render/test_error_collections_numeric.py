"""A numeric quotient beyond the numeric precision limit (``a / b`` of numeric(38,0) by
numeric(38,10), whose result type keeps 22 integer digits) is an error as data with SQLSTATE
22003 and PostgreSQL's message "value overflows numeric format": reads of the view fail naming
it (the reference evaluator fails on the same contents), the dataflow goes on stepping, and
once the row is retracted reads equal the reference's answer. (The quotient used to raise a
Spark error even in capture mode, failing the step for good.) In a Map, in a Filter's
predicate and in a reduce's aggregate input; small deltas and large ones."""

from __future__ import annotations

from collections import Counter
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spate.plan import col, count, sum_
from spate.plan.expr import BinaryFunc, CallBinary, ColumnRef, Literal
from spate.plan.relation import Filter, Get
from spate.repr import RelationDesc
from spate.repr.types import numeric
from tests.render.test_error_collections_ops import T, _run

LARGE = pytest.mark.parametrize("large", [False, True], ids=["small", "large"])
NUM = RelationDesc.of(("a", numeric(38, 0), False), ("b", numeric(38, 10), False))
SRC = Get(T, NUM)
QUOTIENT = CallBinary(BinaryFunc.DIV, ColumnRef(0), ColumnRef(1))
ROWS = Counter({(Decimal(10), Decimal(2)): 1, (Decimal(1), Decimal(3)): 1})
BAD = (T, (Decimal(10**30), Decimal("0.0000000001")))
LATER = (T, (Decimal(7), Decimal("0.5")))
OVERFLOW = "value overflows numeric format"


@LARGE
def test_an_overflowing_numeric_quotient_in_a_map_fails_reads_until_retracted(
    spark: SparkSession, tmp_path: Path, large: bool
) -> None:
    _run(
        SRC.map(q=QUOTIENT),
        {T: ROWS},
        BAD,
        name="quotients",
        sqlstate="22003",
        large=large,
        spark=spark,
        scratch=tmp_path,
        later=LATER,
        descs={T: NUM},
        message=OVERFLOW,
    )


@LARGE
def test_an_overflowing_numeric_quotient_in_a_filter_fails_reads_until_retracted(
    spark: SparkSession, tmp_path: Path, large: bool
) -> None:
    big = CallBinary(BinaryFunc.GT, QUOTIENT, Literal(Decimal(3), numeric(38, 0)))
    _run(
        Filter(SRC, (big,)),
        {T: ROWS},
        BAD,
        name="ratios",
        sqlstate="22003",
        large=large,
        spark=spark,
        scratch=tmp_path,
        later=LATER,
        descs={T: NUM},
        message=OVERFLOW,
    )


@LARGE
def test_an_overflowing_numeric_quotient_under_a_sum_fails_reads_until_retracted(
    spark: SparkSession, tmp_path: Path, large: bool
) -> None:
    plan = SRC.map(q=QUOTIENT).reduce([], total=sum_(col("q")), n=count())
    _run(
        plan,
        {T: ROWS},
        BAD,
        name="totals",
        sqlstate="22003",
        large=large,
        spark=spark,
        scratch=tmp_path,
        later=LATER,
        descs={T: NUM},
        message=OVERFLOW,
    )
