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
  than 38 digits raises (in capture mode: NULL, and :func:`aggregate_failure` gives the group's
  error record, as it does for an int64 sum beyond 64 bits and a numeric ``avg`` beyond its
  type). float64: Σ v·m in doubles.
* ``min``/``max`` — Spark's (NaN largest, text by code point, bytes unsigned bytewise).
* ``avg`` — int64: the exact decimal Σ v·m divided by Σ m by long division, printed with 36
  fraction digits and a sticky digit and parsed as a double (Java's ``parseDouble`` rounds
  correctly). float64: Σ v·m / Σ m in doubles. numeric: the exact numeric division of
  :mod:`spate.render.numeric_division` (PostgreSQL's result scale per average, capped at the
  type's). Neither depends on Spark's decimal division rules.
* ``bool_and``/``bool_or`` — Spark's ``bool_and``/``bool_or`` (multiplicity does not matter).
* ``string_agg`` — every value repeated ``m`` times (``collect_set`` for distinct), sorted by
  code point (Spark sorts strings by UTF-8 bytes, the same order), joined by the delimiter.

**Known deviations from the reference:**

* float64 ``sum``/``avg``: the reference sums with ``math.fsum`` (one correctly rounded result);
  Spark adds in partition order, so results may differ in the last bits unless every partial
  sum is exact (and the reference raises where ``fsum`` meets ``inf`` and ``-inf``; Spark gives
  NaN).
* int64 ``avg`` is correctly rounded except when ``|average| < 1/8`` and ``Σ m > 10**10`` (36
  fraction digits may then not decide the rounding).
* numeric ``sum``/``avg`` of ``numeric(p,s)`` with ``p > 18`` and ``s > 6``: ``v·m`` is computed
  in Spark decimals and, without :data:`~spate.render.scalar.EXACT_DECIMAL_CONF`, is rounded to
  fewer fraction digits.
* a count beyond int64 raises (the reference counts without bound); ``string_agg`` of a value
  with multiplicity beyond 2**31 raises (Spark arrays hold fewer elements).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spate.errors import error_record
from spate.plan.aggregate import AggregateExpr, AggregateFunc, aggregate_type
from spate.plan.errors import PlanTypeError
from spate.plan.infer import typ
from spate.render.numeric_division import numeric_divide
from spate.render.scalar import Failure, compile_scalar
from spate.render.scalar_funcs import Check, raising, unchecked
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
    capture: bool = False,
) -> Column:
    """``agg`` over a group of consolidated rows, as a column for ``groupBy(...).agg(...)``.

    ``input_desc`` describes the data columns (named ``names``, by default ``c0, c1, …``);
    ``diff`` names the multiplicity column (positive; rows with 0 are ignored); ``out_type`` is
    the aggregate's result type (:func:`spate.plan.aggregate.aggregate_type`). The column has
    Spark type ``spark_type(out_type)``. ``capture``: failures give NULL here and an error
    record in :func:`aggregate_failure` instead of failing the Spark job.
    """
    m = F.col(diff)
    # Rows of multiplicity 0 contribute nothing (as in the reference), not even to min/max.
    failures: list[Failure] | None = [] if capture else None
    value = compile_scalar(agg.expr, input_desc, names, failures=failures)
    v = F.when(m != F.lit(0), value)
    in_type = typ(agg.expr, input_desc.columns).type
    out = _aggregate(agg, v, m, in_type, out_type, capture=capture)
    return out.try_cast(spark_type(out_type)) if capture else out.cast(spark_type(out_type))


