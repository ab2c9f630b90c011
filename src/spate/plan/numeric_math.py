"""PostgreSQL's ``sqrt``, ``exp``, ``ln``, ``log`` and ``power`` of ``numeric`` values, exactly.

PostgreSQL computes these in its own decimal arithmetic and gives each result a *per-value*
scale (``rscale``): at least 16 significant digits, never fewer fraction digits than an
argument's display scale (``sqrt_var``, ``exp_var``, ``ln_var``, ``log_var``, ``power_var`` and
``power_var_int`` in ``src/backend/utils/adt/numeric.c``). Here each result is computed with
Python's :mod:`decimal` at a precision well beyond that scale (correctly rounded), then rounded
half away from zero to PostgreSQL's ``rscale``; the caller stores it at the column's static scale
(:func:`result_type`), as numeric division does.

Errors raise :class:`~spate.plan.errors.EvalError` with PostgreSQL's SQLSTATE: the square root
of a negative number and ``0 ^ negative`` / ``negative ^ non-integer`` (2201F), the logarithm of
zero or of a negative number (2201E), a logarithm with base 1 (22012, division by zero).
A result beyond the column's 38 digits is 22003, where PostgreSQL (1000 digits) may answer.

The functions take and return :class:`~decimal.Decimal`; Spark runs them in its Python workers
(:mod:`spate.render.scalar_funcs`).
"""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Context, Decimal, localcontext
from typing import Final

from spate.plan.errors import EvalError
from spate.repr.types import ScalarType, numeric

MIN_SIG_DIGITS: Final = 16
MAX_DISPLAY_SCALE: Final = 1000
_LOG10_E: Final = 0.434294481903252


def _clamp(rscale: int, *dscales: int) -> int:
    return min(max(rscale, *dscales, 0), MAX_DISPLAY_SCALE)


def _digits(x: Decimal) -> tuple[int, list[int]]:
    """PostgreSQL's base-10000 form of ``|x|`` (non-zero): the weight of the first digit and
    the first two digits."""
    a = abs(x)
    weight = a.adjusted() // 4
    scaled = a.scaleb(-4 * weight)
    d0 = int(scaled)
    d1 = int((scaled - d0) * 10000)
    return weight, [d0, d1]


def _trunc(v: float) -> int:
    return int(v)  # C's (int): toward zero


def _ln_dweight(x: Decimal) -> int:
    """``estimate_ln_dweight``: the decimal weight of ``ln(x)``."""
    if x <= 0:
        return 0
    if Decimal("0.9") <= x <= Decimal("1.1"):
        y = x - 1
        if y == 0:
            return 0
        weight, digits = _digits(y)
        return weight * 4 + _trunc(math.log10(digits[0]))
    weight, digits = _digits(x)
    value = digits[0]
    dweight = weight * 4
    if digits[1] or (abs(x).scaleb(-4 * weight) - digits[0]) != 0:
        value = value * 10000 + digits[1]
        dweight -= 4
    ln_var = math.log(value) + dweight * 2.302585092994046
    return _trunc(math.log10(abs(ln_var))) if ln_var != 0 else 0


def _round(value: Decimal, rscale: int) -> Decimal:
    with localcontext(Context(prec=rscale + max(value.adjusted(), 0) + 10)):
        out = value.quantize(Decimal(1).scaleb(-rscale), rounding=ROUND_HALF_UP)
    return out.copy_abs() if out == 0 else out


def _ctx(rscale: int, weight: int) -> Context:
    return Context(prec=max(rscale + max(weight, 0) + 20, 40), Emax=10**6, Emin=-(10**6))


def sqrt(x: Decimal, dscale: int, what: str) -> Decimal:
    if x < 0:
        raise EvalError(f"cannot take square root of a negative number in {what}", sqlstate="2201F")
    weight = _digits(x)[0] if x != 0 else 0
    sweight = (weight + 1) * 4 // 2 - 1
    rscale = _clamp(MIN_SIG_DIGITS - sweight, dscale)
    with localcontext(_ctx(rscale, sweight)):
        return _round(x.sqrt(), rscale)


def exp(x: Decimal, dscale: int, what: str) -> Decimal:
    val = float(x) * _LOG10_E
    val = max(min(val, 2000.0), -2000.0)
    rscale = _clamp(MIN_SIG_DIGITS - _trunc(val), dscale)
    if val > 100:
        raise EvalError(f"value overflows numeric format in {what}", sqlstate="22003")
    with localcontext(_ctx(rscale, _trunc(val) + 1)):
        return _round(x.exp(), rscale)


