"""``extract(field from x)`` and ``date_part('field', x)`` on timestamps, dates and intervals,
as PostgreSQL 15 computes them.

``extract`` gives ``numeric`` (``second`` at scale 6, ``milliseconds`` at scale 3, ``epoch`` at
scale 6 but of a date at scale 0, every other field an integer); ``date_part`` gives
``double precision``, computed as PostgreSQL computes it in doubles (``second`` is
``whole seconds + microseconds / 1e6``). A field's name is read as PostgreSQL reads it
(lower-cased, cut to 10 characters, its abbreviations and plurals: ``usec``, ``mins``,
``centuries``…). A field the type does not have fails with ``0A000`` (``unit "dow" not
supported for type interval``), a name that is no field with ``22023`` (``not recognized``).

An interval's fields are PostgreSQL's ``interval2itm``: ``year`` is ``months / 12`` and
``month`` the rest (C's division: each with the sign of ``months``), ``day`` the days, and
``hour``, ``minute`` and the seconds the microseconds split (again toward zero), so
``extract(hour from interval '36:00:00')`` is 36 and of ``'-1 mon'`` the month is -1.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Final

from sqlglot import exp

from spate.plan.expr import (
    BinaryFunc,
    CallBinary,
    CallVariadic,
    Case,
    Cast,
    DateTrunc,
    Extract,
    Literal,
    ScalarExpr,
    TimeUnit,
    VariadicFunc,
)
from spate.repr.types import DATE, FLOAT64, INT64, TIMESTAMP, numeric
from spate.sql.binding import BinderBase, Typed
from spate.sql.errors import FeatureNotSupported, InvalidParameterValue, UndefinedFunction
from spate.sql.types import FLOAT8, PG_TIMESTAMP, display_name, pg_numeric

V = VariadicFunc
B = BinaryFunc

_FIELDS: Final[dict[str, tuple[str, ...]]] = {
    "century": ("c", "cent", "centuries", "century"),
    "day": ("d", "day", "days"),
    "decade": ("dec", "decade", "decades", "decs"),
    "hour": ("h", "hour", "hours", "hr", "hrs"),
    "minute": ("m", "min", "mins", "minute", "minutes"),
    "microseconds": ("microsecon", "us", "usec", "usecond", "useconds", "usecs"),
    "millennium": ("mil", "millennia", "millennium", "mils"),
    "milliseconds": ("millisecon", "ms", "msec", "msecond", "mseconds", "msecs"),
    "month": ("mon", "mons", "month", "months"),
    "quarter": ("qtr", "quarter"),
    "second": ("s", "sec", "second", "seconds", "secs"),
    "timezone": ("timezone",),
    "timezone_hour": ("timezone_h",),
    "timezone_minute": ("timezone_m",),
    "week": ("w", "week", "weeks"),
    "year": ("y", "year", "years", "yr", "yrs"),
    # the date fields PostgreSQL reads from its table of date words
    "dow": ("dow",),
    "doy": ("doy",),
    "isodow": ("isodow",),
    "isoyear": ("isoyear",),
    "julian": ("j", "jd", "julian"),
}
_UNITS: Final = {name: field for field, names in _FIELDS.items() for name in names}
_RESERVED: Final = frozenset(
    {"epoch", "now", "today", "tomorrow", "yesterday", "infinity", "-infinity", "allballs"}
)
"""PostgreSQL's reserved date words: ``epoch`` a field, the others known but no field."""

_INTERVAL_FIELDS: Final = frozenset(
    {
        "microseconds",
        "milliseconds",
        "second",
        "minute",
        "hour",
        "day",
        "month",
        "quarter",
        "year",
        "decade",
        "century",
        "millennium",
        "epoch",
    }
)
_DATE_FIELDS: Final = frozenset(
    {
        "day",
        "month",
        "quarter",
        "week",
        "dow",
        "isodow",
        "doy",
        "year",
        "isoyear",
        "decade",
        "century",
        "millennium",
        "epoch",
        "julian",
    }
)
_TIMESTAMP_FIELDS: Final = _DATE_FIELDS | {
    "microseconds",
    "milliseconds",
    "second",
    "minute",
    "hour",
}
_PLAIN: Final = {
    "year": TimeUnit.YEAR,
    "quarter": TimeUnit.QUARTER,
    "month": TimeUnit.MONTH,
    "week": TimeUnit.WEEK,
    "day": TimeUnit.DAY,
    "hour": TimeUnit.HOUR,
    "minute": TimeUnit.MINUTE,
    "dow": TimeUnit.DOW,
    "doy": TimeUnit.DOY,
}
_EPOCH: Final = Literal(dt.datetime(1970, 1, 1), TIMESTAMP)
_EPOCH_DAY: Final = Literal(dt.date(1970, 1, 1), DATE)
_US_PER_HOUR: Final = 3_600_000_000
_US_PER_MINUTE: Final = 60_000_000


