"""Evaluation paths that used to raise inside a view's step in capture mode, failing the
dataflow for good, and are now errors as data (SQLSTATE 22003): int64 negation and absolute
value of -2**63, int64 division of -2**63 by -1, a reduce's numeric sum beyond 38 digits and a
reduce's numeric average beyond its type. Reads of the view fail naming it (the reference
evaluator fails on the same contents), the dataflow goes on stepping, and once the row is
retracted reads equal the reference's answer. Small deltas and large ones."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spate.plan import avg, col, count, sum_
from spate.plan.evaluation.relation import evaluate
from spate.plan.expr import (
    BinaryFunc,
    CallBinary,
    CallUnary,
    CallVariadic,
    ColumnRef,
    Literal,
    ScalarExpr,
    UnaryFunc,
    VariadicFunc,
)
from spate.plan.relation import Get
from spate.render.dataflow import Dataflow
from spate.render.input import ArrowInputs
from spate.repr import DATE, INT64, TEXT, RelationDesc
from spate.repr.arrow import updates_to_table
from spate.repr.types import numeric
from spate.testing.plan_strategies import single_plan_dataflow
from tests.render.oracle import peeked
from tests.render.test_error_collections_ops import DESC, SRC, T, _run

LARGE = pytest.mark.parametrize("large", [False, True], ids=["small", "large"])
MIN = -(2**63)
NUM = RelationDesc.of(("k", INT64, False), ("x", numeric(38, 0), False))
HUGE = Decimal(9 * 10**37)


@LARGE
@pytest.mark.parametrize("func", [UnaryFunc.NEG, UnaryFunc.ABS], ids=["neg", "abs"])
def test_negating_the_smallest_bigint_fails_reads_until_retracted(
    spark: SparkSession, tmp_path: Path, large: bool, func: UnaryFunc
) -> None:
    _run(
        SRC.map(y=CallUnary(func, ColumnRef(1))),
        {T: Counter({(1, 5): 1, (2, -7): 1})},
        (T, (3, MIN)),
        name="negated",
        sqlstate="22003",
        large=large,
        spark=spark,
        scratch=tmp_path,
        later=(T, (4, 1)),
        message="bigint out of range",
    )


@LARGE
def test_dividing_the_smallest_bigint_by_minus_one_fails_reads_until_retracted(
    spark: SparkSession, tmp_path: Path, large: bool
) -> None:
    quotient = CallBinary(BinaryFunc.DIV, ColumnRef(1), Literal(-1, INT64))
    _run(
        SRC.map(y=quotient),
        {T: Counter({(1, 5): 1, (2, -7): 1})},
        (T, (3, MIN)),
        name="halves",
        sqlstate="22003",
        large=large,
        spark=spark,
        scratch=tmp_path,
        later=(T, (4, 1)),
        message="bigint out of range",
    )


@LARGE
def test_a_numeric_sum_beyond_38_digits_fails_reads_until_retracted(
    spark: SparkSession, tmp_path: Path, large: bool
) -> None:
    plan = Get(T, NUM).reduce(["k"], total=sum_(col("x")), n=count())
    _run(
        plan,
        {T: Counter({(1, HUGE): 1, (1, Decimal(2)): 1, (2, Decimal(1)): 1})},
        (T, (1, HUGE)),
        name="numsums",
        sqlstate="22003",
        large=large,
        spark=spark,
        scratch=tmp_path,
        later=(T, (2, Decimal(10))),
        descs={T: NUM},
    )


@LARGE
def test_a_numeric_average_beyond_its_type_fails_reads_until_retracted(
    spark: SparkSession, tmp_path: Path, large: bool
) -> None:
    """avg of numeric(38,0) is numeric(38,16): 22 integer digits."""
    plan = Get(T, NUM).reduce(["k"], mean=avg(col("x")), n=count())
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


@LARGE
def test_a_distinct_numeric_sum_beyond_38_digits_fails_reads_until_retracted(
    spark: SparkSession, tmp_path: Path, large: bool
) -> None:
    plan = Get(T, NUM).reduce(["k"], total=sum_(col("x"), distinct=True), n=count())
    _run(
        plan,
        {T: Counter({(1, HUGE): 2, (1, Decimal(2)): 1, (2, Decimal(1)): 1})},
        (T, (1, Decimal(9 * 10**37 - 1))),
        name="distinctsums",
        sqlstate="22003",
        large=large,
        spark=spark,
        scratch=tmp_path,
        later=(T, (2, Decimal(10))),
        descs={T: NUM},
    )


MONTHS = CallVariadic(VariadicFunc.ADD_MONTHS, (Literal(dt.date(2020, 1, 1), DATE), ColumnRef(1)))
MONTH = CallVariadic(
    VariadicFunc.MAKE_DATE, (Literal(2020, INT64), ColumnRef(1), Literal(1, INT64))
)
FIELD = CallVariadic(
    VariadicFunc.SPLIT_PART, (Literal("a,b", TEXT), Literal(",", TEXT), ColumnRef(1))
)


@LARGE
@pytest.mark.parametrize("x", [MIN, 2**63 - 1], ids=["min", "max"])
@pytest.mark.parametrize("expr", [MONTHS, MONTH], ids=["add_months", "make_date"])
def test_a_date_function_of_an_extreme_bigint_fails_reads_until_retracted(
    spark: SparkSession, tmp_path: Path, large: bool, x: int, expr: ScalarExpr
) -> None:
    """add_months(date, x) and make_date(2020, x, 1): 22008, not Spark's int64 overflow."""
    _run(
        SRC.map(y=expr),
        {T: Counter({(1, 5): 1, (2, 7): 1})},
        (T, (3, x)),
        name="dates",
        sqlstate="22008",
        large=large,
        spark=spark,
        scratch=tmp_path,
        later=(T, (4, 1)),
    )


def test_split_part_at_an_extreme_bigint_field_equals_the_reference(
    spark: SparkSession, tmp_path: Path
) -> None:
    """split_part('a,b', ',', x) at x = -2**63 and 2**63 - 1 is '' (Spark's abs of -2**63
    used to raise)."""
    plan = SRC.map(y=FIELD)
    rows = Counter({(1, MIN): 1, (2, 2**63 - 1): 1, (3, -1): 1})
    table = updates_to_table(DESC, [(r, 0, n) for r, n in rows.items()])
    inputs = ArrowInputs.of({T: table}, upper=1)
    df = Dataflow(
        single_plan_dataflow(plan, {T: DESC}), inputs, spark=spark, scratch=tmp_path, name="f"
    )
    df.step()
    got = peeked(df.peek(df.description.index_exports[0].id, timestamp=0))
    assert (
        got
        == Counter(evaluate(plan, {T: rows}, 0))
        == Counter({(1, MIN, ""): 1, (2, 2**63 - 1, ""): 1, (3, -1, "b"): 1})
    )
    df.drop()
