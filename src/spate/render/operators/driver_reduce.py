"""A small reduce step computed on the driver with pyarrow, without a Spark job.

When a reduce's touched groups were looked up on the driver (:meth:`KeyedNode._lookup`: the
keys' history and the delta as one Arrow table, at most ``small_rows`` rows), shipping them to
Spark for the group arithmetic costs a Spark job (~40-150 ms here) and the plan's analysis for a
few thousand rows that pyarrow groups in about a millisecond. :func:`reduce_on_driver` computes
steps 3 and 4 of :mod:`spate.render.operators.keyed` from the same inputs — every touched key
accumulated at every time of ``T``, and each output row ``+1`` at ``_from``, ``-1`` at
``_next`` — for the aggregates whose values pyarrow computes exactly as the renderer's Spark
columns (:mod:`spate.render.aggregates`) do:

* keys of bool, int64, text, date or timestamp columns, never NULL in the rows given;
* aggregates over an input column (or ``count(*)``, or ``count`` of a non-NULL literal, which
  counts the rows as ``count(*)`` does), not ``DISTINCT``: ``count``; ``sum`` and ``avg`` of
  int64 (``Σ v·m`` exact: a product beyond int64 falls back; the average is Python's correctly
  rounded ``int / int``); ``sum`` of an int64 column cast to ``numeric(p, 0)`` with ``p >= 19``
  (how the Spark dialect sums a ``bigint``: every int64 is such a numeric unchanged, so the sum
  is the same exact ``Σ v·m``, as a numeric); ``min`` and ``max`` of bool, int64, text (pyarrow
  and Spark both order UTF-8 by bytes, which is code-point order), date or timestamp.

Anything else, and any group with a negative multiplicity or a sum beyond int64 (evaluation
errors, which Spark raises with their messages), returns ``None``: the caller takes the Spark
path. Consolidation may keep apart rows Spark would merge (float columns the aggregates do not
read, compared by bits here); that never changes a count, sum, min or max, and a row that would
become negative through it falls back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spate.plan.aggregate import AggregateExpr, AggregateFunc
from spate.plan.expr import Cast, ColumnRef, Literal
from spate.render.layout import col_name, data_names, internal_schema
from spate.repr.consolidate import consolidate
from spate.repr.desc import DIFF_COLUMN, TIME_COLUMN, RelationDesc
from spate.repr.types import ScalarKind

K = ScalarKind
_KEY_KINDS: Final = frozenset({K.BOOL, K.INT64, K.TEXT, K.DATE, K.TIMESTAMP})
_MIN_MAX_KINDS: Final = frozenset({K.BOOL, K.INT64, K.TEXT, K.DATE, K.TIMESTAMP})
_AT: Final = "_at"
_NEXT: Final = "_next"
_FROM: Final = "_from"
_M: Final = "_m"
_EXACT: Final = pa.decimal128(38, 0)


def counts_rows(agg: AggregateExpr) -> bool:
    """Whether ``agg`` is the group's row count: ``count(*)``, or ``count`` of a literal that
    is not NULL (``count(1)``), not ``DISTINCT``."""
    if agg.func is not AggregateFunc.COUNT or agg.distinct:
        return False
    return agg.is_count_star() or (isinstance(agg.expr, Literal) and agg.expr.value is not None)


def value_column(agg: AggregateExpr, in_desc: RelationDesc) -> int | None:
    """The input column whose values ``agg`` aggregates as they are: a column, or for ``sum``
    an int64 column cast to ``numeric(p, 0)`` with ``p >= 19`` (module docs); ``None`` for any
    other expression."""
    e = agg.expr
    if isinstance(e, ColumnRef):
        return e.index
    if (
        agg.func is AggregateFunc.SUM
        and isinstance(e, Cast)
        and isinstance(e.expr, ColumnRef)
        and e.type.kind is K.NUMERIC
        and e.type.scale == 0
        and (e.type.precision or 0) >= 19
        and in_desc.columns[e.expr.index].type.kind is K.INT64
    ):
        return e.expr.index
    return None


def supported(
    key: Sequence[int], aggregates: Sequence[AggregateExpr], in_desc: RelationDesc
) -> bool:
    """Whether :func:`reduce_on_driver` can compute this reduce (module docs)."""
    if not key or any(in_desc.columns[k].type.kind not in _KEY_KINDS for k in key):
        return False
    for agg in aggregates:
        if agg.distinct:
            return False
        if counts_rows(agg):
            continue
        index = value_column(agg, in_desc)
        if index is None:
            return False
        kind = in_desc.columns[index].type.kind
        f = agg.func
        if f is AggregateFunc.COUNT:
            continue
        if f in (AggregateFunc.SUM, AggregateFunc.AVG) and kind is K.INT64:
            continue
        if f in (AggregateFunc.MIN, AggregateFunc.MAX) and kind in _MIN_MAX_KINDS:
            continue
        return False
    return True


def reduce_on_driver(
    rows: pa.Table,
    times: pa.Table,
    key: Sequence[int],
    aggregates: Sequence[AggregateExpr],
    in_desc: RelationDesc,
    out_desc: RelationDesc,
) -> pa.Table | None:
    """The reduce's output changes (consolidated, internal layout of ``out_desc``) for the
    touched groups' ``rows`` (history and delta, internal layout of ``in_desc``) and ``T``
    (``times``: the key columns, ``_time`` as the group's time, ``_next``, ``_from``), or
    ``None`` when the Spark path must compute them (module docs)."""
    keys = [col_name(k) for k in key]
    if any(rows.column(k).null_count for k in keys):
        return None  # NULL keys group together, which pyarrow's join does not do
    data = data_names(in_desc.arity)
    t = times.select([*keys, TIME_COLUMN, _NEXT, _FROM]).rename_columns([*keys, _AT, _NEXT, _FROM])
    joined = rows.join(t, keys=keys, join_type="inner", use_threads=False)
    joined = joined.filter(pc.less_equal(joined.column(TIME_COLUMN), joined.column(_AT)))
    carried = [_AT, _NEXT, _FROM]
    # Every touched group at every time of T, consolidated (NULL-safe: pyarrow groups NULLs)
    groups = joined.group_by([*data, *carried], use_threads=False).aggregate([(DIFF_COLUMN, "sum")])
    m = groups.column(f"{DIFF_COLUMN}_sum")
    if groups.num_rows and pc.min(m).as_py() < 0:
        return None  # an evaluation error: Spark raises it
    groups = groups.filter(pc.not_equal(m, 0))
    m = groups.column(f"{DIFF_COLUMN}_sum")
    columns: dict[str, pa.ChunkedArray | pa.Array] = {k: groups.column(k) for k in keys}
    for c in carried:
        columns[c] = groups.column(c)
    specs: list[tuple[str, str]] = []
    avgs: list[int] = []
    for i, agg in enumerate(aggregates):
        name = f"_a{i}"
        f = agg.func
        if counts_rows(agg):
            columns[name] = m
            specs.append((name, "sum"))
            continue
        index = value_column(agg, in_desc)
        assert index is not None
        v = groups.column(col_name(index))
        if f is AggregateFunc.COUNT:
            columns[name] = pc.if_else(pc.is_null(v), 0, m)
            specs.append((name, "sum"))
        elif f in (AggregateFunc.MIN, AggregateFunc.MAX):
            columns[name] = v
            specs.append((name, "min" if f is AggregateFunc.MIN else "max"))
        else:
            try:
                product = pc.multiply_checked(v, m)
            except pa.ArrowInvalid:
                return None
            columns[name] = product.cast(_EXACT)
            specs.append((name, "sum"))
            if f is AggregateFunc.AVG:
                columns[f"{name}_n"] = pc.if_else(pc.is_null(v), None, m)
                specs.append((f"{name}_n", "sum"))
                avgs.append(i)
    by = [*keys, *carried]
    out = pa.table(columns).group_by(by, use_threads=False).aggregate(specs)
    values: list[pa.Array | pa.ChunkedArray] = []
    n_keys = len(key)
    for i, agg in enumerate(aggregates):
        total = out.column(f"_a{i}_{specs_of(specs, f'_a{i}')}")
        if i in avgs:
            values.append(_average(total, out.column(f"_a{i}_n_sum")))
        elif agg.func is AggregateFunc.SUM and out_desc.columns[n_keys + i].type.kind is K.NUMERIC:
            if not _fits(total, out_desc.columns[n_keys + i].type.precision):
                return None  # beyond the numeric's digits: Spark raises the overflow
            values.append(total)
        elif agg.func is AggregateFunc.SUM:
            try:
                values.append(total.cast(pa.int64()))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                return None  # beyond int64: Spark raises the overflow
        elif agg.func is AggregateFunc.COUNT:
            values.append(pc.fill_null(total, 0))
        else:
            values.append(total)
    return signed_changes(out, keys, values, out_desc)


def _fits(total: pa.ChunkedArray, precision: int | None) -> bool:
    """Whether every sum of ``total`` (decimal128(38, 0)) has at most ``precision`` digits."""
    digits = 38 if precision is None else precision
    bound = 10**digits - 1
    return all(v is None or -bound <= int(v) <= bound for v in total.to_pylist())


def specs_of(specs: list[tuple[str, str]], name: str) -> str:
    """The aggregation function ``specs`` applies to column ``name``."""
    for column, func in specs:
        if column == name:
            return func
    raise KeyError(name)


def _average(total: pa.ChunkedArray, n: pa.ChunkedArray) -> pa.Array:
    """``total / n`` per row, correctly rounded (Python's ``int / int``); NULL without
    values."""
    out: list[float | None] = []
    for s, c in zip(total.to_pylist(), n.to_pylist(), strict=True):
        out.append(None if s is None or not c else int(s) / int(c))
    return pa.array(out, pa.float64())


def signed_changes(
    out: pa.Table,
    keys: list[str],
    values: list[pa.Array | pa.ChunkedArray],
    out_desc: RelationDesc,
) -> pa.Table:
    """Each output row ``+1`` at ``_from`` and ``-1`` at ``_next`` (either left out when
    NULL), consolidated, in the internal layout of ``out_desc``."""
    schema = internal_schema(out_desc)
    data = [out.column(k) for k in keys] + values
    pieces = []
    for time_col, sign in ((_FROM, 1), (_NEXT, -1)):
        present = pc.is_valid(out.column(time_col))
        arrays = [pc.filter(a, present) for a in data]
        times = pc.filter(out.column(time_col), present)
        n = len(times)
        arrays += [times, pa.array(np.full(n, sign, np.int64))]
        arrays = [a.cast(schema.field(i).type) for i, a in enumerate(arrays)]
        pieces.append(pa.Table.from_arrays(arrays, schema=schema))
    return consolidate(pa.concat_tables(pieces))