def aggregate_failure(
    agg: AggregateExpr, input_desc: RelationDesc, *, diff: str = DIFF_COLUMN
) -> Column | None:
    """Capture mode: the group's error record for ``agg`` (NULL when it evaluates): a failing
    input expression on one of the group's rows, or an int64 ``sum`` beyond 64 bits; ``None``
    when neither can happen."""
    from spate.plan.expr import show
    from spate.render.errors import first_failure, row_text

    m = F.col(diff)
    failures: list[Failure] = []
    compile_scalar(agg.expr, input_desc, failures=failures)
    row = row_text(input_desc)
    what = f"{agg.func.value}({show(agg.expr, input_desc.names)})"
    per_row = first_failure(failures, row, show(agg.expr, input_desc.names))
    found: list[Column] = []
    if per_row is not None:
        found.append(F.max(F.when(m != F.lit(0), per_row)))
    in_type = typ(agg.expr, input_desc.columns).type
    if agg.func is AggregateFunc.SUM and in_type.kind is K.INT64:
        v = F.when(m != F.lit(0), compile_scalar(agg.expr, input_desc, failures=[]))
        total = _sum(v, m, K.INT64, agg.distinct, for_avg=True)
        too_big = (total > F.lit(2**63 - 1)) | (total < F.lit(-(2**63)))
        sample = F.max(F.when((m != F.lit(0)) & v.isNotNull(), row))
        text = F.concat(F.lit(error_record("22003", "bigint out of range", what, "")), sample)
        found.append(F.when(too_big, text))
    if in_type.kind is K.NUMERIC and agg.func in (AggregateFunc.SUM, AggregateFunc.AVG):
        # a sum beyond 38 digits (Spark's decimal), an average beyond its type: NULL in
        # aggregate_column (capture), failing here
        out_type = aggregate_type(agg.func, typ(agg.expr, input_desc.columns)).type
        v = F.when(m != F.lit(0), compile_scalar(agg.expr, input_desc, failures=[]))
        value = _aggregate(agg, v, m, in_type, out_type, capture=True)
        present = F.when(v.isNotNull(), m)
        lost = value.isNull() & (F.count(present) > F.lit(0))
        sample = F.max(F.when(present.isNotNull(), row))
        text = F.concat(F.lit(error_record("22003", "numeric field overflow", what, "")), sample)
        found.append(F.when(lost, text))
    if not found:
        return None
    return found[0] if len(found) == 1 else F.coalesce(*found)


def _aggregate(
    agg: AggregateExpr,
    v: Column,
    m: Column,
    in_type: ScalarType,
    out: ScalarType,
    *,
    capture: bool = False,
) -> Column:
    f, k, distinct = agg.func, in_type.kind, agg.distinct
    present_m = F.when(v.isNotNull(), m)
    if f is AggregateFunc.COUNT:
        if distinct:
            return F.count_distinct(v)
        return F.coalesce(F.sum(present_m), F.lit(0).cast(T.LongType()))
    if f is AggregateFunc.SUM:
        return _sum(v, m, k, distinct, capture=capture, scale=in_type.scale or 0)
    if f is AggregateFunc.MIN:
        return F.min(v)
    if f is AggregateFunc.MAX:
        return F.max(v)
    if f is AggregateFunc.AVG:
        total = _sum(v, m, k, distinct, for_avg=True, capture=capture, scale=in_type.scale or 0)
        n = F.count_distinct(v) if distinct else F.sum(present_m)
        if k is K.NUMERIC:
            assert in_type.scale is not None and out.scale is not None
            check = unchecked if capture else raising  # capture: aggregate_failure fails
            return numeric_ratio(total, n, in_type.scale, out.scale, check)
        if k is K.INT64:
            return int_ratio(total, n)
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


def _sum(
    v: Column,
    m: Column,
    k: ScalarKind,
    distinct: bool,
    *,
    for_avg: bool = False,
    capture: bool = False,
    scale: int = 0,
) -> Column:
    """The sum of ``v`` times ``m`` (of each distinct ``v`` once); ``scale``: a numeric's."""
    if k is K.INT64:
        exact = v.cast(_INT_VALUE)
        total = F.sum_distinct(exact) if distinct else F.sum(exact * m.cast(_MULTIPLICITY))
        if for_avg:
            return total.cast(_EXACT_INT)
        return total.try_cast(T.LongType()) if capture else total.cast(T.LongType())
    if k is K.NUMERIC:
        if capture and distinct:  # beyond 38 digits: NULL (aggregate_failure fails)
            wide = T.DecimalType(38, scale)
            values = F.collect_set(v)
            zero = F.lit(0).cast(wide)  # try_add keeps a NULL (an overflow) to the end
            total = F.aggregate(values, zero, lambda acc, x: F.try_add(acc, x).cast(wide))
            return F.when(F.size(values) > F.lit(0), total)
        if capture:
            product = F.try_multiply(v, m.cast(_MULTIPLICITY))
            return F.when(F.count(product) == F.count(v), F.try_sum(product))
        return F.sum_distinct(v) if distinct else F.sum(v * m.cast(_MULTIPLICITY))
    total = F.sum_distinct(v) if distinct else F.sum(v * m.cast("double"))
    return total if for_avg else F.when(total == F.lit(0.0), F.lit(0.0)).otherwise(total)


