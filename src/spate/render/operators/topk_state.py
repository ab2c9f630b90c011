"""The per-key summary a TopK keeps between steps, and a step computed from it.

For each key it has seen, a TopK keeps a **summary** of the key's group at its upper: the
group's first rows in the operator's order (the ``ORDER BY`` columns, then the whole row
ascending, NULLs last, as :meth:`spate.plan.evaluation.relation.Evaluator.top_k` defines it),
consolidated, with their multiplicities: the shortest prefix holding at least
``2·(offset + limit)`` rows (the slack), or the whole group, then **complete**. Invariant: every
row of the group that sorts at or before the summary's last row ``b`` is in the summary, with
its whole multiplicity.

A step over ``[lo, hi)`` views each known key's group through rows ``<= b`` (the whole group
when complete): the summary (as updates at ``lo - 1``) and the delta's rows ``<= b``. The view
is exact, and while it holds at least ``offset + limit`` rows at every time of the step the
window ``[offset, offset + limit)`` lies inside it: the output changes follow from it alone,
as the Spark plan computes them from the whole group (:func:`_ranked`, :func:`_changes`). A key
whose view falls short at some time (retractions of summarised rows), and a key not known yet,
is **slow**: its history is read (the caller's ``history``) and its step computed from history
and delta. Either way the key's new summary is its group at its last time in the step, cut to
the slack (insertions before ``b`` grow a summary; it is cut back at each step).

Like :class:`~spate.render.operators.reduce_state.ReduceState` this is a cache, with the same
obligations (the caller runs the commit action when the step commits, and clears the cache
after a step it computed another way); an absent key is unknown. A group with a negative
multiplicity among the rows a step reads declines the step (the Spark path raises the error);
retractions of rows after ``b`` are not checked against the history, as the reduce's
accumulators do not check retractions of rows they do not hold.

Supported: a ``limit``, and input columns of bool, int64, numeric, text, date or timestamp
(pyarrow orders and compares them as Spark does: text by its UTF-8 bytes, a numeric column's
decimals, all of its one precision and scale, by value).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spate.plan.finishing import ColumnOrder
from spate.render.layout import col_name, data_names, internal_schema, sort_columns
from spate.repr.consolidate import consolidate
from spate.repr.desc import DIFF_COLUMN, TIME_COLUMN, RelationDesc
from spate.repr.types import ScalarKind

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from spate.render.operators.node import ColumnMemo

History = Callable[[pa.Table], "pa.Table | None"]
K = ScalarKind
_KINDS: Final = frozenset({K.BOOL, K.INT64, K.NUMERIC, K.TEXT, K.DATE, K.TIMESTAMP})
_M: Final = "_m"
_MAX_CHUNKS: Final = 64
_AT: Final = "_at"


def supported(in_desc: RelationDesc, limit: int | None) -> bool:
    """Whether a TopK over ``in_desc`` can keep summaries (module docs)."""
    return limit is not None and all(c.type.kind in _KINDS for c in in_desc.columns)


@dataclass(frozen=True, slots=True)
class TopKLayout:
    key: tuple[int, ...]
    order_by: tuple[ColumnOrder, ...]
    limit: int
    offset: int
    desc: RelationDesc
    """The input's (and output's) columns."""

    @property
    def window(self) -> int:
        return self.offset + self.limit

    @property
    def keys(self) -> list[str]:
        return [col_name(k) for k in self.key]


class _Negative(Exception):
    """A group the step reads has a row of negative multiplicity."""


@dataclass(frozen=True, slots=True)
class _Times:
    """``T``: every touched key's times in the step and ``lo - 1``, sorted by key then time."""

    kid: np.ndarray
    at: np.ndarray
    has_next: np.ndarray
    end: np.ndarray
    """Per key, one past its last entry."""
    lo: int

    @staticmethod
    def of(kid: np.ndarray, time: np.ndarray, keys: int, lo: int) -> _Times:
        k = np.concatenate([kid, np.arange(keys, dtype=np.int64)])
        t = np.concatenate([time, np.full(keys, lo - 1, np.int64)])
        order = np.lexsort((t, k))
        k, t = k[order], t[order]
        keep = np.ones(len(k), bool)
        keep[1:] = (k[1:] != k[:-1]) | (t[1:] != t[:-1])
        k, t = k[keep], t[keep]
        has_next = np.zeros(len(k), bool)
        has_next[:-1] = k[1:] == k[:-1]
        end = np.searchsorted(k, np.arange(keys), side="right")
        return _Times(k, t, has_next, end, lo)

    def entries(self, kid: np.ndarray, time: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each row (key ``kid``, time ``time``) once per entry of its key at or after its
        time: the rows' indices and the entries'."""
        ats = np.unique(self.at)
        width = len(ats) + 1
        entry_code = self.kid * width + np.searchsorted(ats, self.at)
        row_code = kid * width + np.searchsorted(ats, time)
        first = np.searchsorted(entry_code, row_code)
        count = np.maximum(self.end[kid] - first, 0)
        rows = np.repeat(np.arange(len(kid)), count)
        offsets = np.arange(len(rows)) - np.repeat(np.cumsum(count) - count, count)
        return rows, np.repeat(first, count) + offsets


@dataclass(frozen=True, slots=True)
class _Ranked:
    """Every entry's group, consolidated and in order: per row, the input row it is (an index),
    its entry, multiplicity and the multiplicity before it in its entry."""

    row: np.ndarray
    e: np.ndarray
    m: np.ndarray
    before: np.ndarray


def group_ids(
    columns: Sequence[pa.Array | pa.ChunkedArray], n: int
) -> tuple[np.ndarray, np.ndarray]:
    """Dense ids of the rows' values of ``columns`` (NULL equal to NULL; all 0 without
    columns), and each id's first row."""
    code = np.zeros(n, np.int64)
    for c in columns:
        values = pc.unique(c)
        at = pc.index_in(c, value_set=values, skip_nulls=False)
        code = code * len(values) + np.asarray(at.to_numpy(zero_copy_only=False), np.int64)
        code = np.unique(code, return_inverse=True)[1].reshape(-1)
    _, first, ids = np.unique(code, return_index=True, return_inverse=True)
    return np.asarray(ids, np.int64).reshape(-1), np.asarray(first, np.int64)


