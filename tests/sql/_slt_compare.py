"""Comparing spate's answer (a pyarrow Table) with PostgreSQL's rows.

Values are normalised per column of spate's result type, then rows are compared as multisets
(or in order, for queries whose ORDER BY fixes the order):

- floats: NaN equals NaN, -0.0 equals 0.0, otherwise equal to 12 significant digits (the
  engines sum in different orders); a ``real`` (float32) column's values as single-precision
  values (PostgreSQL sends their shortest digits, ``0.1``);
- numerics: by value; where PostgreSQL's scale exceeds spate's column scale (division), PG's
  value is rounded to spate's scale first;
- integers against a PostgreSQL numeric (``sum(bigint)``): by value;
- intervals: as PostgreSQL prints them (so ``'1 mon'`` and ``'30 days'`` differ);
- everything else (text, booleans, dates, timestamps, bytes): exactly.

:func:`type_problem` compares the result's column types: where PostgreSQL's column is an
integer (``smallint``, ``integer``, ``bigint``) or a float (``real``, ``double precision``) and
spate's is one of the same family, they must be the same width.
"""

from __future__ import annotations

import math
import struct
from collections import Counter
from collections.abc import Callable, Sequence
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from typing import Any

import pyarrow as pa

from spate.repr.interval import Interval

Row = tuple[Any, ...]


def _float_key(v: Any) -> Any:
    x = float(v)
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return Decimal(0)
    return Decimal(f"{x:.12g}")


def _decimal_key(scale: int) -> Callable[[Any], Any]:
    quantum = Decimal(1).scaleb(-scale)

    def key(v: Any) -> Any:
        if isinstance(v, float):
            return _float_key(v)
        d = Decimal(v)
        if not d.is_finite():
            return str(d)
        try:
            return (
                d.quantize(quantum, rounding=ROUND_HALF_EVEN)
                if d.as_tuple().exponent < -scale
                else d
            )  # type: ignore[operator]
        except InvalidOperation:
            return d

    return key


def _int_key(v: Any) -> Any:
    if isinstance(v, bool):
        return v
    if isinstance(v, Decimal) and v == v.to_integral_value():
        return int(v)
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def _plain(v: Any) -> Any:
    if isinstance(v, memoryview | bytearray):
        return bytes(v)
    return v


def _interval_text(v: Any) -> Any:
    if isinstance(v, pa.MonthDayNano):
        return Interval(v.months, v.days, v.nanoseconds // 1000).text()
    return v


def _single_key(v: Any) -> Any:
    x = float(v)
    if math.isfinite(x):
        x = struct.unpack("f", struct.pack("f", x))[0]
    return _float_key(x)


def _normaliser(t: pa.DataType) -> Callable[[Any], Any]:
    if t == pa.month_day_nano_interval():
        return _interval_text  # compared as PostgreSQL prints them: the fields exactly
    if pa.types.is_float32(t):
        return _single_key
    if pa.types.is_floating(t):
        return _float_key
    if pa.types.is_decimal(t):
        return _decimal_key(t.scale)
    if pa.types.is_integer(t):
        return _int_key
    return _plain


def _normalise(rows: Sequence[Row], keys: list[Callable[[Any], Any]]) -> list[Row]:
    return [tuple(None if v is None else k(v) for k, v in zip(keys, r, strict=True)) for r in rows]


def table_rows(table: pa.Table) -> list[Row]:
    columns = [table.column(i).to_pylist() for i in range(table.num_columns)]
    return list(zip(*columns, strict=True)) if columns else []


def compare(pg_rows: Sequence[Row], table: pa.Table, *, ordered: bool) -> str | None:
    """``None`` if spate's ``table`` answers like ``pg_rows``, else what differs."""
    width = len(pg_rows[0]) if pg_rows else None
    if width is not None and width != table.num_columns:
        return f"{table.num_columns} columns, PostgreSQL has {width}"
    keys = [_normaliser(f.type) for f in table.schema]
    ours = _normalise(table_rows(table), keys)
    theirs = _normalise(pg_rows, keys)
    if ordered:
        if ours == theirs:
            return None
        return f"rows (in order) differ:\n  spate      {ours[:12]!r}\n  postgresql {theirs[:12]!r}"
    a, b = Counter(ours), Counter(theirs)
    if a == b:
        return None
    extra, missing = a - b, b - a
    return (
        f"rows differ: {sum(extra.values())} only in spate {list(extra.elements())[:6]!r}, "
        f"{sum(missing.values())} only in PostgreSQL {list(missing.elements())[:6]!r}"
    )


_INTEGERS = {21: pa.int16(), 23: pa.int32(), 20: pa.int64()}
_FLOATS = {700: pa.float32(), 701: pa.float64()}


def type_problem(pg_oids: Sequence[int], schema: pa.Schema) -> str | None:
    """``None`` if each integer and float column of spate's result has the width of
    PostgreSQL's column of the same family (type OIDs ``pg_oids``), else which do not."""
    bad = []
    for i, (oid, t) in enumerate(zip(pg_oids, schema.types, strict=False)):
        for family, same in ((_INTEGERS, pa.types.is_integer), (_FLOATS, pa.types.is_floating)):
            if oid in family and same(t) and t != family[oid]:
                bad.append(f"column {i + 1}: spate {t}, PostgreSQL {family[oid]}")
    return "; ".join(bad) or None
