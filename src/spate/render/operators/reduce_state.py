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

Obligations: the caller MUST run the returned commit action exactly when the step commits, and
MUST call :meth:`ReduceState.clear` (on commit) after any non-empty step it computed another
way, since the cache would then be stale for the keys that step touched.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spate.render.batch import Batch, Lazy
from spate.render.layout import internal_schema
from spate.render.lookup import concat_like
from spate.render.operators.accumulators import Layout, Unfoldable, fold, state_of
from spate.render.operators.driver_reduce import reduce_on_driver
from spate.render.operators.key_times import key_times, with_from
from spate.render.operators.node import StepContext

History = Callable[[pa.Table], "pa.Table | None"]
"""``keys -> their rows before the step`` (a superset is fine), or ``None`` when the driver
cannot read them."""

_KNOWN: Final = "_known"


class ReduceState:
    """The accumulators of the keys a reduce has seen (module docs)."""

    def __init__(self, layout: Layout, *, capacity: int) -> None:
        self.layout = layout
        self.capacity = capacity
        """At most this many keys are kept (beyond it, new keys are not learned)."""
        self.table = layout.schema().empty_table()
        self.folded_keys = 0
        """Keys folded from their deltas alone so far (for tests and profiles)."""

    def clear(self) -> None:
        self.table = self.layout.schema().empty_table()

    def step(
        self, delta: pa.Table, *, lo: int, history: History
    ) -> tuple[pa.Table, Callable[[], None]] | None:
        """The output changes of a step whose input delta is ``delta`` (times ``>= lo``,
        internal layout of the input), and the action that commits the new accumulators; or
        ``None`` when the step must be computed from the groups' history alone (NULL keys,
        a negative group, sums near int64's range, histories the driver cannot read)."""
        layout, keys = self.layout, self.layout.keys
        if any(delta.column(k).null_count for k in keys):
            return None
        # Every join here hashes the step's side (its keys), never the whole state
        touched = _distinct(delta, keys)
        old = self.table.join(touched, keys=keys, join_type="left semi", use_threads=False)
        known = old.select(keys).append_column(_KNOWN, pa.array(np.ones(old.num_rows, bool)))
        marked = delta.join(known, keys=keys, join_type="left outer", use_threads=False)
        is_known = pc.is_valid(marked.column(_KNOWN))
        marked = marked.drop_columns([_KNOWN]).select(delta.column_names)
        fast_rows = marked.filter(is_known)
        unknown = marked.filter(pc.invert(is_known))
        try:
            folded = fold(layout, fast_rows, old, lo=lo) if fast_rows.num_rows else None
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
                times = with_from(key_times(slow_delta, layout.key, lo - 1), lo)
                out = reduce_on_driver(
                    rows, times, layout.key, layout.aggregates, layout.in_desc, layout.out_desc
                )
                if out is None:
                    return None
                changes.append(out)
                learned = _semi_join(state_of(layout, rows), slow_keys, keys)
        except Unfoldable:
            return None
        fresh = [t for t in (None if folded is None else folded.state, learned) if t is not None]
        fast = 0 if folded is None else folded.fast

        def commit() -> None:
            self.folded_keys += fast
            kept = self.table.join(touched, keys=keys, join_type="left anti", use_threads=False)
            table = pa.concat_tables([kept.select(self.table.column_names), *fresh])
            self.table = table if table.num_rows <= self.capacity else kept
            if table.num_rows > self.capacity:
                self.table = self.table.select(self.table.column_names)

        schema = internal_schema(layout.out_desc)
        return pa.concat_tables([schema.empty_table(), *(c.cast(schema) for c in changes)]), commit


def _distinct(table: pa.Table, keys: list[str]) -> pa.Table:
    return table.select(keys).group_by(keys, use_threads=False).aggregate([])


def _semi_join(table: pa.Table, keys_table: pa.Table, keys: list[str]) -> pa.Table:
    return table.join(
        _distinct(keys_table, keys), keys=keys, join_type="left semi", use_threads=False
    )


def folded_step(
    state: ReduceState, ctx: StepContext, delta: pa.Table, history: History, *, capturing: bool
) -> Lazy | None:
    """The step of a reduce from ``state`` (:meth:`ReduceState.step`) as the operator's
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
    return ctx.engine.lazy_of_batch(
        Batch(state.layout.out_desc, table=changes, rows=changes.num_rows)
    )
