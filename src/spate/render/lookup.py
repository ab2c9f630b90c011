"""Key lookups: the rows of a table whose key is among given keys, served by pyarrow.

A step touches few keys of large arrangements. Spark can only find them by scanning every
file (a 1M-row arrangement costs a scan per step, whatever the delta), so operators ask the
arrangement for the touched keys' rows instead — a read of the arrangement, served on the
driver like a peek — and hand Spark that small table to compute with.

A lookup may return a **superset** of the matching rows: operators always apply their exact
key conditions in Spark afterwards. That lets a lookup use only the key columns it can match
exactly in pyarrow (integers, text, bytes, numeric, dates, timestamps, booleans); floats
(``-0.0 = 0.0`` and NaN equal in Spark) and jsonb are left to Spark, and a lookup with no
usable column is not done at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

import pyarrow as pa
import pyarrow.compute as pc

from spate.repr.desc import RelationDesc
from spate.repr.types import ScalarKind

if TYPE_CHECKING:
    from pyspark.sql import Column

LOOKUP_MAX_ROWS: Final = 8_000_000
"""Arrangements up to this many updates are kept in driver memory (as Arrow) and serve
lookups; larger ones are read by Spark."""

_EXACT: Final = frozenset(
    {
        ScalarKind.BOOL,
        ScalarKind.INT64,
        ScalarKind.NUMERIC,
        ScalarKind.TEXT,
        ScalarKind.BYTES,
        ScalarKind.DATE,
        ScalarKind.TIMESTAMP,
    }
)


def lookup_columns(desc: RelationDesc, columns: Sequence[int], *, null_safe: bool) -> list[int]:
    """The positions among ``columns`` (key columns of ``desc``) a lookup matches on.

    With one column, NULL keys match NULL when ``null_safe``; with several, only non-nullable
    columns are used (a multi-column semi-join cannot match NULLs), which still selects a
    superset. Empty: no lookup possible.
    """
    exact = [i for i, c in enumerate(columns) if desc.columns[c].type.kind in _EXACT]
    if len(exact) <= 1 or not null_safe:
        return exact
    return [i for i in exact if not desc.columns[columns[i]].nullable] or exact[:1]


def semi_join(
    table: pa.Table, columns: Sequence[str], keys: pa.Table, *, null_safe: bool
) -> pa.Table | None:
    """The rows of ``table`` whose ``columns`` equal a row of ``keys`` (same order, any
    names). NULL matches NULL only when ``null_safe`` and there is one column. ``None`` when
    pyarrow cannot compare the key types (the caller leaves the lookup to Spark)."""
    if table.num_rows == 0 or keys.num_rows == 0:
        return table.slice(0, 0)
    names = list(columns)
    try:
        values = [
            keys.column(i).combine_chunks().cast(table.schema.field(n).type)
            for i, n in enumerate(names)
        ]
        if len(names) == 1:
            (v,) = values
            if not null_safe:
                v = v.drop_null()
            mask = pc.is_in(table.column(names[0]), value_set=v, skip_nulls=not null_safe)
            return table.filter(mask)
        right = pa.Table.from_arrays(values, names=names).drop_null()
        right = right.group_by(names, use_threads=False).aggregate([])
        return table.join(right, keys=names, join_type="left semi", use_threads=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None


def concat_like(a: pa.Table, b: pa.Table) -> pa.Table:
    """``a`` and then ``b``, in ``a``'s schema (the two may differ in nullability)."""
    return pa.concat_tables([a, b if b.schema.equals(a.schema) else b.cast(a.schema)])


IN_LIST_KEYS = 2_000
"""Up to this many touched keys (of a one-column key) select the history with a literal IN
list (pushed down to the Parquet scan, no broadcast job)."""


def in_list(name: str, values: pa.Array | pa.ChunkedArray) -> Column | None:
    """``name IN (…)`` over integer ``values``, as one SQL expression (one py4j call, where
    ``Column.isin`` makes one per value); ``None`` when the values are not integers or more
    than ``IN_LIST_KEYS`` distinct ones (the caller joins with them instead)."""
    from pyspark.sql import functions as F

    if not pa.types.is_integer(values.type):
        return None
    unique = pc.unique(values)
    if len(unique) > IN_LIST_KEYS:
        return None
    distinct = unique.to_pylist()
    present = [int(v) for v in distinct if v is not None]
    parts = []
    if present:
        parts.append(f"{name} IN ({', '.join(map(str, present))})")
    if len(present) < len(distinct):
        parts.append(f"{name} IS NULL")
    return F.expr(" OR ".join(parts) if parts else "false")