def sort_order(
    table: pa.Table, lead: np.ndarray, order_by: Sequence[ColumnOrder], arity: int
) -> np.ndarray:
    """The permutation ordering ``table``'s rows by ``lead``, then ``order_by``, then the
    whole row ascending with NULLs last (each column's NULLs placed by a flag before it)."""
    cols: dict[str, Any] = {"_lead": pa.array(lead)}
    keys: list[tuple[str, str]] = [("_lead", "ascending")]

    def add(name: str, desc: bool, nulls_last: bool) -> None:
        c, i = table.column(name), len(cols)
        if c.null_count:
            cols[f"_n{i}"] = pc.is_null(c)
            keys.append((f"_n{i}", "ascending" if nulls_last else "descending"))
        cols[f"_v{i}"] = c
        keys.append((f"_v{i}", "descending" if desc else "ascending"))

    for o in order_by:
        add(col_name(o.column), o.desc, o.effective_nulls_last())
    for name in data_names(arity):
        add(name, False, True)
    return np.asarray(pc.sort_indices(pa.table(cols), sort_keys=keys).to_numpy(), np.int64)


def _same_as_previous(table: pa.Table, lead: np.ndarray, names: list[str]) -> np.ndarray:
    """Per row of an ordered table: the previous row has the same ``lead`` and ``names``
    values (NULL equal to NULL)."""
    n = table.num_rows
    same = np.zeros(n, bool)
    if n <= 1:
        return same
    eq = lead[1:] == lead[:-1]
    for name in names:
        c = table.column(name).combine_chunks()
        a, b = c.slice(0, n - 1), c.slice(1)
        e = pc.or_(pc.fill_null(pc.equal(a, b), False), pc.and_(pc.is_null(a), pc.is_null(b)))
        eq &= np.asarray(e.to_numpy(zero_copy_only=False), bool)
    same[1:] = eq
    return same