def _type_name(t: Typed) -> str:
    return {
        "timestamp": "timestamp without time zone",
        "timestamptz": "timestamp with time zone",
    }.get(t.type.name, t.type.name)


def field_of(name: str, t: Typed, node: exp.Expression, b: BinderBase) -> str:
    """The field ``name`` names, for a value of ``t``'s type (PostgreSQL's errors otherwise)."""
    low = name.lower()
    key = low[:10]
    interval = t.type.name == "interval" or t.interval_ms is not None
    shown = "interval" if interval else _type_name(t)
    field = _UNITS.get(key) or (key if key in _RESERVED else None)
    if field is None or (interval and field in _RESERVED and field != "epoch"):
        raise b.err(InvalidParameterValue, f'unit "{low}" not recognized for type {shown}', node)
    allowed = (
        _INTERVAL_FIELDS
        if interval
        else _DATE_FIELDS
        if t.type.name == "date"
        else _TIMESTAMP_FIELDS
    )
    if field not in allowed:
        raise b.err(FeatureNotSupported, f'unit "{low}" not supported for type {shown}', node)
    return field


def _i(n: int) -> ScalarExpr:
    return Literal(n, INT64)


def _f(x: float) -> ScalarExpr:
    return Literal(x, FLOAT64)


def _div(a: ScalarExpr, n: int) -> ScalarExpr:
    """``a / n`` on int64, toward zero (as C and PostgreSQL's ``/``)."""
    return CallBinary(B.DIV, a, _i(n))


def _mod(a: ScalarExpr, n: int) -> ScalarExpr:
    return CallBinary(B.MOD, a, _i(n))


def _float(a: ScalarExpr) -> ScalarExpr:
    return Cast(a, FLOAT64)


def _scaled(us: ScalarExpr, scale: int) -> ScalarExpr:
    """The int64 ``us`` divided by ``10**scale`` as numeric at scale ``scale`` (exact)."""
    if scale == 0:
        return Cast(us, numeric(38, 0))
    unit = Literal(Decimal(1).scaleb(-scale), numeric(scale, scale))
    return Cast(CallBinary(B.MUL, Cast(us, numeric(38, 0)), unit), numeric(38, scale))


def _result(x: ScalarExpr, as_float: bool, scale: int = 0) -> Typed:
    if as_float:
        return Typed(_float(x), FLOAT8)
    return Typed(_scaled(x, scale), pg_numeric(numeric(38, scale)))


def _seconds(sec: ScalarExpr, us: ScalarExpr, field: str, as_float: bool) -> Typed:
    """``second``, ``milliseconds`` or ``microseconds`` of whole seconds ``sec`` and the
    microseconds ``us`` beyond them (int64), as PostgreSQL computes each."""
    in_us = CallBinary(B.ADD, CallBinary(B.MUL, sec, _i(1_000_000)), us)
    if not as_float:
        return _result(in_us, False, {"second": 6, "milliseconds": 3, "microseconds": 0}[field])
    if field == "microseconds":
        value = CallBinary(B.ADD, CallBinary(B.MUL, _float(sec), _f(1e6)), _float(us))
    elif field == "milliseconds":
        whole = CallBinary(B.MUL, _float(sec), _f(1000.0))
        value = CallBinary(B.ADD, whole, CallBinary(B.DIV, _float(us), _f(1000.0)))
    else:
        value = CallBinary(B.ADD, _float(sec), CallBinary(B.DIV, _float(us), _f(1e6)))
    return Typed(value, FLOAT8)


def interval_part(
    b: BinderBase, field: str, t: Typed, node: exp.Expression, as_float: bool
) -> Typed:
    """``extract``/``date_part`` of an interval (PostgreSQL's ``interval_part_common``)."""
    from spate.sql.interval_ops import epoch, fields, value

    iv = value(b, t, node)
    months, days, micros = fields(iv)
    if field == "epoch":
        if not as_float:
            return Typed(epoch(iv), pg_numeric(numeric(38, 6)))
        # time / 1e6 + 365.25 days * (months / 12) + 30 days * (months % 12) + days
        out = CallBinary(B.DIV, _float(micros), _f(1e6))
        for factor, part in (
            (365.25 * 86400, _div(months, 12)),
            (30.0 * 86400, _mod(months, 12)),
            (86400.0, days),
        ):
            out = CallBinary(B.ADD, out, CallBinary(B.MUL, _f(factor), _float(part)))
        return Typed(out, FLOAT8)
    year = _div(months, 12)
    in_minute = _mod(micros, _US_PER_MINUTE)
    match field:
        case "microseconds" | "milliseconds" | "second":
            return _seconds(_div(in_minute, 1_000_000), _mod(in_minute, 1_000_000), field, as_float)
        case "minute":
            x = _div(_mod(micros, _US_PER_HOUR), _US_PER_MINUTE)
        case "hour":
            x = _div(micros, _US_PER_HOUR)
        case "day":
            x = days
        case "month":
            x = _mod(months, 12)
        case "quarter":
            x = CallBinary(B.ADD, _div(_mod(months, 12), 3), _i(1))
        case "year":
            x = year
        case "decade":
            x = _div(year, 10)
        case "century":
            x = _div(year, 100)
        case _:
            x = _div(year, 1000)
    return _result(x, as_float)


