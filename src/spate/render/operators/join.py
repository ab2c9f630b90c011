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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa

from spate.plan.expr import ScalarExpr
from spate.render.arrangement import Arrangement
from spate.render.batch import Batch, Engine, Lazy
from spate.render.layout import col_name, data_names
from spate.render.lookup import concat_like, lookup_columns, semi_join
from spate.render.operators.driver_join import join_on_driver, key_columns
from spate.render.operators.linear import all_true, captured_predicates, filter_capturing
from spate.render.operators.node import ColumnMemo, Node, StepContext
from spate.render.operators.touched import Touched
from spate.repr.consolidate import consolidate
from spate.repr.desc import DIFF_COLUMN, TIME_COLUMN, RelationDesc

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

HistoryStep = Callable[["JoinNode", StepContext, list[Batch]], Lazy]
"""A step of a join that serves a keyed operator's history: the join of the touched keys."""


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
    _columns: ColumnMemo = field(default_factory=ColumnMemo)
    owner: dict[int, int] = field(init=False)
    """The input each output column comes from."""
    history_columns: tuple[int, ...] | None = None
    """Set when a keyed operator above reads its groups' history from this join's inputs
    (:mod:`spate.render.operators.join_history`): each input's column of the key's class.
    The join's output is then the whole join (old and new rows) of the touched keys."""
    history_step: HistoryStep | None = None
    """How a step computes the join when it serves a keyed operator's history (set together
    with ``history_columns``)."""
    touched: Touched | None = None
    """What this step's deltas touched (with ``history_columns``; ``None``: nothing)."""
    residual: bool = True
    """The terms apply the residual predicates (off while a capture-mode step applies them
    to the equi-join's rows, routing the rows where they fail to the errors)."""
    engine: Engine | None = None
    """Set at the first step: its plan templates serve :meth:`renamed` and :meth:`term`."""

    def __post_init__(self) -> None:
        self.owner = {
            self.offsets[n] + k: n
            for n, inp in enumerate(self.inputs)
            for k in range(inp.desc.arity)
        }

    def ensure_arranged(self, ctx: StepContext) -> None:
        self.engine = ctx.engine
        if not self.arrangements:
            self.arrangements = [
                Arrangement(ctx.engine, i.desc, f"{self.name}-in{n}", as_of=ctx.lo, internal=True)
                for n, i in enumerate(self.inputs)
            ]
            pairs = self._key_pairs(0, 1) if len(self.inputs) == 2 else []
            for j in (0, 1) if pairs else ():  # what _looked_up looks input j up by
                usable = lookup_columns(self.inputs[j].desc, [p[j] for p in pairs], null_safe=False)
                if len(usable) == 1:
                    self.arrangements[j].lookups_by(pairs[usable[0]][j])

    def step(self, ctx: StepContext) -> Lazy:
        self.ensure_arranged(ctx)
        deltas = [ctx.materialize(i.step(ctx), i.desc, consolidated=False) for i in self.inputs]
        for arr, delta in zip(self.arrangements, deltas, strict=True):
            ctx.on_commit(functools.partial(arr.append, delta, ctx.hi))
        self.touched = None
        if all(d.is_empty for d in deltas):
            return Lazy.empty()
        if ctx.capture and self.predicates:
            captured = self._columns.get(
                "capture", lambda: captured_predicates(self.predicates, self.desc)
            )
            if captured is not None:
                # the equi-join's rows (each with its time and the product of its parts'
                # diffs), then the predicates, a failing row to the errors as Filter does
                # (serving a keyed operator's history, the old rows' errors are not new:
                # StepContext.split_errors keeps the step's own)
                self.residual = False
                try:
                    joined = self._rows(ctx, deltas)
                finally:
                    self.residual = True
                return filter_capturing(ctx, joined, self.desc, *captured)
        return self._rows(ctx, deltas)

    def _rows(self, ctx: StepContext, deltas: list[Batch]) -> Lazy:
        if self.history_step is not None:
            return self.history_step(self, ctx, deltas)
        return self._delta_query(ctx, deltas)

    def _delta_query(self, ctx: StepContext, deltas: list[Batch]) -> Lazy:
        offsets = self.offsets
        small_rows = ctx.engine.settings.small_rows
        looked_up = self._looked_up(ctx, deltas)
        if looked_up is not None:
            return looked_up
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
            big = big or delta.rows > small_rows
            parts_i = [p for p in parts if p is not None]
            terms.append(self.term(i, parts_i, small=delta.rows <= small_rows))
        return _union_all(terms, big=big)

    def _looked_up(self, ctx: StepContext, deltas: list[Batch]) -> Lazy | None:
        """The delta query of a two-input join whose other side is found by key lookups in
        its arrangement (module docs of :mod:`spate.render.lookup`): each term joins small
        tables in Spark instead of scanning the other side. ``None`` when a lookup is not
        possible (Spark reads the arrangements)."""
        small_rows = ctx.engine.settings.small_rows
        driver_rows = ctx.engine.settings.driver_rows
        limit = max(small_rows, driver_rows) if key_columns(self) is not None else small_rows
        if len(self.inputs) != 2 or any(d.rows > limit for d in deltas):
            return None
        pairs = self._key_pairs(0, 1)
        if not pairs:
            return None
        terms: list[DataFrame] = []
        big = False
        found: list[tuple[int, int, Batch, pa.Table]] = []
        for i, j in ((0, 1), (1, 0)):
            delta = deltas[i]
            if delta.is_empty:
                continue
            mine = [p[i] for p in pairs]
            theirs = [p[j] for p in pairs]
            usable = lookup_columns(self.inputs[j].desc, theirs, null_safe=False)
            if not usable:
                return None
            keys = delta.arrow().select([col_name(mine[u]) for u in usable])
            other = self.arrangements[j].lookup([theirs[u] for u in usable], keys, null_safe=False)
            if other is None:
                return None
            if j > i and not deltas[j].is_empty:  # new_j = old_j + Δ_j
                names = [col_name(theirs[u]) for u in usable]
                fresh = semi_join(deltas[j].arrow(), names, keys, null_safe=False)
                if fresh is None:
                    return None
                other = concat_like(other, fresh)
            if other.num_rows == 0:
                continue
            found.append((i, j, delta, other))
        on_driver = self._on_driver(ctx, found, driver_rows)
        if on_driver is not None:
            return on_driver
        engine = ctx.engine
        for i, j, delta, other in found:
            parts: list[DataFrame] = [None, None]  # type: ignore[list-item]
            # through slots, so that the terms' plans are built once (spate.render.templates)
            ours = delta.arrow() if delta.table is not None else None
            parts[i] = self.renamed(
                engine.df_of_batch(delta)
                if ours is None
                else engine.slot_of_table(f"{self.name}-d{i}", ours, self.inputs[i].desc),
                i,
            )
            slot = engine.slot_of_table(f"{self.name}-o{j}", other, self.inputs[j].desc)
            parts[j] = self.renamed(slot, j)
            big = big or other.num_rows > small_rows
            local = other.num_rows <= small_rows
            terms.append(self.term(i, parts, small=delta.rows <= small_rows, local=local))
        return _union_all(terms, big=big, engine=engine, key=(self.name, "looked-up"))

    def _on_driver(
        self, ctx: StepContext, found: list[tuple[int, int, Batch, pa.Table]], driver_rows: int
    ) -> Lazy | None:
        """The looked-up terms joined on the driver (:mod:`.driver_join`), or ``None``."""
        if any(d.rows + other.num_rows > driver_rows for _i, _j, d, other in found):
            return None
        tables = []
        for i, _j, delta, other in found:
            pair = (delta.arrow(), other) if i == 0 else (other, delta.arrow())
            out = join_on_driver(self, *pair)
            if out is None:
                return None
            tables.append(out)
        if not tables:
            return Lazy.empty()
        table = consolidate(pa.concat_tables(tables)) if len(tables) > 1 else tables[0]
        if table.num_rows == 0:
            return Lazy.empty()
        return ctx.engine.lazy_of_batch(Batch(self.desc, table=table, rows=table.num_rows))

    def _key_pairs(self, a: int, b: int) -> list[tuple[int, int]]:
        """For every equivalence class with columns of both inputs ``a`` and ``b``: one column
        of each (input column positions)."""
        pairs = []
        for cls in self.equivalences:
            in_a = [p - self.offsets[a] for p in cls if self.owner[p] == a]
            in_b = [p - self.offsets[b] for p in cls if self.owner[p] == b]
            if in_a and in_b:
                pairs.append((in_a[0], in_b[0]))
        return pairs

    def renamed(self, df: DataFrame, n: int) -> DataFrame:
        """``df`` (input ``n``'s layout) with the column names of the join's terms (a plan
        template, :mod:`spate.render.templates`)."""

        def build() -> DataFrame:
            out = self._renamed(df, n, self.offsets[n])
            assert out is not None
            return out

        if self.engine is None:
            return build()
        return self.engine.templates.template((self.name, "renamed", n), [df], build)

    def _renamed(self, df: DataFrame | None, n: int, offset: int) -> DataFrame | None:
        if df is None:
            return None

        def columns() -> list[Column]:
            from pyspark.sql import functions as F

            arity = self.inputs[n].desc.arity
            cols = [F.col(col_name(k)).alias(col_name(offset + k)) for k in range(arity)]
            cols.append(F.col(TIME_COLUMN).alias(f"_t{n}"))
            cols.append(F.col(DIFF_COLUMN).alias(f"_d{n}"))
            return cols

        return self._columns.select(df, f"renamed{n}", columns)

    def term(
        self, i: int, parts: list[DataFrame], *, small: bool, local: bool = False
    ) -> DataFrame:
        """Term ``i`` of the delta query over ``parts`` (renamed, :meth:`renamed`): part
        ``i`` first, then the others in an order that follows the equivalence classes.
        ``small``: part ``i`` is small (broadcast). ``local``: every part is small, so all of
        it runs in one partition, with no broadcast or shuffle (one Spark stage). A plan
        template (:mod:`spate.render.templates`) when the parts are."""
        if self.engine is None:
            return self._term(i, parts, small=small, local=local)
        key = (self.name, "term", i, small, local, self.residual)
        return self.engine.templates.template(
            key, parts, lambda: self._term(i, parts, small=small, local=local)
        )

    def _term(self, i: int, parts: list[DataFrame], *, small: bool, local: bool) -> DataFrame:
        from pyspark.sql import functions as F

        if local:
            parts = [
                p.coalesce(1) if n == i else p.coalesce(1).hint("shuffle_hash")
                for n, p in enumerate(parts)
            ]
        if small and not local:
            parts = [F.broadcast(p) if n == i else p for n, p in enumerate(parts)]
        order, predicate, final = self._columns.get(
            f"term{i}", functools.partial(self._term_plan, i)
        )
        joined: DataFrame | None = None
        for own, n, cond in order:
            part = parts[n] if own is None else parts[n].where(own)
            if joined is None:
                joined = part
            elif cond is None:
                joined = joined.crossJoin(part)
            else:
                joined = joined.join(part, on=cond, how="inner")
        assert joined is not None
        if predicate is not None and self.residual:
            joined = joined.where(predicate)
        return self._columns.select(joined, f"final{i}", lambda: final)

    def _term_plan(
        self, i: int
    ) -> tuple[list[tuple[Column | None, int, Column | None]], Column | None, list[Column]]:
        """Term ``i``'s join order as ``(own equalities, input, join condition)`` per input,
        delta first, its residual predicate and its output columns: built once, reused by
        every step."""
        from pyspark.sql import functions as F

        owner = self.owner
        order: list[tuple[Column | None, int, Column | None]] = [
            (self._own_equalities(i, owner), i, None)
        ]
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
            cond = None
            for c in conds:
                cond = c if cond is None else cond & c
            order.append((self._own_equalities(pick, owner), pick, cond))
            present.add(pick)
        predicate = all_true(self.predicates, self.desc) if self.predicates else None
        n_inputs = len(self.inputs)
        time = F.greatest(*[F.col(f"_t{n}") for n in range(n_inputs)])
        diff = F.col("_d0")
        for n in range(1, n_inputs):
            diff = diff * F.col(f"_d{n}")
        final = [
            *[F.col(c) for c in data_names(self.desc.arity)],
            time.alias(TIME_COLUMN),
            diff.alias(DIFF_COLUMN),
        ]
        return order, predicate, final

    def _conditions(self, present: set[int], n: int, owner: dict[int, int]) -> list[Column]:
        from pyspark.sql import functions as F

        conds: list[Column] = []
        for cls in self.equivalences:
            mine = [p for p in cls if owner[p] == n]
            theirs = [p for p in cls if owner[p] in present]
            if mine and theirs:
                conds.extend(F.col(col_name(theirs[0])) == F.col(col_name(m)) for m in mine)
        return conds

    def _own_equalities(self, n: int, owner: dict[int, int]) -> Column | None:
        """Classes with several columns of input ``n``: equal and non-NULL within it."""
        from pyspark.sql import functions as F

        cond: Column | None = None
        for cls in self.equivalences:
            mine = [p for p in cls if owner[p] == n]
            parts: list[Column] = []
            if len(mine) >= 2:
                first = F.col(col_name(mine[0]))
                parts = [first == F.col(col_name(m)) for m in mine[1:]]
            elif len(mine) == 1 and len(cls) >= 2:
                parts = [F.col(col_name(mine[0])).isNotNull()]
            for c in parts:
                cond = c if cond is None else cond & c
        return cond

    def drop(self) -> None:
        for a in self.arrangements:
            a.drop()
        for i in self.inputs:
            i.drop()


def _union_all(
    terms: list[DataFrame],
    *,
    big: bool,
    engine: Engine | None = None,
    key: tuple[object, ...] = (),
) -> Lazy:
    """The sum of the delta query's terms (empty when there are none); a plan template under
    ``key`` when ``engine`` is given and the terms are templates."""
    if not terms:
        return Lazy.empty()

    def build() -> DataFrame:
        out = terms[0]
        for t in terms[1:]:
            out = out.unionByName(t)
        return out

    if engine is None or len(terms) == 1:
        return Lazy(build(), big=big)
    return Lazy(engine.templates.template((*key, len(terms)), terms, build), big=big)


def _union(a: DataFrame | None, b: DataFrame | None) -> DataFrame | None:
    if a is None:
        return b
    if b is None:
        return a
    return a.unionByName(b)