def ln(x: Decimal, dscale: int, what: str) -> Decimal:
    _log_domain(x, what)
    rscale = _clamp(MIN_SIG_DIGITS - _ln_dweight(x), dscale)
    with localcontext(_ctx(rscale, 4)):
        return _round(x.ln(), rscale)


def log(base: Decimal, x: Decimal, base_dscale: int, dscale: int, what: str) -> Decimal:
    """``log(base, x)``; ``log(x)`` is ``log(10, x)``."""
    _log_domain(base, what)
    _log_domain(x, what)
    if base == 1:
        raise EvalError(f"division by zero in {what}", sqlstate="22012")
    rscale = _clamp(MIN_SIG_DIGITS - (_ln_dweight(x) - _ln_dweight(base)), base_dscale, dscale)
    with localcontext(_ctx(rscale, 40)):
        return _round(x.ln() / base.ln(), rscale)


def _log_domain(x: Decimal, what: str) -> None:
    if x == 0:
        raise EvalError(f"cannot take logarithm of zero in {what}", sqlstate="2201E")
    if x < 0:
        raise EvalError(f"cannot take logarithm of a negative number in {what}", sqlstate="2201E")


def power(a: Decimal, b: Decimal, a_dscale: int, b_dscale: int, what: str) -> Decimal:
    if a == 0 and b < 0:
        raise EvalError(f"zero raised to a negative power is undefined in {what}", sqlstate="2201F")
    integral = b == b.to_integral_value()
    if a < 0 and not integral:
        raise EvalError(
            f"a negative number raised to a non-integer power yields a complex result in {what}",
            sqlstate="2201F",
        )
    if integral and -(2**31) <= b < 2**31:
        return _power_int(a, int(b), a_dscale, what)
    if a == 0:
        return _round(Decimal(0), MIN_SIG_DIGITS)
    ln_dweight = _ln_dweight(a)
    local = max(8 - ln_dweight, 0)
    with localcontext(Context(prec=60, Emax=10**6, Emin=-(10**6))):
        ln_a = _round(a.ln(), local)
        val = float(_round(ln_a * b, local))
    if abs(val) > 2000 * 3.01 or val * _LOG10_E > 100:
        if val > 0:
            raise EvalError(f"value overflows numeric format in {what}", sqlstate="22003")
        return Decimal(0)
    val *= _LOG10_E
    rscale = _clamp(MIN_SIG_DIGITS - _trunc(val), a_dscale, b_dscale)
    with localcontext(_ctx(rscale, _trunc(val) + 1)):
        return _round(a**b, rscale)


def _power_int(a: Decimal, n: int, a_dscale: int, what: str) -> Decimal:
    """PostgreSQL 15's integer powers: the scale is max(16, the base's)."""
    rscale = _clamp(MIN_SIG_DIGITS, a_dscale)
    if n == 0:
        return _round(Decimal(1), rscale)
    if a == 0:
        return _round(Decimal(0), rscale)
    f = n * math.log10(abs(a))  # the result's decimal weight, roughly
    if f > 100:
        raise EvalError(f"value overflows numeric format in {what}", sqlstate="22003")
    if f < -(rscale + 2):
        return _round(Decimal(0), rscale)
    prec = max(rscale + abs(_trunc(f)) + 30, 60)
    with localcontext(Context(prec=prec, Emax=10**6, Emin=-(10**6))):
        return _round(a**n, rscale)


# --- the static result types -------------------------------------------------------------------


def result_type(name: str, args: list[ScalarType]) -> ScalarType:
    """The column type of ``name`` (``sqrt``, ``exp``, ``ln``, ``log``, ``power``) of numerics
    of the types ``args``: 38 digits, with a scale large enough for PostgreSQL's scale of
    every result of ordinary size (see docs/sql.md for what is rounded)."""
    scales = [t.scale or 0 for t in args]
    whole = [(t.precision or 38) - (t.scale or 0) for t in args]
    s = max(scales)
    if name == "sqrt":
        # the smallest positive value, 10^-s, has the largest rscale
        weight = (-s) // 4
        scale = max(MIN_SIG_DIGITS - ((weight + 1) * 4 // 2 - 1), s)
        return numeric(38, min(scale, 38 - (whole[0] + 1) // 2))
    if name in ("ln", "log"):
        return numeric(38, min(MIN_SIG_DIGITS + s + 1, 34))
    return numeric(38, min(max(s, MIN_SIG_DIGITS + 4), 38 - 18))
