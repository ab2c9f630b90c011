"""``numeric / numeric`` as a Spark column, exactly as :mod:`spate.plan.numeric_division` defines
it (each quotient rounded half away from zero to PostgreSQL's result scale, capped at the type
scale).

Spark's own decimal division cannot do this: its result scale follows from the operand *types*
(``decimal(38,0) / decimal(19,0)`` keeps 9 fraction digits without precision loss allowed), and
PostgreSQL's scale follows from the *values*. So the quotient is computed by long division on
the operands' digits, every step exact in ``decimal(38,0)``:

1. each operand's digits come from its text (Spark prints decimals plainly, with their scale):
   the unscaled digits ``U`` (``|x| = U * 10**-scale``), hence the exponent of the leading digit,
   PostgreSQL's base-10000 weight and leading digit, hence the result scale ``r`` of the row;
2. ``N = round(|a| / |b| * 10**r)`` is ``Ua * 10**k / Ub`` with ``k = r + sb - sa >= 0``
   (trailing zeros of ``Ub`` cancel against ``10**k`` first), divided in base ``10**13`` chunks
   (a partial remainder below ``Ub`` times ``10**13`` stays below ``10**38`` for ``Ub < 10**25``),
   the last remainder deciding the rounding;
3. the digits of ``N`` with the point put back ``r`` places from the right, cast to the type.

Intermediate values are bound once (a one-element ``transform``) so that the expression stays
linear in its operands; no Python runs per row.

A quotient that does not fit ``decimal(38, out_scale)`` is PostgreSQL's numeric overflow (SQLSTATE
22003, "value overflows numeric format"): the long division is computed with Spark's ``try_``
arithmetic, so such a quotient is NULL there instead of an ANSI error, and the caller's
:class:`~spate.render.scalar_funcs.Check` fails where it is NULL (a Spark error, or in capture
mode an error record). The check looks at the quotient only where a double estimate of
``|a / b|`` is not clearly inside the type, so rows that fit compute it once.

**Deviation**: a divisor with more than 25 significant digits (after its trailing zeros cancel)
goes through Spark's decimal division, rounded half up to the type scale from Spark's own
result scale (which may keep fewer digits than the reference).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spate.plan.numeric_division import MIN_SIGNIFICANT_DIGITS
from spate.render.scalar_funcs import Check, raising
from spate.repr.types import NUMERIC_MAX_PRECISION

_EXACT: Final = T.DecimalType(38, 0)
_CHUNK: Final = 13
_MAX_DIVISOR_DIGITS: Final = 25
OVERFLOW: Final = "value overflows numeric format"
"""PostgreSQL's message for a numeric result beyond the numeric format (SQLSTATE 22003)."""


def _let(value: Column, body: Callable[[Column], Column]) -> Column:
    """``body(value)`` with ``value`` evaluated once."""
    return F.transform(F.array(value), body).getItem(0)


def _dec(value: int) -> Column:
    return F.lit(str(value)).cast(_EXACT)


def _digits(x: Column) -> Column:
    """The unscaled digits of ``|x|`` without leading zeros ('' for zero)."""
    return F.regexp_replace(F.regexp_replace(x.cast("string"), "[-.]", ""), "^0+", "")


def _weight_and_digit(sig: Column, scale: int) -> tuple[Column, Column]:
    """PostgreSQL's base-10000 weight and leading digit of the value whose significant digits
    (from the leading one) are ``sig`` at ``scale``; ``(0, 0)`` for zero."""
    exponent = F.length(sig) - F.lit(scale + 1)
    weight = F.floor(exponent / F.lit(4)).cast("int")
    width = exponent - weight * F.lit(4) + F.lit(1)
    digit = F.rpad(sig, width, "0").cast("int")
    zero = F.length(sig) == F.lit(0)
    return (
        F.when(zero, F.lit(0)).otherwise(weight),
        F.when(zero, F.lit(0)).otherwise(digit),
    )


def _long_division(padded: Column, divisor: Column, chunks: int) -> Column:
    """``struct(q, r)`` of the digit string ``padded`` (``13 * chunks`` digits) divided by
    ``divisor`` (decimal(38,0), ``1 <= divisor < 10**25``), one base 10**13 digit at a time,
    each partial remainder bound once; ``q`` must stay below 10**38."""
    base = _dec(10**_CHUNK)

    def step(i: int, acc: Column) -> Column:
        if i == chunks:
            return acc
        digit = F.substring(padded, i * _CHUNK + 1, _CHUNK).cast(_EXACT)

        def divide(current: Column) -> Column:
            # try_: a quotient beyond 38 digits (an overflow, the caller's check) is NULL
            shifted = F.try_multiply(acc["q"], base)
            q = F.try_add(shifted, F.call_function("div", current, divisor)).cast(_EXACT)
            r = (current % divisor).cast(_EXACT)
            return _let(F.struct(q.alias("q"), r.alias("r")), lambda bound: step(i + 1, bound))

        return _let((acc["r"] * base + digit).cast(_EXACT), divide)

    return step(0, F.struct(_dec(0).alias("q"), _dec(0).alias("r")))


