"""The reference semantics of the fixed-signature functions (see :mod:`spate.plan.funcs`)."""

from __future__ import annotations

import calendar
import datetime as dt
import functools
import hashlib
import math
import re
import struct
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

from spate.plan import numeric_math
from spate.plan.errors import EvalError
from spate.plan.evaluation.casts import float_text
from spate.plan.evaluation.interval import INTERVAL_FUNCTIONS
from spate.plan.evaluation.values import check_int64, fit_numeric
from spate.plan.expr import NAN, Literal, ScalarExpr, VariadicFunc
from spate.plan.funcs import (
    DAYS,
    INT_RANGES,
    MONTHS,
    REPEAT_LIMIT,
    TO_CHAR_NUMBER,
    Piece,
    parse_replacement,
    parse_to_char,
)
from spate.plan.numformat import parse_number_format, to_char_number
from spate.repr.interval import INT32_MAX, INT32_MIN, Interval
from spate.repr.types import Datum, ScalarType

V = VariadicFunc
Fn = Callable[[Sequence[Any]], Datum]


def fixed_function(
    f: VariadicFunc, args: Sequence[ScalarExpr], types: Sequence[ScalarType], result: ScalarType,
    what: str,
) -> Fn:  # fmt: skip
    """``f`` on non-NULL argument values (``args`` are the expressions, for constants)."""
    if f in (V.REGEXP_REPLACE, V.REGEXP_REPLACE_ALL):
        rep = args[2]
        assert isinstance(rep, Literal) and isinstance(rep.value, str)
        pieces = parse_replacement(rep.value)
        count = 0 if f is V.REGEXP_REPLACE_ALL else 1
        return lambda a: regexp_replace(a[0], a[1], pieces, count, what)
    if f is V.TO_CHAR:
        fmt = args[1]
        assert isinstance(fmt, Literal) and isinstance(fmt.value, str)
        tokens = parse_to_char(fmt.value)
        return lambda a: to_char(a[0], tokens)
    if f in TO_CHAR_NUMBER:
        fmt = args[1]
        assert isinstance(fmt, Literal) and isinstance(fmt.value, str)
        kind, parsed = TO_CHAR_NUMBER[f], parse_number_format(fmt.value)
        return lambda a: to_char_number(a[0], kind, parsed)
    if f in NUMERIC_MATH_FUNCTIONS:
        fn = NUMERIC_MATH_FUNCTIONS[f]
        scales = [t.scale or 0 for t in types]
        return lambda a: fit_numeric(fn(a, scales, what), result, what)
    simple = _SIMPLE.get(f)
    if simple is None:
        raise EvalError(f"unknown function {f}")
    return lambda a: simple(a, what)


# --- numbers ---------------------------------------------------------------------------------


def _float(x: float) -> float:
    return NAN if math.isnan(x) else (0.0 if x == 0 else x)


def _checked(x: float, args: Sequence[float], what: str) -> float:
    if math.isinf(x) and all(math.isfinite(a) for a in args):
        raise EvalError(f"value out of range: overflow in {what}", sqlstate="22003")
    return _float(x)


def _sqrt(x: float, what: str) -> float:
    if x < 0:
        raise EvalError(f"cannot take square root of a negative number in {what}", sqlstate="2201F")
    return _float(math.sqrt(x))


def _log(x: float, fn: Callable[[float], float], what: str) -> float:
    if x == 0:
        raise EvalError(f"cannot take logarithm of zero in {what}", sqlstate="2201E")
    if x < 0:
        raise EvalError(f"cannot take logarithm of a negative number in {what}", sqlstate="2201E")
    return _float(fn(x))


def _exp(x: float, what: str) -> float:
    try:
        return _float(math.exp(x))
    except OverflowError:
        raise EvalError(f"value out of range: overflow in {what}", sqlstate="22003") from None


