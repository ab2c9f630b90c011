"""Division of ``numeric`` values, as PostgreSQL divides them.

PostgreSQL's numeric quotient has no fixed type scale: each quotient is rounded (half away from
zero) to a *result scale* chosen from the operands' values, so that it carries at least 16
significant digits (numeric is never less precise than float8) and never fewer fraction digits
than either operand displays. In PostgreSQL's base-10000 digits: with ``w`` an operand's weight
(the power of 10000 of its leading base-10000 digit, 0 for zero) and ``d`` that digit,

    qweight = w(a) - w(b) - (1 if d(a) <= d(b) else 0)          # estimated weight of a / b
    rscale  = max(16 - 4 * qweight, scale(a), scale(b), 0)

so ``1 / 3`` has 20 fraction digits (qweight -1), ``10000 / 3`` 16 and ``1 / 30000`` 24.

spate's columns have one scale per type, so the IR's ``numeric(pa,sa) / numeric(pb,sb)`` is
``numeric(38, S)`` with ``S = division_scale(...)``: room for the quotient's integer digits
when the operands' types bound them, at least 16 and at most 24 fraction digits, never fewer
than either operand's scale. Each quotient is the exact ``a / b`` rounded half away from zero to
``min(rscale, S)`` digits, with ``scale(x)`` the operand's type scale (PostgreSQL's display
scale of a typed column's values). A quotient that does not fit ``numeric(38, S)`` is a numeric
overflow; division by zero is NULL here (the SQL layer turns it into PostgreSQL's error).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Final

from spate.repr.types import NUMERIC_MAX_PRECISION, ScalarType

MIN_SIGNIFICANT_DIGITS: Final = 16
"""PostgreSQL's NUMERIC_MIN_SIG_DIGITS: a quotient has at least this many significant digits."""
MAX_DIVISION_SCALE: Final = 24
"""The largest type scale chosen for a quotient (``1 / 30000`` needs 24)."""


def division_scale(a: ScalarType, b: ScalarType) -> int:
    """``S``, the type scale of ``numeric(pa,sa) / numeric(pb,sb)`` (module docs)."""
    assert a.precision is not None and a.scale is not None
    assert b.precision is not None and b.scale is not None
    integral = (a.precision - a.scale) + b.scale  # |a / b| < 10**integral
    room = NUMERIC_MAX_PRECISION - integral
    wanted = min(max(room, MIN_SIGNIFICANT_DIGITS), MAX_DIVISION_SCALE)
    return min(NUMERIC_MAX_PRECISION, max(a.scale, b.scale, wanted))


def weight_and_digit(x: Decimal) -> tuple[int, int]:
    """PostgreSQL's weight of ``|x|`` (power of 10000 of its leading base-10000 digit) and that
    digit; ``(0, 0)`` for zero."""
    if x == 0:
        return 0, 0
    x = abs(x)
    weight = x.adjusted() // 4
    return weight, int(x.scaleb(-4 * weight))


def result_scale(a: Decimal, b: Decimal, a_scale: int, b_scale: int) -> int:
    """PostgreSQL's result scale of ``a / b`` for operands displayed with these scales."""
    wa, da = weight_and_digit(a)
    wb, db = weight_and_digit(b)
    qweight = wa - wb - (1 if da <= db else 0)
    return max(MIN_SIGNIFICANT_DIGITS - 4 * qweight, a_scale, b_scale, 0)


def divide(a: Decimal, b: Decimal, a_scale: int, b_scale: int, out_scale: int) -> Decimal:
    """``a / b`` (``b != 0``) rounded half away from zero to ``min(rscale, out_scale)``
    fraction digits, exactly (integer arithmetic: no context precision involved)."""
    digits = min(result_scale(a, b, a_scale, b_scale), out_scale)
    num_sign, num_digits, num_exp = a.as_tuple()
    den_sign, den_digits, den_exp = b.as_tuple()
    assert isinstance(num_exp, int) and isinstance(den_exp, int)
    num = int("".join(map(str, num_digits)) or "0")
    den = int("".join(map(str, den_digits)) or "0")
    # a / b * 10**digits = num * 10**(num_exp - den_exp + digits) / den
    shift = num_exp - den_exp + digits
    if shift >= 0:
        num *= 10**shift
    else:
        den *= 10**-shift
    q, r = divmod(num, den)
    if 2 * r >= den:
        q += 1
    negative = (num_sign != den_sign) and q != 0
    return Decimal((1 if negative else 0, tuple(int(c) for c in str(q)), -digits))
