"""The accumulators a reduce keeps between steps, and a step computed from them.

:class:`ReduceState` holds the accumulators (:mod:`.accumulators`) of the keys a reduce has
seen, in driver memory, exact at the reduce's upper: a **cache**, where a key that is absent is
unknown (not empty). A step (:meth:`ReduceState.step`) folds the delta of every known key into
its accumulators, without reading the group's history; only *slow* keys — unknown ones, and
known ones whose min or max the delta retracts — are computed from their history (the caller
reads it: the reduce's input arrangement, or the join under it), and their accumulators are
learned from it. So a replica that restarts (rehydrates) starts with an empty cache and learns
each key the first time a step touches it, from the same history the reduce read before the
cache existed.

A state keyed by one integer-like column (:func:`~spate.render.key_index.indexable`) keeps its
keys sorted beside the table (:class:`_Positions`): a step finds its keys' accumulators by binary
search and commits by appending the new rows and moving a few entries of the sorted keys, so it
costs the keys the step touches, not the state's size (a join with a million-key state took
tens of milliseconds, and the anti-join that dropped the touched keys' old rows hundreds).
Rows superseded stay in the table until they outnumber the live ones; it is then compacted.

Obligations: the caller MUST run the returned commit action exactly when the step commits, and
MUST call :meth:`ReduceState.clear` (on commit) after any non-empty step it computed another
way, since the cache would then be stale for the keys that step touched.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spate.render.batch import Batch, Lazy
from spate.render.key_index import as_int64, indexable
from spate.render.layout import internal_schema
from spate.render.lookup import concat_like
from spate.render.operators.accumulators import Layout, Unfoldable, fold, state_of
from spate.render.operators.driver_reduce import reduce_on_driver
from spate.render.operators.int_fold import fold_ints, reduce_ints
from spate.render.operators.key_times import key_times, with_from
from spate.render.operators.node import StepContext
from spate.repr.desc import RelationDesc

History = Callable[[pa.Table], "pa.Table | None"]
"""``keys -> their rows before the step`` (a superset is fine), or ``None`` when the driver
cannot read them."""

Step = tuple[pa.Table, Callable[[], None]]
"""A step's output changes and the action that commits the state."""


class KeyedState(Protocol):
    """What a keyed operator keeps between steps to compute them from the delta: a reduce's
    accumulators (:class:`ReduceState`), a TopK's summaries
    (:class:`~spate.render.operators.topk_state.TopKState`)."""

    capacity: int

    @property
    def keys(self) -> int: ...

    @property
    def out_desc(self) -> RelationDesc: ...

    def clear(self) -> None: ...

    def step(self, delta: pa.Table, *, lo: int, history: History) -> Step | None: ...


_KNOWN: Final = "_known"
_MAX_CHUNKS: Final = 64
"""A positioned state's table is compacted when it has more chunks than this (a chunk per
commit; takes slow down with many)."""


class _Positions:
    """The live rows of a state keyed by one integer-like column: their keys sorted, and each
    one's row in the state's table (superseded rows are in the table but not here)."""

    __slots__ = ("keys", "rows")

    def __init__(self) -> None:
        self.keys = np.empty(0, np.int64)
        self.rows = np.empty(0, np.int64)

    def find(self, asked: np.ndarray) -> np.ndarray:
        """The entries (indices into ``keys``) of the keys of ``asked`` present here."""
        i = np.searchsorted(self.keys, asked)
        inside = i < len(self.keys)
        hit = np.zeros(len(asked), dtype=bool)
        hit[inside] = self.keys[i[inside]] == asked[inside]
        return np.asarray(i[hit], np.int64)

    def replace(self, gone: np.ndarray, keys: np.ndarray, rows: np.ndarray) -> None:
        """Drop the entries ``gone``, then add ``keys`` (distinct, none present but those of
        ``gone``) at table rows ``rows``. A key of ``gone`` added again is updated in place;
        only keys that come or go move the arrays (each move a copy of them)."""
        again = self.find(keys)  # entries of keys present: all among ``gone``
        if len(again):
            hit = np.isin(keys, self.keys[again])
            self.rows[again] = rows[hit]  # (find keeps the order of what it is asked)
            gone = np.setdiff1d(gone, again, assume_unique=True)
            keys, rows = keys[~hit], rows[~hit]
        if len(gone):
            self.keys = np.delete(self.keys, gone)
            self.rows = np.delete(self.rows, gone)
        if len(keys):
            order = np.argsort(keys, kind="stable")
            at = np.searchsorted(self.keys, keys[order])
            self.keys = np.insert(self.keys, at, keys[order])
            self.rows = np.insert(self.rows, at, rows[order])