def _power(x: float, y: float, what: str) -> float:
    if math.isnan(x):
        return 1.0 if y == 0 else NAN
    if math.isnan(y):
        return 1.0 if x == 1 else NAN
    if x == 0 and y < 0:
        raise EvalError(f"zero raised to a negative power is undefined in {what}", sqlstate="2201F")
    if x < 0 and math.isfinite(y) and not y.is_integer():
        raise EvalError(
            f"a negative number raised to a non-integer power yields a complex result in {what}",
            sqlstate="2201F",
        )
    try:
        out = math.pow(x, y)
    except OverflowError:
        raise EvalError(f"value out of range: overflow in {what}", sqlstate="22003") from None
    if out == 0 and x != 0 and math.isfinite(x) and math.isfinite(y):
        raise EvalError(f"value out of range: underflow in {what}", sqlstate="22003")
    return _checked(out, (x, y), what)


def _float4(x: float, what: str) -> float:
    if not math.isfinite(x):
        return _float(x)
    try:
        out: float = struct.unpack("f", struct.pack("f", x))[0]
    except OverflowError:
        out = math.inf
    if math.isinf(out):
        raise EvalError(f"value out of range: overflow in {what}", sqlstate="22003")
    if out == 0 and x != 0:
        raise EvalError(f"value out of range: underflow in {what}", sqlstate="22003")
    return _float(out)


def _int_range(x: int, f: VariadicFunc) -> int:
    bound, name = INT_RANGES[f]
    if not -bound <= x < bound:
        raise EvalError(f"{name} out of range", sqlstate="22003")
    return x


def _cbrt(x: float) -> float:
    return _float(math.cbrt(x))


# --- text ------------------------------------------------------------------------------------


def _replace(s: str, old: str, new: str) -> str:
    return s if old == "" else s.replace(old, new)


