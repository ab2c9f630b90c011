"""Where SQL fails as PostgreSQL does: division by zero, casts that cannot convert a value, a
scalar subquery with more than one row, ``generate_series`` with step 0. Each lowers to the
IR's error value (:class:`~spate.plan.expr.RaiseError`, lazily inside ``CASE``), so that a
one-off SELECT fails with PostgreSQL's SQLSTATE and a maintained view keeps the failing rows in
its error collection (its reads fail until they are retracted). int64 overflow needs nothing
here: it is an error of the IR's arithmetic itself; ``integer`` and ``smallint`` results are
checked by :func:`int_range`."""

from __future__ import annotations

from typing import Final

from spate.plan.expr import (
    BinaryFunc,
    CallBinary,
    CallUnary,
    CallVariadic,
    Case,
    ColumnRef,
    Literal,
    RaiseError,
    ScalarExpr,
    UnaryFunc,
    VariadicFunc,
)
from spate.plan.funcs import INT_RANGES
from spate.plan.infer import cast_can_fail
from spate.plan.relation import Map, RelationExpr
from spate.repr.types import FLOAT64, INT64, TEXT, ScalarKind, ScalarType
from spate.sql.scope import project
from spate.sql.values import DATETIME_SHAPE, INT_LIMITS, zero_of

DIVISION_BY_ZERO: Final = "22012"
INVALID_TEXT: Final = "22P02"
INVALID_DATETIME: Final = "22007"
DATETIME_FIELD: Final = "22008"
OUT_OF_RANGE: Final = "22003"
CARDINALITY: Final = "21000"
INVALID_PARAMETER: Final = "22023"
SUBSTRING_ERROR: Final = "22011"
MORE_THAN_ONE_ROW: Final = "more than one row returned by a subquery used as an expression"


def checked_division(
    op: BinaryFunc,
    value: ScalarExpr,
    divisor: ScalarExpr,
    divisor_type: ScalarType,
    out: ScalarType,
    dividend: ScalarExpr | None = None,
    *,
    nan_check: bool = True,
) -> ScalarExpr:
    """``value`` (``a / b`` or ``a % b``), failing with 22012 where the divisor is zero and
    the ``dividend`` (when given) is not NULL. A double precision ``dividend`` that is NaN
    divides by zero into NaN, as in PostgreSQL."""
    if op not in (BinaryFunc.DIV, BinaryFunc.MOD):
        return value
    if isinstance(divisor, Literal) and divisor.value is not None and divisor.value != 0:
        return value
    zero: ScalarExpr = CallBinary(
        BinaryFunc.EQ, divisor, Literal(zero_of(divisor_type), divisor_type)
    )
    if dividend is not None and not isinstance(dividend, Literal):
        # the operator is strict: a NULL dividend gives NULL before the divisor is looked at
        # (PostgreSQL's NULL / 0 is NULL, as min(x) / count(*) of no rows)
        known = CallUnary(UnaryFunc.NOT, CallUnary(UnaryFunc.IS_NULL, dividend))
        zero = CallBinary(BinaryFunc.AND, zero, known)
    error = (zero, RaiseError(DIVISION_BY_ZERO, "division by zero", out))
    if dividend is not None and divisor_type.kind is ScalarKind.FLOAT64 and nan_check:
        # NaN = NaN holds in the IR (PostgreSQL's float ordering), so this tests for NaN
        nan = Literal(float("nan"), FLOAT64)
        is_nan = CallBinary(BinaryFunc.AND, zero, CallBinary(BinaryFunc.EQ, dividend, nan))
        return Case(((is_nan, Literal(float("nan"), out)), error), value)
    return Case((error,), value)


_FLOAT_MAX: Final = 1.7976931348623157e308


def float_range(
    op: BinaryFunc, value: ScalarExpr, a: ScalarExpr, b: ScalarExpr, out: ScalarType
) -> ScalarExpr:
    """``value`` (``a op b`` in double precision), failing as PostgreSQL's float8 arithmetic
    does (22003): "overflow" where finite operands give an infinity, "underflow" where a
    product of nonzero operands, or a quotient of a nonzero dividend by a finite divisor,
    gives zero. Infinite and NaN operands pass through."""
    if op not in (BinaryFunc.ADD, BinaryFunc.SUB, BinaryFunc.MUL, BinaryFunc.DIV):
        return value
    big = Literal(_FLOAT_MAX, FLOAT64)
    zero = Literal(0.0, FLOAT64)

    def both(x: ScalarExpr, y: ScalarExpr) -> ScalarExpr:
        return CallBinary(BinaryFunc.AND, x, y)

    def finite(x: ScalarExpr) -> ScalarExpr:
        return CallBinary(BinaryFunc.LE, CallUnary(UnaryFunc.ABS, x), big)

    def nonzero(x: ScalarExpr) -> ScalarExpr:
        return CallBinary(BinaryFunc.NE, x, zero)

    infinite = CallUnary(UnaryFunc.NOT, finite(value))
    overflow = both(infinite, both(finite(a), finite(b)))  # finite operands give no NaN
    cases: list[tuple[ScalarExpr, ScalarExpr]] = [
        (overflow, RaiseError(OUT_OF_RANGE, "value out of range: overflow", out))
    ]
    if op in (BinaryFunc.MUL, BinaryFunc.DIV):
        kept = both(nonzero(a), nonzero(b) if op is BinaryFunc.MUL else finite(b))
        underflow = both(CallBinary(BinaryFunc.EQ, value, zero), kept)
        cases.append((underflow, RaiseError(OUT_OF_RANGE, "value out of range: underflow", out)))
    return Case(tuple(cases), value)


