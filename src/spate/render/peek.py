"""Reading an arrangement for a peek: literal key lookups, the contents at a time, finishing.

All of it is pyarrow on the driver — a peek must not pay for a Spark job. Results go out in the
layout of the peek's ``result_desc`` (its names and types), one row per unit of multiplicity.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spate.errors import UsageError
from spate.plan.finishing import RowSetFinishing
from spate.render.layout import col_name, data_names
from spate.repr.arrow import arrow_type, data_schema
from spate.repr.consolidate import accumulate_at
from spate.repr.desc import DIFF_COLUMN, RelationDesc
from spate.repr.types import Row


class PeekError(UsageError, ValueError):
    """A peek that cannot be answered with rows."""


def lookup(
    updates: pa.Table, desc: RelationDesc, key: Sequence[int], constraints: Sequence[Row]
) -> pa.Table:
    """The updates whose key columns equal one of the ``constraints`` (literal key rows)."""
    if not constraints:
        return updates.slice(0, 0)
    mask: pa.ChunkedArray | pa.Array | None = None
    for row in constraints:
        if len(row) != len(key):
            raise PeekError(
                f"literal constraint {row!r} has {len(row)} values; the index key has {len(key)}"
            )
        m: pa.ChunkedArray | pa.Array | None = None
        for pos, value in zip(key, row, strict=True):
            column = updates.column(col_name(pos))
            if value is None:
                eq = pc.is_null(column)
            else:
                eq = pc.equal(column, pa.scalar(value, arrow_type(desc.columns[pos].type)))
            eq = pc.fill_null(eq, False)
            m = eq if m is None else pc.and_(m, eq)
        assert m is not None
        mask = m if mask is None else pc.or_(mask, m)
    assert mask is not None
    return updates.filter(mask)


def contents_at(updates: pa.Table, timestamp: int, *, what: str) -> pa.Table:
    """Data columns and a positive ``_diff``: the contents at ``timestamp``."""
    out = accumulate_at(updates, timestamp)
    diffs = out.column(DIFF_COLUMN)
    if out.num_rows and pc.min(diffs).as_py() < 0:
        raise PeekError(
            f"{what} at {timestamp}: a row has a negative multiplicity (retractions of rows "
            "that were never inserted)"
        )
    return out


def finish(positional: pa.Table, finishing: RowSetFinishing, arity: int) -> pa.Table:
    """Order, offset, limit, project: the rows a peek returns, with their multiplicities.

    ``positional`` has the data columns ``c0…`` and ``_diff`` (all positive). The result has
    the (projected) data columns and ``_diff``: offset and limit count rows with multiplicity,
    so a row may keep only part of its multiplicity. Ties in the order are broken by the whole
    row, so a limit picks the same rows every time.
    """
    finishing.validate(arity)
    names = data_names(arity)
    diffs = positional.column(DIFF_COLUMN).to_numpy()
    if len(diffs) and diffs.min() < 0:
        raise PeekError("a row has a negative multiplicity")
    table = positional.select([*names, DIFF_COLUMN])
    if finishing.order_by or finishing.limit is not None or finishing.offset:
        table = _ordered(table, finishing, names)
        diffs = table.column(DIFF_COLUMN).to_numpy().astype(np.int64)
        cum = np.cumsum(diffs)
        start = cum - diffs
        end = cum
        if finishing.limit is not None:
            end = np.minimum(end, finishing.offset + finishing.limit)
        keep = end - np.maximum(start, finishing.offset)
        mask = keep > 0
        table = table.select(names).filter(pa.array(mask))
        table = table.append_column(DIFF_COLUMN, pa.array(keep[mask], pa.int64()))
    if finishing.project is not None:
        table = table.select([*(names[i] for i in finishing.project), DIFF_COLUMN])
    return table


def _ordered(table: pa.Table, finishing: RowSetFinishing, names: list[str]) -> pa.Table:
    """Sort by the finishing's order (PostgreSQL NULL placement per column), then every column
    ascending with NULLs last."""
    helper = table
    keys: list[tuple[str, str]] = []
    extra: dict[str, pa.Array | pa.ChunkedArray] = {}
    orders = [(o.column, o.desc, o.effective_nulls_last()) for o in finishing.order_by]
    orders += [(i, False, True) for i in range(len(names))]
    for n, (pos, desc, nulls_last) in enumerate(orders):
        column = table.column(names[pos])
        nulls = pc.is_null(column, nan_is_null=False)
        flag = f"_n{n}"
        extra[flag] = nulls
        # False sorts before True: NULLs last ascending the flag, first descending it.
        keys.append((flag, "ascending" if nulls_last else "descending"))
        keys.append((names[pos], "descending" if desc else "ascending"))
    for name, values in extra.items():
        helper = helper.append_column(name, values)
    return helper.sort_by(keys)


def name_result(table: pa.Table, result_desc: RelationDesc | None) -> pa.Table:
    """Positional result columns (then ``_diff``) renamed and cast to ``result_desc``."""
    if result_desc is None:
        return table
    schema = data_schema(result_desc)
    data = table.num_columns - 1
    if data != len(schema):
        raise PeekError(
            f"the result has {data} columns; the peek's result description "
            f"{result_desc} has {len(schema)}"
        )
    arrays = [table.column(i).cast(schema.field(i).type) for i in range(data)]
    arrays.append(table.column(data))
    fields = [*schema, pa.field(DIFF_COLUMN, pa.int64(), nullable=False)]
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))
