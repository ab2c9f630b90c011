"""``CAST`` in the plain-Python evaluation: conversions between scalar types; failures give NULL."""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from decimal import Decimal, InvalidOperation
from typing import Any

from spate.plan.errors import EvalError
from spate.plan.evaluation.values import _Fn1, canonical, fit_numeric, format_timestamp
from spate.plan.numformat import to_single
from spate.repr.types import INT64_MAX, INT64_MIN, Datum, ScalarKind, ScalarType

K = ScalarKind


# --- casts -----------------------------------------------------------------------------------

_INT_RE = re.compile(r"[+-]?\d+")
_NUMERIC_RE = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE]([+-]?[0-9]+))?")
_NUMERIC_EXP_MAX = 1000  # PostgreSQL's numeric input: a larger exponent overflows (22003)
_FLOAT_RE = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?|[+-]?(inf|infinity|nan)", re.I)
_DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}")
_TS_RE = re.compile(r"\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}:\d{2}(\.\d{1,6})?)?")
_TRUE = frozenset({"t", "true", "y", "yes", "on", "1"})
_FALSE = frozenset({"f", "false", "n", "no", "off", "0"})


def cast_function(source: ScalarType, to: ScalarType) -> _Fn1:
    """``CAST(source AS to)`` on a non-NULL value; failures give NULL (see ``expr`` docs)."""
    a, b = source.kind, to.kind
    if a is b and a is not K.NUMERIC:
        return lambda v: v
    if b is K.TEXT:
        return _to_text(source)
    if a is K.TEXT:
        return _from_text(to)
    if b is K.NUMERIC:
        return lambda v: _to_numeric(v, to)
    if b is K.FLOAT64:
        return lambda v: canonical(float(v), to)
    if b is K.INT64:
        if a is K.BOOL:
            return lambda v: int(bool(v))
        return _to_int
    if b is K.BOOL:
        return lambda v: v != 0
    if b is K.TIMESTAMP:
        return lambda v: dt.datetime(v.year, v.month, v.day)
    if b is K.DATE:
        return lambda v: v.date()
    raise EvalError(f"no cast from {source} to {to}")


def _to_int(v: Datum) -> int | None:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    n = int(v)  # type: ignore[arg-type]  # truncates toward zero
    return n if INT64_MIN <= n <= INT64_MAX else None


def _to_numeric(v: Any, to: ScalarType) -> Decimal | None:
    if isinstance(v, float):
        if not math.isfinite(v):
            return None
        d = Decimal(repr(v))
    else:
        d = Decimal(v)
    try:
        return fit_numeric(d, to, "cast")
    except (EvalError, InvalidOperation):  # InvalidOperation: more digits than rounding keeps
        return None


def _to_text(source: ScalarType) -> _Fn1:
    k = source.kind
    if k is K.BOOL:
        return lambda v: "true" if v else "false"
    if k is K.NUMERIC:
        scale = source.scale or 0
        return lambda v: format(v, f".{scale}f")
    if k is K.FLOAT64:
        return float_text
    if k is K.DATE:
        return lambda v: v.isoformat()
    if k is K.TIMESTAMP:
        return lambda v: format_timestamp(v)
    return lambda v: v if isinstance(v, str) else str(v)


def float_text(v: Datum, *, single: bool = False) -> str:
    """A float as PostgreSQL prints it: the shortest digits that read back exactly, in fixed
    notation for decimal exponents -4 … 14, else as ``d.ddde+XX``. ``single``: a ``real``
    (float4) value, printed as PostgreSQL prints float4: the shortest digits that read back as
    the same single-precision value, fixed notation for exponents -4 … 5."""
    assert isinstance(v, float)
    if single:
        v = to_single(v)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    if v == 0:
        return "-0" if math.copysign(1.0, v) < 0 else "0"
    sign, digits, exponent = Decimal(_shortest_single(v) if single else repr(v)).as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits)).rstrip("0")
    exponent += len(digits) - len(text)
    e10 = exponent + len(text) - 1
    minus = "-" if sign else ""
    if -4 <= e10 < (6 if single else 15):
        if e10 >= 0:
            whole = text[: e10 + 1].ljust(e10 + 1, "0")
            frac = text[e10 + 1 :]
            return minus + whole + ("." + frac if frac else "")
        return minus + "0." + "0" * (-e10 - 1) + text
    mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
    return f"{minus}{mantissa}e{'+' if e10 >= 0 else '-'}{abs(e10):02d}"


def _shortest_single(v: float) -> str:
    """The fewest significant digits that read back as ``v``'s single-precision value."""
    target = to_single(v)
    for n in range(1, 10):
        text = f"{target:.{n - 1}e}"
        if to_single(float(text)) == target:
            return text
    return repr(target)


def _from_text(to: ScalarType) -> _Fn1:
    k = to.kind

    def parse(v: Datum) -> Datum:
        assert isinstance(v, str)
        s = v.strip()
        if k is K.INT64:
            return _to_int(int(s)) if _INT_RE.fullmatch(s) else None
        if k is K.FLOAT64:
            if not _FLOAT_RE.fullmatch(s):
                return None
            f = float(s)
            if math.isinf(f) and not s.lstrip("+-").lower().startswith("inf"):
                return None  # a finite number beyond the type's range ('1e400')
            return canonical(f, to)
        if k is K.NUMERIC:
            m = _NUMERIC_RE.fullmatch(s)
            if m is None or (m[4] is not None and abs(int(m[4])) > _NUMERIC_EXP_MAX):
                return None
            return _to_numeric(Decimal(s), to)
        if k is K.BOOL:
            low = s.lower()
            return True if low in _TRUE else False if low in _FALSE else None
        if k is K.DATE:
            if not _DATE_RE.fullmatch(s):
                return None
            try:
                return dt.date.fromisoformat(s)
            except ValueError:
                return None
        if k is K.TIMESTAMP:
            if not _TS_RE.fullmatch(s):
                return None
            try:
                parsed = dt.datetime.fromisoformat(s)
            except ValueError:
                return None
            return parsed
        if k is K.JSONB:
            try:
                json.loads(v)
            except ValueError:
                return None
            return v
        return v

    return parse
