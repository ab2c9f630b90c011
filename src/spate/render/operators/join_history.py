"""A keyed operator over a join, keyed by a join key, reads its history from the join's inputs.

A Reduce or TopK (any :class:`~spate.render.operators.keyed.KeyedNode`) needs the whole history
of every group a step touches. In general it keeps its own arrangement of its input for that.
When its input is a join (through Project, Map, Filter or ArrangeBy) and its one key column is
a column of a join equivalence class that has a column in every join input, the groups'
history is the old join restricted to the touched keys, and each input can be restricted by
its own column of that class: the join's input arrangements already hold everything needed.
So the keyed operator keeps no arrangement of the join's output, and:

* **hydration** computes the join and the keyed operator in one Spark job (no million-row
  arrangement of the join's output to write first);
* **a step** joins, for the touched keys only, each input's old rows (looked up in its
  arrangement) and new rows (its delta) — the touched groups' whole history and their changes
  in one join, where the delta query takes a join per term — and the keyed operator computes
  over that, in one Spark job: the join's delta never comes back to the driver. The touched
  ``(key, time)`` pairs come from the join's input deltas, each row's class column and time
  (a join row's key is the value its parts matched on, its time the latest of theirs, which
  a delta row holds). That is a superset of the pairs where the keyed operator's input
  changes; the extra ones produce updates that cancel.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from spate.render.batch import Batch, Lazy
from spate.render.layout import col_name, internal_schema
from spate.render.lookup import concat_like, in_list, lookup_columns
from spate.render.operators.driver_join import join_on_driver, key_columns
from spate.render.operators.join import JoinNode
from spate.render.operators.touched import Touched

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from spate.render.operators.node import Node, StepContext


BROADCAST_KEYS = 1_000_000
"""Up to this many touched keys are broadcast to select an input's old rows in Spark."""


def attach(node: Node, key: tuple[int, ...]) -> JoinNode | None:
    """The join under ``node`` whose inputs can serve the history of a keyed operator on
    ``node`` keyed by ``key`` (module docs), told to do so; ``None`` when there is none."""
    from spate.render.operators.linear import FilterNode, MapNode, PassNode, ProjectNode

    if len(key) != 1:
        return None
    (column,) = key
    while not isinstance(node, JoinNode):
        if isinstance(node, ProjectNode):
            column = node.outputs[column]
        elif isinstance(node, MapNode):
            if column >= node.input.desc.arity:
                return None  # a computed column: its values are not a join key's
        elif not isinstance(node, FilterNode | PassNode):
            return None
        node = node.input
    join = node
    if join.history_columns is not None:
        return None
    cls = next((c for c in join.equivalences if column in c), None)
    if cls is None:
        return None
    columns = []
    key_type = join.desc.columns[column].type
    for n in range(len(join.inputs)):
        mine = [p - join.offsets[n] for p in cls if join.owner[p] == n]
        if not mine or join.inputs[n].desc.columns[mine[0]].type != key_type:
            return None  # (a key value of one input must be a key value of every other)
        columns.append(mine[0])
    join.history_columns = tuple(columns)
    join.history_step = touched_groups
    return join


def touched_groups(join: JoinNode, ctx: StepContext, deltas: list[Batch]) -> Lazy:
    """The join, old and new rows, of the keys the deltas touch (at hydration: the join of
    the deltas), as one join of each input's rows of those keys, its arrangement's and its
    delta's together; records :class:`Touched` on the join.

    The join's rows are ``old ⋈ old`` (times before the step, the groups' history) plus the
    delta query's terms (``new ⋈ new - old ⋈ old``): joining the inputs' new rows gives both
    at once, where the delta query would take a join per term and a union."""
    columns = join.history_columns
    assert columns is not None
    small_rows = ctx.engine.settings.small_rows
    held = [a.rows > 0 for a in join.arrangements]
    touched = Touched(tuple(deltas), columns, has_history=all(held))
    join.touched = touched
    if not any(held):  # hydration, or nothing before: the join of the deltas
        if any(d.is_empty for d in deltas):
            return Lazy.empty()
        parts = [join.renamed(ctx.engine.df_of_batch(d), n) for n, d in enumerate(deltas)]
        small = all(d.rows <= small_rows for d in deltas)
        return Lazy(join.term(0, parts, small=small, local=small), big=not small)
    keys = touched.keys(internal_schema(join.inputs[0].desc).field(columns[0]).type)
    if len(keys) == 0:
        return Lazy.empty()
    found = on_driver(join, ctx, keys, deltas)
    if found is not None:
        return found
    parts = []
    small = True
    for n, delta in enumerate(deltas):
        part, rows = _new_rows(join, n, columns[n], ctx, keys, delta)
        if rows == 0:
            return Lazy.empty()  # an input without rows of these keys: the join has none
        small = small and rows is not None and rows <= small_rows
        parts.append(join.renamed(part, n))
    return Lazy(join.term(0, parts, small=small, local=small), big=not small)