def stamp_part(b: BinderBase, field: str, t: Typed, node: exp.Expression, as_float: bool) -> Typed:
    """``extract``/``date_part`` of a timestamp or a date (years 1 … 9999: no era rules)."""
    x = t.expr
    is_date = t.type.name == "date"
    if field == "julian":
        raise b.err(FeatureNotSupported, 'extract of "julian" is not supported', node)
    if field == "isoyear":
        # the year of the ISO week: early January in the last week of the year before, late
        # December in the first week of the next
        year, month, week = (Extract(u, x) for u in (TimeUnit.YEAR, TimeUnit.MONTH, TimeUnit.WEEK))
        before = CallBinary(B.AND, CallBinary(B.EQ, month, _i(1)), CallBinary(B.GE, week, _i(52)))
        after = CallBinary(B.AND, CallBinary(B.EQ, month, _i(12)), CallBinary(B.EQ, week, _i(1)))
        iso = Case(
            (
                (before, CallBinary(B.SUB, year, _i(1))),
                (after, CallBinary(B.ADD, year, _i(1))),
            ),
            year,
        )
        return _result(iso, as_float)
    if field == "epoch":
        if is_date:
            days = CallBinary(B.DATE_DIFF_DAYS, x, _EPOCH_DAY)
            return _result(CallBinary(B.MUL, days, _i(86_400)), as_float)
        us = CallVariadic(V.TIMESTAMP_DIFF_US, (x, _EPOCH))
        if as_float:
            return Typed(CallBinary(B.DIV, _float(us), _f(1e6)), FLOAT8)
        return _result(us, False, 6)
    if field in ("second", "milliseconds", "microseconds"):
        sec = Extract(TimeUnit.SECOND, x)
        frac = CallVariadic(V.TIMESTAMP_DIFF_US, (x, DateTrunc(TimeUnit.SECOND, x)))
        return _seconds(sec, frac, field, as_float)
    if field == "isodow":
        dow = Extract(TimeUnit.DOW, x)
        return _result(Case(((CallBinary(B.EQ, dow, _i(0)), _i(7)),), dow), as_float)
    if field in ("decade", "century", "millennium"):
        year = Extract(TimeUnit.YEAR, x)
        size, offset = {"decade": (10, 0), "century": (100, 99), "millennium": (1000, 999)}[field]
        return _result(_div(CallBinary(B.ADD, year, _i(offset)), size), as_float)
    return _result(Extract(_PLAIN[field], x), as_float)


def bind_part(b: BinderBase, name: str, t: Typed, node: exp.Expression, as_float: bool) -> Typed:
    """``extract(name from t)`` (numeric) or ``date_part('name', t)`` (double precision)."""
    if t.type.name == "unknown":
        t = b.coerce(t, PG_TIMESTAMP, node)
    is_interval = t.type.name == "interval" or t.interval_ms is not None
    if not is_interval and t.type.name not in ("date", "timestamp", "timestamptz"):
        what = "date_part" if as_float else "extract"
        raise b.err(UndefinedFunction, f"{what} from {display_name(t.type)}", node)
    if as_float and t.type.name == "date":
        # PostgreSQL has no date_part(text, date): the date becomes a timestamp
        t = Typed(Cast(t.expr, TIMESTAMP), PG_TIMESTAMP)
    field = field_of(name, t, node, b)
    if is_interval:
        return interval_part(b, field, t, node, as_float)
    return stamp_part(b, field, t, node, as_float)


def date_part(b: BinderBase, node: exp.Expression) -> Typed:
    """``date_part(text, x)``: a constant field name (PostgreSQL takes any text)."""
    args = list(node.expressions)
    if len(args) != 2:
        raise b.err(UndefinedFunction, "function date_part does not exist", node)
    unit = args[0]
    if not (isinstance(unit, exp.Literal) and unit.is_string):
        raise b.err(FeatureNotSupported, "date_part's field must be a constant text", unit)
    return bind_part(b, str(unit.this), b._bind(args[1]), node, as_float=True)
