"""Values as the plain-Python evaluation holds them: canonical datums, their order, range checks."""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import math
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any, Final

from spate.plan.errors import EvalError
from spate.plan.expr import NAN
from spate.plan.finishing import ColumnOrder
from spate.repr.desc import Column
from spate.repr.types import INT64_MAX, INT64_MIN, Datum, Row, ScalarKind, ScalarType

K = ScalarKind
EPOCH: Final = dt.datetime(1970, 1, 1)
_CTX = decimal.Context(prec=120, rounding=decimal.ROUND_HALF_UP, Emax=999999, Emin=-999999)

_Fn1 = Callable[[Any], Datum]
_Fn2 = Callable[[Any, Any], Datum]


def canonical(value: Any, type: ScalarType) -> Datum:
    """``value`` as the evaluator represents a ``type``: float64 as float, numeric as Decimal."""
    if value is None:
        return None
    if type.kind is K.FLOAT64:
        f = float(value)
        if math.isnan(f):
            return NAN
        return 0.0 if f == 0 else f
    if type.kind is K.NUMERIC and isinstance(value, int):
        return Decimal(value)
    out: Datum = value
    return out


def canonical_row(row: Row, columns: Sequence[Column]) -> Row:
    return tuple(canonical(v, c.type) for v, c in zip(row, columns, strict=True))


def compare(a: Any, b: Any) -> int:
    """-1, 0 or 1 for two non-NULL values of one type (NaN equals NaN and is the largest)."""
    if isinstance(a, float) and isinstance(b, float):
        an, bn = math.isnan(a), math.isnan(b)
        if an or bn:
            return (an > bn) - (an < bn)
    return int(a > b) - int(a < b)


def compare_nulls_last(a: Datum, b: Datum) -> int:
    """Total order on one column's values with NULL after everything."""
    if a is None or b is None:
        return (a is None) - (b is None)
    return compare(a, b)


def compare_rows(a: Row, b: Row) -> int:
    """Rows ascending, column by column, NULLs last (TopK's tie-break)."""
    for x, y in zip(a, b, strict=True):
        c = compare_nulls_last(x, y)
        if c:
            return c
    return 0


def compare_by(order_by: Sequence[ColumnOrder], a: Row, b: Row) -> int:
    """Order rows by the columns of ``order_by`` (each ascending or descending, NULLs first or
    last as PostgreSQL places them, NaN above every number); 0 when they tie on all of them."""
    for o in order_by:
        x, y = a[o.column], b[o.column]
        if x is None or y is None:
            if x is None and y is None:
                continue
            nulls_last = o.effective_nulls_last()
            return (1 if nulls_last else -1) * (1 if x is None else -1)
        c = compare(x, y)
        if c:
            return -c if o.desc else c
    return 0


row_key = functools.cmp_to_key(compare_rows)
value_key = functools.cmp_to_key(compare_nulls_last)


def check_int64(value: int, what: object) -> int:
    if not INT64_MIN <= value <= INT64_MAX:
        raise EvalError(f"int64 overflow in {what}: {value}", sqlstate="22003")
    return value


def fit_numeric(value: Decimal, type: ScalarType, what: object) -> Decimal:
    """Round half away from zero to the type's scale; more digits than it holds: EvalError."""
    assert type.scale is not None
    q = value.quantize(Decimal(1).scaleb(-type.scale), context=_CTX)
    if q.is_signed() and not q:
        q = q.copy_abs()  # numeric has no -0 (-0.04 at scale 1 is 0.0, as in PostgreSQL)
    if type.problem(q) is not None:
        raise EvalError(
            f"numeric overflow in {what}: {value} does not fit {type}", sqlstate="22003"
        )
    return q


def format_timestamp(value: dt.datetime) -> str:
    text = value.strftime("%Y-%m-%d %H:%M:%S")
    if value.microsecond:
        text += "." + f"{value.microsecond:06d}".rstrip("0")
    return text
