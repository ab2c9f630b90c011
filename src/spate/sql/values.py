"""Literals: typing SQL constants and converting quoted text to a type, as PostgreSQL does.

An integer literal is ``integer`` if it fits 32 bits, else ``bigint``, else ``numeric``; ``1.5``
and ``1e3`` are ``numeric``; a quoted string is ``unknown`` until its context decides, and is
then converted here, at planning (``'abc'::int`` fails with 22P02 like in PostgreSQL).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from decimal import ROUND_HALF_UP, Context, Decimal, InvalidOperation
from typing import Final

from spate.errors import EvalError
from spate.plan.expr import NAN, Literal, literal_type
from spate.plan.funcs import INT_RANGES
from spate.repr.interval import Interval
from spate.repr.interval_text import parse_interval
from spate.repr.types import FLOAT64, INT64_MAX, INT64_MIN, Datum, ScalarKind, ScalarType, numeric
from spate.sql.errors import (
    DatetimeFieldOverflow,
    InvalidDatetimeFormat,
    InvalidTextRepresentation,
    NumericOutOfRange,
    SqlError,
)
from spate.sql.types import (
    DEFAULT_NUMERIC,
    FLOAT8,
    INT4,
    INT8,
    PgType,
    display_name,
    pg_numeric,
)

_WIDE = Context(prec=120, rounding=ROUND_HALF_UP)
"""Rounding to a scale keeps every digit of a numeric(38) (the default context keeps 28)."""
_TRUE = frozenset({"t", "true", "y", "yes", "on", "1"})
_FALSE = frozenset({"f", "false", "n", "no", "off", "0"})
_NUMBER = r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE]([+-]?[0-9]+))?"
"""A number's syntax in PostgreSQL's input of numeric and double precision (ASCII digits)."""


INT_LIMITS: Final = {name: bound for bound, name in INT_RANGES.values()}
"""The integer types narrower than the IR's int64, by display name (``integer``,
``smallint``): their values lie in ``[-bound, bound)``."""


def number_literal(text: str) -> tuple[Literal, PgType]:
    """The literal a number token denotes, with its PostgreSQL type; ``text`` may start with
    ``-`` (the minus signs PostgreSQL folds into the constant they stand in front of). An
    integer is an integer if it fits, else a bigint if it fits, else a numeric."""
    if re.fullmatch(r"-?\d+", text):
        v = int(text)
        if -INT_LIMITS["integer"] <= v < INT_LIMITS["integer"]:
            return Literal(v, INT4.scalar), INT4  # type: ignore[arg-type]
        if INT64_MIN <= v <= INT64_MAX:
            return Literal(v, INT8.scalar), INT8  # type: ignore[arg-type]
    d = Decimal(text)
    if not d.is_finite():
        raise NumericOutOfRange(f"numeric literal {text} is out of range")
    if "e" in text.lower():
        d = d.normalize()
        if d.as_tuple().exponent > 0:  # type: ignore[operator]
            d = d.quantize(Decimal(1), context=_WIDE) if abs(d) < Decimal(10) ** 38 else d
    tup = d.as_tuple()
    assert isinstance(tup.exponent, int)
    scale = max(0, -tup.exponent)
    precision = max(len(tup.digits) + max(0, tup.exponent), scale, 1)
    t = literal_type(d) if precision <= 38 else None
    if t is None:
        # beyond numeric(38): a double precision constant
        return Literal(float(d), FLOAT64), FLOAT8
    return Literal(d, t), pg_numeric(t)


DATETIME_SHAPE: Final = (
    r"[0-9]+[-/][0-9]{1,2}[-/][0-9]{1,2}([ T][0-9]{1,2}:[0-9]{1,2}(:[0-9]{1,2}(\.[0-9]*)?)?)?"
)
"""Text shaped as a date, or a date and a time (surrounding space aside): where it does not
convert, a field is out of range (22008), not invalid input (22007), as in PostgreSQL."""


def _bad_datetime(text: str, target: PgType) -> SqlError:
    if re.fullmatch(DATETIME_SHAPE, text.strip()):
        return DatetimeFieldOverflow(f'date/time field value out of range: "{text}"')
    return InvalidDatetimeFormat(f'invalid input syntax for type {display_name(target)}: "{text}"')


def convert_text(text: str, target: PgType) -> Datum:
    """Quoted ``text`` as a value of ``target`` (errors 22P02 / 22003 like PostgreSQL)."""
    scalar = target.scalar
    assert scalar is not None
    k = scalar.kind
    s = text.strip()
    bad = InvalidTextRepresentation(
        f'invalid input syntax for type {display_name(target)}: "{text}"'
    )
    if k is ScalarKind.TEXT:
        return text
    if k is ScalarKind.INTERVAL:
        try:
            return parse_interval(text)
        except EvalError as e:
            raise SqlError(str(e), sqlstate=e.sqlstate) from None
    if k is ScalarKind.INT64:
        if not re.fullmatch(r"[+-]?\d+", s):
            raise bad
        v = int(s)
        limit = INT_LIMITS.get(display_name(target), 2**63)
        if not -limit <= v < limit or not INT64_MIN <= v <= INT64_MAX:
            raise NumericOutOfRange(
                f'value "{text}" is out of range for type {display_name(target)}'
            )
        return v
    if k is ScalarKind.FLOAT64:
        low = s.lower()
        if low in ("nan",):
            return NAN
        if low in ("infinity", "+infinity", "inf"):
            return math.inf
        if low in ("-infinity", "-inf"):
            return -math.inf
        if re.fullmatch(_NUMBER, s) is None:  # Python's float also takes '1_0'
            raise bad
        f = float(s)
        if math.isinf(f):  # a finite number beyond the type's range ('1e400')
            raise NumericOutOfRange(f'"{text}" is out of range for type {display_name(target)}')
        return f
    if k is ScalarKind.NUMERIC:
        # PostgreSQL's syntax (Python's Decimal also takes '1_0'); NaN and Infinity have no
        # numeric value here.
        m = re.fullmatch(_NUMBER, s)
        if m is None:
            raise bad
        if m[4] is not None and abs(int(m[4])) > 1000:  # as PostgreSQL: overflow
            raise NumericOutOfRange(f'value "{text}" overflows numeric format')
        return fit_numeric(Decimal(s), scalar)
    if k is ScalarKind.BOOL:
        low = s.lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise bad
    if k is ScalarKind.DATE:
        try:
            return dt.date.fromisoformat(s)
        except ValueError:
            raise _bad_datetime(text, target) from None
    if k is ScalarKind.TIMESTAMP:
        try:
            stamp = dt.datetime.fromisoformat(s)
        except ValueError:
            raise _bad_datetime(text, target) from None
        if stamp.tzinfo is not None:
            stamp = stamp.astimezone(dt.UTC).replace(tzinfo=None)
        return stamp
    if k is ScalarKind.JSONB:
        try:
            return json.dumps(json.loads(text), separators=(", ", ": "))
        except ValueError:
            raise bad from None
    if k is ScalarKind.BYTES:
        if text.startswith("\\x"):
            try:
                return bytes.fromhex(text[2:])
            except ValueError:
                raise bad from None
        return text.encode()
    raise bad


def fit_numeric(d: Decimal, scalar: ScalarType) -> Decimal:
    """``d`` rounded (half away from zero) to ``scalar``'s scale; 22003 if it does not fit."""
    assert scalar.scale is not None and scalar.precision is not None
    try:
        q = d.quantize(Decimal(1).scaleb(-scalar.scale), context=_WIDE)
    except InvalidOperation:  # more digits than the context holds ('1e400')
        q = None
    if q is None or scalar.problem(q) is not None:
        raise NumericOutOfRange(
            f"numeric field overflow: {d} does not fit numeric({scalar.precision},{scalar.scale})"
        )
    return q


def numeric_for(value: Decimal) -> ScalarType:
    t = literal_type(value)
    return t if t.kind is ScalarKind.NUMERIC else DEFAULT_NUMERIC


def zero_of(t: ScalarType) -> Datum:
    """Some value of type ``t`` (stands in for NULL in null-safe join keys)."""
    k = t.kind
    if k is ScalarKind.NUMERIC:
        return Decimal(0)
    zeros: dict[ScalarKind, Datum] = {
        ScalarKind.BOOL: False,
        ScalarKind.INT64: 0,
        ScalarKind.FLOAT64: 0.0,
        ScalarKind.TEXT: "",
        ScalarKind.BYTES: b"",
        ScalarKind.DATE: dt.date(1970, 1, 1),
        ScalarKind.TIMESTAMP: dt.datetime(1970, 1, 1),
        ScalarKind.JSONB: "null",
        ScalarKind.INTERVAL: Interval(0, 0, 0),
    }
    return zeros[k]


__all__ = ["convert_text", "fit_numeric", "number_literal", "numeric", "numeric_for", "zero_of"]