def numeric_divide(
    a: Column,
    b: Column,
    a_scale: int,
    b_scale: int,
    out_scale: int,
    check: Check = raising,
) -> Column:
    """``a / b`` (decimal columns of scales ``a_scale``, ``b_scale``) as ``decimal(38,
    out_scale)``: NULL when either is NULL or ``b`` is zero; a quotient beyond the type fails
    through ``check`` (module docs)."""
    present = a.isNotNull() & b.isNotNull() & (b != F.lit(0))
    quotient = F.when(present, _quotient(a, b, a_scale, b_scale, out_scale))
    # |a / b| below half the type's bound (in doubles, a margin far beyond their error) fits
    # once rounded; elsewhere the quotient says (NULL: beyond the type)
    half_bound = F.lit(0.5 * 10.0 ** (NUMERIC_MAX_PRECISION - out_scale))
    inside = F.abs(a.cast("double")) < F.abs(b.cast("double")) * half_bound
    overflow = present & ~inside & quotient.isNull()
    return check(quotient, (overflow, "22003", OVERFLOW))


def _quotient(a: Column, b: Column, a_scale: int, b_scale: int, out_scale: int) -> Column:
    """``a / b`` for non-zero ``b`` (module docs); NULL beyond ``decimal(38, out_scale)``."""
    out = T.DecimalType(38, out_scale)
    # the dividend's digits: at most a's precision, then at most k zeros
    width = NUMERIC_MAX_PRECISION + out_scale + max(0, b_scale - a_scale)
    chunks = -(-width // _CHUNK)

    def with_digits(d: Column) -> Column:
        sig_a, sig_b = d["a"], d["b"]
        wa, da = _weight_and_digit(sig_a, a_scale)
        wb, db = _weight_and_digit(sig_b, b_scale)
        qweight = wa - wb - F.when(da <= db, F.lit(1)).otherwise(F.lit(0))
        scale = F.greatest(
            F.lit(MIN_SIGNIFICANT_DIGITS) - qweight * F.lit(4), F.lit(max(a_scale, b_scale))
        )
        return _let(F.least(scale, F.lit(out_scale)), lambda digits: with_scale(d, digits))

    def with_scale(d: Column, digits: Column) -> Column:
        sig_b = d["b"]
        k = digits + F.lit(b_scale - a_scale)
        trailing = F.length(sig_b) - F.length(F.regexp_replace(sig_b, "0+$", ""))
        cancel = F.least(trailing, k)
        dividend = F.concat(d["a"], F.repeat(F.lit("0"), k - cancel))
        operands = F.struct(
            F.lpad(dividend, chunks * _CHUNK, "0").alias("dividend"),
            F.substring(sig_b, F.lit(1), F.length(sig_b) - cancel).alias("divisor"),
        )
        return _let(operands, lambda o: divided(d, digits, o))

    def divided(d: Column, digits: Column, o: Column) -> Column:
        divisor = o["divisor"].cast(_EXACT)

        def rounded(qr: Column) -> Column:
            up = (qr["r"] * _dec(2)).cast(_EXACT) >= divisor
            n = F.try_add(qr["q"], F.when(up, _dec(1)).otherwise(_dec(0))).cast(_EXACT)
            return _let(n.cast("string"), lambda text: _point(d["neg"], text, digits))

        exact = _let(_long_division(o["dividend"], divisor, chunks), rounded).try_cast(out)
        fits = F.length(o["divisor"]) <= F.lit(_MAX_DIVISOR_DIGITS)
        return F.when(fits, exact).otherwise(F.try_divide(d["x"], d["y"]).try_cast(out))

    bound = F.struct(
        _digits(a).alias("a"),
        _digits(b).alias("b"),
        ((a < F.lit(0)) != (b < F.lit(0))).alias("neg"),
        a.alias("x"),
        b.alias("y"),
    )
    return _let(bound, with_digits)


def _point(negative: Column, unscaled: Column, scale: Column) -> Column:
    """The text of ``unscaled * 10**-scale`` (``unscaled`` non-negative digits), signed."""
    text = F.lpad(unscaled, F.greatest(F.length(unscaled), scale + F.lit(1)), "0")
    cut = F.length(text) - scale
    fraction = F.concat(F.lit("."), F.substring(text, cut + F.lit(1), scale))
    return F.concat(
        F.when(negative, F.lit("-")).otherwise(F.lit("")),
        F.substring(text, F.lit(1), cut),
        F.when(scale > F.lit(0), fraction).otherwise(F.lit("")),
    )
