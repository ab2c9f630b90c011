"""The fixed-signature functions of :mod:`spate.plan.funcs` as Spark columns.

Every function agrees with the reference evaluator, with these deviations:

* ``exp``, ``ln``, ``log10``, ``power`` and ``cbrt`` use Java's ``StrictMath``/``Math``, which
  may differ from the C library in the last bit of the result.
* Regular expressions run on Java's engine (the reference uses Python's ``re``); both agree on
  the syntax they share with PostgreSQL. ``regexp_replace`` of the first match finds it with
  ``regexp_instr``/``regexp_extract`` and replaces it alone, so a pattern with look-around
  that depends on the text outside the match may differ.
* ``initcap`` decides letters and digits with Java's ``\\p{L}``/``\\p{N}`` classes.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Final, Protocol

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spate.plan import numeric_math
from spate.plan.errors import EvalError
from spate.plan.evaluation.funcs import NUMERIC_MATH_FUNCTIONS
from spate.plan.evaluation.values import fit_numeric
from spate.plan.expr import Literal, ScalarExpr, VariadicFunc
from spate.plan.funcs import (
    DAYS,
    INT_RANGES,
    MONTHS,
    REPEAT_LIMIT,
    TO_CHAR_NUMBER,
    parse_replacement,
    parse_to_char,
)
from spate.render.errors import raised_marker
from spate.render.interval import compile_interval
from spate.render.numformat import compile_to_char_number
from spate.repr.types import ScalarKind, ScalarType

V = VariadicFunc
K = ScalarKind
_LONG: Final = T.LongType()
_INF: Final = float("inf")


class FixedNotCompilable(ValueError):
    """A fixed function this renderer has no Spark form for."""


Failing = tuple[Column, str, str]
"""Where a function fails: ``(condition, sqlstate, message)`` (PostgreSQL's SQLSTATE)."""


class Check(Protocol):
    """``value``, except where a condition of ``failing`` holds (the first that does): there
    the function fails (:func:`raising`), or in capture mode gives NULL and the failure is
    recorded for the row's error record (:mod:`spate.render.errors`)."""

    def __call__(self, value: Column, *failing: Failing) -> Column: ...


def raising(value: Column, *failing: Failing) -> Column:
    """:class:`Check` outside capture mode: a Spark error where a condition holds."""
    out: Column | None = None
    for cond, sqlstate, message in failing:
        err = F.raise_error(F.lit(message + raised_marker(sqlstate)))
        out = F.when(cond, err) if out is None else out.when(cond, err)
    return value if out is None else out.otherwise(value)


def unchecked(value: Column, *failing: Failing) -> Column:
    """A :class:`Check` that leaves ``value`` (NULL where it fails): the caller records the
    failure itself (an aggregate's error record in capture mode)."""
    return value


def _canon(c: Column) -> Column:
    return F.when(c == F.lit(0.0), F.lit(0.0)).otherwise(c)


def _finite(c: Column) -> Column:
    return ~F.isnan(c) & (F.abs(c) < F.lit(_INF))


def compile_fixed(
    f: VariadicFunc,
    args: Sequence[Column],
    exprs: Sequence[ScalarExpr],
    types: Sequence[ScalarType],
    what: str,
    check: Check = raising,
) -> Column:
    """``f`` on Spark columns ``args`` (the compiled ``exprs``, of ``types``); where it fails,
    ``check`` decides what happens (:class:`Check`)."""
    a = args
    if f in TO_CHAR_NUMBER:
        fmt = exprs[1]
        assert isinstance(fmt, Literal) and isinstance(fmt.value, str)
        return compile_to_char_number(a[0], TO_CHAR_NUMBER[f], fmt.value, types[0], what, check)
    match f:
        case V.SQRT:
            msg = f"cannot take square root of a negative number in {what}"
            return check(_canon(F.sqrt(a[0])), (a[0] < F.lit(0.0), "2201F", msg))
        case V.FLOAT4:
            x = a[0]
            single = x.cast("float")
            over = (F.abs(single) == F.lit(_INF)) & _finite(x)
            under = (single == F.lit(0.0)) & (x != F.lit(0.0))
            return check(
                _canon(single.cast("double")),
                (over, "22003", f"value out of range: overflow in {what}"),
                (under, "22003", f"value out of range: underflow in {what}"),
            )
        case V.FLOAT4_TEXT:
            return float_text(a[0], single=True)
        case V.NUMERIC_SQRT | V.NUMERIC_EXP | V.NUMERIC_LN | V.NUMERIC_LOG | V.NUMERIC_POWER:
            return _numeric_math(f, a, types, what, check)
        case V.INT4_RANGE | V.INT2_RANGE:
            bound, name = INT_RANGES[f]
            x = a[0]
            outside = (x < F.lit(-bound)) | (x >= F.lit(bound))
            return check(x, (outside, "22003", f"{name} out of range"))
        case V.CBRT:
            return _canon(F.cbrt(a[0]))
        case V.EXP:
            out = F.exp(a[0])
            bad = (out == F.lit(_INF)) & _finite(a[0])
            return check(out, (bad, "22003", f"value out of range: overflow in {what}"))
        case V.LN | V.LOG10:
            x = a[0]
            value = F.ln(x) if f is V.LN else F.log10(x)
            negative = f"cannot take logarithm of a negative number in {what}"
            return check(
                _canon(value),
                (x == F.lit(0.0), "2201E", f"cannot take logarithm of zero in {what}"),
                (x < F.lit(0.0), "2201E", negative),
            )
        case V.POWER:
            return _power(a[0], a[1], what, check)
        case V.REPLACE:
            empty = (a[1] == F.lit("")) & a[2].isNotNull()  # NULL with any NULL argument
            return F.when(empty, a[0]).otherwise(F.replace(a[0], a[1], a[2]))
        case V.STRPOS:
            return F.call_function("locate", a[1], a[0]).cast(_LONG)
        case V.LPAD | V.RPAD:
            return _pad(f is V.LPAD, a[0], a[1], a[2], what, check)
        case V.SPLIT_PART:
            msg = f"field position must not be zero in {what}"
            n = a[2]
            # not abs(n): it overflows (an ANSI error) at -2**63
            top = 2**31 - 1
            small = F.when(n > F.lit(top), F.lit(top)).when(n < F.lit(-top), F.lit(-top))
            small = small.otherwise(n)
            part = F.split_part(a[0], a[1], F.when(n != F.lit(0), small).cast("int"))
            return check(F.when(n.isNotNull(), part), (n == F.lit(0), "22023", msg))
        case V.REPEAT:
            n = a[1]
            too_long = F.length(a[0]).cast(_LONG).cast("decimal(38,0)") * n.cast(
                "decimal(38,0)"
            ) > F.lit(REPEAT_LIMIT)
            count = F.when(n < F.lit(0), F.lit(0)).otherwise(n)
            value = F.repeat(a[0], F.when(too_long, F.lit(0)).otherwise(count).cast("int"))
            msg = f"requested length too large in {what}"
            return check(value, (too_long & (n > F.lit(0)), "54000", msg))
        case V.REVERSE:
            return F.reverse(a[0])
        case V.INITCAP:
            return _initcap(a[0])
        case V.MD5:
            return F.md5(a[0].cast("binary"))
        case V.TRANSLATE:
            return F.call_function("translate", a[0], a[1], a[2])
        case V.ASCII:
            return F.when(a[0] == F.lit(""), F.lit(0)).otherwise(F.ascii(a[0])).cast(_LONG)
        case V.CHR:
            return _chr(a[0], what, check)
        case V.BTRIM:
            return F.btrim(a[0], a[1])
        case V.LTRIM:
            return F.ltrim(a[0], a[1])
        case V.RTRIM:
            return F.rtrim(a[0], a[1])
        case V.OCTET_LENGTH:
            return F.octet_length(a[0]).cast(_LONG)
        case V.REGEXP_LIKE | V.REGEXP_REPLACE | V.REGEXP_REPLACE_ALL:
            return _regex(f, a, exprs, what, check)
        case V.MAKE_DATE:
            y, m, d = a
            small = (y >= F.lit(1)) & (y <= F.lit(9999)) & _within(m, 100) & _within(d, 100)
            # (Spark's make_date raises on a day or month out of range; this gives NULL)
            zero = F.lit(0)
            yy, mm, dd = (F.when(small, c).cast("int") for c in (y, m, d))
            made = F.try_make_timestamp_ntz(yy, mm, dd, zero, zero, zero).cast("date")
            bad = (~small | made.isNull()) & y.isNotNull() & m.isNotNull() & d.isNotNull()
            return check(made, (bad, "22008", f"date field value out of range in {what}"))
        case V.ADD_MONTHS:
            return _add_months(a[0], a[1], types[0], what, check)
        case V.TO_CHAR:
            fmt = exprs[1]
            assert isinstance(fmt, Literal) and isinstance(fmt.value, str)
            return _to_char(a[0], fmt.value)
    interval = compile_interval(f, a, what, check)
    if interval is not None:
        return interval
    raise FixedNotCompilable(f"no Spark form for {f.value}")


# --- numbers ---------------------------------------------------------------------------------


def _power(x: Column, y: Column, what: str, check: Check) -> Column:
    out = F.pow(x, y)
    both_finite = _finite(x) & _finite(y)
    non_integer = _finite(y) & ((y % F.lit(1.0)) != F.lit(0.0))
    value = (
        F.when(x.isNull() | y.isNull(), F.lit(None).cast("double"))
        .when(F.isnan(x), F.when(y == F.lit(0.0), F.lit(1.0)).otherwise(F.lit(float("nan"))))
        .when(F.isnan(y), F.when(x == F.lit(1.0), F.lit(1.0)).otherwise(F.lit(float("nan"))))
        .otherwise(_canon(out))
    )
    complex_result = "a negative number raised to a non-integer power yields a complex result"
    # (each condition is false where x or y is NaN: those give a value above)
    return check(
        value,
        (
            (x == F.lit(0.0)) & (y < F.lit(0.0)),
            "2201F",
            f"zero raised to a negative power is undefined in {what}",
        ),
        ((x < F.lit(0.0)) & non_integer, "2201F", f"{complex_result} in {what}"),
        (
            (F.abs(out) == F.lit(_INF)) & both_finite,
            "22003",
            f"value out of range: overflow in {what}",
        ),
        (
            (out == F.lit(0.0)) & (x != F.lit(0.0)) & both_finite,
            "22003",
            f"value out of range: underflow in {what}",
        ),
    )


# --- text ------------------------------------------------------------------------------------


def _pad(left: bool, s: Column, n: Column, fill: Column, what: str, check: Check) -> Column:
    too_long = n > F.lit(REPEAT_LIMIT)
    width = F.when(too_long | (n < F.lit(0)), F.lit(0)).otherwise(n).cast("int")
    cut = F.substring(s, F.lit(1), width)
    padded = F.lpad(s, width, fill) if left else F.rpad(s, width, fill)
    value = (
        F.when(n <= F.lit(0), F.lit(""))
        .when((F.length(s) >= width) | (fill == F.lit("")), cut)
        .otherwise(padded)
    )
    msg = f"requested length too large in {what}"
    return check(
        F.when(s.isNotNull() & fill.isNotNull(), value),
        (too_long & fill.isNotNull() & s.isNotNull(), "54000", msg),
    )


def _chars(s: Column) -> Column:
    return F.split(s, "")


def _chr(n: Column, what: str, check: Check) -> Column:
    """The character of code point ``n``, built from its UTF-8 bytes."""

    def hx(v: Column) -> Column:
        return F.lpad(F.hex(v), 2, "0")

    def cont(shift: int) -> Column:
        return hx(F.lit(0x80) + F.shiftright(n, shift).bitwiseAND(F.lit(0x3F)))

    utf8 = (
        F.when(n < F.lit(0x80), hx(n))
        .when(n < F.lit(0x800), F.concat(hx(F.lit(0xC0) + F.shiftright(n, 6)), cont(0)))
        .when(
            n < F.lit(0x10000),
            F.concat(hx(F.lit(0xE0) + F.shiftright(n, 12)), cont(6), cont(0)),
        )
        .otherwise(F.concat(hx(F.lit(0xF0) + F.shiftright(n, 18)), cont(12), cont(6), cont(0)))
    )
    text = F.decode(F.unhex(utf8), "UTF-8")
    bad = (n < F.lit(0)) | (n > F.lit(0x10FFFF)) | ((n >= F.lit(0xD800)) & (n <= F.lit(0xDFFF)))
    return check(
        F.when(~bad & (n != F.lit(0)), text),
        (n == F.lit(0), "54000", f"null character not permitted in {what}"),
        (n < F.lit(0), "22023", f"character number must be positive in {what}"),
        (n > F.lit(0x10FFFF), "54000", f"requested character too large for encoding in {what}"),
        (bad, "54000", f"requested character not valid for encoding in {what}"),
    )


def _initcap(s: Column) -> Column:
    chars = _chars(s)
    alnum = "^[\\p{L}\\p{N}]$"

    def one(c: Column, i: Column) -> Column:
        prev = F.when(i > F.lit(0), F.element_at(chars, i)).otherwise(F.lit(""))
        return F.when(prev.rlike(alnum), F.lower(c)).otherwise(F.upper(c))

    return F.when(s.isNotNull(), F.array_join(F.transform(chars, one), ""))


def _regex(
    f: VariadicFunc, a: Sequence[Column], exprs: Sequence[ScalarExpr], what: str, check: Check
) -> Column:
    """A regular expression function, failing (2201B) where the pattern does not compile on
    Java's engine: decided here for a literal pattern (Spark compiles one before any row, even
    where a guard would skip it), per row otherwise."""
    pattern = exprs[1]
    # Java's \\w and case folding are ASCII unless asked (Python's and PostgreSQL's are Unicode)
    a = [a[0], F.concat(F.lit("(?U)"), a[1]), *a[2:]]
    if isinstance(pattern, Literal):
        if isinstance(pattern.value, str) and not _compiles("(?U)" + pattern.value):
            msg = f"invalid regular expression in {what}"
            out = "boolean" if f is V.REGEXP_LIKE else "string"
            return check(F.lit(None).cast(out), (a[0].isNotNull(), "2201B", msg))
        valid: Column | None = None
    else:
        compiled = F.try_reflect(F.lit("java.util.regex.Pattern"), F.lit("compile"), a[1])
        valid = compiled.isNotNull() | a[1].isNull()
    if f is V.REGEXP_LIKE:
        value = F.call_function("regexp_like", a[0], a[1])
    else:
        rep = exprs[2]
        assert isinstance(rep, Literal) and isinstance(rep.value, str)
        java = _java_replacement(rep.value)
        if f is V.REGEXP_REPLACE_ALL:
            value = F.regexp_replace(a[0], a[1], F.lit(java))
        else:
            value = _replace_first(a[0], a[1], java)
    if valid is None:
        return value
    msg = f"invalid regular expression in {what}"
    return check(F.when(valid, value), (~valid & a[0].isNotNull(), "2201B", msg))


def _compiles(pattern: str) -> bool:
    """Whether Java's engine compiles ``pattern`` (asked of the running JVM)."""
    from py4j.protocol import Py4JJavaError
    from pyspark import SparkContext

    sc = SparkContext._active_spark_context
    if sc is None or sc._jvm is None:
        return True  # no JVM to ask: Spark will say so when it runs
    try:
        sc._jvm.java.util.regex.Pattern.compile(pattern)
    except Py4JJavaError:
        return False
    return True


def _java_replacement(text: str) -> str:
    out: list[str] = []
    for piece in parse_replacement(text):
        if isinstance(piece, int):
            out.append(f"${piece}")
        else:
            out.append(piece.replace("\\", "\\\\").replace("$", "\\$"))
    return "".join(out)


def _replace_first(s: Column, pattern: Column, java: str) -> Column:
    start = F.call_function("regexp_instr", s, pattern)
    match = F.call_function("regexp_extract", s, pattern, F.lit(0))
    anchored = F.concat(F.lit("\\A(?:"), pattern, F.lit(")\\z"))
    replaced = F.regexp_replace(match, anchored, F.lit(java))
    before = F.substring(s, F.lit(1), start - F.lit(1))
    after = F.substring(s, start + F.length(match), F.lit(2**31 - 1))
    found = F.call_function("regexp_like", s, pattern)
    return F.when(found, F.concat(before, replaced, after)).otherwise(s)


def _within(n: Column, bound: int) -> Column:
    """``|n| < bound`` for an int64 ``n`` (``abs`` overflows, an ANSI error, at -2**63)."""
    return (n > F.lit(-bound)) & (n < F.lit(bound))


# --- time ------------------------------------------------------------------------------------


def _add_months(v: Column, n: Column, t: ScalarType, what: str, check: Check) -> Column:
    day = v.cast("date") if t.kind is K.TIMESTAMP else v
    wide = T.DecimalType(20, 0)  # n near the int64 range: no ANSI overflow
    months = (F.year(day).cast(_LONG) * 12 + F.month(day) - 1).cast(wide) + n.cast(wide)
    ok = (months >= F.lit(12)) & (months < F.lit(10000 * 12))
    moved = F.add_months(day, F.when(ok, n).otherwise(F.lit(0)).cast("int"))
    if t.kind is K.TIMESTAMP:
        micros = F.timestamp_diff("MICROSECOND", day.cast(T.TimestampNTZType()), v)
        moved_ts = F.timestamp_add("MICROSECOND", micros, moved.cast(T.TimestampNTZType()))
        moved = moved_ts
    bad = ~ok & v.isNotNull() & n.isNotNull()
    return check(F.when(ok, moved), (bad, "22008", f"date out of range in {what}"))


def _to_char(v: Column, fmt: str) -> Column:
    pieces = [
        F.lit(mode) if pat == "lit" else _to_char_field(v, pat, mode == "FM")
        for pat, mode in parse_to_char(fmt)
    ]
    if not pieces:
        return F.when(v.isNotNull(), F.lit(""))
    return F.when(v.isNotNull(), F.concat(*pieces))


def _to_char_field(v: Column, pat: str, fill: bool) -> Column:
    def num(n: Column, width: int) -> Column:
        s = n.cast("string")
        return s if fill else F.lpad(s, width, "0")

    def word(names: Sequence[str], index: Column, width: int) -> Column:
        cased = [n.upper() if pat.isupper() else n.lower() if pat.islower() else n for n in names]
        w = F.element_at(F.array(*[F.lit(n) for n in cased]), index + F.lit(1))
        return w if fill else F.rpad(w, width, " ")

    ts = v.cast(T.TimestampNTZType())
    hour = F.hour(ts)
    dow = F.dayofweek(ts) - F.lit(1)
    match pat:
        case "YYYY":
            return num(F.year(ts), 4)
        case "YY":
            return num(F.year(ts) % 100, 2)
        case "MM":
            return num(F.month(ts), 2)
        case "DD":
            return num(F.dayofmonth(ts), 2)
        case "DDD":
            return num(F.dayofyear(ts), 3)
        case "D":
            return (dow + F.lit(1)).cast("string")
        case "HH24":
            return num(hour, 2)
        case "HH12" | "HH":
            return num(F.when(hour % 12 == 0, F.lit(12)).otherwise(hour % 12), 2)
        case "MI":
            return num(F.minute(ts), 2)
        case "SS":
            return num(F.second(ts), 2)
        case "MS" | "US":
            epoch = F.lit("1970-01-01 00:00:00").cast(T.TimestampNTZType())
            micros = F.pmod(F.timestamp_diff("MICROSECOND", epoch, ts), F.lit(1_000_000))
            if pat == "MS":
                return num(F.floor(micros / F.lit(1000)).cast(_LONG), 3)
            return num(micros, 6)
        case "AM" | "PM" | "am" | "pm":
            mark = F.when(hour < F.lit(12), F.lit("AM")).otherwise(F.lit("PM"))
            return mark if pat.isupper() else F.lower(mark)
        case "Month" | "MONTH" | "month":
            return word(MONTHS, F.month(ts) - F.lit(1), 9)
        case "Mon" | "MON" | "mon":
            return word([m[:3] for m in MONTHS], F.month(ts) - F.lit(1), 3)
        case "Day" | "DAY" | "day":
            return word(DAYS, dow, 9)
        case "Dy" | "DY" | "dy":
            return word([d[:3] for d in DAYS], dow, 3)
        case "Q":
            return F.quarter(ts).cast("string")
    raise FixedNotCompilable(f"unknown to_char pattern {pat}")


# --- float to text ---------------------------------------------------------------------------


def float_text(v: Column, *, single: bool = False) -> Column:
    """A double as PostgreSQL prints it (see ``float_text`` of the reference), rebuilt from
    the digits of Java's ``Double.toString`` (before JDK 19 these are sometimes longer than the
    shortest that reads back, for values no SQL literal of 17 digits or fewer produces).
    ``single``: its single-precision value as PostgreSQL prints a ``real``, from Java's
    ``Float.toString`` (the same caveat)."""
    if single:
        java = v.cast("float").cast("string")
        v = v.cast("float").cast("double")
    else:
        java = v.cast("string")
    s = F.regexp_replace(java, "^-", "")
    mantissa = F.regexp_extract(s, "^([0-9.]+)", 1)
    java_exp = F.coalesce(F.regexp_extract(s, "E(-?[0-9]+)$", 1).try_cast("int"), F.lit(0))
    whole = F.substring_index(mantissa, ".", 1)
    all_digits = F.regexp_replace(mantissa, "\\.", "")
    trimmed = F.ltrim(all_digits, F.lit("0"))
    zeros = F.length(all_digits) - F.length(trimmed)
    digits = F.rtrim(trimmed, F.lit("0"))
    e10 = F.length(whole) - F.lit(1) - zeros + java_exp
    ndig = F.length(digits)
    fixed_pos = F.concat(
        F.rpad(F.substring(digits, F.lit(1), e10 + 1), (e10 + 1).cast("int"), "0"),
        F.when(
            ndig > e10 + 1, F.concat(F.lit("."), F.substring(digits, e10 + 2, F.lit(400)))
        ).otherwise(F.lit("")),
    )
    fixed_neg = F.concat(F.lit("0."), F.repeat(F.lit("0"), (-e10 - 1).cast("int")), digits)
    sci = F.concat(
        F.substring(digits, 1, 1),
        F.when(ndig > 1, F.concat(F.lit("."), F.substring(digits, 2, 400))).otherwise(F.lit("")),
        F.lit("e"),
        F.when(e10 >= 0, F.lit("+")).otherwise(F.lit("-")),
        F.when(F.abs(e10) < F.lit(10), F.lit("0")).otherwise(F.lit("")),
        F.abs(e10).cast("string"),
    )
    body = (
        F.when((e10 >= F.lit(0)) & (e10 < F.lit(6 if single else 15)), fixed_pos)
        .when((e10 >= F.lit(-4)) & (e10 < F.lit(0)), fixed_neg)
        .otherwise(sci)
    )
    sign = F.when(v < F.lit(0.0), F.lit("-")).otherwise(F.lit(""))
    return (
        F.when(v.isNull(), F.lit(None).cast("string"))
        .when(F.isnan(v), F.lit("NaN"))
        .when(v == F.lit(float("inf")), F.lit("Infinity"))
        .when(v == F.lit(float("-inf")), F.lit("-Infinity"))
        .when(v == F.lit(0.0), F.when(java.startswith("-"), "-0").otherwise(F.lit("0")))
        .otherwise(F.concat(sign, body))
    )


def _numeric_math(
    f: VariadicFunc, a: Sequence[Column], types: Sequence[ScalarType], what: str, check: Check
) -> Column:
    """PostgreSQL's numeric ``sqrt``/``exp``/``ln``/``log``/``power``: Spark has no exact
    decimal forms, so the reference's own code (:mod:`spate.plan.numeric_math`) runs in a
    Python UDF, giving NULL where it fails; the failures are recognised on the arguments."""
    name = f.value.removeprefix("numeric_")
    out = numeric_math.result_type(name, list(types))
    scales = [t.scale or 0 for t in types]
    zero = F.lit(0)

    def run(*xs: Decimal | None) -> Decimal | None:
        if any(x is None for x in xs):
            return None
        try:
            return fit_numeric(NUMERIC_MATH_FUNCTIONS[f](xs, scales, what), out, what)
        except EvalError:
            return None

    assert out.precision is not None and out.scale is not None
    value = F.udf(run, T.DecimalType(out.precision, out.scale))(*a)
    present = a[0].isNotNull()
    for x in a[1:]:
        present = present & x.isNotNull()
    failing: list[Failing] = []
    if f is V.NUMERIC_SQRT:
        msg = f"cannot take square root of a negative number in {what}"
        failing.append((a[0] < zero, "2201F", msg))
    if f in (V.NUMERIC_LN, V.NUMERIC_LOG):
        for x in a:
            failing.append((x == zero, "2201E", f"cannot take logarithm of zero in {what}"))
            negative = f"cannot take logarithm of a negative number in {what}"
            failing.append((x < zero, "2201E", negative))
        if f is V.NUMERIC_LOG:
            failing.append((a[0] == F.lit(1), "22012", f"division by zero in {what}"))
    if f is V.NUMERIC_POWER:
        undefined = f"zero raised to a negative power is undefined in {what}"
        failing.append(((a[0] == zero) & (a[1] < zero), "2201F", undefined))
        complex_ = (
            f"a negative number raised to a non-integer power yields a complex result in {what}"
        )
        failing.append(((a[0] < zero) & (a[1] != F.floor(a[1])), "2201F", complex_))
    failing.append((value.isNull(), "22003", f"value overflows numeric format in {what}"))
    return check(value, *[(present & cond, code, msg) for cond, code, msg in failing])
