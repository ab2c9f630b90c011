"""PostgreSQL's ``interval`` as a value: months, days and microseconds, kept apart.

PostgreSQL stores an interval as three fields and never converts between them on its own:
``interval '1 mon'``, ``'30 days'`` and ``'720:00:00'`` are three different values (printed
differently, and ``ts + interval`` adds each field by its own calendar rule), though they
compare equal: comparisons, ``DISTINCT`` and grouping use the span with a month of 30 days and
a day of 24 hours (``interval_cmp_value``). :class:`Interval` is that triple, the datum the
interval type carries (Arrow's ``month_day_nano_interval`` at the user-facing boundary, the
text ``months,days,micros`` inside: see :func:`encode`); :meth:`Interval.text`
prints it as PostgreSQL does with its default ``IntervalStyle`` (``postgres``).
"""

from __future__ import annotations

from typing import Final, NamedTuple

USECS_PER_DAY: Final = 86_400_000_000
DAYS_PER_MONTH: Final = 30
"""The month of an interval's span (PostgreSQL's ``DAYS_PER_MONTH``)."""


class Interval(NamedTuple):
    """``months`` (years are 12 of them), ``days`` and ``micros`` (the time), each with its own
    sign, as in PostgreSQL."""

    months: int
    days: int
    micros: int

    def span(self) -> int:
        """The value intervals are compared, grouped and ordered by: microseconds with a month
        of 30 days and a day of 24 hours (so ``'1 mon' = '30 days' = '720:00:00'``)."""
        return (self.months * DAYS_PER_MONTH + self.days) * USECS_PER_DAY + self.micros

    # Equal and hashed as the triple it is, so that a multiset of rows (a table's contents, a
    # write's diffs, a read's answer) keeps '1 day' and '24:00:00' apart as PostgreSQL's rows
    # do: merged, a retraction of one would retract the other's representation. SQL's
    # comparisons, grouping and DISTINCT compare spans through the plan (``interval_key``,
    # ``interval_canon``: :mod:`spate.sql.interval_ops`), never through ``==``. Ordered by the
    # span first (as PostgreSQL sorts), then by the fields, a total order consistent with ``==``.
    def _order(self) -> tuple[int, int, int, int]:
        return (self.span(), self.months, self.days, self.micros)

    def __lt__(self, other: tuple[int, ...]) -> bool:
        if not isinstance(other, Interval):
            return NotImplemented
        return self._order() < other._order()

    def __le__(self, other: tuple[int, ...]) -> bool:
        if not isinstance(other, Interval):
            return NotImplemented
        return self._order() <= other._order()

    def __gt__(self, other: tuple[int, ...]) -> bool:
        if not isinstance(other, Interval):
            return NotImplemented
        return self._order() > other._order()

    def __ge__(self, other: tuple[int, ...]) -> bool:
        if not isinstance(other, Interval):
            return NotImplemented
        return self._order() >= other._order()

    def text(self) -> str:
        """PostgreSQL's output (``IntervalStyle = postgres``): ``1 year 2 mons``,
        ``-1 days +02:03:00``, ``-00:00:01``, ``3 days 04:05:06.789``, ``00:00:00``."""
        years, months = _div(self.months, 12)
        parts: list[str] = []
        before = False  # the previous part was negative: a positive one gets a "+"
        for value, unit in ((years, "year"), (months, "mon"), (self.days, "day")):
            if value == 0:
                continue
            sign = "+" if before and value > 0 else ""
            parts.append(f"{sign}{value} {unit}{'' if value == 1 else 's'}")
            before = value < 0
        if not parts or self.micros != 0:
            seconds, fraction = _div(abs(self.micros), 1_000_000)
            minutes, seconds = divmod(seconds, 60)
            hours, minutes = divmod(minutes, 60)
            sign = "-" if self.micros < 0 else ("+" if before else "")
            clock = f"{sign}{hours:02d}:{minutes:02d}:{seconds:02d}"
            if fraction:
                clock += "." + f"{fraction:06d}".rstrip("0")
            parts.append(clock)
        return " ".join(parts)

    def __str__(self) -> str:
        return self.text()


def _div(a: int, b: int) -> tuple[int, int]:
    """C's division: the quotient truncated toward zero, the remainder with ``a``'s sign."""
    q = abs(a) // b
    q = q if a >= 0 else -q
    return q, a - q * b


INT32_MIN: Final = -(2**31)
INT32_MAX: Final = 2**31 - 1
INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1


def fits(months: int, days: int, micros: int) -> bool:
    """Whether the fields fit PostgreSQL's interval (months and days int32, micros int64)."""
    return (
        INT32_MIN <= months <= INT32_MAX
        and INT32_MIN <= days <= INT32_MAX
        and INT64_MIN <= micros <= INT64_MAX
    )


def canonical(iv: Interval) -> Interval:
    """The representative of ``iv``'s span that grouping, ``DISTINCT``, set operations,
    ``min``/``max`` and join keys give: PostgreSQL's ``justify_interval`` with every field of the
    span's sign, ``|days| < 30`` and ``|micros| < 24 h`` (``'30 days'`` and ``'720:00:00'`` are
    ``'1 mon'``, ``'36:00:00'`` is ``'1 day 12:00:00'``)."""
    return from_span(iv.span())


def from_span(span: int) -> Interval:
    """The canonical interval (:func:`canonical`) of ``span`` microseconds."""
    sign = -1 if span < 0 else 1
    days, micros = divmod(abs(span), USECS_PER_DAY)
    months, days = divmod(days, DAYS_PER_MONTH)
    return Interval(sign * months, sign * days, sign * micros)


def encode(iv: Interval) -> str:
    """An interval as it is stored in Arrow, Parquet and Spark: ``months,days,micros``."""
    return f"{iv.months},{iv.days},{iv.micros}"


def decode(text: str) -> Interval:
    """The inverse of :func:`encode`."""
    m, d, u = text.split(",")
    return Interval(int(m), int(d), int(u))
