"""Scalar expressions of the plan IR compiled to Spark ``Column`` expressions.

:func:`compile_scalar` turns a resolved :class:`~spate.plan.expr.ScalarExpr` over the columns of
a :class:`~spate.repr.desc.RelationDesc` into one ``pyspark.sql.Column`` over a DataFrame whose
column at position ``i`` is called ``names[i]`` (by default ``c0, c1, …``, see
:mod:`spate.render.layout`). The reference evaluator :mod:`spate.plan.evaluation.scalar` defines
what the result must be; for every row on which the reference returns a value, the column holds
the same value, and where the reference raises :class:`~spate.plan.errors.EvalError` (int64
overflow, numeric beyond 38 digits, a time outside years 1..9999, a function's own error such as
``sqrt`` of a negative number) evaluating the column raises a Spark error (ANSI arithmetic or
``raise_error``, whose message carries PostgreSQL's SQLSTATE) — or, compiled with
``failures``, gives NULL and a captured failure with that SQLSTATE.

Spark runs with ANSI mode on, so every function whose reference result is NULL where Spark would
raise is guarded (``/`` and ``%`` by zero, failed casts through ``try_cast`` behind the same
syntax checks the reference applies). Times never depend on the session time zone: timestamps
are ``TIMESTAMP_NTZ`` and all time arithmetic goes through microseconds since 1970-01-01.

**Session requirement.** Numeric arithmetic is exact only with
``spark.sql.decimalOperations.allowPrecisionLoss=false`` (see :data:`EXACT_DECIMAL_CONF`): with
the Spark default, a product such as ``numeric(38,4) * numeric(38,4)`` is rounded to 6 fractional
digits instead of the IR's 8.

**Known deviations from the reference** (all outside the values spate generates or stores):

* Errors in operands whose value cannot matter: the reference evaluates every operand of a
  strict function and both sides of ``AND``/``OR`` before looking at NULLs, so an operand that
  raises makes the whole expression raise; Spark short-circuits (a NULL left operand, a FALSE
  side of ``AND``) and then returns the result without raising. Every function that raises in
  the reference on its own operand values raises here too.

* ``numeric`` → ``text`` of a negative zero (``-0.00`` in Python) prints ``0.00``.
* Text parsing (casts from text) accepts ASCII digits only; Python's ``int()``/``float()`` also
  accept other Unicode decimal digits.
* ``text`` → ``jsonb`` validates with Spark's ``try_parse_json``: JSON with duplicate object keys
  or with the non-standard ``NaN``/``Infinity`` tokens is rejected (NULL), Python accepts them.
* ``lower``/``upper`` use Java's Unicode case mapping, which may differ from Python's for a few
  characters when their Unicode versions differ.
* ``float64`` → ``numeric`` rounds Java's ``Double.toString`` digits, which before JDK 19 are
  sometimes longer than Python's shortest ``repr`` (differs only when a digit beyond the 17th
  significant one decides the rounding).
* ``coalesce``/``greatest``/``least``/``CASE`` over numerics of different types cast each
  argument to the result type,
  which raises where the reference would return a value that does not fit its own result type.
* A ``float64`` result may carry ``-0.0`` where the reference has ``0.0`` only for values read
  unchanged from input columns (every computed float is normalised); they compare equal.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import Final

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spate.plan.errors import InvalidPlan
from spate.plan.expr import (
    BinaryFunc,
    CallBinary,
    CallUnary,
    CallVariadic,
    Case,
    Cast,
    ColumnRef,
    DateTrunc,
    Extract,
    Literal,
    Now,
    RaiseError,
    ScalarExpr,
    TimeUnit,
    UnaryFunc,
    VariadicFunc,
    show,
)
from spate.plan.funcs import SIGNATURES
from spate.plan.infer import typ
from spate.render.errors import raised_marker
from spate.render.layout import col_name
from spate.render.like import _like_regex_column, _substr, like_regex
from spate.render.numeric_division import numeric_divide
from spate.render.scalar_funcs import Failing, FixedNotCompilable, compile_fixed, raising
from spate.render.text_casts import canon_float, from_text, to_text
from spate.repr.arrow import arrow_interval
from spate.repr.desc import RelationDesc
from spate.repr.spark import spark_type
from spate.repr.types import Datum, ScalarKind, ScalarType

K = ScalarKind

EXACT_DECIMAL_CONF: Final = {"spark.sql.decimalOperations.allowPrecisionLoss": "false"}
"""Session configuration under which numeric arithmetic matches the IR's result types."""

