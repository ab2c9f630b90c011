"""One identity per row: equal values are one value wherever rows meet.

Floats have two values that compare in surprising ways: ``-0.0 == 0.0`` in Python but the two
are different bit patterns (so Arrow's hash grouping keeps them apart), and NaN is unequal to
itself in Python (so a NaN row can never be found again in a dict or Counter). spate follows
PostgreSQL: ``-0.0`` and ``0.0`` are the same value, and NaN equals NaN. Rows are normalised at
the boundaries where they enter or leave the physical format (validated rows, Arrow tables built
or checked, rows read back, consolidation keys), so storage, reads and renderers all see one
value:

* ``-0.0`` becomes ``0.0``;
* every NaN becomes the one canonical NaN (:data:`NAN`, in Python the same object, so tuples
  containing it compare and hash equal).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

from spate.repr.types import Row

NAN: Final = float("nan")
"""The canonical NaN: every float NaN in a row is this object."""


def canonical_float(value: float) -> float:
    """``value`` with ``-0.0`` as ``0.0`` and any NaN as :data:`NAN`."""
    if value != value:
        return NAN
    if value == 0.0:
        return 0.0
    return value


def canonical_floats(values: Sequence[object]) -> list[object]:
    """Each float in ``values`` canonical (ints become floats; NULLs stay)."""
    return [
        canonical_float(float(v)) if isinstance(v, (int, float)) and not isinstance(v, bool) else v
        for v in values
    ]


def canonical_row(row: Row) -> Row:
    """``row`` with each float canonical (for rows whose types are not known)."""
    if any(isinstance(v, float) for v in row):
        return tuple(canonical_float(v) if isinstance(v, float) else v for v in row)
    return row


def normalize_float_array(column: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """A float64 column with ``-0.0`` as ``0.0`` and every NaN one bit pattern."""
    if len(column) == 0:
        return column
    # -0.0 + 0.0 is +0.0 under round-to-nearest; every other value is unchanged.
    plus_zero = pc.add(column, pa.scalar(0.0, column.type))
    return pc.if_else(pc.is_nan(plus_zero), pa.scalar(NAN, column.type), plus_zero)


def normalize_table(table: pa.Table) -> pa.Table:
    """``table`` with every floating point column normalised (other columns untouched)."""
    for i, field in enumerate(table.schema):
        if pa.types.is_floating(field.type):
            table = table.set_column(i, field, normalize_float_array(table.column(i)))
    return table