_SPACE: Final = "[ \\t\\n\\r\\f]*"
_NUMBER: Final = "[+-]?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)"
NUMBER_SYNTAX: Final = {
    ScalarKind.INT64: f"^{_SPACE}[+-]?[0-9]+{_SPACE}$",
    ScalarKind.NUMERIC: f"^{_SPACE}{_NUMBER}([eE][+-]?[0-9]+)?{_SPACE}$",
    ScalarKind.FLOAT64: f"^{_SPACE}{_NUMBER}([eE][+-]?[0-9]+)?{_SPACE}$",
}
"""Text that spells a number of the kind: where its cast gives NULL, the value is out of the
type's range (22003), not invalid input (22P02)."""
# INT_LIMITS (spate.sql.values): the narrow integer types' bounds, by display name; a text cast
# checks their range ('99999'::smallint fails with 22003, as in PostgreSQL).


def strict_cast(
    value: ScalarExpr, source: ScalarExpr, source_type: ScalarType, out: ScalarType, name: str
) -> ScalarExpr:
    """``value`` (``source`` cast to ``out``, the type called ``name``), failing where the
    cast gives NULL for a value: from text, 22003 when the text spells a number out of the
    type's range (:data:`NUMBER_SYNTAX`, :data:`INT_LIMITS`) and 22P02 when it does not
    parse; from another type, 22003."""
    if not cast_can_fail(source_type, out):
        return value
    failed = CallBinary(
        BinaryFunc.AND,
        CallUnary(UnaryFunc.NOT, CallUnary(UnaryFunc.IS_NULL, source)),
        CallUnary(UnaryFunc.IS_NULL, value),
    )
    if source_type.kind is not ScalarKind.TEXT:
        if out.kind is ScalarKind.NUMERIC:
            code, message = OUT_OF_RANGE, "numeric field overflow"
        else:
            code, message = OUT_OF_RANGE, f"{name} out of range"
        return Case(((failed, RaiseError(code, message, out)),), value)
    cases: list[tuple[ScalarExpr, ScalarExpr]] = []
    range_error = RaiseError(
        OUT_OF_RANGE,
        "numeric field overflow"
        if out.kind is ScalarKind.NUMERIC
        else f"value is out of range for type {name}",
        out,
    )
    syntax = NUMBER_SYNTAX.get(out.kind)
    if syntax is not None:
        spelled = CallVariadic(VariadicFunc.REGEXP_LIKE, (source, Literal(syntax, TEXT)))
        cases.append((CallBinary(BinaryFunc.AND, failed, spelled), range_error))
    invalid_code = INVALID_TEXT
    if out.kind in (ScalarKind.DATE, ScalarKind.TIMESTAMP):
        # PostgreSQL: text shaped as a date (and time) whose fields are out of range is 22008,
        # any other text 22007
        invalid_code = INVALID_DATETIME
        shaped = CallVariadic(
            VariadicFunc.REGEXP_LIKE, (source, Literal(f"^{_SPACE}{DATETIME_SHAPE}{_SPACE}$", TEXT))
        )
        field = RaiseError(DATETIME_FIELD, "date/time field value out of range", out)
        cases.append((CallBinary(BinaryFunc.AND, failed, shaped), field))
    invalid = RaiseError(invalid_code, f"invalid input syntax for type {name}", out)
    cases.append((failed, invalid))
    limit = INT_LIMITS.get(name) if out.kind is ScalarKind.INT64 else None
    if limit is not None:
        outside = CallBinary(
            BinaryFunc.OR,
            CallBinary(BinaryFunc.LT, value, Literal(-limit, INT64)),
            CallBinary(BinaryFunc.GE, value, Literal(limit, INT64)),
        )
        cases.append((outside, range_error))
    return Case(tuple(cases), value)


_INT_RANGE: Final = {"int4": VariadicFunc.INT4_RANGE, "int2": VariadicFunc.INT2_RANGE}


def int_range(value: ScalarExpr, type_name: str) -> ScalarExpr:
    """``value`` (int64) computed for the PostgreSQL type ``type_name``: for ``integer`` and
    ``smallint``, failing with 22003 outside the type's range (PostgreSQL's 32- and 16-bit
    arithmetic and casts); other types unchanged."""
    f = _INT_RANGE.get(type_name)
    if f is None:
        return value
    if isinstance(value, Literal):
        bound, _ = INT_RANGES[f]
        v = value.value
        if v is None or (isinstance(v, int) and -bound <= v < bound):
            return value
    return CallVariadic(f, (value,))


def nonzero_step(start: ScalarExpr, stop: ScalarExpr, step: ScalarExpr) -> ScalarExpr:
    """``generate_series``'s ``step``, failing with 22023 where it is zero and the other
    arguments are not NULL (PostgreSQL's function is strict: a NULL argument gives no rows)."""
    zero = CallBinary(BinaryFunc.EQ, step, Literal(0, INT64))
    for x in (start, stop):
        present = CallUnary(UnaryFunc.NOT, CallUnary(UnaryFunc.IS_NULL, x))
        zero = CallBinary(BinaryFunc.AND, zero, present)
    return Case(
        ((zero, RaiseError(INVALID_PARAMETER, "step size cannot equal zero", INT64)),), step
    )


def at_most_one_row(reduced: RelationExpr, keys: int, type: ScalarType) -> RelationExpr:
    """``reduced`` holds, per key (its first ``keys`` columns), the value and the number of
    rows: the keys and the value, failing with 21000 where there was more than one row."""
    value, n = ColumnRef(keys), ColumnRef(keys + 1)
    many = CallBinary(BinaryFunc.GT, n, Literal(1, INT64))
    checked = Case(((many, RaiseError(CARDINALITY, MORE_THAN_ONE_ROW, type)),), value)
    mapped = Map(reduced, (checked,))
    return project(mapped, [*range(keys), keys + 2])
