"""The interval texts a cast of a text *column* reads (``t::interval``, at run time): one
regular expression that the reference evaluator and Spark both apply, and its value as
PostgreSQL 15's ``interval_in`` computes it.

A text in this form (case and surrounding white space aside):

* ``[@]`` then integer counts (at most 9 digits, each with its own sign) of the units in
  this order, each at most once: millennia, centuries, decades, years, months, weeks, days;
  then either counts of hours, minutes, seconds, milliseconds, microseconds, or a time
  ``[+-]h:mm[:ss[.ffffff]]`` (minutes and seconds below 60, at most 6 decimals); then
  ``[ago]``. PostgreSQL's own output (``1 year 2 mons -3 days +04:05:06.5``) is of this form.

Its value is exact, and its range errors PostgreSQL's: years (with decades, centuries,
millennia), months and days add up in int32 (``22015``), the months of the years beyond int32
are ``22008``. A text without a digit is ``22007`` as in PostgreSQL; any other text outside
the form is ``0A000`` at run time whether or not PostgreSQL would read it (a quoted constant
is read by :mod:`spate.repr.interval_text`, which reads more).
"""

from __future__ import annotations

import re
from typing import Final

from spate.errors import EvalError
from spate.repr.interval import INT32_MAX, INT32_MIN, Interval
from spate.repr.interval_text import UNIT_NAMES

_WS: Final = r"[ \t\n\r\f\x0b]"
_NUM: Final = r"([+-]?[0-9]{1,9})"


def _item(words: str) -> str:
    return rf"(?:{_NUM}{_WS}*(?:{words})(?:{_WS}+|$))?"


def _words(unit: str) -> str:
    """The names of ``unit`` (:data:`~spate.repr.interval_text.UNIT_NAMES`) as an alternation,
    longest first."""
    return "|".join(sorted(UNIT_NAMES[unit], key=len, reverse=True))


YEAR_UNITS: Final = ((1000, _words("mil")), (100, _words("c")))
_DECADES: Final = _words("dec")
_YEARS: Final = _words("y")
_MONTHS: Final = _words("mon")
_WEEKS: Final = _words("w")
_DAYS: Final = _words("d")
MICRO_UNITS: Final = (
    (3_600_000_000, _words("h")),
    (60_000_000, _words("min")),
    (1_000_000, _words("s")),
    (1000, _words("ms")),
    (1, _words("us")),
)
_TIME: Final = r"([+-]?)([0-9]{1,9}):([0-5][0-9])(?::([0-5][0-9])(?:\.([0-9]{1,6}))?)?"

PATTERN: Final = (
    rf"^{_WS}*(?:@{_WS}*)?"
    + "".join(_item(w) for _, w in YEAR_UNITS)
    + _item(_DECADES)
    + _item(_YEARS)
    + _item(_MONTHS)
    + _item(_WEEKS)
    + _item(_DAYS)
    + rf"(?:{_TIME}(?:{_WS}+|$)|"
    + "".join(_item(w) for _, w in MICRO_UNITS)
    + rf")((?:ago)?){_WS}*$"
)
"""Case-insensitive (ASCII). Groups: 1 millennia, 2 centuries, 3 decades, 4 years, 5 months,
6 weeks, 7 days, 8-12 the time (sign, hours, minutes, seconds, fraction), 13-17 hours …
microseconds, 18 ``ago`` (or empty)."""

_COMPILED: Final = re.compile(PATTERN, re.IGNORECASE | re.ASCII)
GROUPS: Final = 18
_DIGIT: Final = re.compile("[0-9]")


def unsupported(text: str) -> EvalError:
    return EvalError(
        f'interval text "{text}" is not in a form read at run time ([@] counts of units from '
        "millennia down to microseconds, or a time h:mm[:ss[.f]], [ago])",
        sqlstate="0A000",
    )


def _field_overflow(text: str) -> EvalError:
    return EvalError(f'interval field value out of range: "{text}"', sqlstate="22015")


def read(text: str) -> Interval:
    """``text`` (in the form of the module docstring) as PostgreSQL reads it."""
    m = _COMPILED.match(text)
    if m is None or not any(m.group(k) for k in range(1, GROUPS)):
        if _DIGIT.search(text) is None:  # PostgreSQL reads no interval without a number
            raise EvalError(f'invalid input syntax for type interval: "{text}"', sqlstate="22007")
        raise unsupported(text)
    g = [m.group(k) or "" for k in range(GROUPS + 1)]

    def n(k: int) -> int:
        return int(g[k]) if g[k] else 0

    def int32(x: int) -> bool:
        return INT32_MIN <= x <= INT32_MAX

    # PostgreSQL adds the fields right to left, checking each step in int32
    years = n(4)
    for k, scale in ((3, 10), (2, 100), (1, 1000)):
        if not int32(n(k) * scale) or not int32(years + n(k) * scale):
            raise _field_overflow(text)
        years += n(k) * scale
    months = n(5)
    if not int32(n(6) * 7) or not int32(n(7) + n(6) * 7):
        raise _field_overflow(text)
    days = n(7) + n(6) * 7
    if g[9]:
        frac = int(g[12].ljust(6, "0")) if g[12] else 0
        time = ((n(9) * 60 + n(10)) * 60 + n(11)) * 1_000_000 + frac
        micros = -time if g[8] == "-" else time
    else:
        micros = sum(n(13 + i) * scale for i, (scale, _) in enumerate(MICRO_UNITS))
    if g[18]:
        if INT32_MIN in (years, days):
            raise _field_overflow(text)
        years, months, days, micros = -years, -months, -days, -micros
    total = years * 12 + months
    if not int32(total):
        raise EvalError("interval out of range", sqlstate="22008")
    return Interval(total, days, micros)
