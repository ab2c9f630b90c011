"""Temporal filters: predicates on ``now()`` turned into insertions and future retractions.

Each input update ``(r, t, d)`` whose row passes the ordinary predicates and has a validity
interval ``[lower, upper)`` (:mod:`spate.plan.temporal`) becomes ``(r, max(t, lower), d)`` and,
when ``upper`` is finite, ``(r, upper, -d)`` — both only when ``max(t, lower) < upper``. Spark
computes these for the step's delta; the ones at or beyond the step's ``hi`` are held back in a
pending arrangement and released by the step whose interval contains them, so a sliding window
needs no watermark: the frontier itself retires rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from spate.plan.temporal import TemporalBounds
from spate.render.batch import Lazy
from spate.render.layout import data_names, internal_schema
from spate.render.operators.linear import all_true
from spate.render.operators.node import Node, StepContext, scalar
from spate.repr.consolidate import consolidate
from spate.repr.desc import DIFF_COLUMN, TIME_COLUMN, RelationDesc

if TYPE_CHECKING:
    from pyspark.sql import Column


@dataclass
class TemporalFilterNode:
    input: Node
    bounds: TemporalBounds
    desc: RelationDesc
    pending: pa.Table | None = field(default=None)
    """Output updates at times not yet reached (internal layout)."""

    def step(self, ctx: StepContext) -> Lazy:
        from pyspark.sql import functions as F

        if self.pending is None:
            self.pending = internal_schema(self.desc).empty_table()
        pending = self.pending
        lazy = self.input.step(ctx)
        parts = [pending]
        if not lazy.is_empty:
            df = lazy.frame()
            if self.bounds.predicates:
                df = df.where(all_true(self.bounds.predicates, self.input.desc))
            lower: Column = F.lit(0).cast("long")
            valid: Column = F.lit(True)
            for e in self.bounds.lower:
                v = scalar(e, self.input.desc)
                valid = valid & v.isNotNull()
                lower = F.greatest(lower, v)
            start = F.greatest(F.col(TIME_COLUMN), lower)
            data = data_names(self.desc.arity)
            if self.bounds.upper:
                ups = [scalar(e, self.input.desc) for e in self.bounds.upper]
                for u in ups:
                    valid = valid & u.isNotNull()
                upper = F.least(*ups) if len(ups) > 1 else ups[0]
                df = df.where(valid & (start < upper))
                ins = df.select(*data, start.alias(TIME_COLUMN), F.col(DIFF_COLUMN))
                ret = df.select(
                    *data, upper.alias(TIME_COLUMN), (-F.col(DIFF_COLUMN)).alias(DIFF_COLUMN)
                )
                out = ins.unionByName(ret)
            else:
                out = df.where(valid).select(*data, start.alias(TIME_COLUMN), F.col(DIFF_COLUMN))
            batch = ctx.materialize(Lazy(out, lazy.big), self.desc)
            parts.append(batch.arrow())
        updates = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
        times = updates.column(TIME_COLUMN)
        now_mask = pc.less(times, ctx.hi)
        released = consolidate(updates.filter(now_mask))
        later = updates.filter(pc.invert(now_mask))

        def commit() -> None:
            self.pending = later

        ctx.on_commit(commit)
        if released.num_rows == 0:
            return Lazy.empty()
        batch = ctx.engine.batch_of_table(released, self.desc)
        return ctx.engine.lazy_of_batch(batch)

    def has_pending_before(self, hi: int) -> bool:
        p = self.pending
        return p is not None and p.num_rows > 0 and pc.min(p.column(TIME_COLUMN)).as_py() < hi

    def drop(self) -> None:
        self.pending = None
        self.input.drop()
