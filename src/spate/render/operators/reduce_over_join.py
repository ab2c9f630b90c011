"""A reduce (or TopK) over a join, stepped from its accumulators (summaries): the join's delta,
not its history.

A reduce keyed by a join key reads its groups' history from the join's inputs
(:mod:`.join_history`): each step the join computes, for every touched key, the old join and
the new one. A reduce that keeps accumulators (:mod:`.reduce_state`) needs that history only
for its slow keys, so once it has accumulators the join runs its plain delta query for the step
(``dA ⋈ B + A' ⋈ dB``, on the driver), the reduce folds it, and the history of the slow keys
alone is joined from the join's arrangements (which hold every update before the step until
the step commits).

Only a two-input join the driver computes (:func:`.driver_join.key_columns`), with nothing but
projections between it and the reduce (so that its rows are the reduce's input rows, columns
picked). When anything declines (a delta beyond ``driver_rows``, a history not found on the
driver), the step's registered commits and errors are rewound and the caller computes the step
as before, from the whole history of the touched keys.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from spate.render.batch import Batch, Lazy
from spate.render.layout import col_name, data_names, internal_schema
from spate.render.operators.driver_join import key_columns
from spate.render.operators.join_history import on_driver as old_join_on_driver
from spate.render.operators.linear import PassNode, ProjectNode
from spate.render.operators.reduce_state import KeyedState, folded_step
from spate.repr.desc import DIFF_COLUMN, TIME_COLUMN

if TYPE_CHECKING:
    from spate.render.operators.join import JoinNode
    from spate.render.operators.node import Node, StepContext


def join_columns(node: Node, join: JoinNode) -> list[int] | None:
    """The join's output column under each column of ``node``, when only projections (and
    ArrangeBy) lie between them; else ``None``."""
    columns = list(range(node.desc.arity))
    while node is not join:
        if isinstance(node, ProjectNode):
            columns = [node.outputs[c] for c in columns]
        elif not isinstance(node, PassNode):
            return None
        node = node.input
    return columns


def folded_over_join(
    node: Node, ctx: StepContext, join: JoinNode, state: KeyedState, *, capturing: bool
) -> Lazy | None:
    """The reduce's step from its accumulators over the join's delta (module docs), or
    ``None`` with ``ctx`` as it was: the caller steps as before."""
    if capturing or ctx.first or state.keys == 0 or key_columns(join) is None:
        return None
    columns = join_columns(node, join)
    if columns is None:
        return None
    commits, errors = len(ctx.commits), len(ctx.errors)
    out = _folded(node, ctx, join, state, columns)
    if out is None:
        del ctx.commits[commits:]
        del ctx.errors[errors:]
    return out


def _folded(
    node: Node, ctx: StepContext, join: JoinNode, state: KeyedState, columns: list[int]
) -> Lazy | None:
    serving = join.history_step
    join.history_step = None  # the plain delta query, this step
    try:
        lazy = node.step(ctx)
    finally:
        join.history_step = serving
    if lazy.is_empty:
        return Lazy.empty()
    if lazy.batch is not None and lazy.batch.table is not None:
        delta = lazy.batch.table
    else:
        batch = ctx.materialize(lazy, node.desc, consolidated=False)
        if batch.rows > ctx.engine.settings.driver_rows:
            return None
        delta = batch.arrow()

    def history(keys: pa.Table) -> pa.Table | None:
        empty = [Batch(i.desc) for i in join.inputs]
        old = old_join_on_driver(join, ctx, keys.column(0).combine_chunks(), empty)
        schema = internal_schema(node.desc)
        if old is None or (not old.is_empty and (old.batch is None or old.batch.table is None)):
            return None
        if old.is_empty:
            return schema.empty_table()
        assert old.batch is not None and old.batch.table is not None
        picked = old.batch.table.select([*(col_name(c) for c in columns), TIME_COLUMN, DIFF_COLUMN])
        names = [*data_names(len(columns)), TIME_COLUMN, DIFF_COLUMN]
        return picked.rename_columns(names).cast(schema)

    return folded_step(state, ctx, delta, history, capturing=False)
