"""The interval functions (:mod:`spate.plan.interval_funcs`) as Spark columns.

An interval column is the text ``months,days,micros`` (:func:`spate.repr.interval.encode`);
its fields are read with ``split`` and built back with ``concat_ws``. Each function agrees with
the reference evaluator (:mod:`spate.plan.evaluation.interval`): the arithmetic of
``interval * float8`` and ``/`` is done in doubles as PostgreSQL does it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spate.plan.func_names import VariadicFunc
from spate.render.interval_input import read_text
from spate.render.let import let
from spate.repr.interval import INT32_MAX, INT32_MIN, USECS_PER_DAY

if TYPE_CHECKING:
    from spate.render.scalar_funcs import Check

V = VariadicFunc
_LONG: Final = T.LongType()
_KEY: Final = T.DecimalType(38, 0)
_EPOCH: Final = T.DecimalType(38, 6)
_INT64_LIMIT: Final = 9.223372036854775807e18
_MIN_TS: Final = "0001-01-01 00:00:00"
_MAX_TS: Final = "9999-12-31 23:59:59.999999"


def field(iv: Column, i: int) -> Column:
    """Field ``i`` (0 months, 1 days, 2 microseconds) of a stored interval, as a long."""
    return F.split(iv, ",").getItem(i).cast(_LONG)


def make(months: Column, days: Column, micros: Column) -> Column:
    """A stored interval of three long fields (NULL if any is)."""
    text = F.concat_ws(",", months.cast("string"), days.cast("string"), micros.cast("string"))
    return F.when(months.isNotNull() & days.isNotNull() & micros.isNotNull(), text)


def _int32(x: Column) -> Column:
    return (x >= F.lit(INT32_MIN)) & (x <= F.lit(INT32_MAX))


def _key(iv: Column) -> Column:
    days = (field(iv, 0) * F.lit(30) + field(iv, 1)).cast(_KEY)
    return days * F.lit(USECS_PER_DAY).cast(_KEY) + field(iv, 2).cast(_KEY)


def _div(a: Column, k: int) -> Column:
    """``a / k`` truncated toward zero (C's division) for a long ``a``."""
    return F.call_function("div", a, F.lit(k).cast(_LONG))


def _mod(a: Column, k: int) -> Column:
    """C's remainder: the sign of ``a``."""
    return a - _div(a, k) * F.lit(k)


def _canon(iv: Column) -> Column:
    return _justified(field(iv, 0) * F.lit(30) + field(iv, 1), field(iv, 2))


def _of_key(span: Column) -> Column:
    day = F.lit(USECS_PER_DAY).cast(_KEY)
    days = F.call_function("div", span, day).cast(_LONG)
    return _justified(days, (span - days.cast(_KEY) * day).cast(_LONG))


def _justified(total: Column, us: Column) -> Column:
    """The canonical interval of ``total`` days and ``us`` microseconds (longs)."""
    days = total + _div(us, USECS_PER_DAY)
    rest = _mod(us, USECS_PER_DAY)
    day = F.lit(USECS_PER_DAY)
    borrow = (days > F.lit(0)) & (rest < F.lit(0))
    lend = (days < F.lit(0)) & (rest > F.lit(0))
    days = F.when(borrow, days - F.lit(1)).when(lend, days + F.lit(1)).otherwise(days)
    rest = F.when(borrow, rest + day).when(lend, rest - day).otherwise(rest)
    return make(_div(days, 30), _mod(days, 30), rest)


def _trunc(x: Column) -> Column:
    """A double truncated toward zero, as a long (the caller checks the range)."""
    return F.when(x < F.lit(0.0), F.ceil(x)).otherwise(F.floor(x)).cast(_LONG)


def _tsround(x: Column) -> Column:
    return F.rint(x * F.lit(1e6)) / F.lit(1e6)


def _scaled(fm: Column, fd: Column, fu: Column) -> Column:
    """``struct(value, bad)``: the interval of months ``fm``, days ``fd`` and microseconds
    ``fu`` (doubles, already scaled), PostgreSQL's cascade of fractions; ``bad`` when a field
    leaves its range."""
    bad_m = F.isnan(fm) | (fm > F.lit(float(INT32_MAX))) | (fm < F.lit(float(INT32_MIN)))
    bad_d = F.isnan(fd) | (fd > F.lit(float(INT32_MAX))) | (fd < F.lit(float(INT32_MIN)))

    def months(month: Column, day0: Column, month_days: Column) -> Column:
        whole_md = _trunc(month_days)
        return let(
            lambda sec: _carried(month, day0 + whole_md, sec, fu, bad_m | bad_d),
            sec=_tsround((fd - day0 + month_days - whole_md) * F.lit(86400.0)),
        )

    return let(
        lambda month, day0: months(month, day0, _tsround((fm - month) * F.lit(30.0))),
        month=_trunc(F.when(~bad_m, fm)),
        day0=_trunc(F.when(~bad_d, fd)),
    )


def _carried(month: Column, day: Column, sec: Column, fu: Column, bad_md: Column) -> Column:
    carry = F.when(F.abs(sec) >= F.lit(86400.0), _trunc(sec / F.lit(86400.0))).otherwise(
        F.lit(0).cast(_LONG)
    )
    rest = sec - carry * F.lit(86400)
    day = day + carry

    def done(micros: Column) -> Column:
        # PostgreSQL's range for a double that becomes an int64: [-2**63, 2**63)
        bad_u = F.isnan(micros) | (micros >= F.lit(_INT64_LIMIT)) | (micros < F.lit(-_INT64_LIMIT))
        bad = bad_md | bad_u | ~_int32(day)
        value = make(month, day, F.when(~bad_u, micros).cast(_LONG))
        return F.struct(value.alias("value"), bad.alias("bad"))

    return let(done, micros=F.rint(fu + rest * F.lit(1e6)))


def _scale(iv: Column, factor: Column, divide: bool, what: str, check: Check) -> Column:
    def by(x: Column) -> Column:
        return x.cast("double") / factor if divide else x.cast("double") * factor

    out = let(
        lambda m, d, u: _scaled(by(m), by(d), by(u)),
        m=field(iv, 0),
        d=field(iv, 1),
        u=field(iv, 2),
    )
    bad, value = out["bad"], out["value"]
    failing = [(iv.isNotNull() & factor.isNotNull() & bad, "22008", "interval out of range")]
    if divide:
        zero = iv.isNotNull() & (factor == F.lit(0.0))
        failing.insert(0, (zero, "22012", "division by zero"))
        bad = bad | zero
    return check(F.when(~bad, value), *failing)


def _epoch(iv: Column) -> Column:
    m = field(iv, 0)
    years = _div(m, 12)
    secs = (
        years * F.lit(31_557_600)
        + (m - years * F.lit(12)) * F.lit(2_592_000)
        + field(iv, 1) * F.lit(86_400)
    )
    us = secs.cast(_KEY) * F.lit(1_000_000).cast(_KEY) + field(iv, 2).cast(_KEY)
    return (us / F.lit(1_000_000).cast(_KEY)).cast(_EPOCH)


def _text(iv: Column) -> Column:
    """PostgreSQL's output (:meth:`spate.repr.interval.Interval.text`)."""
    m, d, u = field(iv, 0), field(iv, 1), field(iv, 2)
    years = _div(m, 12)
    zero = F.lit(0)
    parts: list[Column] = []
    before: Column = F.lit(False)  # the previous part shown was negative
    for value, unit in ((years, "year"), (m - years * F.lit(12), "mon"), (d, "day")):
        sign = F.when(before & (value > zero), F.lit("+")).otherwise(F.lit(""))
        plural = F.when(value == F.lit(1), F.lit("")).otherwise(F.lit("s"))
        shown = F.concat(sign, value.cast("string"), F.lit(f" {unit}"), plural)
        parts.append(F.when(value != zero, shown))
        before = F.when(value != zero, value < zero).otherwise(before)
    big = T.DecimalType(20, 0)
    us = F.abs(u.cast(big))
    secs = F.floor(us / F.lit(1_000_000).cast(big)).cast(big)
    frac = (us - secs * F.lit(1_000_000).cast(big)).cast(_LONG)
    hours = F.floor(secs / F.lit(3600)).cast(big)
    minutes = F.floor((secs - hours * F.lit(3600)) / F.lit(60)).cast(_LONG)
    seconds = (secs - hours * F.lit(3600) - minutes * F.lit(60)).cast(_LONG)
    sign = F.when(u < zero, F.lit("-")).when(before, F.lit("+")).otherwise(F.lit(""))
    fraction = F.regexp_replace(F.lpad(frac.cast("string"), 6, "0"), "0+$", "")
    clock = F.concat(
        sign,
        F.lpad(hours.cast("string"), F.greatest(F.lit(2), F.length(hours.cast("string"))), "0"),
        F.lit(":"),
        F.lpad(minutes.cast("string"), 2, "0"),
        F.lit(":"),
        F.lpad(seconds.cast("string"), 2, "0"),
        F.when(frac != zero, F.concat(F.lit("."), fraction)).otherwise(F.lit("")),
    )
    empty = (m == zero) & (d == zero)
    parts.append(F.when(empty | (u != zero), clock))
    return F.when(iv.isNotNull(), F.concat_ws(" ", *parts))


def _add_micros(ts: Column, n: Column, what: str, check: Check) -> Column:
    low, high = F.lit(_MIN_TS).cast("timestamp_ntz"), F.lit(_MAX_TS).cast("timestamp_ntz")
    # a span beyond the representable years is out of range whatever the timestamp
    too_far = F.abs(n.cast(_KEY)) > F.lit(315_537_897_599_999_999).cast(_KEY)
    shifted = F.timestamp_add("MICROSECOND", F.when(~too_far, n), ts)
    outside = ts.isNotNull() & n.isNotNull() & (too_far | (shifted < low) | (shifted > high))
    msg = f"timestamp out of range in {what}"
    return check(F.when(~outside, shifted), (outside, "22008", msg))


def _same_sign(high: Column, low: Column, unit: int) -> tuple[Column, Column]:
    """One ``unit`` of ``low`` borrowed from ``high`` (or lent) so that they share a sign."""
    zero = F.lit(0)
    borrow = (high > zero) & (low < zero)
    lend = (high < zero) & (low > zero)
    high = F.when(borrow, high - F.lit(1)).when(lend, high + F.lit(1)).otherwise(high)
    low = F.when(borrow, low + F.lit(unit)).when(lend, low - F.lit(unit)).otherwise(low)
    return high, low


def _justify(iv: Column, f: VariadicFunc, check: Check) -> Column:
    """PostgreSQL 15's ``justify_days``, ``justify_hours`` and ``justify_interval``
    (:mod:`spate.plan.evaluation.interval`): in longs, then the months or days that left int32
    are 22008."""

    def days(m: Column, d: Column, u: Column) -> Column:
        months = m + _div(d, 30)
        return let(
            lambda m1, d1: out(~_int32(m1), *_same_sign(m1, d1, 30), u), m1=months, d1=_mod(d, 30)
        )

    def hours(m: Column, d: Column, u: Column) -> Column:
        total = d + _div(u, USECS_PER_DAY)
        return let(
            lambda d1, u1: out(~_int32(d1), m, *_same_sign(d1, u1, USECS_PER_DAY)),
            d1=total,
            u1=_mod(u, USECS_PER_DAY),
        )

    def interval(m: Column, d: Column, u: Column) -> Column:
        zero = F.lit(0)
        first = ((d > zero) & (u > zero)) | ((d < zero) & (u < zero))
        early = F.when(first, _div(d, 30)).otherwise(F.lit(0).cast(_LONG))
        return let(
            lambda m0, d0, u1: rest(m0, d0 + _div(u, USECS_PER_DAY), u1),
            m0=m + early,
            d0=d - early * F.lit(30),
            u1=_mod(u, USECS_PER_DAY),
        )

    def rest(m0: Column, d1: Column, u1: Column) -> Column:
        return let(
            lambda m1, d2: signs(~_int32(m0) | ~_int32(m1), m1, d2, u1),
            m1=m0 + _div(d1, 30),
            d2=_mod(d1, 30),
        )

    def signs(bad: Column, m1: Column, d2: Column, u1: Column) -> Column:
        zero = F.lit(0)
        dec = (m1 > zero) & ((d2 < zero) | ((d2 == zero) & (u1 < zero)))
        inc = (m1 < zero) & ((d2 > zero) | ((d2 == zero) & (u1 > zero)))
        m2 = F.when(dec, m1 - F.lit(1)).when(inc, m1 + F.lit(1)).otherwise(m1)
        d3 = F.when(dec, d2 + F.lit(30)).when(inc, d2 - F.lit(30)).otherwise(d2)
        return let(lambda d4, u2: out(bad, m2, *_same_sign(d4, u2, USECS_PER_DAY)), d4=d3, u2=u1)

    def out(bad: Column, m: Column, d: Column, u: Column) -> Column:
        return F.struct(make(m, d, u).alias("value"), bad.alias("bad"))

    body = {V.JUSTIFY_DAYS: days, V.JUSTIFY_HOURS: hours, V.JUSTIFY_INTERVAL: interval}[f]
    result = let(body, m=field(iv, 0), d=field(iv, 1), u=field(iv, 2))
    bad = iv.isNotNull() & result["bad"]
    return check(F.when(~bad, result["value"]), (bad, "22008", "interval out of range"))


def compile_interval(
    f: VariadicFunc, a: Sequence[Column], what: str, check: Check
) -> Column | None:
    """``f`` on Spark columns ``a``, or ``None`` if ``f`` is not an interval function."""
    match f:
        case V.INTERVAL_MONTHS:
            return field(a[0], 0)
        case V.INTERVAL_DAYS:
            return field(a[0], 1)
        case V.INTERVAL_MICROS:
            return field(a[0], 2)
        case V.MAKE_INTERVAL:
            bad = ~_int32(a[0]) | ~_int32(a[1])
            return check(
                F.when(~bad, make(a[0], a[1], a[2])), (bad, "22008", "interval out of range")
            )
        case V.INTERVAL_KEY:
            return _key(a[0])
        case V.INTERVAL_CANON:
            return _canon(a[0])
        case V.INTERVAL_OF_KEY:
            return _of_key(a[0])
        case V.TIMESTAMP_DIFF_US:
            return F.timestamp_diff("MICROSECOND", a[1], a[0])
        case V.INTERVAL_MUL | V.INTERVAL_DIV:
            return _scale(a[0], a[1], f is V.INTERVAL_DIV, what, check)
        case V.INTERVAL_EPOCH:
            return _epoch(a[0])
        case V.INTERVAL_TEXT:
            return _text(a[0])
        case V.TIMESTAMP_ADD_US:
            return _add_micros(a[0], a[1], what, check)
        case V.JUSTIFY_DAYS | V.JUSTIFY_HOURS | V.JUSTIFY_INTERVAL:
            return _justify(a[0], f, check)
        case V.INTERVAL_OF_TEXT:
            return read_text(a[0], make, check)
    return None
