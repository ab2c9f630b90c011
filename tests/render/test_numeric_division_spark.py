"""Numeric division on Spark (spate.render.numeric_division) agrees with the reference
evaluator on seeded random operands of several types, and stays within a time budget."""

from __future__ import annotations

import random
import time
from decimal import Decimal
from typing import TYPE_CHECKING

import pytest

from spate.plan.errors import EvalError
from spate.plan.evaluation.scalar import eval_scalar
from spate.plan.expr import BinaryFunc, CallBinary, ColumnRef
from spate.render.scalar import EXACT_DECIMAL_CONF, compile_scalar
from spate.repr.desc import Column, RelationDesc
from spate.repr.types import Row, numeric

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# (pa, sa, pb, sb): the divisors have at most 25 significant digits (the exact path)
TYPES = [(38, 0, 19, 0), (38, 10, 25, 10)]


def _value(rng: random.Random, precision: int, scale: int) -> Decimal:
    digits = rng.randint(0, precision)
    unscaled = rng.randint(0, 10**digits - 1) * rng.choice((1, -1))
    return Decimal(unscaled).scaleb(-scale)


@pytest.mark.parametrize("types", TYPES, ids=str)
def test_spark_division_equals_the_reference(
    spark: SparkSession, seed: int, types: tuple[int, int, int, int]
) -> None:
    for k, v in EXACT_DECIMAL_CONF.items():
        spark.conf.set(k, v)
    pa, sa, pb, sb = types
    desc = RelationDesc([Column("a", numeric(pa, sa), True), Column("b", numeric(pb, sb), True)])
    expr = CallBinary(BinaryFunc.DIV, ColumnRef(0), ColumnRef(1))
    rng = random.Random(seed)
    rows: list[Row] = [(Decimal(1), Decimal(3)), (None, Decimal(1)), (Decimal(5), Decimal(0))]
    rows += [(_value(rng, pa, sa), _value(rng, pb, sb)) for _ in range(100)]
    expected = []
    kept: list[Row] = []
    for row in rows:
        try:
            expected.append(eval_scalar(expr, desc.columns, row, 0))
        except EvalError:
            continue  # a numeric overflow: Spark raises it too (tests/render/test_scalar_spark)
        kept.append(row)
    df = spark.createDataFrame(kept, f"c0 decimal({pa},{sa}), c1 decimal({pb},{sb})")
    started = time.perf_counter()
    got = [r[0] for r in df.select(compile_scalar(expr, desc)).collect()]
    elapsed = time.perf_counter() - started
    print(f"{len(kept)} quotients of {types} on Spark: {elapsed:.2f}s")
    bad = [(r, e, g) for r, e, g in zip(kept, expected, got, strict=True) if e != g]
    assert not bad, bad[:3]
    assert elapsed < 120, f"{len(kept)} quotients took {elapsed:.1f}s"
