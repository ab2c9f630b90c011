"""A text column cast to interval on Spark: :mod:`spate.repr.interval_input`'s form, read with
``regexp_extract`` over the same pattern, and its value and errors as the reference computes
them (the fields added in longs, then checked against int32 in PostgreSQL's order)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spate.render.let import let
from spate.repr.interval import INT32_MAX, INT32_MIN
from spate.repr.interval_input import GROUPS, MICRO_UNITS, PATTERN

if TYPE_CHECKING:
    from spate.render.scalar_funcs import Check

_LONG: Final = T.LongType()
# case-insensitive (ASCII, as Python's re.ASCII) and only "\n" ends a line (as in Python)
_JAVA_PATTERN: Final = "(?id)" + PATTERN
_UNSUPPORTED: Final = (
    "interval text is not in a form read at run time ([@] counts of units from millennia "
    "down to microseconds, or a time h:mm[:ss[.f]], [ago])"
)


def _int32(x: Column) -> Column:
    return (x >= F.lit(INT32_MIN)) & (x <= F.lit(INT32_MAX))


Make = Callable[[Column, Column, Column], Column]


def read_text(text: Column, make: Make, check: Check) -> Column:
    """``text::interval`` (``make`` builds the stored interval of three longs).

    The groups are bound once (:func:`~spate.render.let.let`); the value and each failure's
    condition leave the binding's lambda as fields of a struct, and ``check`` sees those
    fields: a condition over the lambda's variable recorded by a capturing ``check`` would be
    used outside the lambda, where Spark cannot resolve it."""
    groups = {f"g{k}": F.regexp_extract(text, _JAVA_PATTERN, k) for k in range(1, GROUPS + 1)}
    out = let(lambda *g: _value(text, list(g), make), **groups)
    failing = [(out[name], sqlstate, message) for name, sqlstate, message in _FAILURES]
    bad = F.lit(False)
    for cond, _, _ in failing:
        bad = bad | cond
    return check(F.when(text.isNotNull() & ~bad, out["value"]), *failing)


_FAILURES: Final = (
    ("digitless", "22007", "invalid input syntax for type interval"),
    ("unsupported", "0A000", _UNSUPPORTED),
    ("overflow", "22015", "interval field value out of range"),
    ("out_of_range", "22008", "interval out of range"),
)


def _value(text: Column, g: list[Column], make: Make) -> Column:
    """The interval of the groups ``g`` and where it fails, as a struct: ``value`` and one
    boolean field per failure of :data:`_FAILURES`."""
    empty = F.lit("")
    zero = F.lit(0).cast(_LONG)

    def n(k: int) -> Column:
        return F.when(g[k - 1] != empty, g[k - 1].cast(_LONG)).otherwise(zero)

    matched = F.lit(False)
    for k in range(1, GROUPS):
        matched = matched | (g[k - 1] != empty)
    steps: list[Column] = []
    years = n(4)
    for k, scale in ((3, 10), (2, 100), (1, 1000)):
        steps += [n(k) * F.lit(scale), years + n(k) * F.lit(scale)]
        years = years + n(k) * F.lit(scale)
    steps += [n(6) * F.lit(7), n(7) + n(6) * F.lit(7)]
    days = n(7) + n(6) * F.lit(7)
    frac = F.when(g[11] != empty, F.rpad(g[11], 6, "0").cast(_LONG)).otherwise(zero)
    clock = ((n(9) * F.lit(60) + n(10)) * F.lit(60) + n(11)) * F.lit(1_000_000) + frac
    units = zero
    for i, (scale, _) in enumerate(MICRO_UNITS):
        units = units + n(13 + i) * F.lit(scale)
    micros = F.when(g[8] != empty, F.when(g[7] == F.lit("-"), -clock).otherwise(clock)).otherwise(
        units
    )
    ago = g[17] != empty
    field_bad = F.lit(False)
    for s in steps:
        field_bad = field_bad | ~_int32(s)
    field_bad = field_bad | (ago & ((years == F.lit(INT32_MIN)) | (days == F.lit(INT32_MIN))))
    sign = F.when(ago, F.lit(-1)).otherwise(F.lit(1)).cast(_LONG)
    months = (years * F.lit(12) + n(5)) * sign
    present = text.isNotNull()
    digitless = present & ~matched & ~text.rlike("[0-9]")
    unsupported = present & ~matched & ~digitless
    overflow = present & matched & field_bad
    out_of_range = present & matched & ~field_bad & ~_int32(months)
    return F.struct(
        make(months, days * sign, micros * sign).alias("value"),
        digitless.alias("digitless"),
        unsupported.alias("unsupported"),
        overflow.alias("overflow"),
        out_of_range.alias("out_of_range"),
    )