_BIGINT: Final = "bigint out of range"
_NTZ: Final = T.TimestampNTZType()
_LONG: Final = T.LongType()
_MIN_TS: Final = "0001-01-01 00:00:00"
_MAX_TS: Final = "9999-12-31 23:59:59.999999"
_MIN_MS: Final = -62_135_596_800_000
"""``0001-01-01`` in ms since 1970 (the reference's ``datetime.min``)."""
_MAX_MS: Final = 253_402_300_799_999
"""``9999-12-31 23:59:59.999`` in ms since 1970 (the reference's ``datetime.max``, in ms)."""
_MAX_SPAN_MS: Final = _MAX_MS - _MIN_MS
_MAX_SPAN_DAYS: Final = 3_652_059
_MICROS: Final = {
    TimeUnit.HOUR: 3_600_000_000,
    TimeUnit.MINUTE: 60_000_000,
    TimeUnit.SECOND: 1_000_000,
}


class ScalarNotCompilable(InvalidPlan):
    """An expression that has no Spark form here (``now()``: renderers bound time separately)."""


Failure = tuple[Column, str, str]
"""Where an expression fails, captured: ``(condition, sqlstate, message)``."""


def compile_scalar(
    expr: ScalarExpr,
    desc: RelationDesc,
    names: Sequence[str] | None = None,
    *,
    failures: list[Failure] | None = None,
) -> Column:
    """``expr`` (resolved against ``desc``) as a Spark column over columns called ``names``.

    ``names[i]`` is the DataFrame column holding position ``i`` of ``desc``; by default the
    internal layout's ``c0, c1, …``. Raises :class:`ScalarNotCompilable` for ``now()`` (turn
    temporal filters into bounds with :func:`spate.plan.temporal.temporal_bounds` first) and
    :class:`~spate.plan.errors.InvalidPlan` if ``expr`` does not type-check against ``desc``.

    With ``failures`` (a list), errors are captured instead of raised: a :class:`RaiseError`
    reached (lazily, through ``CASE``) and int64 or numeric ``+ - *`` out of range each append
    ``(condition, sqlstate, message)`` and give NULL, so that the caller routes the rows where a
    condition holds to the error collection (:func:`spate.render.errors.first_failure`).
    Without, they raise a Spark error.
    """
    if names is None:
        names = [col_name(i) for i in range(desc.arity)]
    if len(names) != desc.arity:
        raise ValueError(f"{len(names)} column names for {desc.arity} columns of {desc}")
    return _Compiler(desc, names, failures).go(expr)


def typed_literal(value: Datum, t: ScalarType) -> Column:
    """A Spark literal of exactly ``spark_type(t)`` (``None``: a NULL of that type)."""
    st = spark_type(t)
    k = t.kind
    if value is None:
        return F.lit(None).cast(st)
    if k is K.FLOAT64:
        assert isinstance(value, (int, float))
        f = float(value)
        return F.lit(0.0 if f == 0 else f).cast(st)
    if k is K.NUMERIC:
        return F.lit(format(value, "f")).cast(st)
    if k is K.BYTES:
        assert isinstance(value, bytes)
        return F.unhex(F.lit(value.hex()))
    if k is K.TIMESTAMP:
        assert isinstance(value, dt.datetime)
        return F.lit(value.isoformat(sep=" ")).cast(st)
    if k is K.DATE:
        assert isinstance(value, dt.date)
        return F.lit(value.isoformat()).cast(st)
    return F.lit(arrow_interval(value) if k is K.INTERVAL else value).cast(st)


# --- helpers over Spark columns ----------------------------------------------------------------


def _epoch() -> Column:
    return F.lit("1970-01-01 00:00:00").cast(_NTZ)


def _micros(ts: Column) -> Column:
    """Microseconds since 1970-01-01 of a ``TIMESTAMP_NTZ`` (time-zone free)."""
    return F.timestamp_diff("MICROSECOND", _epoch(), ts)


def _from_micros(micros: Column) -> Column:
    return F.timestamp_add("MICROSECOND", micros, _epoch())


def _floor_div(x: Column, k: int) -> Column:
    """``floor(x / k)`` for a long ``x`` and a positive ``k`` (exact, no overflow here)."""
    return F.call_function("div", x - F.pmod(x, F.lit(k)), F.lit(k))


