"""A step folded into a reduce's accumulators with numpy, for one integer key and int64 values.

:func:`~spate.render.operators.accumulators.fold` computes a step of a reduce from its
accumulators with pyarrow: a dozen group-bys, joins and sorts, each costing a fixed ~0.1 ms
whatever the rows, so a step of a thousand updates took milliseconds. :func:`fold_ints`
computes the same :class:`~spate.render.operators.accumulators.Folded` (the same changes, state,
slow keys and count, up to row order) with a handful of numpy passes, for the common case:

* one key column holding integers underneath (int64, dates, timestamps: :func:`~spate.render.
  key_index.indexable`) and no NULL;
* aggregates ``count``, ``sum``, ``min``, ``max`` over int64 columns with no NULL in the delta,
  and accumulators (``old``) without NULL (``avg`` and other types go the pyarrow way).

It returns ``None`` when it does not apply; the caller then folds with pyarrow. Rows are sorted
by ``(key, time)`` (``np.lexsort``) and each ``(key, time)`` group's shares summed with
``reduceat``; the running totals and extremes per key follow as in :func:`fold`.

The keys a fold leaves slow (a retracted extreme, an unknown key) are computed from their
history by :func:`reduce_ints` in the same way (what :func:`~spate.render.operators.
driver_reduce.reduce_on_driver` and :func:`~spate.render.operators.accumulators.state_of`
give), when every column of the input is integer-like without NULL: the rows are told apart by
all their columns, each one's multiplicity accumulated at each time the step reads.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import pyarrow as pa

from spate.plan.aggregate import AggregateFunc
from spate.render.key_index import as_int64, indexable
from spate.render.layout import internal_schema
from spate.render.operators.accumulators import _SAFE, ROWS, Folded, Layout, Unfoldable
from spate.repr.consolidate import SORTED_ROWS, consolidate
from spate.repr.desc import DIFF_COLUMN, TIME_COLUMN

F_ = AggregateFunc
_LOW: Final = np.iinfo(np.int64).min
_HIGH: Final = np.iinfo(np.int64).max


def applies(layout: Layout, delta: pa.Table) -> bool:
    """Whether :func:`fold_ints` can fold ``delta`` (module docs; ``old`` is checked there)."""
    if len(layout.keys) != 1 or not indexable(delta.column(layout.keys[0])):
        return False
    for i, agg in enumerate(layout.aggregates):
        name = layout.value(i)
        if name is None:
            continue
        if agg.func not in (F_.COUNT, F_.SUM, F_.MIN, F_.MAX):
            return False
        c = delta.column(name)
        if c.type != pa.int64() or c.null_count:
            return False
    return True


def _ints(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    return np.asarray(column.to_numpy(zero_copy_only=False), dtype=np.int64)


def _array(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


def _segment_extreme(values: np.ndarray, seg: np.ndarray, *, lower: bool) -> np.ndarray:
    """The running min (``lower``) or max of ``values`` within each run of equal ``seg``
    (``seg`` sorted): a doubling scan, ``log2`` of the longest run passes."""
    pick = np.minimum if lower else np.maximum
    out = values.copy()
    n = len(out)
    longest = int(np.bincount(seg).max()) if n else 0
    shift = 1
    while shift < longest:
        same = seg[shift:] == seg[:-shift]
        out[shift:] = np.where(same, pick(out[shift:], out[:-shift]), out[shift:])
        shift *= 2
    return out


def fold_ints(layout: Layout, delta: pa.Table, old: pa.Table) -> Folded | None:
    """:func:`~spate.render.operators.accumulators.fold` of ``delta`` (rows of keys of ``old``)
    into ``old`` with numpy, or ``None`` when it does not apply (module docs). Raises
    :class:`~spate.render.operators.accumulators.Unfoldable` as ``fold`` does."""
    if not applies(layout, delta):
        return None
    (key,) = layout.keys
    for name in old.column_names:
        if old.column(name).null_count:
            return None
    key_col = delta.column(key)
    k = as_int64(key_col)
    t = _ints(delta.column(TIME_COLUMN))
    m = _ints(delta.column(DIFF_COLUMN))
    order = np.lexsort((t, k))
    ks, ts, ms = k[order], t[order], m[order]
    n = len(order)
    if n == 0:
        return None
    brk = np.ones(n, dtype=bool)
    brk[1:] = (ks[1:] != ks[:-1]) | (ts[1:] != ts[:-1])
    gstart = np.flatnonzero(brk)
    gk, gt = ks[gstart], ts[gstart]
    # the old accumulators of each group's key (every key of the delta is one of old's)
    okeys = as_int64(old.column(key))
    osort = np.argsort(okeys, kind="stable")
    at = np.searchsorted(okeys[osort], gk)
    at[at >= len(okeys)] = 0
    present = okeys[osort][at] == gk if len(okeys) else np.zeros(len(gk), dtype=bool)
    if not present.all():
        return None
    orow = osort[at]

    def old_of(name: str) -> np.ndarray:
        return _ints(old.column(name))[orow]

    step_sums: dict[str, np.ndarray] = {ROWS: np.add.reduceat(ms, gstart)}
    magnitude = np.add.reduceat(np.abs(ms).astype(np.float64), gstart)
    extremes: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
    positive = ms > 0
    for i, agg in enumerate(layout.aggregates):
        name = layout.value(i)
        if name is None:
            continue
        v = _ints(delta.column(name))[order]
        step_sums[f"_n{i}"] = step_sums[ROWS]  # no NULL among the values
        if agg.func is F_.SUM:
            product = v.astype(np.float64) * ms
            if n and np.abs(product).max() >= _SAFE:
                raise Unfoldable("sums near the int64 range")
            step_sums[f"_s{i}"] = np.add.reduceat(v * ms, gstart)
            magnitude += np.add.reduceat(np.abs(product), gstart)
        elif agg.func in (F_.MIN, F_.MAX):
            lower = agg.func is F_.MIN
            reduce = np.minimum if lower else np.maximum
            none = _HIGH if lower else _LOW
            ins = reduce.reduceat(np.where(positive, v, none), gstart)
            has_ins = np.add.reduceat(positive.astype(np.int64), gstart) > 0
            gone = reduce.reduceat(np.where(positive, none, v), gstart)
            has_gone = np.add.reduceat((~positive).astype(np.int64), gstart) > 0
            extremes[i] = (ins, has_ins, gone, has_gone)
    g = len(gstart)
    kstart = np.ones(g, dtype=bool)
    kstart[1:] = gk[1:] != gk[:-1]
    seg = np.cumsum(kstart) - 1
    first = np.flatnonzero(kstart)
    bound = np.add.reduceat(magnitude, first)
    names = [ROWS, *(f.name for f in layout.schema() if f.name.startswith(("_n", "_s")))]
    before: dict[str, np.ndarray] = {}
    now: dict[str, np.ndarray] = {}
    for name in names:
        was = old_of(name)
        running = np.cumsum(step_sums[name])
        running -= np.concatenate([[0], running])[first][seg]
        total = was + running
        if name.startswith("_s"):
            bound += np.abs(was[first].astype(np.float64))
        if (name == ROWS or name.startswith("_n")) and total.min() < 0:
            raise Unfoldable("a group with a negative multiplicity")
        before[name], now[name] = was, total
    if bound.max() >= _SAFE:
        raise Unfoldable("sums near the int64 range")
    slow_hits = np.zeros(g, dtype=bool)
    for i, (ins, has_ins, gone, has_gone) in extremes.items():
        lower = layout.aggregates[i].func is F_.MIN
        was = old_of(f"_v{i}")
        slow_hits |= has_gone & ((gone <= was) if lower else (gone >= was))
        reached = np.where(has_ins, (np.minimum if lower else np.maximum)(was, ins), was)
        before[f"_v{i}"] = was
        now[f"_v{i}"] = _segment_extreme(reached, seg, lower=lower)
    slow = np.add.reduceat(slow_hits.astype(np.int64), first) > 0
    fast = ~slow[seg]
    rowof = order[gstart]  # a delta row of each group: its key, as the key column holds it
    slow_keys = pa.table({key: key_col.take(pa.array(rowof[kstart & ~fast]))})
    has_next = np.zeros(g, dtype=bool)
    has_next[:-1] = ~kstart[1:]
    nxt = np.zeros(g, dtype=np.int64)
    nxt[:-1] = gt[1:]
    # the outputs: each fast key's old row retracted at its first time, its row at every time
    # of the step (from then, retracted at the next): as signed updates, then consolidated
    new_live = fast & (now[ROWS] > 0)
    old_live = fast & kstart & (before[ROWS] > 0)
    parts = [
        (now, new_live, gt, 1),
        (now, new_live & has_next, nxt, -1),
        (before, old_live, gt, -1),
    ]
    changes = _signed(layout, key_col, rowof, parts)
    final = fast & ~has_next & (now[ROWS] > 0)
    schema = layout.schema()
    state_cols = [_array(key_col.take(pa.array(rowof[final])))]
    for f in list(schema)[1:]:
        state_cols.append(pa.array(now[f.name][final], pa.int64()).cast(f.type))
    state = pa.Table.from_arrays(state_cols, schema=schema)
    return Folded(changes, state, slow_keys, int((kstart & fast).sum()))


def _signed(
    layout: Layout,
    key_col: pa.ChunkedArray,
    rowof: np.ndarray,
    parts: list[tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, int]],
) -> pa.Table:
    """The output rows of ``parts`` (accumulators, which groups, at which times, sign),
    consolidated, in the internal layout of the output."""
    schema = internal_schema(layout.out_desc)
    rows = np.concatenate([rowof[sel] for _, sel, _, _ in parts])
    times = np.concatenate([at[sel] for _, sel, at, _ in parts])
    diffs = np.concatenate([np.full(int(sel.sum()), sign, np.int64) for _, sel, _, sign in parts])
    values: list[np.ndarray] = []
    nulls: list[np.ndarray] = []
    for i, agg in enumerate(layout.aggregates):
        name = layout.value(i)
        if name is None:
            col = ROWS
        elif agg.func is F_.COUNT:
            col = f"_n{i}"
        elif agg.func is F_.SUM:
            col = f"_s{i}"
        else:
            col = f"_v{i}"
        values.append(np.concatenate([acc[col][sel] for acc, sel, _, _ in parts]))
        if name is None or agg.func is F_.COUNT:
            nulls.append(np.zeros(len(rows), dtype=bool))
        else:  # sum, min and max of no value are NULL
            nulls.append(np.concatenate([acc[f"_n{i}"][sel] == 0 for acc, sel, _, _ in parts]))
    if len(rows) > SORTED_ROWS:  # many rows: a hash group-by consolidates them faster
        plain = [_array(key_col.take(pa.array(rows))).cast(schema.field(0).type)]
        for j, v in enumerate(values):
            plain.append(pa.array(v, pa.int64(), mask=nulls[j]).cast(schema.field(1 + j).type))
        plain += [pa.array(times, pa.int64()), pa.array(diffs, pa.int64())]
        return consolidate(pa.Table.from_arrays(plain, schema=schema))
    keys = as_int64(key_col)[rows]
    # consolidate: equal (key, values, nulls, time) rows add up
    order = np.lexsort((times, *values, *nulls, keys))
    cols = [keys[order], *(v[order] for v in values), *(z[order] for z in nulls), times[order]]
    d = diffs[order]
    n = len(d)
    if n:
        brk = np.zeros(n, dtype=bool)
        brk[0] = True
        for c in cols:
            brk[1:] |= c[1:] != c[:-1]
        starts = np.flatnonzero(brk)
        sums = np.add.reduceat(d, starts)
        keep = starts[sums != 0]
        sums = sums[sums != 0]
    else:
        keep = np.empty(0, dtype=np.int64)
        sums = np.empty(0, dtype=np.int64)
    taken = key_col.take(pa.array(rows[order][keep]))
    arrays: list[pa.Array] = [_array(taken).cast(schema.field(0).type)]
    for j, v in enumerate(values):
        mask = nulls[j][order][keep]
        typ = schema.field(1 + j).type
        arrays.append(pa.array(v[order][keep], pa.int64(), mask=mask).cast(typ))
    arrays.append(pa.array(times[order][keep], pa.int64()))
    arrays.append(pa.array(sums, pa.int64()))
    return pa.Table.from_arrays(arrays, schema=schema)


MAX_LEVELS: Final = 8
""":func:`reduce_ints` declines a step of more times than this: it accumulates every row at
every time of the step, where the join of ``reduce_on_driver`` pairs a row with its own key's
times only (a step over many writes, each touching a few keys)."""
MAX_CELLS: Final = 4_000_000
""":func:`reduce_ints` declines when rows x times of the step would exceed this."""


def reduce_ints(
    layout: Layout, rows: pa.Table, delta: pa.Table, lo: int
) -> tuple[pa.Table, pa.Table] | None:
    """The output changes and the accumulators after the step of the keys of ``delta`` (the
    step's rows of the slow keys, times ``>= lo``), from ``rows`` (their history, times
    ``< lo``, a superset of keys allowed, and ``delta``), with numpy: what
    :func:`~spate.render.operators.driver_reduce.reduce_on_driver` and
    :func:`~spate.render.operators.accumulators.state_of` compute, or ``None`` when they must
    (a data column not integer-like or with NULL, a negative row at a time the step reads,
    sums near int64's range, more than :data:`MAX_LEVELS` times or :data:`MAX_CELLS` rows x
    times)."""
    if not delta.num_rows or not applies(layout, delta):
        return None
    (key,) = layout.keys
    data = [f.name for f in layout.in_schema][: layout.in_desc.arity]
    if not all(indexable(rows.column(c)) for c in data) or not indexable(delta.column(key)):
        return None
    dk = as_int64(delta.column(key))
    dt = _ints(delta.column(TIME_COLUMN))
    wanted = np.unique(dk)
    k_all = as_int64(rows.column(key))
    rows = rows.filter(np.isin(k_all, wanted))
    n = rows.num_rows
    levels = np.concatenate([[lo - 1], np.unique(dt)])
    if len(levels) > MAX_LEVELS + 1 or n * len(levels) > MAX_CELLS:
        return None
    ints = [as_int64(rows.column(c)) for c in data]
    k = as_int64(rows.column(key))
    t = _ints(rows.column(TIME_COLUMN))
    m = _ints(rows.column(DIFF_COLUMN))
    order = np.lexsort([*ints[::-1], k])  # by key, then the whole row
    ks, ts, ms = k[order], t[order], m[order]
    sorted_ints = [c[order] for c in ints]
    brk = np.ones(n, dtype=bool)
    same = np.ones(max(n - 1, 0), dtype=bool)
    for c in sorted_ints:
        same &= c[1:] == c[:-1]
    brk[1:] = ~same
    rstart = np.flatnonzero(brk)  # distinct rows
    rkeys = ks[rstart]
    kbrk = np.ones(len(rstart), dtype=bool)
    kbrk[1:] = rkeys[1:] != rkeys[:-1]
    kfirst = np.flatnonzero(kbrk)  # each key's first distinct row
    gkeys = rkeys[kfirst]
    nkeys = len(gkeys)
    rowof = order[rstart[kfirst]]  # a row of each key: its key as the column holds it
    values = {i: _ints(rows.column(layout.value(i) or key))[order][rstart] for i in _valued(layout)}
    # which (key, level) pairs the step reads: every key before the step, and its own times
    reads = np.zeros((len(levels), nkeys), dtype=bool)
    reads[0] = True
    pair_key = np.searchsorted(gkeys, dk)
    pair_level = np.searchsorted(levels, dt)
    reads[pair_level, pair_key] = True
    accs: list[dict[str, np.ndarray]] = []
    for j, level in enumerate(levels):
        acc = np.add.reduceat(np.where(ts <= level, ms, 0), rstart) if n else ms[:0]
        negative = np.add.reduceat((acc < 0).astype(np.int64), kfirst) > 0 if n else acc[:0] > 0
        if (negative & (reads[j] | (j == len(levels) - 1))).any():
            return None  # an evaluation error, or a negative state: the other paths say
        live = acc > 0
        summary: dict[str, np.ndarray] = {ROWS: np.add.reduceat(acc, kfirst)}
        bound = np.add.reduceat(np.abs(acc).astype(np.float64), kfirst)
        for i, v in values.items():
            agg = layout.aggregates[i]
            summary[f"_n{i}"] = summary[ROWS]
            if agg.func is F_.SUM:
                product = v.astype(np.float64) * acc
                bound += np.add.reduceat(np.abs(product), kfirst)
                summary[f"_s{i}"] = np.add.reduceat(v * acc, kfirst)
            elif agg.func in (F_.MIN, F_.MAX):
                lower = agg.func is F_.MIN
                reduce = np.minimum if lower else np.maximum
                none = _HIGH if lower else _LOW
                summary[f"_v{i}"] = reduce.reduceat(np.where(live, v, none), kfirst)
        if nkeys and bound.max() >= _SAFE:
            return None
        accs.append(summary)
    # each key's value at each level it reads: retracted at its next level read, emitted
    # (from its level on) at every level but the one before the step
    nxt = np.full((len(levels), nkeys), -1, dtype=np.int64)
    upcoming = np.full(nkeys, -1, dtype=np.int64)
    for j in range(len(levels) - 1, -1, -1):
        nxt[j] = upcoming
        upcoming = np.where(reads[j], levels[j], upcoming)
    parts = []
    for j, summary in enumerate(accs):
        live = reads[j] & (summary[ROWS] > 0)
        if j:
            parts.append((summary, live, np.full(nkeys, levels[j]), 1))
        parts.append((summary, live & (nxt[j] >= 0), nxt[j], -1))
    key_col = rows.column(key)
    changes = _signed(layout, key_col, rowof, parts) if nkeys else None
    final = accs[-1]
    keep = final[ROWS] > 0
    schema = layout.schema()
    state_cols = [_array(key_col.take(pa.array(rowof[keep])))]
    for f in list(schema)[1:]:
        state_cols.append(pa.array(final[f.name][keep], pa.int64()).cast(f.type))
    state = pa.Table.from_arrays(state_cols, schema=schema)
    if changes is None:
        changes = internal_schema(layout.out_desc).empty_table()
    return changes, state


def _valued(layout: Layout) -> list[int]:
    """The aggregates that read a column."""
    return [i for i in range(len(layout.aggregates)) if layout.value(i) is not None]