def _pad(s: str, n: int, fill: str, left: bool, what: str) -> str:
    if n <= 0:
        return ""
    if n > REPEAT_LIMIT:
        raise EvalError(f"requested length too large in {what}", sqlstate="54000")
    if len(s) >= n or fill == "":
        return s[:n]
    need = n - len(s)
    pad = (fill * (need // len(fill) + 1))[:need]
    return pad + s if left else s + pad


def _split_part(s: str, delim: str, n: int, what: str) -> str:
    if n == 0:
        raise EvalError(f"field position must not be zero in {what}", sqlstate="22023")
    if delim == "":
        return s if n in (1, -1) else ""
    parts = s.split(delim)
    if abs(n) > len(parts):
        return ""
    return parts[n - 1] if n > 0 else parts[n]


def _repeat(s: str, n: int, what: str) -> str:
    if n <= 0 or s == "":
        return ""
    if len(s) * n > REPEAT_LIMIT:
        raise EvalError(f"requested length too large in {what}", sqlstate="54000")
    return s * n


def initcap(s: str) -> str:
    out: list[str] = []
    prev_alnum = False
    for ch in s:
        out.append(ch.lower() if prev_alnum else ch.upper())
        prev_alnum = ch.isalnum()
    return "".join(out)


def _md5(s: str) -> str:
    return hashlib.md5(s.encode("utf-8", "surrogatepass"), usedforsecurity=False).hexdigest()


def _translate(s: str, src: str, dst: str) -> str:
    table: dict[str, str | None] = {}
    for i, ch in enumerate(src):
        if ch not in table:
            table[ch] = dst[i] if i < len(dst) else None
    return "".join(c for c in (table.get(ch, ch) for ch in s) if c is not None)


def _chr(n: int, what: str) -> str:
    if n == 0:
        raise EvalError(f"null character not permitted in {what}", sqlstate="54000")
    if n < 0:
        raise EvalError(f"character number must be positive in {what}", sqlstate="22023")
    if n > 0x10FFFF:
        raise EvalError(
            f"requested character too large for encoding: {n} in {what}", sqlstate="54000"
        )
    if 0xD800 <= n <= 0xDFFF:
        raise EvalError(
            f"requested character not valid for encoding: {n} in {what}", sqlstate="54000"
        )
    return chr(n)


@functools.lru_cache(maxsize=256)
def _regex(pattern: str, what: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as e:
        raise EvalError(f"invalid regular expression: {e} in {what}", sqlstate="2201B") from None


def regexp_replace(s: str, pattern: str, pieces: tuple[Piece, ...], count: int, what: str) -> str:
    rx = _regex(pattern, what)

    def sub(m: re.Match[str]) -> str:
        return "".join(p if isinstance(p, str) else (m.group(p) or "") for p in pieces)

    try:
        return rx.sub(sub, s, count=count)
    except IndexError:  # a group the pattern does not have: empty, as PostgreSQL
        safe = tuple(p if isinstance(p, str) or p <= rx.groups else "" for p in pieces)
        return regexp_replace(s, pattern, safe, count, what)


# --- time ------------------------------------------------------------------------------------


def _make_date(y: int, m: int, d: int, what: str) -> dt.date:
    try:
        return dt.date(y, m, d)
    except (ValueError, OverflowError):
        raise EvalError(
            f"date field value out of range: {y}-{m:02}-{d:02} in {what}", sqlstate="22008"
        ) from None


def add_months(v: dt.date, n: int, what: str) -> dt.date:
    total = v.year * 12 + (v.month - 1) + n
    y, m = divmod(total, 12)
    if not 1 <= y <= 9999:
        raise EvalError(f"date out of range in {what}", sqlstate="22008")
    day = min(v.day, calendar.monthrange(y, m + 1)[1])
    return v.replace(year=y, month=m + 1, day=day)


def to_char(v: dt.date, tokens: Sequence[tuple[str, str]]) -> str:
    ts = v if isinstance(v, dt.datetime) else dt.datetime(v.year, v.month, v.day)
    out: list[str] = []
    for pat, mode in tokens:
        if pat == "lit":
            out.append(mode)
            continue
        out.append(to_char_field(ts, pat, fill=mode == "FM"))
    return "".join(out)


def to_char_field(ts: dt.datetime, pat: str, *, fill: bool) -> str:
    def num(n: int, width: int) -> str:
        return str(n) if fill else str(n).zfill(width)

    def word(w: str, width: int) -> str:
        if pat.isupper():
            w = w.upper()
        elif pat.islower():
            w = w.lower()
        return w if fill else w.ljust(width)

    hour12 = ts.hour % 12 or 12
    dow = ts.isoweekday() % 7
    match pat:
        case "YYYY":
            return num(ts.year, 4)
        case "YY":
            return num(ts.year % 100, 2)
        case "MM":
            return num(ts.month, 2)
        case "DD":
            return num(ts.day, 2)
        case "DDD":
            return num(ts.timetuple().tm_yday, 3)
        case "D":
            return str(dow + 1)
        case "HH24":
            return num(ts.hour, 2)
        case "HH12" | "HH":
            return num(hour12, 2)
        case "MI":
            return num(ts.minute, 2)
        case "SS":
            return num(ts.second, 2)
        case "MS":
            return num(ts.microsecond // 1000, 3)
        case "US":
            return num(ts.microsecond, 6)
        case "AM" | "PM" | "am" | "pm":
            mark = "AM" if ts.hour < 12 else "PM"
            return mark if pat.isupper() else mark.lower()
        case "Month" | "MONTH" | "month":
            return word(MONTHS[ts.month - 1], 9)
        case "Mon" | "MON" | "mon":
            return word(MONTHS[ts.month - 1][:3], 3)
        case "Day" | "DAY" | "day":
            return word(DAYS[dow], 9)
        case "Dy" | "DY" | "dy":
            return word(DAYS[dow][:3], 3)
        case "Q":
            return str((ts.month - 1) // 3 + 1)
    raise EvalError(f"unknown to_char pattern {pat}")


NUMERIC_MATH_FUNCTIONS: dict[VariadicFunc, Callable[[Sequence[Any], list[int], str], Decimal]] = {
    V.NUMERIC_SQRT: lambda a, s, w: numeric_math.sqrt(a[0], s[0], w),
    V.NUMERIC_EXP: lambda a, s, w: numeric_math.exp(a[0], s[0], w),
    V.NUMERIC_LN: lambda a, s, w: numeric_math.ln(a[0], s[0], w),
    V.NUMERIC_LOG: lambda a, s, w: numeric_math.log(a[0], a[1], s[0], s[1], w),
    V.NUMERIC_POWER: lambda a, s, w: numeric_math.power(a[0], a[1], s[0], s[1], w),
}

_SIMPLE: dict[VariadicFunc, Callable[[Sequence[Any], str], Datum]] = {
    V.SQRT: lambda a, w: _sqrt(a[0], w),
    V.CBRT: lambda a, w: _cbrt(a[0]),
    V.FLOAT4: lambda a, w: _float4(a[0], w),
    V.FLOAT4_TEXT: lambda a, w: float_text(a[0], single=True),
    V.INT4_RANGE: lambda a, w: _int_range(a[0], V.INT4_RANGE),
    V.INT2_RANGE: lambda a, w: _int_range(a[0], V.INT2_RANGE),
    V.EXP: lambda a, w: _exp(a[0], w),
    V.LN: lambda a, w: _log(a[0], math.log, w),
    V.LOG10: lambda a, w: _log(a[0], math.log10, w),
    V.POWER: lambda a, w: _power(a[0], a[1], w),
    V.REPLACE: lambda a, w: _replace(a[0], a[1], a[2]),
    V.STRPOS: lambda a, w: a[0].find(a[1]) + 1,
    V.LPAD: lambda a, w: _pad(a[0], a[1], a[2], True, w),
    V.RPAD: lambda a, w: _pad(a[0], a[1], a[2], False, w),
    V.SPLIT_PART: lambda a, w: _split_part(a[0], a[1], a[2], w),
    V.REPEAT: lambda a, w: _repeat(a[0], a[1], w),
    V.REVERSE: lambda a, w: a[0][::-1],
    V.INITCAP: lambda a, w: initcap(a[0]),
    V.MD5: lambda a, w: _md5(a[0]),
    V.TRANSLATE: lambda a, w: _translate(a[0], a[1], a[2]),
    V.ASCII: lambda a, w: ord(a[0][0]) if a[0] else 0,
    V.CHR: lambda a, w: _chr(a[0], w),
    V.BTRIM: lambda a, w: a[0].strip(a[1]),
    V.LTRIM: lambda a, w: a[0].lstrip(a[1]),
    V.RTRIM: lambda a, w: a[0].rstrip(a[1]),
    V.OCTET_LENGTH: lambda a, w: len(a[0].encode("utf-8", "surrogatepass")),
    V.REGEXP_LIKE: lambda a, w: _regex(a[1], w).search(a[0]) is not None,
    V.MAKE_DATE: lambda a, w: _make_date(a[0], a[1], a[2], w),
    V.ADD_MONTHS: lambda a, w: add_months(a[0], a[1], w),
    V.MAKE_INTERVAL: lambda a, w: _make_interval(a[0], a[1], a[2]),
    V.TIMESTAMP_DIFF_US: lambda a, w: _diff_us(a[0], a[1]),
    **INTERVAL_FUNCTIONS,
}


def _make_interval(months: int, days: int, micros: int) -> Interval:
    if not (INT32_MIN <= months <= INT32_MAX and INT32_MIN <= days <= INT32_MAX):
        raise EvalError("interval out of range", sqlstate="22008")
    return Interval(months, days, check_int64(micros, "interval"))


def _diff_us(a: dt.datetime, b: dt.datetime) -> int:
    d = a - b
    return (d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds


__all__ = ["check_int64", "fixed_function"]