class ReduceState:
    """The accumulators of the keys a reduce has seen (module docs)."""

    def __init__(self, layout: Layout, *, capacity: int) -> None:
        self.layout = layout
        self.capacity = capacity
        """At most this many keys are kept (beyond it, new keys are not learned)."""
        self.table = layout.schema().empty_table()
        """Every key's accumulators (with a positioned state, superseded rows too)."""
        self.folded_keys = 0
        """Keys folded from their deltas alone so far (for tests and profiles)."""
        self._positions: _Positions | None = None
        self._positioned = len(layout.key) == 1 and indexable(self.table.column(layout.keys[0]))

    @property
    def out_desc(self) -> RelationDesc:
        return self.layout.out_desc

    @property
    def keys(self) -> int:
        """How many keys' accumulators are known."""
        return self.table.num_rows if self._positions is None else len(self._positions.keys)

    def clear(self) -> None:
        self.table = self.layout.schema().empty_table()
        self._positions = None

    def load(self, table: pa.Table) -> None:
        """Replace every accumulator by ``table`` (:meth:`Layout.schema`, one row per key;
        NULL keys, which no step folds, left out; nothing kept beyond the capacity)."""
        self.clear()
        for k in self.layout.keys:
            table = table.filter(pc.is_valid(table.column(k)))
        if table.num_rows > self.capacity:
            return
        if not self._positioned:
            self.table = table
            return
        keys = as_int64(table.column(self.layout.keys[0]))
        order = np.argsort(keys, kind="stable")
        self.table = table.take(pa.array(order)).combine_chunks()
        self._positions = _Positions()
        self._positions.keys = keys[order]
        self._positions.rows = np.arange(len(order), dtype=np.int64)

    def _old(self, touched: pa.Table) -> tuple[pa.Table, np.ndarray | None]:
        """The accumulators of ``touched`` (distinct keys) and, positioned, their entries."""
        keys = self.layout.keys
        if not self._positioned:
            return self.table.join(
                touched, keys=keys, join_type="left semi", use_threads=False
            ), None
        if self._positions is None:
            self._positions = _Positions()
        entries = self._positions.find(np.unique(as_int64(touched.column(keys[0]))))
        return self.table.take(pa.array(self._positions.rows[entries])), entries

    def _commit(self, touched: pa.Table, entries: np.ndarray | None, fresh: list[pa.Table]) -> None:
        """Replace the accumulators of ``touched`` (``entries``, positioned) by ``fresh``."""
        keys = self.layout.keys
        schema = self.table.schema
        fresh = [f.select(schema.names).cast(schema) for f in fresh]
        if entries is None or self._positions is None:
            kept = self.table.join(touched, keys=keys, join_type="left anti", use_threads=False)
            table = pa.concat_tables([kept.select(schema.names), *fresh])
            self.table = table if table.num_rows <= self.capacity else kept.select(schema.names)
            return
        positions = self._positions
        learned = sum(f.num_rows for f in fresh)
        if len(positions.keys) - len(entries) + learned > self.capacity:
            fresh, learned = [], 0  # beyond the capacity: the touched keys are forgotten
        base = self.table.num_rows
        new_keys = (  # (from the chunks: pa.chunked_array of columns walks their values)
            as_int64(
                pa.chunked_array(
                    [c for f in fresh for c in f.column(keys[0]).chunks], schema.field(keys[0]).type
                )
            )
            if learned
            else np.empty(0, np.int64)
        )
        positions.replace(entries, new_keys, base + np.arange(learned, dtype=np.int64))
        if learned:
            self.table = pa.concat_tables([self.table, *fresh])
        live = len(positions.keys)
        chunks = self.table.column(0).num_chunks
        if self.table.num_rows > 2 * live + 1024 or chunks > _MAX_CHUNKS:
            self.table = self.table.take(pa.array(positions.rows)).combine_chunks()
            positions.rows = np.arange(live, dtype=np.int64)

    def step(self, delta: pa.Table, *, lo: int, history: History) -> Step | None:
        """The output changes of a step whose input delta is ``delta`` (times ``>= lo``,
        internal layout of the input), and the action that commits the new accumulators; or
        ``None`` when the step must be computed from the groups' history alone (NULL keys,
        a negative group, sums near int64's range, histories the driver cannot read)."""
        layout, keys = self.layout, self.layout.keys
        if any(delta.column(k).null_count for k in keys):
            return None
        if self._positioned and indexable(delta.column(keys[0])):
            # one integer key: the keys' entries and the split by binary search, no join
            k = as_int64(delta.column(keys[0]))
            if self._positions is None:
                self._positions = _Positions()
            entries: np.ndarray | None = self._positions.find(np.unique(k))
            assert entries is not None
            old = self.table.take(pa.array(self._positions.rows[entries]))
            is_known = _members(k, self._positions.keys[entries])
            marked = delta
            touched = delta.select(keys).slice(0, 0)  # unused when positioned (_commit)
            fast_rows = delta.filter(is_known)
            unknown = delta.filter(~is_known)
        else:
            # Every join here hashes the step's side (its keys), never the whole state
            touched = _distinct(delta, keys)
            old, entries = self._old(touched)
            known = old.select(keys).append_column(_KNOWN, pa.array(np.ones(old.num_rows, bool)))
            marked = delta.join(known, keys=keys, join_type="left outer", use_threads=False)
            known_mask = pc.is_valid(marked.column(_KNOWN))
            marked = marked.drop_columns([_KNOWN]).select(delta.column_names)
            fast_rows = marked.filter(known_mask)
            unknown = marked.filter(pc.invert(known_mask))
        try:
            folded = None
            if fast_rows.num_rows:
                folded = fold_ints(layout, fast_rows, old) or fold(layout, fast_rows, old, lo=lo)
            slow_keys = _distinct(unknown, keys)
            if folded is not None:
                slow_keys = pa.concat_tables([slow_keys, folded.slow.cast(slow_keys.schema)])
            changes = [] if folded is None else [folded.changes]
            learned = None
            if slow_keys.num_rows:
                slow_delta = _semi_join(marked, slow_keys, keys)
                before = history(slow_keys)
                if before is None:
                    return None
                rows = concat_like(before, slow_delta)
                quick = reduce_ints(layout, rows, slow_delta, lo)
                if quick is not None:
                    out, learned = quick
                else:
                    times = with_from(key_times(slow_delta, layout.key, lo - 1), lo)
                    found = reduce_on_driver(
                        rows, times, layout.key, layout.aggregates, layout.in_desc, layout.out_desc
                    )
                    if found is None:
                        return None
                    out = found
                    learned = _semi_join(state_of(layout, rows), slow_keys, keys)
                changes.append(out)
        except Unfoldable:
            return None
        fresh = [t for t in (None if folded is None else folded.state, learned) if t is not None]
        fast = 0 if folded is None else folded.fast

        def commit() -> None:
            self.folded_keys += fast
            self._commit(touched, entries, fresh)

        schema = internal_schema(layout.out_desc)
        return pa.concat_tables([schema.empty_table(), *(c.cast(schema) for c in changes)]), commit


