"""Scalar types and the Python values (datums) that inhabit them.

==============  =====================  ==================================================
type            Python value           notes
==============  =====================  ==================================================
``bool``        ``bool``
``int64``       ``int``                ``[-2**63, 2**63)``; ``bool`` is not an int here
``float64``     ``float`` (or ``int``)  NaN and infinities allowed
``numeric(p,s)`` ``Decimal`` (or ``int``) at most ``p`` digits, ``s`` of them fractional;
                                       ``1 <= p <= 38``, ``0 <= s <= p``
``text``        ``str``
``bytes``       ``bytes``
``date``        ``datetime.date``      not a ``datetime``
``timestamp``   ``datetime.datetime``  naive, microseconds (wall clock, no time zone)
``jsonb``       ``str``                must parse as JSON; stored as text
``interval``    :class:`Interval`      months, days, microseconds (stored as the text
                                       ``months,days,micros``: :mod:`spate.repr.arrow`)
==============  =====================  ==================================================

``None`` is SQL NULL and is allowed only in nullable columns (see :mod:`spate.repr.desc`).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from typing import Final

from spate.errors import InvalidScalarType as InvalidScalarType
from spate.repr.interval import Interval, fits
from spate.wire import wire

Datum = None | bool | int | float | Decimal | str | bytes | dt.date | dt.datetime | Interval
"""A scalar value as Python sees it (``None`` is NULL)."""

Row = tuple[Datum, ...]

INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1
NUMERIC_MAX_PRECISION: Final = 38


class ScalarKind(StrEnum):
    BOOL = "bool"
    INT64 = "int64"
    FLOAT64 = "float64"
    NUMERIC = "numeric"
    TEXT = "text"
    BYTES = "bytes"
    DATE = "date"
    TIMESTAMP = "timestamp"
    JSONB = "jsonb"
    INTERVAL = "interval"


@wire("repr.scalar_type")
@dataclass(frozen=True, slots=True)
class ScalarType:
    """A column type. Use the constants (``INT64``…) and :func:`numeric`."""

    kind: ScalarKind
    precision: int | None = None
    scale: int | None = None

    def __post_init__(self) -> None:
        if self.kind is ScalarKind.NUMERIC:
            p, s = self.precision, self.scale
            if not isinstance(p, int) or not 1 <= p <= NUMERIC_MAX_PRECISION:
                raise InvalidScalarType(
                    f"numeric precision must be in 1..{NUMERIC_MAX_PRECISION}, got {p!r}"
                )
            if not isinstance(s, int) or not 0 <= s <= p:
                raise InvalidScalarType(f"numeric scale must be in 0..{p}, got {s!r}")
        elif self.precision is not None or self.scale is not None:
            raise InvalidScalarType(f"{self.kind} takes no precision or scale")

    @staticmethod
    def parse(text: str) -> ScalarType:
        """Parse the printed form: ``int64``, ``numeric(10,2)``…"""
        m = re.fullmatch(r"\s*numeric\s*\(\s*(\d+)\s*,\s*(\d+)\s*\)\s*", text)
        if m:
            return numeric(int(m.group(1)), int(m.group(2)))
        try:
            kind = ScalarKind(text.strip())
        except ValueError:
            names = ", ".join(k.value for k in ScalarKind if k is not ScalarKind.NUMERIC)
            raise InvalidScalarType(
                f"unknown scalar type {text!r}; known: {names}, numeric(p,s)"
            ) from None
        if kind is ScalarKind.NUMERIC:
            raise InvalidScalarType("numeric needs precision and scale: numeric(p,s)")
        return ScalarType(kind)

    def __str__(self) -> str:
        if self.kind is ScalarKind.NUMERIC:
            return f"numeric({self.precision},{self.scale})"
        return self.kind.value

    def problem(self, value: Datum) -> str | None:
        """``None`` if ``value`` (not NULL) fits this type, else a description of what it is."""
        k = self.kind
        if k is ScalarKind.BOOL:
            return None if isinstance(value, bool) else _describe(value)
        if k is ScalarKind.INT64:
            if isinstance(value, bool) or not isinstance(value, int):
                return _describe(value)
            if not INT64_MIN <= value <= INT64_MAX:
                return f"{_describe(value)} (out of range for int64)"
            return None
        if k is ScalarKind.FLOAT64:
            if isinstance(value, bool) or not isinstance(value, (float, int)):
                return _describe(value)
            return None
        if k is ScalarKind.NUMERIC:
            return self._numeric_problem(value)
        if k is ScalarKind.TEXT:
            if not isinstance(value, str):
                return _describe(value)
            if "\x00" in value:
                return f"{_describe(value)} (contains a NUL character, which text cannot hold)"
            return _unencodable(value)
        if k is ScalarKind.BYTES:
            return None if isinstance(value, bytes) else _describe(value)
        if k is ScalarKind.DATE:
            if isinstance(value, dt.datetime) or not isinstance(value, dt.date):
                return _describe(value)
            return None
        if k is ScalarKind.TIMESTAMP:
            if not isinstance(value, dt.datetime):
                return _describe(value)
            if value.tzinfo is not None:
                return f"{_describe(value)} (has a time zone; timestamp is naive)"
            return None
        if k is ScalarKind.JSONB:
            if not isinstance(value, str):
                return _describe(value)
            if "\x00" in value or "\\u0000" in value:
                return f"{_describe(value)} (contains a NUL character, which jsonb cannot hold)"
            try:
                json.loads(value, parse_constant=_no_constant)
            except ValueError:
                return f"{_describe(value)} (not valid JSON)"
            except RecursionError:
                return f"{_describe(value)} (not valid JSON: nested too deeply)"
            return _unencodable(value)
        if k is ScalarKind.INTERVAL:
            if not isinstance(value, Interval):
                return _describe(value)
            if not all(isinstance(f, int) and not isinstance(f, bool) for f in value):
                return f"{_describe(value)} (its fields must be integers)"
            if not fits(*value):
                return (
                    f"{_describe(value)} (out of range for interval: months and days are 32-bit, "
                    "microseconds 64-bit)"
                )
            return None
        raise AssertionError(f"unhandled scalar kind {k}")

    def _numeric_problem(self, value: Datum) -> str | None:
        if isinstance(value, bool) or not isinstance(value, (Decimal, int)):
            return _describe(value)
        d = Decimal(value) if isinstance(value, int) else value
        if not d.is_finite():
            return f"{_describe(value)} (not a finite number)"
        assert self.precision is not None and self.scale is not None
        exponent = d.as_tuple().exponent
        assert isinstance(exponent, int)
        frac = max(0, -exponent)
        # Trailing zeros in the fraction do not count against the scale (1.50 fits scale 1).
        if frac > self.scale:
            normalized = d.normalize()
            exp2 = normalized.as_tuple().exponent
            assert isinstance(exp2, int)
            frac = max(0, -exp2)
            if frac > self.scale:
                return (
                    f"{_describe(value)} (out of range: {frac} fractional digits, "
                    f"at most {self.scale})"
                )
        integral = abs(int(d))
        int_digits = len(str(integral)) if integral else 0
        allowed = self.precision - self.scale
        if int_digits > allowed:
            return (
                f"{_describe(value)} (out of range: {int_digits} integer digits, at most {allowed})"
            )
        return None


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON value")


def _unencodable(value: str) -> str | None:
    """A description of why ``value`` cannot be stored as UTF-8 (lone surrogates), or None."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        return f"{_describe(value)} (not valid UTF-8: {e.reason} at position {e.start})"
    return None


def _describe(value: object) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"


BOOL: Final = ScalarType(ScalarKind.BOOL)
INT64: Final = ScalarType(ScalarKind.INT64)
FLOAT64: Final = ScalarType(ScalarKind.FLOAT64)
TEXT: Final = ScalarType(ScalarKind.TEXT)
BYTES: Final = ScalarType(ScalarKind.BYTES)
DATE: Final = ScalarType(ScalarKind.DATE)
TIMESTAMP: Final = ScalarType(ScalarKind.TIMESTAMP)
JSONB: Final = ScalarType(ScalarKind.JSONB)
INTERVAL: Final = ScalarType(ScalarKind.INTERVAL)


def numeric(precision: int, scale: int) -> ScalarType:
    """``numeric(precision, scale)``: exact decimals, stored as Arrow ``decimal128``."""
    return ScalarType(ScalarKind.NUMERIC, precision, scale)
