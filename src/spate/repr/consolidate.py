"""Consolidation of updates, vectorised on Arrow tables (and a small-list variant).

For a table ``U`` of updates (data columns, ``_time``, ``_diff``):

* ``consolidate(U)`` sums ``_diff`` over equal ``(row, _time)`` and drops zero sums. It is
  idempotent, independent of input order, and preserves ``Σ diff`` per ``(row, time)``;
* ``accumulate_at(U, t)`` is the collection at time ``t``: ``Σ diff`` per row over updates with
  ``_time <= t``, without zero rows. Output: data columns and ``_diff`` (the multiplicity);
* ``advance_times(U, since)`` replaces every ``_time < since`` by ``since``. By the differential
  dataflow guarantee, ``accumulate_at(advance_times(U, s), t) == accumulate_at(U, t)`` for every
  ``t >= s``; this is what compaction relies on.

Rows compare by value with NULL equal to NULL (identical rows consolidate), ``-0.0`` equal to
``0.0`` and NaN equal to NaN (see :mod:`spate.repr.identity`).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spate.repr.arrow import integers_under
from spate.repr.desc import DIFF_COLUMN, RESERVED_COLUMNS, TIME_COLUMN
from spate.repr.identity import canonical_row, normalize_table
from spate.repr.types import Row

_SUM = DIFF_COLUMN + "_sum"


def data_columns(table: pa.Table) -> list[str]:
    return [n for n in table.column_names if n not in RESERVED_COLUMNS]


THREADED_ROWS = 1_000_000
"""Tables of at least this many rows are grouped with Arrow's thread pool: below it, handing
the work to the pool costs more than it saves (a step's 1,000 updates: 1.4 ms threaded, 0.12 ms
not, on two cores)."""


def _group_sum(table: pa.Table, keys: list[str]) -> pa.Table:
    table = normalize_table(table)
    threads = table.num_rows >= THREADED_ROWS
    grouped = table.group_by(keys, use_threads=threads).aggregate([(DIFF_COLUMN, "sum")])
    grouped = grouped.filter(pc.not_equal(grouped.column(_SUM), 0))
    return grouped.rename_columns([*keys, DIFF_COLUMN])


SORTED_ROWS = 500
"""Tables of at most this many rows whose columns are all integers underneath or text are
consolidated by sorting (:func:`_sorted_sums`, in sorted order): for a few rows it costs less
than starting a hash group-by (~0.07 ms) and its sort (another ~0.04 ms, a subscribe's batch
is sorted); beyond a few hundred rows the group-by is faster (a thousand rows of five integer
columns: 0.22 ms sorting, 0.14 ms hashing)."""


def _codes(column: pa.ChunkedArray) -> list[np.ndarray] | None:
    """Integer arrays equal together exactly where ``column``'s values are (NULLs equal to each
    other) and ordered as they are (NULLs last), or ``None`` for a type compared otherwise
    (floats: -0.0 and NaN; decimals…)."""
    t = column.type
    array = column.combine_chunks()
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t):
        encoded = pc.dictionary_encode(array, null_encoding="encode")
        # the dictionary (its distinct values) sorted: each code becomes its value's rank
        by_value = pc.array_sort_indices(encoded.dictionary, null_placement="at_end").to_numpy()
        rank = np.empty(len(by_value), dtype=np.int64)
        rank[by_value] = np.arange(len(by_value))
        return [rank[encoded.indices.to_numpy(zero_copy_only=False)]]
    if pa.types.is_date32(t) or pa.types.is_date64(t) or pa.types.is_timestamp(t):
        array = integers_under(array)
    elif pa.types.is_boolean(t):
        array = array.cast(pa.int8())
    elif not pa.types.is_integer(t) or pa.types.is_uint64(t):
        return None
    if not array.null_count:
        return [np.asarray(array.to_numpy(zero_copy_only=False), dtype=np.int64)]
    null = np.asarray(array.is_null().to_numpy(zero_copy_only=False), dtype=np.int64)
    filled = pc.fill_null(array, pa.scalar(0, array.type))
    return [null, np.asarray(filled.to_numpy(zero_copy_only=False), dtype=np.int64)]


def _sorted_sums(table: pa.Table, keys: list[str]) -> pa.Table | None:
    """:func:`_group_sum` by sorting (``SORTED_ROWS``), its rows ordered by ``keys`` (NULLs
    last), or ``None`` for a column it cannot compare as integers."""
    codes: list[np.ndarray] = []
    for k in keys:
        c = _codes(table.column(k))
        if c is None:
            return None
        codes.extend(c)
    n = table.num_rows
    order = np.lexsort(codes[::-1]) if codes else np.arange(n)
    brk = np.zeros(n, dtype=bool)
    brk[0] = True
    for code in codes:
        s = code[order]
        brk[1:] |= s[1:] != s[:-1]
    starts = np.flatnonzero(brk)
    diffs = np.asarray(table.column(DIFF_COLUMN).to_numpy(), dtype=np.int64)[order]
    sums = np.add.reduceat(diffs, starts)
    nonzero = sums != 0
    picked = table.select(keys).take(pa.array(order[starts[nonzero]]))
    diff_type = table.schema.field(DIFF_COLUMN).type
    return picked.append_column(DIFF_COLUMN, pa.array(sums[nonzero], pa.int64()).cast(diff_type))


def _restore_schema(result: pa.Table, like: pa.Schema, names: list[str]) -> pa.Table:
    """Give ``result`` the field order, nullability and metadata of ``like``."""
    fields = [like.field(n) for n in names]
    return pa.Table.from_arrays([result.column(n) for n in names], schema=pa.schema(fields))


def consolidate(table: pa.Table, *, sort: bool = False) -> pa.Table:
    """Sum ``_diff`` per ``(row, _time)``, drop zeros; ``sort=True`` orders by data, then time."""
    if table.num_rows == 0:
        return table
    keys = [*data_columns(table), TIME_COLUMN]
    summed = None
    diffs = table.column(DIFF_COLUMN)
    if table.num_rows <= SORTED_ROWS and pa.types.is_integer(diffs.type) and not diffs.null_count:
        summed = _sorted_sums(table, keys)
    ordered = summed is not None
    if summed is None:
        summed = _group_sum(table, keys)
    out = _restore_schema(summed, table.schema, [*keys, DIFF_COLUMN])
    if sort and not ordered:
        out = out.sort_by([(k, "ascending") for k in keys])
    return out


def accumulate_at(table: pa.Table, time: int, *, sort: bool = False) -> pa.Table:
    """The contents at ``time``: data columns and ``_diff``, zero multiplicities dropped."""
    data = data_columns(table)
    visible = table.filter(pc.less_equal(table.column(TIME_COLUMN), time))
    names = [*data, DIFF_COLUMN]
    if visible.num_rows == 0:
        return _restore_schema(visible.select(names), table.schema, names)
    if data:
        out = _group_sum(visible, data)
    else:
        total = pc.sum(visible.column(DIFF_COLUMN)).as_py() or 0
        out = pa.table({DIFF_COLUMN: pa.array([total] if total else [], pa.int64())})
    out = _restore_schema(out, table.schema, names)
    if sort and data:
        out = out.sort_by([(k, "ascending") for k in data])
    return out


def advance_times(table: pa.Table, since: int) -> pa.Table:
    """Every ``_time < since`` becomes ``since`` (then consolidate to shrink)."""
    idx = table.schema.get_field_index(TIME_COLUMN)
    times = table.column(TIME_COLUMN)
    advanced = pc.max_element_wise(times, pa.scalar(since, pa.int64()))
    return table.set_column(idx, table.schema.field(idx), advanced)


def consolidate_updates(updates: Iterable[tuple[Row, int, int]]) -> list[tuple[Row, int, int]]:
    """Consolidate a small list of ``(row, time, diff)`` in Python, keeping first-seen order."""
    acc: dict[tuple[Row, int], int] = {}
    for row, time, diff in updates:
        key = (canonical_row(row), time)
        acc[key] = acc.get(key, 0) + diff
    return [(row, time, diff) for (row, time), diff in acc.items() if diff != 0]