def _members(values: np.ndarray, sorted_keys: np.ndarray) -> np.ndarray:
    """Which of ``values`` are among ``sorted_keys`` (sorted, distinct)."""
    if not len(sorted_keys):
        return np.zeros(len(values), dtype=bool)
    at = np.searchsorted(sorted_keys, values)
    at[at >= len(sorted_keys)] = 0
    return np.asarray(sorted_keys[at] == values)


def _distinct(table: pa.Table, keys: list[str]) -> pa.Table:
    if table.num_rows == 0:
        return table.select(keys)
    return table.select(keys).group_by(keys, use_threads=False).aggregate([])


def _semi_join(table: pa.Table, keys_table: pa.Table, keys: list[str]) -> pa.Table:
    if len(keys) == 1 and indexable(table.column(keys[0])):
        wanted = keys_table.column(keys[0])
        if wanted.type == table.column(keys[0]).type and indexable(wanted):
            asked = np.unique(as_int64(wanted))
            return table.filter(_members(as_int64(table.column(keys[0])), asked))
    return table.join(
        _distinct(keys_table, keys), keys=keys, join_type="left semi", use_threads=False
    )


def folded_step(
    state: KeyedState, ctx: StepContext, delta: pa.Table, history: History, *, capturing: bool
) -> Lazy | None:
    """The step of a reduce or TopK from ``state`` (:meth:`ReduceState.step`) as the operator's
    output, its commit scheduled; ``None`` (the state then cleared on commit) when the caller
    must compute the step otherwise (capture mode, a delta beyond ``driver_rows``, or
    :meth:`ReduceState.step` declines)."""
    result = None
    if not capturing and delta.num_rows <= ctx.engine.settings.driver_rows:
        try:
            result = state.step(delta, lo=ctx.lo, history=history)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            result = None  # columns pyarrow cannot join or compare: the other paths can
    if result is None:
        ctx.on_commit(state.clear)
        return None
    changes, commit = result
    ctx.on_commit(commit)
    if changes.num_rows == 0:
        return Lazy.empty()
    return ctx.engine.lazy_of_batch(Batch(state.out_desc, table=changes, rows=changes.num_rows))