# --- exact averages ----------------------------------------------------------------------------
#
# Spark's decimal division rounds to a result type that depends on the operand types and on
# allowPrecisionLoss, so averages are computed by long division instead: base 10**13 digits of the
# sum, each step a decimal(38,0) product/remainder or an integral ``div`` (exact, and the same
# under every configuration). Intermediate values are bound once with ``_let`` (a lambda), which
# keeps the expression small: written out, every reuse would copy the whole sub-expression.

_BASE: Final = 10**13


def _dec(value: int) -> Column:
    return F.lit(str(value)).cast(_EXACT_INT)


def _let(value: Column, body: Callable[[Column], Column]) -> Column:
    """``body(value)`` with ``value`` evaluated once."""
    return F.transform(F.array(value), body).getItem(0)


def _divmod(u: Column, divisor: Column) -> Column:
    """``struct(q, r)``: ``u div divisor`` and ``u mod divisor`` (decimal(38,0)) for
    ``0 <= u < 10**38`` and ``divisor >= 1``, both decimal(38,0) columns."""
    base = _dec(_BASE)
    # Digits through text: ``div`` on decimals wraps silently when the quotient exceeds a long.
    text = F.lpad(u.cast("string"), 39, "0")
    digits = F.array(*[F.substring(text, 1 + 13 * i, 13).cast(_EXACT_INT) for i in range(3)])

    def step(acc: Column, digit: Column) -> Column:
        return _let(
            (acc["r"] * base + digit).cast(_EXACT_INT),
            lambda current: F.struct(
                (acc["q"] * base + F.call_function("div", current, divisor))
                .cast(_EXACT_INT)
                .alias("q"),
                (current % divisor).cast(_EXACT_INT).alias("r"),
            ),
        )

    return F.aggregate(digits, F.struct(_dec(0).alias("q"), _dec(0).alias("r")), step)


def _ratio(
    total: Column, n: Column, body: Callable[[Column, Column, Column, Column], Column]
) -> Column:
    """``body(sign, quotient, remainder, divisor)`` of ``|total| / n`` (all bound once)."""
    pair = F.struct(total.cast(_EXACT_INT).alias("s"), n.cast(_EXACT_INT).alias("n"))

    def with_pair(p: Column) -> Column:
        negative = p["s"] < _dec(0)
        # Not F.abs: Spark negates decimals through Scala's BigDecimal (34 digits).
        u = F.when(negative, _dec(0) - p["s"]).otherwise(p["s"]).cast(_EXACT_INT)
        sign = F.when(negative, F.lit("-")).otherwise(F.lit(""))
        return _let(_divmod(u, p["n"]), lambda qr: body(sign, qr["q"], qr["r"], p["n"]))

    return F.when(n > F.lit(0), _let(pair, with_pair))


def int_ratio(total: Column, n: Column) -> Column:
    """``total / n`` (exact decimal(38,0) sum, long count) as the correctly rounded double."""

    def body(sign: Column, q: Column, r: Column, divisor: Column) -> Column:
        # 36 fraction digits and a sticky digit: Java's parseDouble then rounds correctly
        # (unless |average| < 1/8 and n > 10**10).
        high_scaled = (r * _dec(10**18)).cast(_EXACT_INT)
        low_scaled = (high_scaled % divisor * _dec(10**18)).cast(_EXACT_INT)
        text = F.concat(
            sign,
            q.cast("string"),
            F.lit("."),
            F.lpad(F.call_function("div", high_scaled, divisor).cast("string"), 18, "0"),
            F.lpad(F.call_function("div", low_scaled, divisor).cast("string"), 18, "0"),
            F.when(low_scaled % divisor != _dec(0), F.lit("1")).otherwise(F.lit("")),
        )
        return text.cast("double")

    return _ratio(total, n, body)


def numeric_ratio(
    total: Column, n: Column, scale: int, out_scale: int, check: Check = raising
) -> Column:
    """``total / n`` (numeric sum of scale ``scale``, a count) rounded as PostgreSQL rounds the
    quotient (:mod:`spate.render.numeric_division`); a quotient beyond the type fails through
    ``check``."""
    exact_total = total.cast(T.DecimalType(38, scale))
    return numeric_divide(exact_total, n.cast(T.DecimalType(20, 0)), scale, 0, out_scale, check)
