"""A reduce's hydration that computes its accumulators, and its output from them.

A reduce that keeps accumulators (:mod:`.reduce_state`) would otherwise start with none: every
key a step touched for the first time was computed from its history, so for the first hundreds
of steps over a large state nearly every key was slow, and each step cost more than without
accumulators. Instead, when every update of the first step is at the as_of and none is negative
(the case in which a reduce aggregates its rows as they are, :meth:`KeyedNode._hydrate`), the
one Spark job of the hydration aggregates each key's **accumulators** (:mod:`.accumulators`:
``_rows``, and per aggregate ``_n``, an exact ``_s``, ``_v``) rather than its output values;
the driver derives the output from them exactly as a fold does, and the reduce starts with
every key's accumulators (up to its capacity).

Sums are aggregated as ``decimal(38, 0)``, exactly; when one lies beyond what the
accumulators hold exactly (``|_s| >= 2**62``, :data:`.accumulators._SAFE`) the result is
dropped and the caller hydrates as before (which raises a sum beyond int64 as an evaluation
error).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spate.plan.aggregate import AggregateFunc
from spate.render.batch import Batch, Lazy
from spate.render.layout import internal_schema
from spate.render.operators.accumulators import ROWS, Layout, Unfoldable, state_of, values_of
from spate.render.operators.driver_reduce import value_column
from spate.render.operators.reduce_state import ReduceState
from spate.repr.desc import DIFF_COLUMN, TIME_COLUMN, Column, RelationDesc
from spate.repr.types import INT64, numeric

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from spate.render.operators.node import StepContext

F_ = AggregateFunc
_EXACT: Final = numeric(38, 0)
_SAFE: Final = 2**62
"""As :data:`.accumulators._SAFE`."""


def _nullable(layout: Layout, i: int) -> bool:
    """Whether aggregate ``i`` reads a nullable column (else its ``_n`` is ``_rows``, not
    aggregated)."""
    index = value_column(layout.aggregates[i], layout.in_desc)
    assert index is not None
    return layout.in_desc.columns[index].nullable


def _state_desc(layout: Layout) -> tuple[RelationDesc, list[str]]:
    """The accumulators as a relation (exact sums: ``numeric(38, 0)``), and each column's
    name in :meth:`Layout.schema`."""
    columns: list[Column] = []
    names: list[str] = []
    for j, k in enumerate(layout.key):
        columns.append(Column(f"k{j}", layout.in_desc.columns[k].type))
        names.append(layout.keys[j])
    columns.append(Column("rows", INT64))
    names.append(ROWS)
    for i, agg in enumerate(layout.aggregates):
        v = layout.value(i)
        if v is None:
            continue
        if _nullable(layout, i):
            columns.append(Column(f"n{i}", INT64))
            names.append(f"_n{i}")
        if agg.func in (F_.SUM, F_.AVG):
            columns.append(Column(f"s{i}", _EXACT))
            names.append(f"_s{i}")
        elif agg.func in (F_.MIN, F_.MAX):
            index = layout.in_schema.get_field_index(v)
            columns.append(Column(f"v{i}", layout.in_desc.columns[index].type))
            names.append(f"_v{i}")
    return RelationDesc(columns), names


def _plan(layout: Layout, d: DataFrame, at: int) -> DataFrame:
    """Each key's accumulators over ``d`` (the reduce's input rows, no negative ``_diff``),
    in the internal layout of :func:`_state_desc`, all at ``at``."""
    from pyspark.sql import functions as F

    diff = F.col(DIFF_COLUMN)
    aggs = [F.sum(diff)]
    for i, agg in enumerate(layout.aggregates):
        v = layout.value(i)
        if v is None:
            continue
        c = F.col(v)
        if _nullable(layout, i):
            aggs.append(F.sum(F.when(c.isNull(), F.lit(0)).otherwise(diff)))
        if agg.func in (F_.SUM, F_.AVG):
            # Σ v·m over the rows whose v is not NULL: 0 for a group whose values are all
            # NULL (Spark's sum would say NULL), as the accumulators hold it (_n says NULL)
            product = c.cast("decimal(38,0)") * diff.cast("decimal(20,0)")
            aggs.append(F.coalesce(F.sum(product), F.lit(0).cast("decimal(38,0)")))
        elif agg.func is F_.MIN:  # (every multiplicity is positive: KeyedNode._hydrate)
            aggs.append(F.min(c))
        elif agg.func is F_.MAX:
            aggs.append(F.max(c))
    grouped = d.groupBy(*layout.keys).agg(*[a.alias(f"_a{j}") for j, a in enumerate(aggs)])
    n = len(layout.keys)
    cols = [F.col(k).alias(f"c{j}") for j, k in enumerate(layout.keys)]
    cols += [F.col(f"_a{j}").alias(f"c{n + j}") for j in range(len(aggs))]
    cols += [F.lit(at).cast("long").alias(TIME_COLUMN), F.lit(1).cast("long").alias(DIFF_COLUMN)]
    return grouped.select(*cols)


def hydrate_with_state(
    state: ReduceState, ctx: StepContext, d: DataFrame, at: int, big: bool
) -> Lazy | None:
    """The hydration of the reduce whose accumulators ``state`` will hold (module docs), the
    accumulators loaded when the step commits; ``None`` when a sum lies beyond what they hold
    exactly (the caller hydrates as before)."""
    layout = state.layout
    desc, names = _state_desc(layout)
    if not big:
        d = d.coalesce(1)  # one partition: no shuffle (as KeyedNode._hydrate)
    batch = ctx.materialize(Lazy(_plan(layout, d, at), big, consolidated=True), desc)
    acc = batch.arrow()
    acc = acc.select(acc.column_names[: len(names)]).rename_columns(names)
    acc = acc.filter(pc.greater(acc.column(ROWS), 0))
    schema = layout.schema()
    columns = []
    for field in schema:
        # a count of a column without NULLs is the group's
        column = acc.column(field.name if field.name in names else ROWS)
        exact = field.name.startswith("_s") and len(column) > 0
        if exact and pc.max(pc.abs(column)).as_py() >= _SAFE:
            return None
        columns.append(column.cast(field.type))
    learned = pa.Table.from_arrays(columns, schema=schema)
    return _hydrated(state, ctx, learned, at)


def hydrate_on_driver(state: ReduceState, ctx: StepContext, rows: pa.Table, at: int) -> Lazy | None:
    """The same hydration with pyarrow, without a Spark job, from ``rows`` (the reduce's input
    rows, internal layout, every ``_diff`` positive or zero, not necessarily consolidated; on
    the driver already); ``None`` when a sum lies beyond what the accumulators hold exactly.
    The aggregates of a reduce with accumulators are those pyarrow computes exactly
    (:mod:`.accumulators`)."""
    try:
        learned = state_of(state.layout, rows, consolidated=True)
    except (Unfoldable, pa.ArrowInvalid):  # (a value beyond float64's exact integers)
        return None
    return _hydrated(state, ctx, learned, at)


def _hydrated(state: ReduceState, ctx: StepContext, learned: pa.Table, at: int) -> Lazy:
    """The reduce's output at ``at`` from every key's accumulators ``learned``, which the
    state loads when the step commits."""
    layout = state.layout
    out_schema = internal_schema(layout.out_desc)
    n = learned.num_rows
    arrays = [learned.column(k) for k in layout.keys] + values_of(layout, learned)
    arrays += [pa.array(np.full(n, at, np.int64)), pa.array(np.ones(n, np.int64))]
    out = pa.Table.from_arrays(
        [a.cast(out_schema.field(i).type) for i, a in enumerate(arrays)], schema=out_schema
    )
    ctx.on_commit(lambda: state.load(learned))
    if n == 0:
        return Lazy.empty()
    return ctx.engine.lazy_of_batch(Batch(layout.out_desc, table=out, rows=n))
