"""A TopK's hydration that computes its per-key summaries, and its output from them.

A TopK that keeps summaries (:mod:`.topk_state`) would otherwise start with none, and every
key a step touched for the first time would be computed from its history (over a join, a
TopK learns nothing while the join serves its history in Spark). Instead the one Spark job of
the hydration ranks each key's consolidated group in the TopK's order (the running sum of the
multiplicities, and the group's total) and keeps the rows the summary holds: those with fewer
than ``2·(offset + limit)`` rows before them; a key is complete when its last row is kept. The
driver derives the output from them (each row's share of the window ``[offset, offset +
limit)``), and the TopK starts with every key's summary (up to its capacity).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from spate.render.batch import Batch, Lazy
from spate.render.layout import col_name, data_names, internal_schema
from spate.render.operators.topk_state import TopKState, group_ids, spark_order
from spate.repr.desc import DIFF_COLUMN, TIME_COLUMN, Column, RelationDesc
from spate.repr.types import INT64

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from spate.render.operators.node import StepContext


def hydrate_summaries(state: TopKState, ctx: StepContext, groups: DataFrame, big: bool) -> Lazy:
    """The hydration at ``ctx.lo`` of the TopK whose summaries ``state`` will hold, from its
    input's ``groups`` (consolidated, no negative or zero multiplicity), the summaries loaded
    when the step commits."""
    from pyspark.sql import functions as F
    from pyspark.sql.window import Window

    lay, at = state.layout, ctx.lo
    n = lay.desc.arity
    data = data_names(n)
    keys = [F.col(k) for k in lay.keys]
    diff = F.col(DIFF_COLUMN)
    running = (
        Window.partitionBy(*keys)
        .orderBy(*spark_order(lay.order_by, data))
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    cum, total = F.sum(diff).over(running), F.sum(diff).over(Window.partitionBy(*keys))
    ranked = groups.select(*data, diff, cum.alias("_cum"), total.alias("_total"))
    kept = ranked.where(F.col("_cum") - diff < 2 * lay.window).select(
        *data,
        diff.alias(col_name(n)),
        F.col("_cum").alias(col_name(n + 1)),
        F.col("_total").alias(col_name(n + 2)),
        F.lit(at).cast("long").alias(TIME_COLUMN),
        F.lit(1).cast("long").alias(DIFF_COLUMN),
    )
    extra = [
        Column("_summary_m", INT64),
        Column("_summary_cum", INT64),
        Column("_summary_total", INT64),
    ]
    desc = RelationDesc((*lay.desc.columns, *extra))
    table = ctx.materialize(Lazy(kept, big, consolidated=True), desc).arrow()
    m = np.asarray(table.column(col_name(n)).to_numpy(), np.int64)
    cum_ = np.asarray(table.column(col_name(n + 1)).to_numpy(), np.int64)
    complete = cum_ == np.asarray(table.column(col_name(n + 2)).to_numpy(), np.int64)
    # a key is complete when its last row (running sum = total) is kept
    held = table.select(data).append_column("_m", pa.array(m))
    if lay.keys:
        gid, _ = group_ids([table.column(k) for k in lay.keys], table.num_rows)
        whole = np.zeros(int(gid.max()) + 1 if len(gid) else 0, bool)
        np.logical_or.at(whole, gid, complete)
        complete = whole[gid]
    else:
        complete = np.full(table.num_rows, bool(complete.any()))
    ctx.on_commit(lambda: state.load(held, complete))
    share = np.minimum(cum_, lay.window) - np.maximum(cum_ - m, lay.offset)
    inside = share > 0
    if not inside.any():
        return Lazy.empty()
    out = table.select(data).filter(pa.array(inside))
    out = out.append_column(TIME_COLUMN, pa.array(np.full(out.num_rows, at, np.int64)))
    out = out.append_column(DIFF_COLUMN, pa.array(share[inside], pa.int64()))
    out = out.cast(internal_schema(lay.desc))
    return ctx.engine.lazy_of_batch(Batch(lay.desc, table=out, rows=out.num_rows))
