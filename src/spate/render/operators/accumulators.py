"""A reduce's per-key accumulators, and a step folded into them from the delta alone.

For a reduce whose aggregates :mod:`.driver_reduce` computes (count, sum and avg of int64,
min and max), the state of a key ``k`` whose group ``G`` is accumulated at a time ``t`` is one
row (the **accumulator layout**, :func:`state_schema`)::

    k…, _rows = Σ m over G,
    for each aggregate i:  _n{i} = Σ m over G where v_i is not NULL     (count, sum, avg, min, max)
                           _s{i} = Σ v_i·m over G                       (sum, avg; int64)
                           _v{i} = min / max of v_i over G              (min, max)

kept only while ``_rows > 0`` (an absent key's group is empty). Every output column is a
function of it: ``count(*) = _rows``, ``count(v) = _n``, ``sum = _s`` (NULL when ``_n = 0``,
as in PostgreSQL), ``avg = _s / _n`` (correctly rounded, NULL when ``_n = 0``),
``min = max = _v``.

``_rows``, ``_n`` and ``_s`` are sums over the group, so the state at every time ``t`` of a step
over ``[lo, hi)`` is the state before the step plus the delta's rows of times ``<= t``
(:func:`fold`): exact at every time, without the group's history. ``_v`` is a summary, not
invertible: inserting ``v`` gives ``min(_v, v)``; retracting a value ``r > _v`` (for min) leaves
``_v``, which still has a positive multiplicity; retracting ``r <= _v`` (or any value when
``_v`` is NULL) may remove the extreme, and only the group's history says what comes next: such a
key is **slow** and the caller computes it from its history (:func:`state_of` then gives its new
state). A delta under which a group's ``_rows`` or ``_n`` turns negative (an evaluation error),
or whose sums could leave int64, folds nothing: the caller takes the history path, which raises
or computes them exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spate.plan.aggregate import AggregateExpr, AggregateFunc
from spate.render.layout import col_name, data_names, internal_schema
from spate.render.operators.driver_reduce import (
    counts_rows,
    signed_changes,
    value_column,
)
from spate.render.operators.driver_reduce import supported as driver_supported
from spate.repr.consolidate import consolidate
from spate.repr.desc import DIFF_COLUMN, TIME_COLUMN, RelationDesc
from spate.repr.types import ScalarKind, ScalarType

K = ScalarKind
F_ = AggregateFunc
ROWS: Final = "_rows"
_FROM: Final = "_from"
_NEXT: Final = "_next"
_SAFE: Final = float(2**62)
"""Sums whose absolute contributions stay below this cannot leave int64 at any prefix."""


def supported(
    key: Sequence[int],
    aggregates: Sequence[AggregateExpr],
    in_desc: RelationDesc,
    out_desc: RelationDesc,
) -> bool:
    """Whether a reduce can keep accumulators: :mod:`.driver_reduce` computes it, and its
    sums are int64 (or a numeric every int64 fits in: the Spark dialect's sum of a ``bigint``)
    and averages float64 (so this layout gives them exactly)."""
    if not driver_supported(key, aggregates, in_desc):
        return False
    for agg, column in zip(aggregates, out_desc.columns[len(key) :], strict=True):
        kind = column.type.kind
        if agg.func is F_.SUM and kind is not K.INT64 and not _whole_numeric(column.type):
            return False
        if agg.func is F_.AVG and kind is not K.FLOAT64:
            return False
    return True


def _whole_numeric(t: ScalarType) -> bool:
    """A numeric of scale 0 that holds every int64 (at least 19 digits)."""
    return t.kind is K.NUMERIC and t.scale == 0 and (t.precision or 0) >= 19


@dataclass(frozen=True, slots=True)
class Layout:
    """The accumulator layout of one reduce (module docs)."""

    key: tuple[int, ...]
    aggregates: tuple[AggregateExpr, ...]
    in_desc: RelationDesc
    out_desc: RelationDesc

    @property
    def keys(self) -> list[str]:
        return [col_name(k) for k in self.key]

    def value(self, i: int) -> str | None:
        """The input column aggregate ``i`` reads (``None``: ``count(*)``)."""
        agg = self.aggregates[i]
        if counts_rows(agg):
            return None
        index = value_column(agg, self.in_desc)
        assert index is not None
        return col_name(index)

    @property
    def in_schema(self) -> pa.Schema:
        return internal_schema(self.in_desc)

    def schema(self) -> pa.Schema:
        """The accumulator layout (module docs)."""
        fields = [self.in_schema.field(k) for k in self.keys]
        fields.append(pa.field(ROWS, pa.int64()))
        for i, agg in enumerate(self.aggregates):
            v = self.value(i)
            if v is None:
                continue
            fields.append(pa.field(f"_n{i}", pa.int64()))
            if agg.func in (F_.SUM, F_.AVG):
                fields.append(pa.field(f"_s{i}", pa.int64()))
            elif agg.func in (F_.MIN, F_.MAX):
                fields.append(pa.field(f"_v{i}", self.in_schema.field(v).type))
        return pa.schema(fields)


class Unfoldable(Exception):
    """The delta cannot be folded (a negative group, or sums near int64's range)."""


def _contributions(layout: Layout, rows: pa.Table) -> tuple[pa.Table, list[tuple[str, str]]]:
    """Each row's share of the accumulators (and, for min/max, ``_gone{i}``: a retracted value),
    with the aggregation that combines shares of one key and time."""
    m = rows.column(DIFF_COLUMN)
    cols: dict[str, pa.Array | pa.ChunkedArray] = {k: rows.column(k) for k in layout.keys}
    cols[TIME_COLUMN] = rows.column(TIME_COLUMN)
    cols[ROWS] = m
    specs: list[tuple[str, str]] = [(ROWS, "sum")]
    magnitude = pc.abs(m).cast(pa.float64())
    for i, agg in enumerate(layout.aggregates):
        name = layout.value(i)
        if name is None:
            continue
        v = rows.column(name)
        cols[f"_n{i}"] = pc.if_else(pc.is_null(v), 0, m)
        specs.append((f"_n{i}", "sum"))
        if agg.func in (F_.SUM, F_.AVG):
            try:
                cols[f"_s{i}"] = pc.fill_null(pc.multiply_checked(v, m), 0)
            except pa.ArrowInvalid as e:
                raise Unfoldable from e
            specs.append((f"_s{i}", "sum"))
            magnitude = pc.add(
                magnitude,
                pc.fill_null(pc.abs(pc.multiply(v.cast(pa.float64()), m.cast(pa.float64()))), 0.0),
            )
        elif agg.func in (F_.MIN, F_.MAX):
            extreme = "min" if agg.func is F_.MIN else "max"
            positive = pc.greater(m, 0)
            cols[f"_v{i}"] = pc.if_else(positive, v, pa.scalar(None, v.type))
            specs.append((f"_v{i}", extreme))
            cols[f"_gone{i}"] = pc.if_else(positive, pa.scalar(None, v.type), v)
            specs.append((f"_gone{i}", extreme))
    cols["_abs"] = magnitude
    specs.append(("_abs", "sum"))
    return pa.table(cols), specs


def _grouped(table: pa.Table, by: list[str], specs: list[tuple[str, str]]) -> pa.Table:
    out = table.group_by(by, use_threads=False).aggregate(specs)
    columns = {k: out.column(k) for k in by}
    columns.update({c: out.column(f"{c}_{f}") for c, f in specs})
    return pa.table(columns)


def state_of(layout: Layout, rows: pa.Table, *, consolidated: bool = False) -> pa.Table:
    """The accumulators of every key of ``rows`` (a group's whole updates, any times),
    keys with an empty group left out. Raises :class:`Unfoldable` for a negative group or
    sums near int64's range. ``consolidated``: no row of ``rows`` is negative, or ``rows`` is
    consolidated (a row's shares add up either way: no consolidation first)."""
    data = data_names(layout.in_desc.arity)
    at_zero = pa.array(np.zeros(rows.num_rows, np.int64))
    rows = rows.select([*data, TIME_COLUMN, DIFF_COLUMN]).set_column(
        len(data), TIME_COLUMN, at_zero
    )
    if not consolidated:
        rows = consolidate(rows)
    if rows.num_rows and pc.min(rows.column(DIFF_COLUMN)).as_py() < 0:
        raise Unfoldable("a row with a negative multiplicity")
    shares, specs = _contributions(layout, rows)
    specs = [(c, f) for c, f in specs if not c.startswith("_gone")]
    acc = _grouped(shares, layout.keys, specs)
    if acc.num_rows and pc.max(acc.column("_abs")).as_py() >= _SAFE:
        raise Unfoldable("sums near the int64 range")
    acc = acc.filter(pc.greater(acc.column(ROWS), 0))
    schema = layout.schema()
    return pa.Table.from_arrays([acc.column(f.name).cast(f.type) for f in schema], schema=schema)


@dataclass(frozen=True, slots=True)
class Folded:
    """A step folded into the accumulators of its fast keys (module docs)."""

    changes: pa.Table
    """The fast keys' output changes (internal layout of the output, consolidated)."""
    state: pa.Table
    """The fast keys' accumulators after the step (an emptied group left out)."""
    slow: pa.Table
    """The keys (key columns) whose history must be read (a retracted min/max)."""
    fast: int
    """How many keys were folded (the delta's keys but the slow ones)."""


def fold(layout: Layout, delta: pa.Table, old: pa.Table, *, lo: int) -> Folded:
    """Fold ``delta`` (rows of the keys of ``old``, times ``>= lo``) into ``old`` (their
    accumulators before the step). Raises :class:`Unfoldable` (module docs)."""
    keys = layout.keys
    shares, specs = _contributions(layout, delta)
    inc = _grouped(shares, [*keys, TIME_COLUMN], specs)
    inc = inc.join(_prefixed(old, keys), keys=keys, join_type="inner", use_threads=False)
    inc = inc.sort_by([(k, "ascending") for k in [*keys, TIME_COLUMN]])
    n = inc.num_rows
    start = np.ones(n, dtype=bool)
    if n > 1:
        same = np.ones(n - 1, dtype=bool)
        for k in keys:
            c = inc.column(k).combine_chunks()
            same &= pc.equal(c.slice(0, n - 1), c.slice(1)).to_numpy(zero_copy_only=False)
        start[1:] = ~same
    seg = np.cumsum(start) - 1
    first = np.flatnonzero(start)
    nseg = len(first)
    bound = np.zeros(nseg)
    np.add.at(bound, seg, inc.column("_abs").to_numpy())
    slow = np.zeros(nseg, dtype=bool)
    now: dict[str, pa.Array] = {}
    for name in [ROWS, *(f.name for f in layout.schema() if f.name.startswith(("_n", "_s")))]:
        before = inc.column(f"_old{name}").to_numpy()
        step = inc.column(name).to_numpy()
        if name.startswith("_s"):
            bound += np.abs(before[first].astype(np.float64))
        running = np.cumsum(step)
        running -= np.concatenate([[0], running])[first][seg]
        total = before + running
        if (name == ROWS or name.startswith("_n")) and n and total.min() < 0:
            raise Unfoldable("a group with a negative multiplicity")
        now[name] = pa.array(total, pa.int64())
    if nseg and bound.max() >= _SAFE:
        raise Unfoldable("sums near the int64 range")
    for i, agg in enumerate(layout.aggregates):
        if agg.func not in (F_.MIN, F_.MAX) or layout.value(i) is None:
            continue
        lower = agg.func is F_.MIN
        was = inc.column(f"_old_v{i}")
        retracted = inc.column(f"_gone{i}")
        cmp = pc.less_equal if lower else pc.greater_equal
        hit = pc.and_(
            pc.is_valid(retracted), pc.or_(pc.is_null(was), pc.fill_null(cmp(retracted, was), True))
        )
        flags = pc.fill_null(hit, False).to_numpy(zero_copy_only=False)
        np.logical_or.at(slow, seg, flags)
        now[f"_v{i}"] = _running_extreme(inc.column(f"_v{i}"), was, start, lower=lower)
    fast = ~slow[seg]
    slow_keys = inc.filter(pa.array(start & ~fast)).select(keys)
    # the outputs: each fast key's old one (from its accumulators before the step, retracted
    # at its first time) and one at every time of the step (each retracted at the next)
    times = inc.column(TIME_COLUMN).to_numpy()
    nxt = np.zeros(n, dtype=np.int64)
    has_next = np.zeros(n, dtype=bool)
    if n > 1:
        nxt[:-1] = times[1:]
        has_next[:-1] = ~start[1:]
    new = pa.table(
        {
            **{k: inc.column(k) for k in keys},
            _FROM: inc.column(TIME_COLUMN),
            _NEXT: pa.array(nxt, pa.int64(), mask=~has_next),
            **now,
        }
    ).filter(pa.array(fast))
    before_step = pa.table(
        {
            **{k: inc.column(k) for k in keys},
            _FROM: pa.nulls(n, pa.int64()),
            _NEXT: inc.column(TIME_COLUMN),
            **{name: inc.column(f"_old{name}") for name in now},
        }
    ).filter(pa.array(start & fast))
    outputs = pa.concat_tables([new, before_step.cast(new.schema)])
    outputs = outputs.filter(pc.greater(outputs.column(ROWS), 0))
    changes = signed_changes(outputs, keys, values_of(layout, outputs), layout.out_desc)
    final = new.filter(pc.is_null(new.column(_NEXT)))
    final = final.filter(pc.greater(final.column(ROWS), 0))
    schema = layout.schema()
    state = pa.Table.from_arrays([final.column(f.name).cast(f.type) for f in schema], schema=schema)
    return Folded(changes, state, slow_keys, int((start & fast).sum()))


def _prefixed(old: pa.Table, keys: list[str]) -> pa.Table:
    return old.rename_columns([c if c in keys else f"_old{c}" for c in old.column_names])


def _running_extreme(
    inserted: pa.ChunkedArray, was: pa.ChunkedArray, start: np.ndarray, *, lower: bool
) -> pa.Array:
    """The min (``lower``) or max of each key's old value and its inserted values up to
    each time (rows sorted by key and time; ``start`` marks each key's first)."""
    pick = pc.min_element_wise if lower else pc.max_element_wise
    first = pick(was, inserted, skip_nulls=True)
    if start.all():
        return first.combine_chunks() if isinstance(first, pa.ChunkedArray) else first
    values = first.to_pylist()
    for j in range(1, len(values)):
        if start[j]:
            continue
        a, b = values[j - 1], values[j]
        if a is not None and (b is None or ((b > a) if lower else (b < a))):
            values[j] = a
    return pa.array(values, inserted.type)


def values_of(layout: Layout, acc: pa.Table) -> list[pa.Array | pa.ChunkedArray]:
    """The aggregates' output values of accumulator rows (module docs)."""
    out: list[pa.Array | pa.ChunkedArray] = []
    for i, agg in enumerate(layout.aggregates):
        if layout.value(i) is None:
            out.append(acc.column(ROWS))
            continue
        n = acc.column(f"_n{i}")
        empty = pc.equal(n, 0)
        if agg.func is F_.COUNT:
            out.append(n)
        elif agg.func is F_.SUM:
            out.append(pc.if_else(empty, pa.scalar(None, pa.int64()), acc.column(f"_s{i}")))
        elif agg.func is F_.AVG:
            s, c = acc.column(f"_s{i}").to_pylist(), n.to_pylist()
            out.append(
                pa.array([x / y if y else None for x, y in zip(s, c, strict=True)], pa.float64())
            )
        else:
            v = acc.column(f"_v{i}")
            out.append(pc.if_else(empty, pa.scalar(None, v.type), v))
    return out
