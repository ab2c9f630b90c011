"""``sum``, ``avg``, ``min`` and ``max`` of intervals, as aggregates over GROUP BY and over
window frames.

PostgreSQL sums intervals field by field (months, days and microseconds apart, never carried
into one another) and fails with 22008 "interval out of range" when a field leaves its range
(months and days int32, microseconds int64); ``avg`` is that sum divided by the count as
``interval / float8`` divides (the fractions cascade: :data:`~spate.plan.func_names.
VariadicFunc.INTERVAL_DIV`). Both are lowered onto the invertible aggregates a maintained view
already keeps: a numeric ``sum`` per field (and a ``count`` for ``avg``), recombined into an
interval with the range checked. ``min`` and ``max`` are taken over the span
(``interval_key``) and give the span's canonical interval, as grouping does.

PostgreSQL checks the range after every addition, so a sum whose running total leaves the
range and comes back fails there; here only the total is checked (the order of the additions
is PostgreSQL's scan order, which a maintained view does not have).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import NamedTuple

from spate.plan.aggregate import AggregateExpr, AggregateFunc
from spate.plan.expr import (
    BinaryFunc,
    CallBinary,
    CallUnary,
    CallVariadic,
    Case,
    Cast,
    Literal,
    RaiseError,
    ScalarExpr,
    UnaryFunc,
    VariadicFunc,
)
from spate.repr.interval import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN
from spate.repr.types import FLOAT64, INT64, INTERVAL, numeric
from spate.sql import interval_ops

V = VariadicFunc
_FIELD = numeric(19, 0)
_SUM = numeric(38, 0)
_RANGES = ((INT32_MIN, INT32_MAX), (INT32_MIN, INT32_MAX), (INT64_MIN, INT64_MAX))

AGGREGATES = ("sum", "avg", "min", "max")
"""The aggregates :func:`lower` takes."""


class Lowered(NamedTuple):
    """An aggregate call made of plain aggregates: ``final`` makes the call's value of their
    results (in order), ``defaults`` are their values over no rows (a global aggregate). The
    interval aggregates here; also ``sum(real)`` over a window (one sum, rounded by ``final``)."""

    aggs: tuple[AggregateExpr, ...]
    final: Callable[[Sequence[ScalarExpr]], ScalarExpr]
    defaults: tuple[ScalarExpr, ...]


def lower(
    name: str, x: ScalarExpr, guard: Callable[[ScalarExpr], ScalarExpr], distinct: bool = False
) -> Lowered:
    """``name`` (one of :data:`AGGREGATES`) of the interval value ``x``; ``guard`` wraps each
    aggregated expression (a FILTER clause)."""
    if distinct and name in ("sum", "avg"):
        return _distinct(name, x, guard)
    if name in ("min", "max"):
        f = AggregateFunc.MIN if name == "min" else AggregateFunc.MAX
        span = AggregateExpr(f, guard(interval_ops.key(x)))
        return Lowered((span,), lambda c: interval_ops.of_key(c[0]), (Literal(None, _SUM),))
    sums = tuple(
        AggregateExpr(AggregateFunc.SUM, guard(Cast(p, _FIELD))) for p in interval_ops.fields(x)
    )
    none = tuple(Literal(None, _SUM) for _ in sums)
    if name == "sum":
        return Lowered(sums, lambda c: of_sums(c[0], c[1], c[2]), none)
    assert name == "avg", name
    count = AggregateExpr(AggregateFunc.COUNT, guard(x))
    return Lowered((*sums, count), average, (*none, Literal(0, INT64)))


def of_sums(months: ScalarExpr, days: ScalarExpr, micros: ScalarExpr) -> ScalarExpr:
    """The interval of the summed fields (numeric; NULL when no value was summed), 22008
    where a field is out of its range."""
    checks: list[ScalarExpr] = []
    for total, (low, high) in zip((months, days, micros), _RANGES, strict=True):
        checks.append(CallBinary(BinaryFunc.GE, total, Literal(Decimal(low), _SUM)))
        checks.append(CallBinary(BinaryFunc.LE, total, Literal(Decimal(high), _SUM)))
    in_range = checks[0]
    for c in checks[1:]:
        in_range = CallBinary(BinaryFunc.AND, in_range, c)
    parts = tuple(Cast(p, INT64) for p in (months, days, micros))
    return Case(
        (
            (CallUnary(UnaryFunc.IS_NULL, months), Literal(None, INTERVAL)),
            (in_range, CallVariadic(V.MAKE_INTERVAL, parts)),
        ),
        RaiseError("22008", "interval out of range", INTERVAL),
    )


def average(c: Sequence[ScalarExpr]) -> ScalarExpr:
    """PostgreSQL's ``interval_avg``: the sum divided by the count as a float8."""
    return CallVariadic(V.INTERVAL_DIV, (of_sums(c[0], c[1], c[2]), Cast(c[3], FLOAT64)))


_SHIFT = Literal(Decimal(2**38), _SUM)
"""More than twice any canonical field (microseconds below 86400·10⁶ < 2³⁷, months below
2³³): ``span · 2³⁸ + field`` is distinct exactly where the span is."""


def _distinct(name: str, x: ScalarExpr, guard: Callable[[ScalarExpr], ScalarExpr]) -> Lowered:
    """``sum``/``avg(DISTINCT x)``: over the distinct spans, each as its canonical interval
    (PostgreSQL keeps one of the equal intervals it meets, which one unspecified). The sum of a
    canonical field over distinct spans is ``sum(DISTINCT span · 2³⁸ + field) − 2³⁸ ·
    sum(DISTINCT span)``: plain distinct sums, so a view keeps them incrementally. A sum of
    encoded values beyond numeric(38) (some 10⁴ distinct spans of 10⁸ years) is 22003."""
    span = interval_ops.key(x)
    canon = interval_ops.fields(interval_ops.canonical(x))
    spans = AggregateExpr(AggregateFunc.SUM, guard(span), True)
    coded = tuple(
        AggregateExpr(
            AggregateFunc.SUM,
            guard(
                CallBinary(BinaryFunc.ADD, CallBinary(BinaryFunc.MUL, span, _SHIFT), Cast(f, _SUM))
            ),
            True,
        )
        for f in canon
    )
    aggs: tuple[AggregateExpr, ...] = (spans, *coded)
    defaults: tuple[ScalarExpr, ...] = tuple(Literal(None, _SUM) for _ in aggs)
    if name == "avg":
        aggs = (*aggs, AggregateExpr(AggregateFunc.COUNT, guard(span), True))
        defaults = (*defaults, Literal(0, INT64))

    def final(c: Sequence[ScalarExpr]) -> ScalarExpr:
        shifted = CallBinary(BinaryFunc.MUL, c[0], _SHIFT)
        fields = [CallBinary(BinaryFunc.SUB, c[k], shifted) for k in (1, 2, 3)]
        total = of_sums(fields[0], fields[1], fields[2])
        if name == "sum":
            return total
        return CallVariadic(V.INTERVAL_DIV, (total, Cast(c[4], FLOAT64)))

    return Lowered(aggs, final, defaults)
