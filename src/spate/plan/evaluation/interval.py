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
    Interval,
    canonical,
    from_span,
)
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
}
"""Per function: its value on non-NULL arguments (``w`` names the expression)."""
