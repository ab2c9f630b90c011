"""Reduce, TopK, Distinct and Threshold: operators whose output per key is a function of the
key's whole group.

For a step over ``[lo, hi)`` with input delta ``Δ``:

1. ``T`` = the distinct ``(key, time)`` pairs of ``Δ`` — the only keys and times at which the
   output can change — plus ``(key, lo - 1)`` for each touched key when there is history;
2. ``C`` = the touched keys' history (from the input arrangement, all times ``< lo``) and ``Δ``;
3. for every ``(key, t)`` in ``T``: the group accumulated at ``t`` (``C`` rows of that key with
   time ``<= t``, consolidated), and the operator's output for it;
4. the output changes at each ``t`` by ``output(t) - output(previous t of that key)``: each
   output row is emitted ``+m`` at its ``t`` (when ``t >= lo``) and ``-m`` at the key's next
   time in ``T``.

So the output is exact at every time of the step, and the cost follows the touched keys'
groups, not the whole state. All of it is one Spark plan, run once when the result is
materialized. A group with a negative multiplicity is an evaluation error (Spark's
``raise_error``), as in the reference.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from spate.plan.aggregate import AggregateExpr
from spate.plan.finishing import ColumnOrder
from spate.render.arrangement import Arrangement
from spate.render.batch import SMALL_ROWS, Lazy
from spate.render.layout import col_name, data_names
from spate.render.operators.node import Node, StepContext
from spate.repr.desc import DIFF_COLUMN, TIME_COLUMN, RelationDesc

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

_AT = "_at"
_NEXT = "_next"
_M = "_m"


@dataclass
class KeyedNode:
    """The shared machinery; ``kind`` is ``reduce``, ``topk``, ``distinct`` or ``threshold``."""

    input: Node
    kind: str
    key: tuple[int, ...]
    desc: RelationDesc
    name: str
    aggregates: tuple[AggregateExpr, ...] = ()
    order_by: tuple[ColumnOrder, ...] = ()
    limit: int | None = None
    offset: int = 0
    arrangement: Arrangement | None = None
    _out_key: tuple[int, ...] = field(default=())

    def step(self, ctx: StepContext) -> Lazy:
        from pyspark.sql import functions as F

        in_desc = self.input.desc
        if self.arrangement is None:
            self.arrangement = Arrangement(
                ctx.engine, in_desc, f"{self.name}-in", as_of=ctx.lo, internal=True
            )
        arr = self.arrangement
        delta = ctx.materialize(self.input.step(ctx), in_desc)
        ctx.on_commit(functools.partial(arr.append, delta, ctx.hi))
        if delta.is_empty:
            return Lazy.empty()
        d = ctx.engine.df_of_batch(delta)
        keys = [col_name(k) for k in self.key]
        if not keys:  # a global group: key every row by one constant
            d = d.withColumn("_g", F.lit(0))
            keys = ["_g"]
        history = arr.df()
        times = d.select(*keys, F.col(TIME_COLUMN)).distinct()
        if history is not None:
            if self.key:
                touched = d.select(*keys).distinct()
                if delta.rows <= SMALL_ROWS:
                    touched = F.broadcast(touched)
                history = history.join(
                    touched, on=_null_safe(history, touched, keys), how="left_semi"
                )
            else:
                history = history.withColumn("_g", F.lit(0))
            before = times.select(*keys).distinct().withColumn(TIME_COLUMN, F.lit(ctx.lo - 1))
            times = times.unionByName(before)
            rows = history.unionByName(d.select(*history.columns))
        else:
            rows = d
        # 3. every touched group, accumulated at every time of T
        t = times.select(
            *[F.col(k).alias(f"_tk{i}") for i, k in enumerate(keys)], F.col(TIME_COLUMN).alias(_AT)
        )
        cond = None
        for i, k in enumerate(keys):
            c = t[f"_tk{i}"].eqNullSafe(rows[k])
            cond = c if cond is None else cond & c
        assert cond is not None
        cond = cond & (rows[TIME_COLUMN] <= t[_AT])
        if delta.rows <= SMALL_ROWS:
            t = F.broadcast(t)
        data = data_names(in_desc.arity)
        groups = (
            rows.join(t, on=cond, how="inner")
            .groupBy(_AT, *data)
            .agg(F.sum(DIFF_COLUMN).alias(DIFF_COLUMN))
            .where(F.col(DIFF_COLUMN) != 0)
        )
        if self.kind != "threshold":
            groups = groups.withColumn(
                DIFF_COLUMN,
                F.when(
                    F.col(DIFF_COLUMN) < 0,
                    F.raise_error(
                        F.lit(f"{self.kind} {self.name}: an input row has a negative multiplicity")
                    ),
                ).otherwise(F.col(DIFF_COLUMN)),
            )
        out, out_keys = self._outputs(groups)
        # 4. differences between consecutive times of each key
        from pyspark.sql.window import Window

        nxt = times.withColumn(
            _NEXT, F.lead(TIME_COLUMN).over(Window.partitionBy(*keys).orderBy(TIME_COLUMN))
        )
        nxt = nxt.select(
            *[F.col(k).alias(f"_nk{i}") for i, k in enumerate(keys)],
            F.col(TIME_COLUMN).alias("_nt"),
            F.col(_NEXT),
        )
        jc = out[_AT] == nxt["_nt"]
        for i, k in enumerate(out_keys):
            jc = jc & nxt[f"_nk{i}"].eqNullSafe(out[k])
        joined = out.join(nxt, on=jc, how="inner")
        cols = data_names(self.desc.arity)
        plus = joined.where(F.col(_AT) >= ctx.lo).select(
            *cols, F.col(_AT).alias(TIME_COLUMN), F.col(_M).alias(DIFF_COLUMN)
        )
        minus = joined.where(F.col(_NEXT).isNotNull()).select(
            *cols, F.col(_NEXT).alias(TIME_COLUMN), (-F.col(_M)).alias(DIFF_COLUMN)
        )
        return Lazy(plus.unionByName(minus), big=delta.rows > SMALL_ROWS)

    def _outputs(self, groups: DataFrame) -> tuple[DataFrame, list[str]]:
        """The output rows of every ``(key, _at)`` group: data columns, ``_at``, ``_m``; and the
        names of the key columns among them."""
        from pyspark.sql import functions as F

        in_desc = self.input.desc
        if self.kind == "reduce":
            from spate.render.aggregates import aggregate_column

            keys = [col_name(k) for k in self.key]
            out_types = [c.type for c in self.desc.columns[len(self.key) :]]
            aggs = [
                aggregate_column(a, in_desc, t, diff=DIFF_COLUMN).alias(f"_a{i}")
                for i, (a, t) in enumerate(zip(self.aggregates, out_types, strict=True))
            ]
            grouped = (
                groups.groupBy(*keys, _AT).agg(*aggs)
                if aggs
                else groups.select(*keys, _AT).distinct()
            )
            n = len(keys)
            cols = [F.col(k).alias(col_name(i)) for i, k in enumerate(keys)]
            cols += [F.col(f"_a{i}").alias(col_name(n + i)) for i in range(len(aggs))]
            out = grouped.select(*cols, F.col(_AT), F.lit(1).cast("long").alias(_M))
            if not self.key:
                out = out.withColumn("_g", F.lit(0))
                return out, ["_g"]
            return out, [col_name(i) for i in range(n)]
        data = data_names(in_desc.arity)
        keys = [col_name(k) for k in self.key]
        if self.kind == "distinct":
            out = groups.select(*data, F.col(_AT), F.lit(1).cast("long").alias(_M))
        elif self.kind == "threshold":
            out = groups.where(F.col(DIFF_COLUMN) > 0).select(
                *data, F.col(_AT), F.col(DIFF_COLUMN).alias(_M)
            )
        else:
            out = self._top_k(groups, keys, data)
        if not self.key:
            out = out.withColumn("_g", F.lit(0))
            return out, ["_g"]
        return out, keys

    def _top_k(self, groups: DataFrame, keys: list[str], data: list[str]) -> DataFrame:
        from pyspark.sql import functions as F
        from pyspark.sql.window import Window

        order: list[Column] = []
        for o in self.order_by:
            c = F.col(col_name(o.column))
            last = o.effective_nulls_last()
            if o.desc:
                order.append(c.desc_nulls_last() if last else c.desc_nulls_first())
            else:
                order.append(c.asc_nulls_last() if last else c.asc_nulls_first())
        order += [F.col(c).asc_nulls_last() for c in data]
        w = (
            Window.partitionBy(*keys, _AT)
            .orderBy(*order)
            .rowsBetween(Window.unboundedPreceding, Window.currentRow)
        )
        ranked = groups.withColumn("_cum", F.sum(DIFF_COLUMN).over(w))
        start = F.col("_cum") - F.col(DIFF_COLUMN)
        lo = F.greatest(start, F.lit(self.offset))
        end = F.col("_cum")
        if self.limit is not None:
            end = F.least(end, F.lit(self.offset + self.limit))
        m = (end - lo).cast("long")
        return ranked.select(*data, F.col(_AT), m.alias(_M)).where(F.col(_M) > 0)

    def drop(self) -> None:
        if self.arrangement is not None:
            self.arrangement.drop()
        self.input.drop()


def _null_safe(left: DataFrame, right: DataFrame, keys: list[str]) -> Column:
    cond = None
    for k in keys:
        c = left[k].eqNullSafe(right[k])
        cond = c if cond is None else cond & c
    assert cond is not None
    return cond
