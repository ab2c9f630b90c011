"""Join: n-ary equi-join with residual predicates, maintained from arranged inputs.

Every input ``i`` is arranged (all its updates before the step, :class:`Arrangement`). A row
combination's time is the latest of its parts' times and its diff the product of their diffs,
so the combinations whose time falls in the step's ``[lo, hi)`` are exactly those with at least
one part in this step's deltas. Classifying each by the *first* input whose part is new gives
the delta query, one term per input with a non-empty delta::

    term i  =  old_0 ⋈ … ⋈ old_{i-1} ⋈ Δ_i ⋈ new_{i+1} ⋈ … ⋈ new_{n-1}      (new = old + Δ)

Each term starts from the (small, broadcast) delta and adds the other inputs in an order that
follows the equivalence classes, so no term builds a cross product the classes could avoid.
Times inside the old arrangements matter only through ``max``, and all of them lie below
``lo``, so the arrangements are kept fully compacted.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from spate.plan.expr import ScalarExpr
from spate.render.arrangement import Arrangement
from spate.render.batch import SMALL_ROWS, Batch, Lazy
from spate.render.layout import col_name, data_names
from spate.render.operators.linear import all_true
from spate.render.operators.node import Node, StepContext
from spate.repr.desc import DIFF_COLUMN, TIME_COLUMN, RelationDesc

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


@dataclass
class JoinNode:
    inputs: tuple[Node, ...]
    equivalences: tuple[tuple[int, ...], ...]
    predicates: tuple[ScalarExpr, ...]
    desc: RelationDesc
    name: str
    offsets: tuple[int, ...]
    """Each input's first column in the output (``Join.input_offsets``)."""
    arrangements: list[Arrangement] = field(default_factory=list)
    owner: dict[int, int] = field(init=False)
    """The input each output column comes from."""

    def __post_init__(self) -> None:
        self.owner = {
            self.offsets[n] + k: n
            for n, inp in enumerate(self.inputs)
            for k in range(inp.desc.arity)
        }

    def ensure_arranged(self, ctx: StepContext) -> None:
        if not self.arrangements:
            self.arrangements = [
                Arrangement(ctx.engine, i.desc, f"{self.name}-in{n}", as_of=ctx.lo, internal=True)
                for n, i in enumerate(self.inputs)
            ]

    def step(self, ctx: StepContext) -> Lazy:
        self.ensure_arranged(ctx)
        deltas = [ctx.materialize(i.step(ctx), i.desc, consolidated=False) for i in self.inputs]
        for arr, delta in zip(self.arrangements, deltas, strict=True):
            ctx.on_commit(functools.partial(arr.append, delta, ctx.hi))
        if all(d.is_empty for d in deltas):
            return Lazy.empty()
        offsets = self.offsets
        old = [self._renamed(a.df(), n, offsets[n]) for n, a in enumerate(self.arrangements)]
        fresh = [
            self._renamed(ctx.engine.df_of_batch(d), n, offsets[n]) if not d.is_empty else None
            for n, d in enumerate(deltas)
        ]
        new = [_union(o, f) for o, f in zip(old, fresh, strict=True)]
        terms: list[DataFrame] = []
        big = False
        for i, delta in enumerate(deltas):
            if delta.is_empty:
                continue
            parts = [*old[:i], fresh[i], *new[i + 1 :]]
            if any(p is None for p in parts):
                continue
            big = big or delta.rows > SMALL_ROWS
            terms.append(self._term(i, [p for p in parts if p is not None], delta))
        if not terms:
            return Lazy.empty()
        out = terms[0]
        for t in terms[1:]:
            out = out.unionByName(t)
        return Lazy(out, big=big)

    def _renamed(self, df: DataFrame | None, n: int, offset: int) -> DataFrame | None:
        if df is None:
            return None
        from pyspark.sql import functions as F

        arity = self.inputs[n].desc.arity
        cols = [F.col(col_name(k)).alias(col_name(offset + k)) for k in range(arity)]
        cols.append(F.col(TIME_COLUMN).alias(f"_t{n}"))
        cols.append(F.col(DIFF_COLUMN).alias(f"_d{n}"))
        return df.select(*cols)

    def _term(self, i: int, parts: list[DataFrame], delta: Batch) -> DataFrame:
        from pyspark.sql import functions as F

        owner = self.owner
        start = parts[i]
        if delta.rows <= SMALL_ROWS:
            start = F.broadcast(start)
        joined = self._own_equalities(start, i, owner)
        present = {i}
        remaining = [n for n in range(len(self.inputs)) if n != i]
        while remaining:
            pick, conds = remaining[0], []
            for n in remaining:
                conds = self._conditions(present, n, owner)
                if conds:
                    pick = n
                    break
            remaining.remove(pick)
            other = self._own_equalities(parts[pick], pick, owner)
            if conds:
                cond = conds[0]
                for c in conds[1:]:
                    cond = cond & c
                joined = joined.join(other, on=cond, how="inner")
            else:
                joined = joined.crossJoin(other)
            present.add(pick)
        if self.predicates:
            joined = joined.where(all_true(self.predicates, self.desc))
        n_inputs = len(self.inputs)
        time = F.greatest(*[F.col(f"_t{n}") for n in range(n_inputs)])
        diff = F.col("_d0")
        for n in range(1, n_inputs):
            diff = diff * F.col(f"_d{n}")
        return joined.select(
            *data_names(self.desc.arity), time.alias(TIME_COLUMN), diff.alias(DIFF_COLUMN)
        )

    def _conditions(self, present: set[int], n: int, owner: dict[int, int]) -> list[Column]:
        from pyspark.sql import functions as F

        conds: list[Column] = []
        for cls in self.equivalences:
            mine = [p for p in cls if owner[p] == n]
            theirs = [p for p in cls if owner[p] in present]
            if mine and theirs:
                conds.extend(F.col(col_name(theirs[0])) == F.col(col_name(m)) for m in mine)
        return conds

    def _own_equalities(self, df: DataFrame, n: int, owner: dict[int, int]) -> DataFrame:
        """Classes with several columns of input ``n``: equal and non-NULL within it."""
        from pyspark.sql import functions as F

        for cls in self.equivalences:
            mine = [p for p in cls if owner[p] == n]
            if len(mine) >= 2:
                first = F.col(col_name(mine[0]))
                for m in mine[1:]:
                    df = df.where(first == F.col(col_name(m)))
            elif len(mine) == 1 and len(cls) >= 2:
                df = df.where(F.col(col_name(mine[0])).isNotNull())
        return df

    def drop(self) -> None:
        for a in self.arrangements:
            a.drop()
        for i in self.inputs:
            i.drop()


def _union(a: DataFrame | None, b: DataFrame | None) -> DataFrame | None:
    if a is None:
        return b
    if b is None:
        return a
    return a.unionByName(b)