_COMPARE: Final[dict[BinaryFunc, Callable[[Column, Column], Column]]] = {
    BinaryFunc.EQ: lambda x, y: x == y,
    BinaryFunc.NE: lambda x, y: x != y,
    BinaryFunc.LT: lambda x, y: x < y,
    BinaryFunc.LE: lambda x, y: x <= y,
    BinaryFunc.GT: lambda x, y: x > y,
    BinaryFunc.GE: lambda x, y: x >= y,
}


def _numeric_compare(f: BinaryFunc, a: Column, ta: ScalarType, b: Column, tb: ScalarType) -> Column:
    """``a <f> b`` for decimals of different types, exactly.

    Spark widens the two to one decimal of at most 38 digits and drops fraction digits to make
    room (``decimal(8,3)`` against ``decimal(38,0)`` compares as ``decimal(38,0)``: ``0.125 >
    0`` is false). When the exact common type fits in 38 digits both sides are cast to it;
    otherwise the integer parts (``floor``) are compared first and the fractions (in [0, 1))
    break ties."""
    pa, sa, pb, sb = ta.precision, ta.scale, tb.precision, tb.scale
    assert pa is not None and sa is not None and pb is not None and sb is not None
    op = _COMPARE[f]
    whole, scale = max(pa - sa, pb - sb), max(sa, sb)
    if whole + scale <= 38:
        common = T.DecimalType(whole + scale, scale)
        return op(a.cast(common), b.cast(common))
    ia, ib = F.floor(a), F.floor(b)
    frac = T.DecimalType(min(38, scale + 1), scale)
    fa, fb = (a - ia).cast(frac), (b - ib).cast(frac)
    if f is BinaryFunc.EQ:
        return (ia == ib) & (fa == fb)
    if f is BinaryFunc.NE:
        return (ia != ib) | (fa != fb)
    strict = _COMPARE[{BinaryFunc.LE: BinaryFunc.LT, BinaryFunc.GE: BinaryFunc.GT}.get(f, f)]
    return strict(ia, ib) | ((ia == ib) & op(fa, fb))


def _in_range(ts: Column) -> Column:
    """Whether ``ts`` lies in years 1..9999 (the reference's range)."""
    low, high = F.lit(_MIN_TS).cast(_NTZ), F.lit(_MAX_TS).cast(_NTZ)
    return (ts >= low) & (ts <= high)


# --- the compiler ------------------------------------------------------------------------------


def _and(a: Column | None, b: Column | None) -> Column | None:
    """``a AND b`` of guards, ``None`` standing for TRUE."""
    if a is None:
        return b
    return a if b is None else (a & b)


