"""The interval functions (:mod:`spate.plan.interval_funcs`) on Python values: PostgreSQL 15's
definitions (``timestamp.c``), the reference the Spark compiler is checked against."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any, Final

from spate.errors import EvalError
from spate.plan.func_names import VariadicFunc
from spate.repr.interval import (
    DAYS_PER_MONTH,
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    USECS_PER_DAY,
    Interval,
    canonical,
    from_span,
)
from spate.repr.interval_input import read as read_text
from spate.repr.types import Datum

V = VariadicFunc
_SECS_PER_DAY: Final = 86_400
_YEAR_SECS: Final = 31_557_600  # 365.25 days
_MIN_TS: Final = dt.datetime(1, 1, 1)
_MAX_TS: Final = dt.datetime(9999, 12, 31, 23, 59, 59, 999_999)


def _out_of_range() -> EvalError:
    return EvalError("interval out of range", sqlstate="22008")


def _tsround(x: float) -> float:
    return round(x * 1e6) / 1e6


def _trunc32(x: float) -> int:
    if math.isnan(x) or x > INT32_MAX or x < INT32_MIN:
        raise _out_of_range()
    return int(x)


def scale(iv: Interval, factor: float, divide: bool) -> Interval:
    """PostgreSQL 15's ``interval_mul`` (``interval_div`` with ``divide``)."""
    if divide and factor == 0:
        raise EvalError("division by zero", sqlstate="22012")

    def by(x: float) -> float:
        return x / factor if divide else x * factor

    month = _trunc32(by(float(iv.months)))
    day = _trunc32(by(float(iv.days)))
    month_days = _tsround((by(float(iv.months)) - month) * DAYS_PER_MONTH)
    sec = _tsround((by(float(iv.days)) - day + month_days - int(month_days)) * _SECS_PER_DAY)
    if abs(sec) >= _SECS_PER_DAY:
        day += int(sec / _SECS_PER_DAY)
        sec -= int(sec / _SECS_PER_DAY) * _SECS_PER_DAY
    day += int(month_days)
    micros = round(by(float(iv.micros)) + sec * 1e6)
    if math.isnan(micros) or not INT64_MIN <= micros <= INT64_MAX:
        raise _out_of_range()
    if not INT32_MIN <= day <= INT32_MAX:
        raise _out_of_range()
    return Interval(month, day, int(micros))


def epoch(iv: Interval) -> Decimal:
    """``extract(epoch from iv)``: seconds, a year of 365.25 days, at scale 6."""
    years = int(iv.months / 12)  # C's division: toward zero
    months = iv.months - years * 12
    secs = _YEAR_SECS * years + DAYS_PER_MONTH * _SECS_PER_DAY * months + _SECS_PER_DAY * iv.days
    return Decimal(secs * 1_000_000 + iv.micros).scaleb(-6)


def add_micros(ts: dt.datetime, n: int) -> dt.datetime:
    try:
        out = ts + dt.timedelta(microseconds=n)
    except OverflowError:
        raise EvalError("timestamp out of range", sqlstate="22008") from None
    return out


def _cdiv(a: int, b: int) -> int:
    """C's division: toward zero."""
    q = abs(a) // b
    return q if a >= 0 else -q


def _add32(a: int, b: int) -> int:
    if not INT32_MIN <= a + b <= INT32_MAX:
        raise _out_of_range()
    return a + b


def _same_sign(high: int, low: int, unit: int) -> tuple[int, int]:
    """Borrow one ``unit`` of ``low`` from ``high`` (or lend one) so that they share a sign."""
    if high > 0 and low < 0:
        return high - 1, low + unit
    if high < 0 and low > 0:
        return high + 1, low - unit
    return high, low


def justify_days(iv: Interval) -> Interval:
    """PostgreSQL 15's ``justify_days``: whole 30-day months out of the days."""
    whole = _cdiv(iv.days, DAYS_PER_MONTH)
    months = _add32(iv.months, whole)
    months, days = _same_sign(months, iv.days - whole * DAYS_PER_MONTH, DAYS_PER_MONTH)
    return Interval(months, days, iv.micros)


def justify_hours(iv: Interval) -> Interval:
    """PostgreSQL 15's ``justify_hours``: whole days out of the time."""
    whole = _cdiv(iv.micros, USECS_PER_DAY)
    days = _add32(iv.days, whole)
    days, micros = _same_sign(days, iv.micros - whole * USECS_PER_DAY, USECS_PER_DAY)
    return Interval(iv.months, days, micros)


def justify_interval(iv: Interval) -> Interval:
    """PostgreSQL 15's ``justify_interval``: days out of the time, months out of the days (the
    days first when they and the time share a sign, which keeps the days in range), then
    every part of the sign of the whole."""
    months, days, micros = iv
    if (days > 0 and micros > 0) or (days < 0 and micros < 0):
        whole = _cdiv(days, DAYS_PER_MONTH)
        days -= whole * DAYS_PER_MONTH
        months = _add32(months, whole)
    whole = _cdiv(micros, USECS_PER_DAY)
    micros -= whole * USECS_PER_DAY
    days += whole
    whole = _cdiv(days, DAYS_PER_MONTH)
    days -= whole * DAYS_PER_MONTH
    months = _add32(months, whole)
    if months > 0 and (days < 0 or (days == 0 and micros < 0)):
        months, days = months - 1, days + DAYS_PER_MONTH
    elif months < 0 and (days > 0 or (days == 0 and micros > 0)):
        months, days = months + 1, days - DAYS_PER_MONTH
    days, micros = _same_sign(days, micros, USECS_PER_DAY)
    return Interval(months, days, micros)


INTERVAL_FUNCTIONS: Final[dict[VariadicFunc, Callable[[Sequence[Any], str], Datum]]] = {
    V.INTERVAL_MONTHS: lambda a, w: a[0].months,
    V.INTERVAL_DAYS: lambda a, w: a[0].days,
    V.INTERVAL_MICROS: lambda a, w: a[0].micros,
    V.INTERVAL_KEY: lambda a, w: Decimal(a[0].span()),
    V.INTERVAL_CANON: lambda a, w: canonical(a[0]),
    V.INTERVAL_OF_KEY: lambda a, w: from_span(int(a[0])),
    V.INTERVAL_MUL: lambda a, w: scale(a[0], float(a[1]), False),
    V.INTERVAL_DIV: lambda a, w: scale(a[0], float(a[1]), True),
    V.INTERVAL_EPOCH: lambda a, w: epoch(a[0]),
    V.INTERVAL_TEXT: lambda a, w: a[0].text(),
    V.TIMESTAMP_ADD_US: lambda a, w: add_micros(a[0], a[1]),
    V.JUSTIFY_DAYS: lambda a, w: justify_days(a[0]),
    V.JUSTIFY_HOURS: lambda a, w: justify_hours(a[0]),
    V.JUSTIFY_INTERVAL: lambda a, w: justify_interval(a[0]),
    V.INTERVAL_OF_TEXT: lambda a, w: read_text(a[0]),
}
"""Per function: its value on non-NULL arguments (``w`` names the expression)."""