def on_driver(join: JoinNode, ctx: StepContext, keys: pa.Array, deltas: list[Batch]) -> Lazy | None:
    """The touched keys' join computed on the driver (:mod:`.driver_join`) when every input's
    rows of those keys are found there and few; else ``None``."""
    columns = join.history_columns
    assert columns is not None
    driver_rows = ctx.engine.settings.driver_rows
    if key_columns(join) is None or len(keys) > driver_rows:
        return None
    tables = []
    for n, delta in enumerate(deltas):
        table = _found_rows(join, n, columns[n], keys, delta, driver_rows)
        if table is None or table.num_rows > driver_rows:
            return None
        if table.num_rows == 0:
            return Lazy.empty()
        tables.append(table)
    out = join_on_driver(join, tables[0], tables[1])
    if out is None:
        return None
    if out.num_rows == 0:
        return Lazy.empty()
    return ctx.engine.lazy_of_batch(Batch(join.desc, table=out, rows=out.num_rows))


def _found_rows(
    join: JoinNode, n: int, column: int, keys: pa.Array, delta: Batch, driver_rows: int
) -> pa.Table | None:
    """Input ``n``'s rows whose class column is among ``keys`` (old and new) when its
    arrangement serves the lookup, else ``None``."""
    desc = join.inputs[n].desc
    if not lookup_columns(desc, [column], null_safe=False) or delta.rows > driver_rows:
        return None
    found = join.arrangements[n].lookup([column], pa.table({"k": keys}), null_safe=False)
    if found is None:
        return None
    return found if delta.is_empty else concat_like(found, delta.arrow())


def _new_rows(
    join: JoinNode, n: int, column: int, ctx: StepContext, keys: pa.Array, delta: Batch
) -> tuple[DataFrame, int | None]:
    """Input ``n``'s rows whose class column is among ``keys``, old (its arrangement's) and
    new (``delta``, all of whose keys are among them), and how many (``None``: unknown,
    Spark reads the arrangement)."""
    from pyspark.sql import functions as F

    arr = join.arrangements[n]
    desc = join.inputs[n].desc
    exact = lookup_columns(desc, [column], null_safe=False)
    small_rows = ctx.engine.settings.small_rows
    if exact and len(keys) <= small_rows and delta.rows <= small_rows:
        found = arr.lookup([column], pa.table({"k": keys}), null_safe=False)
        if found is not None:
            if not delta.is_empty:
                found = concat_like(found, delta.arrow())
            slot = ctx.engine.slot_of_table(f"{join.name}-found{n}", found, desc)
            return slot, int(found.num_rows)
    old = arr.df()
    name = col_name(column)
    if old is not None:
        listed = in_list(name, keys)
        if listed is not None:
            old = old.where(listed)
        else:
            wanted = ctx.engine.spark_of_arrow(pa.table({name: keys}))
            if len(keys) <= BROADCAST_KEYS:  # rather than a shuffle of every old row
                wanted = F.broadcast(wanted)
            old = old.join(wanted, on=name, how="left_semi")
    if delta.is_empty:
        if old is None:
            return ctx.engine.df_of_table(internal_schema(desc).empty_table(), desc), 0
        return old, None
    new = ctx.engine.df_of_batch(delta)
    return (new if old is None else old.unionByName(new)), None