class _Compiler:
    def __init__(
        self, desc: RelationDesc, names: Sequence[str], failures: list[Failure] | None = None
    ) -> None:
        self.desc = desc
        self.names = names
        self.types: dict[ScalarExpr, ScalarType] = {}
        self.failures = failures
        self.guard: Column | None = None
        """In capture mode: where the expression being compiled is evaluated at all (inside
        a CASE branch, where its condition holds); ``None``: everywhere."""

    def fail(self, cond: Column, sqlstate: str, message: str) -> None:
        assert self.failures is not None
        where = cond if self.guard is None else (self.guard & cond)
        self.failures.append((where, sqlstate, message))

    def check(self, value: Column, *failing: Failing) -> Column:
        """``value``, failing where a condition holds (:class:`~.scalar_funcs.Check`): a
        Spark error, or in capture mode NULL and a captured failure."""
        if self.failures is None:
            return raising(value, *failing)
        out: Column | None = None
        for cond, sqlstate, message in failing:
            self.fail(cond, sqlstate, message)
            out = F.when(cond, F.lit(None)) if out is None else out.when(cond, F.lit(None))
        return value if out is None else out.otherwise(value)

    def type_of(self, e: ScalarExpr) -> ScalarType:
        found = self.types.get(e)
        if found is None:
            found = self.types[e] = typ(e, self.desc.columns).type
        return found

    def what(self, e: ScalarExpr) -> str:
        return show(e, self.desc.names)

    def go(self, e: ScalarExpr) -> Column:
        match e:
            case ColumnRef(i):
                if i >= len(self.names):
                    self.type_of(e)  # raises PlanColumnMissing with the columns listed
                return F.col("`" + self.names[i].replace("`", "``") + "`")
            case Literal(v, t):
                return typed_literal(v, t)
            case RaiseError(code, message, t):
                if self.failures is None:
                    raised = F.raise_error(F.lit(message + raised_marker(code)))
                    return raised.cast(spark_type(t))
                self.fail(F.lit(True), code, message)
                return F.lit(None).cast(spark_type(t))
            case Now():
                raise ScalarNotCompilable(
                    f"{self.what(e)} cannot be compiled to a Spark column; split temporal "
                    "filters with spate.plan.temporal.temporal_bounds first"
                )
            case CallUnary(f, x):
                return self.unary(e, f, x)
            case CallBinary(f, left, right):
                return self.binary(e, f, left, right)
            case CallVariadic(f, xs):
                return self.variadic(e, f, xs)
            case Case(whens, otherwise):
                return self.case(e, whens, otherwise)
            case Cast(x, to):
                return self.cast(self.go(x), self.type_of(x), to)
            case DateTrunc(unit, x):
                return self.date_trunc(unit, self.go(x), self.type_of(x))
            case Extract(unit, x):
                return _extract(unit, self.go(x)).cast(_LONG)
        raise ScalarNotCompilable(f"not a compilable scalar expression: {e!r}")

    def case(
        self,
        e: ScalarExpr,
        whens: tuple[tuple[ScalarExpr, ScalarExpr], ...],
        otherwise: ScalarExpr | None,
    ) -> Column:
        out = spark_type(self.type_of(e))
        result: Column | None = None
        track = self.failures is not None  # guards matter only when failures are captured
        outer = self.guard
        not_yet: Column | None = None  # no earlier condition held
        for c, r in whens:
            self.guard = _and(outer, not_yet)
            cond = self.go(c)
            held = F.coalesce(cond, F.lit(False)) if track else None
            self.guard = _and(_and(outer, not_yet), held)
            branch = self.go(r).cast(out)
            result = F.when(cond, branch) if result is None else result.when(cond, branch)
            not_yet = _and(not_yet, ~held) if held is not None else None
        assert result is not None
        if otherwise is not None:
            self.guard = _and(outer, not_yet)
            result = result.otherwise(self.go(otherwise).cast(out))
        self.guard = outer
        return result

    # -- unary ----------------------------------------------------------------------------------

    def unary(self, e: ScalarExpr, f: UnaryFunc, x: ScalarExpr) -> Column:
        a = self.go(x)
        k = self.type_of(x).kind
        match f:
            case UnaryFunc.NOT:
                return ~a
            case UnaryFunc.IS_NULL:
                return a.isNull()
            case UnaryFunc.NEG | UnaryFunc.ABS:
                st = spark_type(self.type_of(e))
                if k is K.NUMERIC:
                    # Spark negates decimals through Scala's BigDecimal, which rounds them to
                    # 34 digits; a subtraction from zero is exact.
                    negated = F.lit(0).cast(st) - a
                    out = negated if f is UnaryFunc.NEG else F.when(a < 0, negated).otherwise(a)
                    return out.cast(st)
                out = -a if f is UnaryFunc.NEG else F.abs(a)
                if k is K.INT64:  # -(-2**63) does not fit: PostgreSQL's 22003
                    smallest = a == F.lit(-(2**63))
                    return self.check(F.when(~smallest, out), (smallest, "22003", _BIGINT))
                return canon_float(out) if k is K.FLOAT64 else out
            case UnaryFunc.LOWER:
                return F.lower(a)
            case UnaryFunc.UPPER:
                return F.upper(a)
            case UnaryFunc.LENGTH:
                return F.length(a).cast(_LONG)
            case UnaryFunc.TRIM:
                return F.btrim(a, F.lit(" "))
            case UnaryFunc.EPOCH_MS:
                return _floor_div(_micros(a), 1000)
            case UnaryFunc.EPOCH_MS_CEIL:
                m = _micros(a)
                return F.call_function("div", m + F.pmod(-m, F.lit(1000)), F.lit(1000))
            case UnaryFunc.FROM_EPOCH_MS:
                ok = (a >= F.lit(_MIN_MS)) & (a <= F.lit(_MAX_MS))
                msg = f"timestamp out of range in {self.what(e)}"
                ts = F.timestamp_add("MILLISECOND", F.when(ok, a), _epoch())
                return self.check(ts, (~ok, "22008", msg))
        raise ScalarNotCompilable(f"unknown unary function {f}")

    # -- binary ---------------------------------------------------------------------------------

    def binary(self, e: ScalarExpr, f: BinaryFunc, left: ScalarExpr, right: ScalarExpr) -> Column:
        a, b = self.go(left), self.go(right)
        k = self.type_of(left).kind
        match f:
            case BinaryFunc.AND:
                return a & b
            case BinaryFunc.OR:
                return a | b
            case (
                BinaryFunc.EQ
                | BinaryFunc.NE
                | BinaryFunc.LT
                | BinaryFunc.LE
                | BinaryFunc.GT
                | (BinaryFunc.GE)
            ) if k is K.NUMERIC and self.type_of(left) != self.type_of(right):
                return _numeric_compare(f, a, self.type_of(left), b, self.type_of(right))
            case BinaryFunc.EQ:
                return a == b
            case BinaryFunc.NE:
                return a != b
            case BinaryFunc.LT:
                return a < b
            case BinaryFunc.LE:
                return a <= b
            case BinaryFunc.GT:
                return a > b
            case BinaryFunc.GE:
                return a >= b
            case BinaryFunc.ADD | BinaryFunc.SUB | BinaryFunc.MUL | BinaryFunc.DIV | BinaryFunc.MOD:
                return self.arithmetic(e, f, k, a, b)
            case BinaryFunc.CONCAT:
                return F.concat(a, b)
            case BinaryFunc.LIKE | BinaryFunc.ILIKE:
                return self.like(f is BinaryFunc.ILIKE, a, right, b)
            case BinaryFunc.TIMESTAMP_ADD_MS | BinaryFunc.TIMESTAMP_SUB_MS:
                # a NULL timestamp gives NULL whatever the offset (no range error)
                too_far = a.isNotNull() & (
                    F.abs(b.cast(T.DecimalType(20, 0))) > F.lit(_MAX_SPAN_MS)
                )
                ms = F.when(~too_far, b if f is BinaryFunc.TIMESTAMP_ADD_MS else -b)
                shifted = F.timestamp_add("MILLISECOND", ms, a)
                msg = f"timestamp out of range in {self.what(e)}"
                return self.check(
                    F.when(_in_range(shifted), shifted),
                    (too_far, "22008", msg),
                    (~_in_range(shifted), "22008", msg),
                )
            case BinaryFunc.TIMESTAMP_DIFF_MS:
                return _floor_div(F.timestamp_diff("MICROSECOND", b, a), 1000)
            case BinaryFunc.DATE_ADD_DAYS:
                msg = f"date out of range in {self.what(e)}"
                # a NULL date gives NULL whatever the offset (no range error)
                too_far = a.isNotNull() & (
                    F.abs(b.cast(T.DecimalType(20, 0))) > F.lit(_MAX_SPAN_DAYS)
                )
                moved = F.date_add(a, F.when(too_far, F.lit(0)).otherwise(b).cast("int"))
                low, high = F.lit("0001-01-01").cast("date"), F.lit("9999-12-31").cast("date")
                bad = too_far | (moved < low) | (moved > high)
                return self.check(F.when(~bad, moved), (bad, "22008", msg))
            case BinaryFunc.DATE_DIFF_DAYS:
                return F.datediff(a, b).cast(_LONG)
        raise ScalarNotCompilable(f"unknown binary function {f}")

    def arithmetic(
        self, e: ScalarExpr, f: BinaryFunc, k: ScalarKind, a: Column, b: Column
    ) -> Column:
        out: Column
        checked = {BinaryFunc.ADD: F.try_add, BinaryFunc.SUB: F.try_subtract}
        checked[BinaryFunc.MUL] = F.try_multiply
        if self.failures is not None and k in (K.INT64, K.NUMERIC) and f in checked:
            # out of range: NULL and a captured failure instead of Spark's ANSI error
            out = checked[f](a, b).try_cast(spark_type(self.type_of(e)))
            message = _BIGINT if k is K.INT64 else "numeric field overflow"
            self.fail(out.isNull() & a.isNotNull() & b.isNotNull(), "22003", message)
            return out
        if f is BinaryFunc.ADD:
            out = a + b
        elif f is BinaryFunc.SUB:
            out = a - b
        elif f is BinaryFunc.MUL:
            out = a * b
        elif f is BinaryFunc.DIV:
            if k is K.INT64:  # -2**63 / -1 does not fit: PostgreSQL's 22003
                smallest = (a == F.lit(-(2**63))) & (b == F.lit(-1))
                out = F.when((b != F.lit(0)) & ~smallest, F.call_function("div", a, b))
                out = self.check(out, (smallest, "22003", _BIGINT))
            elif k is K.NUMERIC:
                assert isinstance(e, CallBinary)
                sa, sb, so = (self.type_of(x).scale for x in (e.left, e.right, e))
                assert sa is not None and sb is not None and so is not None
                return numeric_divide(a, b, sa, sb, so, self.check)
            else:
                out = F.when(b != F.lit(0), a / b)
        else:
            out = F.when(b != F.lit(0), a % b)
        if k is K.FLOAT64:
            return canon_float(out)
        return out.cast(spark_type(self.type_of(e)))

    def like(
        self, ignore_case: bool, value: Column, pattern: ScalarExpr, compiled: Column
    ) -> Column:
        if ignore_case:
            value = F.lower(value)
        if isinstance(pattern, Literal):
            if pattern.value is None:
                return F.lit(None).cast("boolean")
            assert isinstance(pattern.value, str)
            text = pattern.value.lower() if ignore_case else pattern.value
            return value.rlike(like_regex(text))
        if ignore_case:
            compiled = F.lower(compiled)
        return F.rlike(value, _like_regex_column(compiled))

    # -- variadic -------------------------------------------------------------------------------

    def variadic(self, e: ScalarExpr, f: VariadicFunc, xs: tuple[ScalarExpr, ...]) -> Column:
        if f is VariadicFunc.SUBSTR:
            return _substr(*[self.go(x) for x in xs])
        if f in SIGNATURES:
            types = [self.type_of(x) for x in xs]
            try:
                args = [self.go(x) for x in xs]
                return compile_fixed(f, args, xs, types, self.what(e), self.check)
            except FixedNotCompilable as err:
                raise ScalarNotCompilable(str(err)) from None
        out = spark_type(self.type_of(e))
        args = [self.go(x).cast(out) for x in xs]
        if len(args) == 1:
            return args[0]
        if f is VariadicFunc.COALESCE:
            return F.coalesce(*args)
        if f is VariadicFunc.GREATEST:
            return F.greatest(*args)
        if f is VariadicFunc.LEAST:
            return F.least(*args)
        raise ScalarNotCompilable(f"unknown variadic function {f}")

    # -- casts ----------------------------------------------------------------------------------

    def cast(self, v: Column, source: ScalarType, to: ScalarType) -> Column:
        a, b = source.kind, to.kind
        st = spark_type(to)
        if a is b and a is not K.NUMERIC:
            return v
        if b is K.TEXT:
            return to_text(v, source)
        if a is K.TEXT:
            return from_text(v, to)
        if b is K.NUMERIC:
            return v.try_cast(st)
        if b is K.FLOAT64:
            if a is K.NUMERIC:
                # Through text: Java's parseDouble rounds correctly; Spark's decimal → double
                # divides by a power of ten in floating point for small decimals.
                return canon_float(v.cast("string").cast(st))
            return canon_float(v.cast(st))
        if b is K.INT64:
            if a is K.FLOAT64:
                fits = (v >= F.lit(-(2.0**63))) & (v < F.lit(2.0**63))
                return F.when(fits, v.cast(st))
            if a is K.NUMERIC:
                whole = F.regexp_extract(v.cast("string"), "^(-?[0-9]+)", 1)
                return F.when(v.isNotNull(), whole.try_cast(st))
            return v.cast(st)
        if b in (K.BOOL, K.TIMESTAMP, K.DATE):
            return v.cast(st)
        raise ScalarNotCompilable(f"no cast from {source} to {to}")

    # -- time -----------------------------------------------------------------------------------

    def date_trunc(self, unit: TimeUnit, v: Column, source: ScalarType) -> Column:
        is_ts = source.kind is K.TIMESTAMP
        if unit in _MICROS:
            m = _micros(v)
            return _from_micros(m - F.pmod(m, F.lit(_MICROS[unit])))
        day = v.cast("date") if is_ts else v
        if unit is not TimeUnit.DAY:
            day = F.trunc(day, unit.value)
        return day.cast(_NTZ) if is_ts else day


def _extract(unit: TimeUnit, v: Column) -> Column:
    match unit:
        case TimeUnit.YEAR:
            return F.year(v)
        case TimeUnit.QUARTER:
            return F.quarter(v)
        case TimeUnit.MONTH:
            return F.month(v)
        case TimeUnit.WEEK:
            return F.weekofyear(v)
        case TimeUnit.DAY:
            return F.dayofmonth(v)
        case TimeUnit.DOW:
            return F.dayofweek(v) - F.lit(1)
        case TimeUnit.DOY:
            return F.dayofyear(v)
        case TimeUnit.HOUR:
            return F.hour(v)
        case TimeUnit.MINUTE:
            return F.minute(v)
        case TimeUnit.SECOND:
            return F.second(v)
    raise ScalarNotCompilable(f"extract does not take unit {unit}")
