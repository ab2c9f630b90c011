"""Where SQL fails as PostgreSQL does: division by zero, casts that cannot convert a value, a
scalar subquery with more than one row. Each lowers to the IR's error value
(:class:`~spate.plan.expr.RaiseError`, lazily inside ``CASE``), so that a one-off SELECT fails
with PostgreSQL's SQLSTATE and a maintained view keeps the failing rows in its error collection
(its reads fail until they are retracted). int64 overflow needs nothing here: it is an error
of the IR's arithmetic itself.
"""

from __future__ import annotations

from typing import Final

from spate.plan.expr import (
    BinaryFunc,
    CallBinary,
    CallUnary,
    Case,
    ColumnRef,
    Literal,
    RaiseError,
    ScalarExpr,
    UnaryFunc,
)
from spate.plan.infer import cast_can_fail
from spate.plan.relation import Map, RelationExpr
from spate.repr.types import INT64, ScalarKind, ScalarType
from spate.sql.scope import project
from spate.sql.values import zero_of

DIVISION_BY_ZERO: Final = "22012"
INVALID_TEXT: Final = "22P02"
OUT_OF_RANGE: Final = "22003"
CARDINALITY: Final = "21000"
MORE_THAN_ONE_ROW: Final = "more than one row returned by a subquery used as an expression"


def checked_division(
    op: BinaryFunc,
    value: ScalarExpr,
    divisor: ScalarExpr,
    divisor_type: ScalarType,
    out: ScalarType,
) -> ScalarExpr:
    """``value`` (``a / b`` or ``a % b``), failing with 22012 where the divisor is zero."""
    if op not in (BinaryFunc.DIV, BinaryFunc.MOD):
        return value
    if isinstance(divisor, Literal) and divisor.value is not None and divisor.value != 0:
        return value
    zero = CallBinary(BinaryFunc.EQ, divisor, Literal(zero_of(divisor_type), divisor_type))
    return Case(((zero, RaiseError(DIVISION_BY_ZERO, "division by zero", out)),), value)


def strict_cast(
    value: ScalarExpr, source: ScalarExpr, source_type: ScalarType, out: ScalarType, name: str
) -> ScalarExpr:
    """``value`` (``source`` cast to ``out``, the type called ``name``), failing where the
    cast gives NULL for a value: 22P02 for text that does not parse, else 22003."""
    if not cast_can_fail(source_type, out):
        return value
    if source_type.kind is ScalarKind.TEXT:
        code, message = INVALID_TEXT, f"invalid input syntax for type {name}"
    elif out.kind is ScalarKind.NUMERIC:
        code, message = OUT_OF_RANGE, "numeric field overflow"
    else:
        code, message = OUT_OF_RANGE, f"{name} out of range"
    failed = CallBinary(
        BinaryFunc.AND,
        CallUnary(UnaryFunc.NOT, CallUnary(UnaryFunc.IS_NULL, source)),
        CallUnary(UnaryFunc.IS_NULL, value),
    )
    return Case(((failed, RaiseError(code, message, out)),), value)


def at_most_one_row(reduced: RelationExpr, keys: int, type: ScalarType) -> RelationExpr:
    """``reduced`` holds, per key (its first ``keys`` columns), the value and the number of
    rows: the keys and the value, failing with 21000 where there was more than one row."""
    value, n = ColumnRef(keys), ColumnRef(keys + 1)
    many = CallBinary(BinaryFunc.GT, n, Literal(1, INT64))
    checked = Case(((many, RaiseError(CARDINALITY, MORE_THAN_ONE_ROW, type)),), value)
    mapped = Map(reduced, (checked,))
    return project(mapped, [*range(keys), keys + 2])
