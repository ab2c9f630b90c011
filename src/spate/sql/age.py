"""``age(timestamp, timestamp)``: PostgreSQL's "symbolic" difference, as spate carries intervals.

PostgreSQL's ``age(a, b)`` subtracts field by field (years, months, days, time of day), borrows
a day from the time and days of the month of the earlier timestamp from the months, and keeps
the sign of ``a - b``: ``age('2024-03-01', '2023-01-31 10:00')`` is ``1 year 1 mon 14:00:00``.
Computed intervals in spate are int64 milliseconds, the value PostgreSQL orders intervals by
(a month is 30 days): that is what this gives, ``((years * 12 + months) * 30 + days) * 1 day +
time``, so that ``age(…)`` compares with intervals as in PostgreSQL.

``age(timestamp)`` is ``age(current_date, timestamp)``, from today's midnight (UTC, spate's
clock). A one-off query reads the date when it is planned, as PostgreSQL reads it at the start
of the transaction; a view cannot read it (its result would change with the clock, not its
inputs), and refuses it as Materialize refuses unmaterializable functions.
"""

from __future__ import annotations

import datetime as dt

from sqlglot import exp

from spate.plan.expr import (
    BinaryFunc,
    CallBinary,
    CallUnary,
    CallVariadic,
    Case,
    DateTrunc,
    Extract,
    Literal,
    ScalarExpr,
    TimeUnit,
    UnaryFunc,
    VariadicFunc,
)
from spate.repr.types import BOOL, INT64, TIMESTAMP
from spate.sql.binding import BinderBase, Typed
from spate.sql.errors import FeatureNotSupported, UndefinedFunction
from spate.sql.types import PG_TIMESTAMP, PgType, display_name

__all__ = ["age"]

_DAY_MS = 86_400_000


def age(b: BinderBase, node: exp.Expression) -> Typed:
    args = list(node.expressions)
    if len(args) == 1:
        if b.today is None:
            raise b.err(
                FeatureNotSupported,
                "cannot materialize call to age(timestamp): it reads the current date, which "
                "a view kept up to date at every time cannot; write age(<timestamp>, "
                "<timestamp>)",
                node,
            )
        midnight = dt.datetime.combine(b.today, dt.time())
        later: ScalarExpr = Literal(midnight, TIMESTAMP)
        earlier = _timestamp(b, args[0])
    elif len(args) == 2:
        later, earlier = (_timestamp(b, a) for a in args)
    else:
        raise b.err(UndefinedFunction, "function age takes one or two timestamps", node)
    forward = _age_ms(later, earlier)
    backward = CallUnary(UnaryFunc.NEG, _age_ms(earlier, later))
    ahead = CallBinary(BinaryFunc.GE, later, earlier)
    value = Case(((ahead, forward),), backward)
    fields = zip(_age_fields(later, earlier, _US), _age_fields(earlier, later, _US), strict=True)
    parts = tuple(Case(((ahead, f),), CallUnary(UnaryFunc.NEG, b)) for f, b in fields)
    return Typed(value, PgType("interval", None), interval_parts=parts)  # type: ignore[arg-type]


def _timestamp(b: BinderBase, node: exp.Expression) -> ScalarExpr:
    t = b._bind(node)
    if t.type.name in ("unknown", "date"):
        t = b.coerce(t, PG_TIMESTAMP, node)
    if t.type.name not in ("timestamp", "timestamptz"):
        raise b.err(UndefinedFunction, f"function age({display_name(t.type)}) does not exist", node)
    return t.expr


def _i(v: int) -> Literal:
    return Literal(v, INT64)


def _op(f: BinaryFunc, a: ScalarExpr, c: ScalarExpr) -> ScalarExpr:
    return CallBinary(f, a, c)


def _age_ms(a: ScalarExpr, e: ScalarExpr) -> ScalarExpr:
    """``age(a, e)`` in milliseconds for ``a >= e``, a month counted as 30 days."""
    months, days, time = _age_fields(a, e, _MS)
    whole_days = _op(BinaryFunc.ADD, _op(BinaryFunc.MUL, months, _i(30)), days)
    return _op(BinaryFunc.ADD, _op(BinaryFunc.MUL, whole_days, _i(_DAY_MS)), time)


_MS, _US = 1, 1000


def _age_fields(
    a: ScalarExpr, e: ScalarExpr, unit: int
) -> tuple[ScalarExpr, ScalarExpr, ScalarExpr]:
    """``age(a, e)`` for ``a >= e``: months, days and the time (in milliseconds, or in
    microseconds with ``unit`` ``_US``), with the borrows of PostgreSQL's ``timestamp_age``
    (the month's length is that of ``e``'s month)."""
    add, sub, mul = BinaryFunc.ADD, BinaryFunc.SUB, BinaryFunc.MUL

    def time_of_day(x: ScalarExpr) -> ScalarExpr:
        midnight = DateTrunc(TimeUnit.DAY, x)
        if unit == _US:
            return CallVariadic(VariadicFunc.TIMESTAMP_DIFF_US, (x, midnight))
        return _op(sub, CallUnary(UnaryFunc.EPOCH_MS, x), CallUnary(UnaryFunc.EPOCH_MS, midnight))

    def field(unit: TimeUnit, x: ScalarExpr) -> ScalarExpr:
        return Extract(unit, x)

    time = _op(sub, time_of_day(a), time_of_day(e))
    borrow_day = _op(BinaryFunc.LT, time, _i(0))
    time = Case(((borrow_day, _op(add, time, _i(_DAY_MS * unit))),), time)
    days = _op(sub, field(TimeUnit.DAY, a), field(TimeUnit.DAY, e))
    days = Case(((borrow_day, _op(sub, days, _i(1))),), days)
    month_days = _days_in_month(field(TimeUnit.YEAR, e), field(TimeUnit.MONTH, e))
    once = _op(add, days, month_days)
    # days borrow one month's days, or two when one is not enough (a 28-day February)
    borrowed = _op(
        BinaryFunc.ADD,
        Case(((_op(BinaryFunc.LT, days, _i(0)), _i(1)),), _i(0)),
        Case(((_op(BinaryFunc.LT, once, _i(0)), _i(1)),), _i(0)),
    )
    days = _op(add, days, _op(mul, borrowed, month_days))
    months = _op(
        add,
        _op(mul, _op(sub, field(TimeUnit.YEAR, a), field(TimeUnit.YEAR, e)), _i(12)),
        _op(sub, field(TimeUnit.MONTH, a), field(TimeUnit.MONTH, e)),
    )
    months = _op(sub, months, borrowed)
    return months, days, time


def _days_in_month(year: ScalarExpr, month: ScalarExpr) -> ScalarExpr:
    def divisible(n: int) -> ScalarExpr:
        return _op(BinaryFunc.EQ, _op(BinaryFunc.MOD, year, _i(n)), _i(0))

    leap = _op(
        BinaryFunc.OR,
        _op(BinaryFunc.AND, divisible(4), CallUnary(UnaryFunc.NOT, divisible(100))),
        divisible(400),
    )
    february = Case(((leap, _i(29)),), _i(28))
    short = Literal(False, BOOL)
    for m in (4, 6, 9, 11):
        short = _op(BinaryFunc.OR, short, _op(BinaryFunc.EQ, month, _i(m)))  # type: ignore[assignment]
    return Case(((_op(BinaryFunc.EQ, month, _i(2)), february), (short, _i(30))), _i(31))
