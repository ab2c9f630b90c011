"""Binding of time: interval constants, mz_now(), EXTRACT and date_trunc."""

from __future__ import annotations

import datetime as dt

from sqlglot import exp

from spate.errors import EvalError
from spate.plan.expr import (
    Cast,
    DateTrunc,
    Literal,
    Now,
    TimeUnit,
)
from spate.repr.interval_text import parse_interval as read_interval
from spate.repr.types import INT64, TIMESTAMP
from spate.sql.binding import BinderBase, Typed
from spate.sql.errors import (
    FeatureNotSupported,
    SqlError,
    UndefinedFunction,
)
from spate.sql.types import (
    PG_INTERVAL,
    PG_TIMESTAMP,
    PG_TIMESTAMPTZ,
    display_name,
)

_DAY_MS = 86_400_000
_UNIT_MS = {
    "microsecond": 0.001,
    "millisecond": 1,
    "second": 1000,
    "minute": 60_000,
    "hour": 3_600_000,
    "day": _DAY_MS,
    "week": 7 * _DAY_MS,
}
_MONTHS = {"month": 1, "year": 12}
_UNIT_ALIASES = {
    "us": "microsecond",
    "microseconds": "microsecond",
    "ms": "millisecond",
    "milliseconds": "millisecond",
    "s": "second",
    "sec": "second",
    "secs": "second",
    "seconds": "second",
    "m": "minute",
    "min": "minute",
    "mins": "minute",
    "minutes": "minute",
    "h": "hour",
    "hr": "hour",
    "hrs": "hour",
    "hours": "hour",
    "d": "day",
    "days": "day",
    "w": "week",
    "weeks": "week",
    "mon": "month",
    "mons": "month",
    "months": "month",
    "y": "year",
    "years": "year",
    "mm": "month",
    "yyyy": "year",
    "yy": "year",
    "dd": "day",
    "dayofweek": "dow",
    "dayofyear": "doy",
}


class TemporalBinding(BinderBase):
    def interval(self, node: exp.Expression) -> Typed:
        unit = node.args.get("unit")
        raw = node.this
        if not isinstance(raw, exp.Literal):
            raise self.err(FeatureNotSupported, "interval values are only constants", node)
        text = str(raw.this)
        if unit is not None:
            text = f"{text} {unit.name}"
        return interval_constant(text, node, self)

    def now(self, node: exp.Expression) -> Typed:
        if not self.allow_now:
            raise self.err(
                FeatureNotSupported,
                "mz_now()/now() may only appear in WHERE or HAVING of a view, as "
                "mz_now() <op> <expression>",
                node,
            )
        return Typed(Now(PG_TIMESTAMP.scalar), PG_TIMESTAMP)  # type: ignore[arg-type]

    def wall_clock(self, node: exp.Expression) -> Typed:
        """``now()``/``current_timestamp``: the statement's start time in a one-off read or
        write; a view cannot read the clock (its result would change with it, not with its
        inputs)."""
        if isinstance(self.today, dt.datetime):
            return Typed(Literal(self.today, TIMESTAMP), PG_TIMESTAMPTZ)
        raise self.err(
            FeatureNotSupported,
            "cannot materialize call to now(): a view kept up to date at every time cannot "
            "read the clock; use mz_now() in a temporal filter",
            node,
        )

    def extract(self, node: exp.Expression) -> Typed:
        from spate.sql.extract import bind_part

        field = node.this.name.strip("'\"")
        return bind_part(self, field, self._bind(node.expression), node, as_float=False)

    def date_trunc(self, node: exp.Expression) -> Typed:
        unit_node = node.args.get("unit")
        unit = _time_unit(unit_node.name if unit_node is not None else "", node, self)
        t = self._bind(node.this)
        if t.type.name == "unknown":
            t = self.coerce(t, PG_TIMESTAMP, node.this)
        if t.type.name == "date":
            t = Typed(Cast(t.expr, PG_TIMESTAMP.scalar), PG_TIMESTAMP)  # type: ignore[arg-type]
        if t.type.name not in ("timestamp", "timestamptz"):
            raise self.err(UndefinedFunction, f"date_trunc of {display_name(t.type)}", node)
        return Typed(DateTrunc(unit, t.expr), t.type)


def _time_unit(name: str, node: exp.Expression, binder: BinderBase) -> TimeUnit:
    n = name.strip("'\"").lower()
    n = _UNIT_ALIASES.get(n, n)
    if n == "epoch":
        raise binder.err(FeatureNotSupported, "extract(epoch …) is not supported", node)
    try:
        return TimeUnit(n)
    except ValueError:
        raise binder.err(FeatureNotSupported, f'unit "{name}" not supported', node) from None


def interval_constant(text: str, node: exp.Expression, binder: BinderBase) -> Typed:
    """An interval constant: milliseconds and months for time arithmetic, and its fields
    (read as PostgreSQL reads them: :mod:`spate.repr.interval_text`)."""
    try:
        value = read_interval(text)
    except EvalError as e:
        error = binder.err(SqlError, str(e), node)
        error.sqlstate = e.sqlstate
        raise error from None
    months = value.months
    ms = value.days * _DAY_MS + round(value.micros / 1000)
    parts = tuple(Literal(v, INT64) for v in value)
    return Typed(
        Literal(None, INT64),
        PG_INTERVAL,
        interval_ms=ms,
        interval_months=months,
        interval_parts=parts,  # type: ignore[arg-type]
    )


def parse_interval(text: str, node: exp.Expression, binder: BinderBase) -> int:
    """Milliseconds of an interval constant (fixed-length units only)."""
    months, ms = parse_interval_parts(text, node, binder)
    if months:
        raise binder.err(
            FeatureNotSupported,
            "intervals of months or years have no fixed length here; use days",
            node,
        )
    return ms


def parse_interval_parts(text: str, node: exp.Expression, binder: BinderBase) -> tuple[int, int]:
    """The months and the milliseconds of an interval constant."""
    import re

    parts = re.findall(r"([+-]?\d+(?:\.\d+)?)\s*([a-zA-Z]*)", text.strip())
    if not parts or re.sub(r"[+-]?\d+(?:\.\d+)?\s*[a-zA-Z]*|\s", "", text):
        hms = re.fullmatch(r"\s*(\d+):(\d+)(?::(\d+(?:\.\d+)?))?\s*", text)
        if hms:
            h, m, s = hms.group(1), hms.group(2), hms.group(3) or "0"
            return 0, int(h) * 3_600_000 + int(m) * 60_000 + int(float(s) * 1000)
        raise binder.err(SqlError, f'invalid input syntax for type interval: "{text}"', node)
    total = 0.0
    months = 0
    for number, unit in parts:
        u = _UNIT_ALIASES.get(unit.lower(), unit.lower()) if unit else "second"
        if u.endswith("s") and u[:-1] in _UNIT_MS | _MONTHS:
            u = u[:-1]
        if u in _MONTHS:
            count = float(number) * _MONTHS[u]
            if not count.is_integer():
                raise binder.err(
                    FeatureNotSupported, "fractional months in an interval are not supported", node
                )
            months += int(count)
            continue
        if u not in _UNIT_MS:
            raise binder.err(SqlError, f'invalid input syntax for type interval: "{text}"', node)
        total += float(number) * _UNIT_MS[u]
    return months, round(total)
