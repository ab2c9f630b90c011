"""Aggregate functions of ``Reduce``: what each computes over a group, and its result type.

For a group (the rows of the input, with their multiplicities, that share the key), with the
aggregate's expression evaluated on each row and NULLs dropped (``distinct``: each distinct
non-NULL value once):

==============  ==============================  =================================================
function        input → result                  value
==============  ==============================  =================================================
``count``       any → int64 not null            number of values, counting multiplicity
                                                (``count(*)`` is ``count`` of ``TRUE``)
``sum``         int64 → int64, float64 →        Σ value × multiplicity; NULL if no values
                float64, numeric(p,s) →
                numeric(38,s)
``min/max``     any orderable type              smallest/largest value; NULL if none
``avg``         int64/float64 → float64,        sum / count; NULL if none; numeric is the
                numeric(p,s) →                  quotient of numeric(38,s) by the count, rounded
                numeric(38,max(s,16))           as PostgreSQL rounds it (its result scale
                                                from the values, capped at the type's scale;
                                                :mod:`spate.plan.numeric_division`)
``bool_and``    bool → bool                     all values TRUE; NULL if none
``bool_or``     bool → bool                     any value TRUE; NULL if none
``string_agg``  text → text                     the values **sorted ascending**, each repeated
                                                by its multiplicity, joined by ``delimiter``;
                                                NULL if none
==============  ==============================  =================================================

A group exists only while it has rows: a ``Reduce`` without group key over an empty input has no
output row (unlike SQL's ``SELECT count(*)``). A result is nullable iff the input expression is
(``count`` never is).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from spate.plan.errors import PlanTypeError
from spate.plan.expr import ColumnType, Literal, ScalarExpr
from spate.plan.numeric_division import division_scale
from spate.repr.types import BOOL, FLOAT64, INT64, TEXT, ScalarKind, numeric
from spate.wire import wire

K = ScalarKind


class AggregateFunc(StrEnum):
    COUNT = "count"
    SUM = "sum"
    MIN = "min"
    MAX = "max"
    AVG = "avg"
    BOOL_AND = "bool_and"
    BOOL_OR = "bool_or"
    STRING_AGG = "string_agg"


@wire("plan.aggregate")
@dataclass(frozen=True, slots=True)
class AggregateExpr:
    """``func([DISTINCT] expr)``; ``delimiter`` is used (and required) by ``string_agg`` only."""

    func: AggregateFunc
    expr: ScalarExpr
    distinct: bool = False
    delimiter: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.expr, ScalarExpr):
            raise PlanTypeError(
                f"{self.func.value}: expected a scalar expression, got {self.expr!r}"
            )
        if self.func is AggregateFunc.STRING_AGG:
            if not isinstance(self.delimiter, str):
                raise PlanTypeError("string_agg needs a text delimiter")
        elif self.delimiter is not None:
            raise PlanTypeError(f"{self.func.value} takes no delimiter")

    def is_count_star(self) -> bool:
        return self.func is AggregateFunc.COUNT and self.expr == Literal(True, BOOL)


def avg_scale(scale: int) -> int:
    """The type scale of ``avg`` over ``numeric(p, scale)``: that of the sum's quotient by a
    count."""
    return division_scale(numeric(38, scale), numeric(20, 0))


def aggregate_type(func: AggregateFunc, input_type: ColumnType) -> ColumnType:
    """The result type of ``func`` over values of ``input_type`` (raises ``PlanTypeError``)."""
    t = input_type.type
    k = t.kind
    nullable = input_type.nullable

    def bad(want: str) -> PlanTypeError:
        return PlanTypeError(f"{func.value} expects {want}, got {t}")

    if func is AggregateFunc.COUNT:
        return ColumnType(INT64, False)
    if func is AggregateFunc.SUM:
        if k is K.INT64:
            return ColumnType(INT64, nullable)
        if k is K.FLOAT64:
            return ColumnType(FLOAT64, nullable)
        if k is K.NUMERIC:
            assert t.scale is not None
            return ColumnType(numeric(38, t.scale), nullable)
        raise bad("int64, float64 or numeric")
    if func in (AggregateFunc.MIN, AggregateFunc.MAX):
        if k is K.JSONB:
            raise bad("an orderable type")
        return ColumnType(t, nullable)
    if func is AggregateFunc.AVG:
        if k in (K.INT64, K.FLOAT64):
            return ColumnType(FLOAT64, nullable)
        if k is K.NUMERIC:
            assert t.scale is not None
            return ColumnType(numeric(38, avg_scale(t.scale)), nullable)
        raise bad("int64, float64 or numeric")
    if func in (AggregateFunc.BOOL_AND, AggregateFunc.BOOL_OR):
        if k is not K.BOOL:
            raise bad("bool")
        return ColumnType(BOOL, nullable)
    if func is AggregateFunc.STRING_AGG:
        if k is not K.TEXT:
            raise bad("text")
        return ColumnType(TEXT, nullable)
    raise PlanTypeError(f"unknown aggregate function {func!r}")