def _ranked(layout: TopKLayout, rows: pa.Table, kid: np.ndarray, times: _Times) -> _Ranked:
    """Step 3 of :mod:`.keyed` for ``rows`` (updates of the keys ``kid``): every entry of
    ``times``, its group consolidated and ordered (raises :class:`_Negative`)."""
    time = np.asarray(rows.column(TIME_COLUMN).to_numpy(), np.int64)
    idx, e = times.entries(kid, time)
    data = data_names(layout.desc.arity)
    expanded = rows.select(data).take(pa.array(idx))
    perm = sort_order(expanded, e, layout.order_by, layout.desc.arity)
    idx, e = idx[perm], e[perm]
    same = _same_as_previous(expanded.take(pa.array(perm)), e, data)
    starts = np.flatnonzero(~same)
    diff = np.asarray(rows.column(DIFF_COLUMN).to_numpy(), np.int64)[idx]
    m = np.add.reduceat(diff, starts) if len(starts) else diff[:0]
    if (m < 0).any():
        raise _Negative
    nonzero = m != 0
    row, e, m = idx[starts][nonzero], e[starts][nonzero], m[nonzero]
    cum = np.cumsum(m)
    new = np.ones(len(e), bool)
    new[1:] = e[1:] != e[:-1]
    first = np.flatnonzero(new)
    before = cum - m - (cum - m)[first][np.cumsum(new) - 1]
    return _Ranked(row, e, m, before)


def _changes(
    layout: TopKLayout, rows: pa.Table, ranked: _Ranked, times: _Times, entries: np.ndarray
) -> list[pa.Table]:
    """Step 4 for the entries marked in ``entries``: each row's multiplicity within the window
    ``+m`` at its entry's time (when in the step) and ``-m`` at the key's next time."""
    r = ranked
    m = np.minimum(r.before + r.m, layout.window) - np.maximum(r.before, layout.offset)
    kept = (m > 0) & entries[r.e]
    row, e, m = r.row[kept], r.e[kept], m[kept]
    data = rows.select(data_names(layout.desc.arity))
    nxt = np.zeros(len(times.at), np.int64)
    nxt[:-1] = times.at[1:]
    out = []
    for present, at, sign in (
        (times.at[e] >= times.lo, times.at[e], 1),
        (times.has_next[e], nxt[e], -1),
    ):
        piece = data.take(pa.array(row[present]))
        piece = piece.append_column(TIME_COLUMN, pa.array(at[present], pa.int64()))
        out.append(piece.append_column(DIFF_COLUMN, pa.array(sign * m[present], pa.int64())))
    return out


_Summaries = tuple[pa.Table, np.ndarray, np.ndarray, np.ndarray]


