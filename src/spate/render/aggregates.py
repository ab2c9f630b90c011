"""Aggregate functions of ``Reduce`` as Spark aggregate columns over rows with multiplicities.

The renderer groups a **consolidated** DataFrame: every distinct row appears once, with its
positive int64 multiplicity in the column ``diff`` (``_diff``). :func:`aggregate_column` returns
a column for ``df.groupBy(keys).agg(...)`` whose value for a group is
:func:`spate.testing.reference.aggregate` of the aggregate's input values paired with their
multiplicities: NULL inputs skipped; ``count`` is Σ multiplicity (0 for no values), every other
function is NULL without values; ``distinct`` takes each distinct non-NULL value once (NaN equals
NaN, ``-0.0`` equals ``0.0``, as Spark's grouping normalises floats).

How each is computed (``v`` the input value, ``m`` its multiplicity):

* ``count`` — Σ m over non-NULL ``v`` (``count(DISTINCT)``: Spark's ``count_distinct``).
* ``sum`` — int64: Σ v·m in ``decimal(38,0)``, then cast to int64 (ANSI: an out-of-range total
  raises, like the reference; intermediate sums never overflow). numeric: Σ v·m in Spark decimals
  (needs :data:`spate.render.scalar.EXACT_DECIMAL_CONF`, else ``v·m`` loses scale digits), more
  than 38 digits raises. float64: Σ v·m in doubles.
* ``min``/``max`` — Spark's (NaN largest, text by code point, bytes unsigned bytewise).
* ``avg`` — int64: exact Σ v·m (decimal) / Σ m as doubles; float64: Σ v·m / Σ m; numeric:
  Spark's decimal division of the exact sum by Σ m, cast (half up) to the result type.
* ``bool_and``/``bool_or`` — Spark's ``bool_and``/``bool_or`` (multiplicity does not matter).
* ``string_agg`` — every value repeated ``m`` times (``collect_set`` for distinct), sorted by
  code point (Spark sorts strings by UTF-8 bytes, the same order), joined by the delimiter.

**Known deviations from the reference:**

* float64 ``sum``/``avg``: the reference sums with ``math.fsum`` (one correctly rounded result);
  Spark adds in partition order, so results may differ in the last bits unless every partial
  sum is exact (and the reference raises where ``fsum`` meets ``inf`` and ``-inf``; Spark gives
  NaN).
* int64 ``avg`` is correctly rounded while ``|Σ v·m| < 2**53``; beyond, it may be one unit in
  the last place off (the sum is converted to a double before dividing).
* numeric ``avg``: with :data:`~spate.render.scalar.EXACT_DECIMAL_CONF` the quotient keeps
  ``s + 20`` fractional digits but at most ``18 - s`` integer digits (a larger average raises);
  the final half-up rounding can differ from the reference only when ``Σ m > 10**16``. Without
  that configuration Spark keeps only ``max(s, 6)`` fractional digits.
* a count beyond int64 raises (the reference counts without bound).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spate.plan.aggregate import AggregateExpr, AggregateFunc
from spate.plan.errors import PlanTypeError
from spate.plan.infer import typ
from spate.render.scalar import compile_scalar
from spate.repr.desc import DIFF_COLUMN, RelationDesc
from spate.repr.spark import spark_type
from spate.repr.types import ScalarKind, ScalarType

K = ScalarKind
_EXACT_INT: Final = T.DecimalType(38, 0)
_INT_VALUE: Final = T.DecimalType(20, 0)
_MULTIPLICITY: Final = T.DecimalType(19, 0)


def aggregate_column(
    agg: AggregateExpr,
    input_desc: RelationDesc,
    out_type: ScalarType,
    *,
    diff: str = DIFF_COLUMN,
    names: Sequence[str] | None = None,
) -> Column:
    """``agg`` over a group of consolidated rows, as a column for ``groupBy(...).agg(...)``.

    ``input_desc`` describes the data columns (named ``names``, by default ``c0, c1, …``);
    ``diff`` names the positive multiplicity column; ``out_type`` is the aggregate's result type
    (:func:`spate.plan.aggregate.aggregate_type`). The column has Spark type
    ``spark_type(out_type)``.
    """
    v = compile_scalar(agg.expr, input_desc, names)
    m = F.col(diff)
    in_type = typ(agg.expr, input_desc.columns).type
    return _aggregate(agg, v, m, in_type, out_type).cast(spark_type(out_type))


def _aggregate(
    agg: AggregateExpr, v: Column, m: Column, in_type: ScalarType, out: ScalarType
) -> Column:
    f, k, distinct = agg.func, in_type.kind, agg.distinct
    present_m = F.when(v.isNotNull(), m)
    if f is AggregateFunc.COUNT:
        if distinct:
            return F.count_distinct(v)
        return F.coalesce(F.sum(present_m), F.lit(0).cast(T.LongType()))
    if f is AggregateFunc.SUM:
        return _sum(v, m, k, distinct)
    if f is AggregateFunc.MIN:
        return F.min(v)
    if f is AggregateFunc.MAX:
        return F.max(v)
    if f is AggregateFunc.AVG:
        total = _sum(v, m, k, distinct, for_avg=True)
        n = F.count_distinct(v) if distinct else F.sum(present_m)
        if k is K.NUMERIC:
            assert in_type.scale is not None and out.scale is not None
            return _numeric_ratio(total, n, in_type.scale, out.scale)
        if k is K.INT64:
            return _int_ratio(total, n)
        average = total / n.cast("double")
        return F.when(average == F.lit(0.0), F.lit(0.0)).otherwise(average)
    if f is AggregateFunc.BOOL_AND:
        return F.bool_and(v)
    if f is AggregateFunc.BOOL_OR:
        return F.bool_or(v)
    if f is AggregateFunc.STRING_AGG:
        assert agg.delimiter is not None
        if distinct:
            values = F.collect_set(v)
        else:
            values = F.flatten(
                F.collect_list(F.when(v.isNotNull(), F.array_repeat(v, m.cast("int"))))
            )
        ordered = F.sort_array(values)
        return F.when(F.size(ordered) > F.lit(0), F.array_join(ordered, agg.delimiter))
    raise PlanTypeError(f"unknown aggregate function {f!r} (output {out})")


def _sum(v: Column, m: Column, k: ScalarKind, distinct: bool, *, for_avg: bool = False) -> Column:
    if k is K.INT64:
        exact = v.cast(_INT_VALUE)
        total = F.sum_distinct(exact) if distinct else F.sum(exact * m.cast(_MULTIPLICITY))
        return total.cast(_EXACT_INT) if for_avg else total.cast(T.LongType())
    if k is K.NUMERIC:
        return F.sum_distinct(v) if distinct else F.sum(v * m.cast(_MULTIPLICITY))
    total = F.sum_distinct(v) if distinct else F.sum(v * m.cast("double"))
    return total if for_avg else F.when(total == F.lit(0.0), F.lit(0.0)).otherwise(total)


# --- exact averages ----------------------------------------------------------------------------
#
# Spark's decimal division rounds to a result type that depends on the operand types and on
# allowPrecisionLoss, so averages are computed by long division in base 10**18 instead: every
# step is a decimal(38,0) product/remainder or an integral ``div`` below 10**18 (exact, and the
# same under every configuration).


def _dec(value: int) -> Column:
    return F.lit(str(value)).cast(_EXACT_INT)


def _long_division(a: Column, n: Column, fraction_chunks: int) -> tuple[Column, Column, Column]:
    """Digits of ``a / n`` for ``0 <= a < 10**38`` (decimal) and ``n > 0`` (long): the integer
    part (54 digits, zero-padded), ``18 * fraction_chunks`` fraction digits (truncated), and
    whether anything remains."""
    divisor = n.cast(_EXACT_INT)
    chunk = 10**18
    pieces = [
        F.call_function("div", a, _dec(chunk * chunk)),
        F.call_function("div", a % _dec(chunk * chunk), _dec(chunk)),
        a % _dec(chunk),
    ]
    remainder: Column = _dec(0)
    digits: list[Column] = []
    for piece in [*pieces, *[_dec(0)] * fraction_chunks]:
        current = (remainder * _dec(chunk) + piece.cast(_EXACT_INT)).cast(_EXACT_INT)
        digits.append(F.lpad(F.call_function("div", current, divisor).cast("string"), 18, "0"))
        remainder = (current % divisor).cast(_EXACT_INT)
    return F.concat(*digits[:3]), F.concat(*digits[3:]), remainder != _dec(0)


def _abs_and_sign(x: Column) -> tuple[Column, Column]:
    negative = x < F.lit(0)
    # Not F.abs: Spark negates decimals through Scala's BigDecimal (34 digits).
    return F.when(negative, _dec(0) - x).otherwise(x).cast(_EXACT_INT), F.when(
        negative, F.lit("-")
    ).otherwise(F.lit(""))


def _int_ratio(total: Column, n: Column) -> Column:
    """``total / n`` (exact decimal(38,0) sum, long count) as the correctly rounded double."""
    a, sign = _abs_and_sign(total)
    whole, fraction, inexact = _long_division(a, n, 2)
    sticky = F.when(inexact, F.lit("1")).otherwise(F.lit(""))
    # Java's parseDouble rounds a decimal string correctly; 36 digits and a sticky digit decide
    # every rounding unless |average| < 1/8 and n > 10**10.
    text = F.concat(sign, whole, F.lit("."), fraction, sticky)
    return F.when(n > F.lit(0), text.cast("double"))


def _numeric_ratio(total: Column, n: Column, scale: int, out_scale: int) -> Column:
    """``total / n`` (numeric sum of scale ``scale``) rounded half away from zero."""
    extra = out_scale - scale
    digits = F.regexp_replace(total.cast("string"), "[.]", "")
    a, sign = _abs_and_sign(digits.cast(_EXACT_INT))
    whole, fraction, _ = _long_division(a, n, 1)
    kept = F.concat(whole, F.substring(fraction, 1, extra)) if extra else whole
    up = F.when(F.substring(fraction, extra + 1, 1) >= F.lit("5"), _dec(1)).otherwise(_dec(0))
    unscaled = (kept.cast(_EXACT_INT) + up).cast(_EXACT_INT).cast("string")
    # lpad also truncates, so only pad short values: "5" at scale 2 is "0.05".
    unscaled = F.when(
        F.length(unscaled) <= F.lit(out_scale), F.lpad(unscaled, out_scale + 1, "0")
    ).otherwise(unscaled)
    width = F.length(unscaled)
    text = F.concat(
        sign,
        F.substring(unscaled, F.lit(1), width - F.lit(out_scale)),
        F.lit("."),
        F.substring(unscaled, width - F.lit(out_scale - 1), F.lit(out_scale)),
    )
    return F.when(n > F.lit(0), text.cast(T.DecimalType(38, out_scale)))
