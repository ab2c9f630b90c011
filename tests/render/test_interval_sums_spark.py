"""The interval of summed fields (``sum`` and ``avg`` of intervals, :mod:`spate.sql.interval_aggs`)
on Spark agrees with the reference evaluator field for field: in range up to each field's limit,
22008 one past it, NULL where nothing was summed."""

from __future__ import annotations

import random
from decimal import Decimal
from typing import TYPE_CHECKING

import pytest

from spate.errors import EvalError
from spate.plan.expr import ColumnRef, ScalarExpr
from spate.render.scalar import compile_scalar
from spate.repr.arrow import interval_of
from spate.repr.desc import RelationDesc
from spate.repr.interval import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, Interval
from spate.repr.types import INT64, Datum, Row, numeric
from spate.sql.interval_aggs import average, of_sums
from tests.render.test_scalar_spark import exact_spark, frame, reference_values

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["exact_spark"]

_N = numeric(38, 0)
DESC = RelationDesc.of(("m", _N), ("d", _N), ("u", _N), ("n", INT64))
M, D, U, N = (ColumnRef(k) for k in range(4))


def _row(m: int, d: int, u: int, n: int) -> Row:
    return (Decimal(m), Decimal(d), Decimal(u), n)


EDGE: list[Row] = [
    (None, None, None, 0),
    _row(0, 0, 0, 1),
    _row(INT32_MAX, INT32_MAX, INT64_MAX, 1),
    _row(INT32_MIN, INT32_MIN, INT64_MIN, 3),
    _row(INT32_MAX + 1, 0, 0, 2),
    _row(0, INT32_MIN - 1, 0, 2),
    _row(0, 0, INT64_MAX + 1, 2),
    _row(0, 0, INT64_MIN - 1, 2),
    _row(-(10**30), 0, 0, 5),
    _row(1, 2, 3_000_000, 7),
]


def _rows(rng: random.Random) -> list[Row]:
    out = list(EDGE)
    for _ in range(30):
        out.append(
            _row(
                rng.randint(-400, 400),
                rng.randint(-10_000, 10_000),
                rng.randint(-(10**15), 10**15),
                rng.randint(1, 9),
            )
        )
    return out


def _same(a: Datum, b: Datum) -> bool:
    if isinstance(a, Interval) and isinstance(b, Interval):
        return tuple(a) == tuple(b)  # the fields, not just the span
    return a is None and b is None


@pytest.mark.timeout(600)
def test_interval_of_sums_on_spark_agrees_with_the_reference(
    exact_spark: SparkSession, seed: int
) -> None:
    from pyspark.sql import functions as fn

    rng = random.Random(seed)
    rows = _rows(rng)
    desc = RelationDesc.of(*((c.name, c.type) for c in DESC.columns), ("k", INT64))
    df = frame(exact_spark, desc, [(*r, k) for k, r in enumerate(rows)])
    exprs: list[ScalarExpr] = [of_sums(M, D, U), average([M, D, U, N])]
    wanted = [[reference_values(DESC, [r], e) for r in rows] for e in exprs]
    columns = []
    for n, e in enumerate(exprs):
        good = [k for k, w in enumerate(wanted[n]) if not isinstance(w, EvalError)]
        columns.append(fn.when(fn.col("c4").isin(good), compile_scalar(e, desc)).alias(f"e{n}"))
    got = {r["c4"]: r for r in df.select("c4", *columns).collect()}
    failing: list[tuple[ScalarExpr, int]] = []
    for n, e in enumerate(exprs):
        for k, want in enumerate(wanted[n]):
            if isinstance(want, EvalError):
                assert want.sqlstate == "22008", (e, rows[k], want)
                failing.append((e, k))
                continue
            g = got[k][f"e{n}"]
            value = interval_of(g) if g is not None else None
            assert _same(value, want[0]), f"{e} on {rows[k]}: spark {value!r}, reference {want!r}"
    # each field one past either limit (and a total far beyond one) fails, in sum and avg
    assert {k for e, k in failing if e == exprs[0]} == {4, 5, 6, 7, 8}
    for e, k in failing:
        one = df.filter(fn.col("c4") == k).select(compile_scalar(e, desc))
        with pytest.raises(Exception, match="SQLSTATE 22008"):
            one.collect()