class TopKState:
    """The summaries of the keys a TopK has seen (module docs)."""

    def __init__(self, layout: TopKLayout, *, capacity: int) -> None:
        self.layout = layout
        self.capacity = capacity
        """At most this many summarised rows are kept (beyond it, keys are not learned)."""
        fields = [*internal_schema(layout.desc)][: layout.desc.arity]
        self._schema = pa.schema([*fields, pa.field(_M, pa.int64())])
        self.table = self._schema.empty_table()
        """Every key's summary rows (and superseded ones), with their multiplicities."""
        self._index: dict[tuple[Any, ...], tuple[int, int, bool]] = {}
        """Per key: its summary's first row in ``table``, its rows, whether complete."""
        self._live = 0
        self.folded_keys = 0
        """Keys stepped from their summaries alone so far (for tests and profiles)."""
        self.slow_keys = 0
        """Keys stepped from their history so far (unknown ones, and known ones whose view fell
        short)."""
        self.short_keys = 0
        """Known keys whose view fell short, so far."""

    @property
    def out_desc(self) -> RelationDesc:
        return self.layout.desc

    @property
    def keys(self) -> int:
        return len(self._index)

    def clear(self) -> None:
        self.table = self._schema.empty_table()
        self._index = {}
        self._live = 0

    def load(self, table: pa.Table, complete: np.ndarray) -> None:
        """Replace every summary by ``table`` (data columns and ``_m``; ``complete``: per row,
        whether its key's summary is), nothing kept beyond the capacity."""
        self.clear()
        n = table.num_rows
        if n > self.capacity or n == 0:
            return
        keys = self.layout.keys
        gid, _ = group_ids([table.column(k) for k in keys], n)
        order = np.argsort(gid, kind="stable")
        table = table.take(pa.array(order)).combine_chunks()
        count = np.bincount(gid)
        start = np.cumsum(count) - count
        firsts = table.select(keys).take(pa.array(start))
        columns = [firsts.column(k).to_pylist() for k in keys]
        names = list(zip(*columns, strict=True)) if columns else [()]
        whole = complete[order][start].tolist()
        spans = zip(names, start.tolist(), count.tolist(), whole, strict=True)
        self._index = {k: (s, c, w) for k, s, c, w in spans}
        self.table = table.select(self._schema.names).cast(self._schema)
        self._live = n

    def step(
        self, delta: pa.Table, *, lo: int, history: History
    ) -> tuple[pa.Table, Callable[[], None]] | None:
        """The output changes of a step whose input delta is ``delta`` (times ``>= lo``,
        internal layout) and the action that commits the new summaries; ``None`` when the
        step must be computed another way (a negative group, a history the driver cannot
        read)."""
        lay = self.layout
        gid, first = group_ids([delta.column(k) for k in lay.keys], delta.num_rows)
        touched = delta.select(lay.keys).take(pa.array(first))
        columns = [touched.column(k).to_pylist() for k in lay.keys]
        names = list(zip(*columns, strict=True)) if columns else [()] * len(first)
        found = [self._index.get(k) for k in names]
        known = np.array([f is not None for f in found], bool)
        times = _Times.of(
            gid, np.asarray(delta.column(TIME_COLUMN).to_numpy(), np.int64), len(names), lo
        )
        pieces: list[pa.Table] = []
        summaries: list[_Summaries] = []
        try:
            failed = np.zeros(len(names), bool)
            if known.any():
                failed = self._fast(delta, gid, known, found, times, pieces, summaries)
            slow = ~known | failed
            if slow.any():
                before = history(touched.filter(pa.array(slow)) if lay.keys else touched)
                if before is None:
                    return None
                self._slow(delta, gid, slow, touched, before, times, pieces, summaries)
        except _Negative:
            return None
        schema = internal_schema(lay.desc)
        changes = consolidate(
            pa.concat_tables([schema.empty_table(), *(p.cast(schema) for p in pieces)])
        )
        fast = int((known & ~failed).sum())
        slow_n, short = int((~known | failed).sum()), int(failed.sum())

        def commit() -> None:
            self.folded_keys += fast
            self.slow_keys += slow_n
            self.short_keys += short
            self._commit(names, found, summaries)

        return changes, commit

    def _fast(
        self,
        delta: pa.Table,
        gid: np.ndarray,
        known: np.ndarray,
        found: list[tuple[int, int, bool] | None],
        times: _Times,
        pieces: list[pa.Table],
        summaries: list[_Summaries],
    ) -> np.ndarray:
        """The known keys' changes from their summaries (into ``pieces``, their new summaries
        into ``summaries``); the keys whose view falls short (module docs)."""
        lay = self.layout
        keys = np.flatnonzero(known)
        held_at = [f for f in found if f is not None]  # in the order of ``keys``
        start = np.array([f[0] for f in held_at], np.int64)
        count = np.array([f[1] for f in held_at], np.int64)
        complete = np.zeros(len(known), bool)
        complete[keys] = [f[2] for f in held_at]
        idx = np.repeat(start - np.cumsum(count) + count, count) + np.arange(count.sum())
        held = self.table.take(pa.array(idx, pa.int64()))
        held_kid = np.repeat(keys, count)
        mine = known[gid]
        d = delta.filter(pa.array(mine))
        d_kid = gid[mine]
        data = data_names(lay.desc.arity)
        if not complete[d_kid].all():
            # the delta's rows after a key's last summarised row are outside its view
            both = pa.concat_tables([held.select(data), d.select(data)])
            lead = np.concatenate([held_kid, d_kid])
            perm = sort_order(both, lead, lay.order_by, lay.desc.arity)
            rank = np.empty(len(perm), np.int64)
            rank[perm] = np.cumsum(~_same_as_previous(both.take(pa.array(perm)), lead[perm], data))
            last = np.full(len(known), -1, np.int64)
            np.maximum.at(last, held_kid, rank[: len(held_kid)])
            inside = complete[d_kid] | (rank[len(held_kid) :] <= last[d_kid])
            d, d_kid = d.filter(pa.array(inside)), d_kid[inside]
        n = held.num_rows
        rows = pa.concat_tables(
            [
                pa.table(
                    [
                        *held.select(data).columns,
                        pa.array(np.full(n, times.lo - 1, np.int64)),
                        held.column(_M),
                    ],
                    names=[*data, TIME_COLUMN, DIFF_COLUMN],
                ).cast(d.schema),
                d,
            ]
        )
        kid = np.concatenate([held_kid, d_kid])
        ranked = _ranked(lay, rows, kid, times)
        total = np.zeros(len(times.at), np.int64)
        np.add.at(total, ranked.e, ranked.m)
        short = (total < lay.window) & ~complete[times.kid]
        failed = np.zeros(len(known), bool)
        failed[times.kid[short]] = True
        failed &= known
        ok = known & ~failed
        pieces.extend(_changes(lay, rows, ranked, times, ok[times.kid]))
        summaries.append(self._summaries(rows, ranked, times, ok, complete))
        return failed

    def _slow(
        self,
        delta: pa.Table,
        gid: np.ndarray,
        slow: np.ndarray,
        touched: pa.Table,
        before: pa.Table,
        times: _Times,
        pieces: list[pa.Table],
        summaries: list[_Summaries],
    ) -> None:
        """The slow keys' changes from their history ``before`` and the delta."""
        lay = self.layout
        g = len(slow)
        if lay.keys:
            both = [
                _chunks_of(touched.column(k), before.column(k).cast(touched.schema.field(k).type))
                for k in lay.keys
            ]
            ids, _ = group_ids(both, g + before.num_rows)
            to_gid = np.full(int(ids.max()) + 1, -1, np.int64)
            to_gid[ids[:g]] = np.arange(g)
            old_kid = to_gid[ids[g:]]
        else:
            old_kid = np.zeros(before.num_rows, np.int64)
        mine = (old_kid >= 0) & slow[np.maximum(old_kid, 0)]
        new = slow[gid]
        rows = pa.concat_tables(
            [before.filter(pa.array(mine)).cast(delta.schema), delta.filter(pa.array(new))]
        )
        kid = np.concatenate([old_kid[mine], gid[new]])
        ranked = _ranked(lay, rows, kid, times)
        pieces.extend(_changes(lay, rows, ranked, times, slow[times.kid]))
        summaries.append(self._summaries(rows, ranked, times, slow, np.ones(g, bool)))

    def _summaries(
        self, rows: pa.Table, ranked: _Ranked, times: _Times, keys: np.ndarray, complete: np.ndarray
    ) -> _Summaries:
        """The new summaries of ``keys`` (marked): each one's group at its last entry, cut to
        the slack; as (rows with ``_m``, each row's key, the keys, each key's completeness)."""
        r = ranked
        last = ~times.has_next[r.e] & keys[times.kid[r.e]]
        slack = 2 * self.layout.window
        cut = last & (r.before >= slack)
        complete = complete.copy()
        complete[times.kid[r.e[cut]]] = False
        kept = last & (r.before < slack)
        data = rows.select(data_names(self.layout.desc.arity)).take(pa.array(r.row[kept]))
        table = data.append_column(_M, pa.array(r.m[kept], pa.int64()))
        return table, times.kid[r.e[kept]], keys, complete

    def _commit(
        self,
        names: list[tuple[Any, ...]],
        found: list[tuple[int, int, bool] | None],
        summaries: list[_Summaries],
    ) -> None:
        """Replace the touched keys' summaries by the new ones (``summaries``: by key, ordered:
        :meth:`_summaries`)."""
        gone = sum(f[1] for f in found if f is not None)
        added = sum(t.num_rows for t, _, _, _ in summaries)
        if self._live - gone + added > self.capacity:
            for k in names:  # beyond the capacity: the touched keys are forgotten
                self._index.pop(k, None)
            self._live -= gone
            return
        base = self.table.num_rows
        fresh = []
        for table, kid, keys, complete in summaries:
            count = np.bincount(kid, minlength=len(names))
            start = base + np.cumsum(count) - count
            starts, counts, whole = start.tolist(), count.tolist(), complete.tolist()
            for i in np.flatnonzero(keys).tolist():
                self._index[names[i]] = (starts[i], counts[i], whole[i])
            fresh.append(table.cast(self._schema))
            base += table.num_rows
        self._live += added - gone
        self.table = pa.concat_tables([self.table, *fresh])
        if self.table.num_rows > 2 * self._live + 1024:
            self._compact()
        elif self.table.column(0).num_chunks > _MAX_CHUNKS:
            self.table = self.table.combine_chunks()

    def _compact(self) -> None:
        """Drop superseded rows (each key's summary moves)."""
        items = list(self._index.items())
        start = np.array([v[0] for _, v in items], np.int64)
        count = np.array([v[1] for _, v in items], np.int64)
        at = np.cumsum(count) - count
        idx = np.repeat(start - at, count) + np.arange(count.sum())
        self.table = self.table.take(pa.array(idx, pa.int64())).combine_chunks()
        self._index = {k: (int(a), v[1], v[2]) for (k, v), a in zip(items, at, strict=True)}


