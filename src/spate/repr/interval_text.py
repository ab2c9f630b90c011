"""PostgreSQL's input syntax for ``interval`` (``IntervalStyle = postgres``): the text a cast,
an ``INSERT`` of a quoted constant or a client's parameter gives.

Accepted: ``[@] quantity unit [quantity unit …] [ago]`` (``ago`` may stand anywhere) with
the units PostgreSQL knows (``microsecond`` … ``millennium``, singular, plural and
abbreviated), a bare number (seconds), a time ``[+-]h:m[:s[.f]]`` (a number before it is
days), and PostgreSQL's own output
(``1 year 2 mons -3 days +04:05:06.5``). Fractions spill as PostgreSQL's ``DecodeInterval``
spills them: a fraction of a year into whole months (rounded), of a month into days of 30 and
then time, of a week or a day into time. ISO 8601 (``P1Y2M``) is not read.

A text that is none of these is ``22007`` (``invalid input syntax for type interval``); a field
beyond its range (years, months or days beyond int32, the time beyond int64 microseconds) is
``22015`` (``interval field value out of range``), and months beyond int32 once the years are
counted in are ``22008`` (``interval out of range``), as in PostgreSQL.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Final

from spate.errors import EvalError
from spate.repr.interval import USECS_PER_DAY, Interval, fits

_TOKEN: Final = re.compile(
    r"\s*(?:(?P<time>[+-]?\d+:\d+(?::\d+(?:\.\d*)?)?)"
    r"|(?P<num>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"|(?P<word>[A-Za-z]+)|(?P<at>@))"
)

UNIT_NAMES: Final[dict[str, tuple[str, ...]]] = {
    unit: tuple(names.split())
    for unit, names in {
        "us": "microsecond microseconds microsecon usec usecs us",
        "ms": "millisecond milliseconds millisecon msec msecs ms",
        "s": "second seconds sec secs s",
        "min": "minute minutes min mins m",
        "h": "hour hours hr hrs h",
        "d": "day days d",
        "w": "week weeks w",
        "mon": "month months mon mons",
        "y": "year years yr yrs y",
        "dec": "decade decades dec decs",
        "c": "century centuries cent c",
        "mil": "millennium millennia mil mils",
    }.items()
}
"""Per unit, the names PostgreSQL reads for it in an interval's text."""
_UNITS: Final = {name: unit for unit, names in UNIT_NAMES.items() for name in names}

_YEARS: Final = {"y": 1, "dec": 10, "c": 100, "mil": 1000}
_SECONDS: Final = {"h": 3600, "min": 60}


def parse_interval(text: str) -> Interval:
    """``text`` as PostgreSQL reads an interval (see the module docstring); :class:`EvalError`
    with PostgreSQL's SQLSTATE where it does not read."""
    bad = EvalError(f'invalid input syntax for type interval: "{text}"', sqlstate="22007")
    years = months = days = 0  # whole years apart, as PostgreSQL keeps them
    micros = 0  # exact: a float loses the last digits of a large count
    pending: str | None = None  # a number waiting for its unit
    seen = False
    ago = False
    used: set[str] = set()  # each unit once, as in PostgreSQL
    pos = 0
    body = text.rstrip()
    while pos < len(body):
        m = _TOKEN.match(body, pos)
        if m is None or m.end() == pos:
            raise bad
        pos = m.end()
        word = (m.group("word") or "").lower()
        if m.group("at") is not None:
            if seen or pending is not None:
                raise bad
            continue
        if m.group("num") is not None:
            if pending is not None:
                raise bad
            pending = m.group("num")
            continue
        if m.group("time") is not None:
            if pending is not None:  # "1 02:03:04": the number is days
                if "d" in used:
                    raise bad
                used.add("d")
                days += _whole(pending, bad)
                pending = None
            if used & {"h", "min", "s"}:
                raise bad
            used.update(("h", "min", "s"))
            micros += _clock(m.group("time"), text, bad)
            seen = True
            continue
        if word == "ago":  # anywhere, any number of times: the whole interval is negated
            if pending is not None:
                raise bad
            ago = True
            continue
        unit = _UNITS.get(word)
        if unit is None or pending is None or unit in used:
            raise bad
        used.add(unit)
        value = Decimal(pending)
        whole = int(value)
        frac = float(value - whole)  # PostgreSQL reads the fraction as a double
        pending = None
        seen = True
        if unit in _YEARS:
            years += whole * _YEARS[unit]
            months += round(frac * 12 * _YEARS[unit])
        elif unit == "mon":
            months += whole
            extra, micros = _spill(frac * 30, micros)
            days += extra
        elif unit == "w":
            days += whole * 7
            extra, micros = _spill(frac * 7, micros)
            days += extra
        elif unit == "d":
            days += whole
            micros += round(frac * USECS_PER_DAY)
        elif unit in _SECONDS:
            micros += whole * _SECONDS[unit] * 1_000_000 + round(frac * _SECONDS[unit] * 1e6)
        elif unit == "s":
            micros += whole * 1_000_000 + round(frac * 1e6)
        elif unit == "ms":
            micros += whole * 1000 + round(frac * 1000)
        else:
            micros += whole + round(frac)
    if pending is not None:  # a bare number: seconds
        value = Decimal(pending)
        micros += int(value) * 1_000_000 + round(float(value - int(value)) * 1e6)
        seen = True
    if not seen:
        raise bad
    total = int(micros)
    if ago:
        years, months, days, total = -years, -months, -days, -total
    if not fits(years, days, total) or not fits(months, 0, 0):
        raise EvalError(f'interval field value out of range: "{text}"', sqlstate="22015")
    if not fits(years * 12 + months, 0, 0):  # the years' months beyond int32
        raise EvalError("interval out of range", sqlstate="22008")
    return Interval(years * 12 + months, days, total)


def _whole(number: str, bad: EvalError) -> int:
    if "." in number:
        raise bad
    return int(number)


def _spill(days: float, micros: int) -> tuple[int, int]:
    """PostgreSQL's ``AdjustFractDays``: whole days, the rest into the time."""
    whole = int(days)
    return whole, micros + round((days - whole) * USECS_PER_DAY)


def _clock(text: str, whole_text: str, bad: EvalError) -> int:
    """``[+-]h:m[:s[.f]]`` in microseconds, the sign applying to every field. As PostgreSQL's
    ``DecodeTime``: minutes above 59 or seconds above 60 are out of range (22015), or, after a
    sign, not read at all (22007)."""
    sign = -1 if text.startswith("-") else 1
    parts = text.lstrip("+-").split(":")
    h, m = int(parts[0]), int(parts[1])
    s = parts[2] if len(parts) > 2 else "0"
    whole, _, frac = s.partition(".")
    if m > 59 or int(whole) > 60:
        if text[0] in "+-":
            raise bad
        raise EvalError(f'interval field value out of range: "{whole_text}"', sqlstate="22015")
    us = round(float("0." + frac) * 1e6) if frac else 0
    return sign * (((h * 60 + m) * 60 + int(whole)) * 1_000_000 + us)