def spark_window(
    memo: ColumnMemo,
    window: tuple[tuple[ColumnOrder, ...], int | None, int],
    groups: DataFrame,
    keys: list[str],
    data: list[str],
    carried: list[str],
) -> DataFrame:
    """The Spark plan's step 3 for a TopK (``window``: its order, limit and offset): each row's
    multiplicity ``_m`` within its ``(key, _at)`` group's window, by a running sum of the diffs
    in the order, with the ``carried`` columns (the window's columns built once in ``memo``)."""
    from pyspark.sql import functions as F

    order_by, limit, offset = window
    cum = memo.get("cum", lambda: _running_sum(order_by, keys, data))
    ranked = groups.withColumn("_cum", cum)

    def windowed() -> list[Column]:
        lo = F.greatest(F.col("_cum") - F.col(DIFF_COLUMN), F.lit(offset))
        end = F.col("_cum")
        if limit is not None:
            end = F.least(end, F.lit(offset + limit))
        return [*[F.col(c) for c in carried], (end - lo).cast("long").alias(_M)]

    kept = memo.get("kept", lambda: F.col(_M) > 0)
    return memo.select(ranked, "topk", windowed).where(kept)


def _running_sum(order_by: Sequence[ColumnOrder], keys: list[str], data: list[str]) -> Column:
    """The running sum of the diffs in the order, within each ``(key, _at)`` group."""
    from pyspark.sql import functions as F
    from pyspark.sql.window import Window

    w = (
        Window.partitionBy(*keys, _AT)
        .orderBy(*spark_order(order_by, data))
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    return F.sum(DIFF_COLUMN).over(w)


def spark_order(order_by: Sequence[ColumnOrder], data: list[str]) -> list[Column]:
    """The TopK's order as Spark sort columns: ``order_by``, then the whole row ascending."""
    from pyspark.sql import functions as F

    return sort_columns(order_by) + [F.col(c).asc_nulls_last() for c in data]


def _chunks_of(*columns: pa.ChunkedArray) -> pa.ChunkedArray:
    """One column of the chunks of ``columns`` (of one type). Built from their chunks: given
    the columns themselves, ``pa.chunked_array`` walks their values one by one in Python."""
    return pa.chunked_array([c for column in columns for c in column.chunks], columns[0].type)
