"""Reduce, TopK, Distinct and Threshold: operators whose output per key is a function of the
key's whole group.

For a step over ``[lo, hi)`` with input delta ``Δ``:

1. ``T`` = the distinct ``(key, time)`` pairs of ``Δ`` — the only keys and times at which the
   output can change — plus ``(key, lo - 1)`` for each touched key when there is history;
2. ``C`` = the touched keys' history (from the input arrangement, all times ``< lo``) and ``Δ``
   (over a join keyed by a join key: the join of the inputs' old and new rows of the touched
   keys, :mod:`spate.render.operators.join_history`, and no arrangement here);
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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from spate.plan.aggregate import AggregateExpr
from spate.plan.finishing import ColumnOrder
from spate.render.arrangement import Arrangement
from spate.render.batch import Batch, Lazy
from spate.render.layout import col_name, data_names, internal_schema
from spate.render.lookup import concat_like, in_list, lookup_columns, semi_join
from spate.render.operators import accumulators, topk_state
from spate.render.operators.driver_reduce import reduce_on_driver
from spate.render.operators.driver_reduce import supported as driver_supported
from spate.render.operators.hydrate_state import hydrate_on_driver, hydrate_with_state
from spate.render.operators.key_times import key_times, null_safe, t_named, with_from
from spate.render.operators.node import ColumnMemo, Node, StepContext
from spate.render.operators.reduce_over_join import folded_over_join
from spate.render.operators.reduce_state import KeyedState, ReduceState, folded_step
from spate.render.operators.topk_hydrate import hydrate_summaries
from spate.repr.desc import DIFF_COLUMN, TIME_COLUMN, RelationDesc
from spate.repr.types import ScalarType

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from spate.render.operators.join import JoinNode

_AT = "_at"
_NEXT = "_next"
_FROM = "_from"
"""``_at`` when it lies in the step (its output is emitted there), else NULL. A column computed
on the driver rather than a literal in the plan, so that every step's plan compiles to the same
code (Spark reuses the generated classes; compiling them anew costs ~100 ms a step)."""
_CARRY = (_NEXT, _FROM)
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
    joined: JoinNode | None = None
    """The join under the input whose inputs serve the groups' history (no arrangement of
    the input here: :mod:`spate.render.operators.join_history`)."""
    _out_key: tuple[int, ...] = field(default=())
    _columns: ColumnMemo = field(default_factory=ColumnMemo)
    _driver: bool | None = None
    """Whether steps may reduce on the driver (decided at the first)."""
    _capturing: bool = False
    """Capture mode (a reduce, a window): each output row carries its error record last."""
    _state: KeyedState | None = None
    """A reduce's per-key accumulators (:mod:`.reduce_state`), when its aggregates have them;
    a TopK's per-key summaries (:mod:`.topk_state`), when its columns allow them."""

    def step(self, ctx: StepContext) -> Lazy:
        if ctx.capture and not self._capturing and self._can_fail():
            self._capturing, self._columns = True, ColumnMemo()  # columns rebuilt capturing
        lazy = self._step(ctx)
        if not self._capturing:
            return lazy
        return ctx.split_errors(lazy, self.desc)

    def _can_fail(self) -> bool:
        """Whether an output row can carry an error record (a reduce's aggregates; a window
        says for itself)."""
        from spate.render.aggregates import aggregate_failure

        return self.kind == "reduce" and any(
            aggregate_failure(a, self.input.desc) is not None for a in self.aggregates
        )

    @property
    def _out_arity(self) -> int:
        return self.desc.arity + (1 if self._capturing else 0)

    def _step(self, ctx: StepContext) -> Lazy:
        if self.joined is not None:
            return self._step_over_join(ctx, self.joined)
        in_desc = self.input.desc
        if self.arrangement is None:
            self.arrangement = Arrangement(
                ctx.engine, in_desc, f"{self.name}-in", as_of=ctx.lo, internal=True
            )
            usable = lookup_columns(in_desc, self.key, null_safe=True)
            if len(usable) == 1:  # steps look up by this column (_lookup, _old_rows)
                self.arrangement.lookups_by(self.key[usable[0]])
        arr = self.arrangement
        delta = ctx.materialize(self.input.step(ctx), in_desc, consolidated=False)
        ctx.on_commit(functools.partial(arr.append, delta, ctx.hi))
        if delta.is_empty:
            return Lazy.empty()
        small_rows = ctx.engine.settings.small_rows
        if ctx.first and ctx.hi == ctx.lo + 1:
            low = delta.min_diff()
            unsigned = low is not None and low >= 0
            state = self._accumulators(ctx) if unsigned and self.key else None
            on_driver = delta.table is not None and delta.rows <= ctx.engine.settings.driver_rows
            if on_driver and isinstance(state, ReduceState) and not self._capturing:
                hydrated = hydrate_on_driver(state, ctx, delta.table, ctx.lo)
                if hydrated is not None:  # the rows are on the driver: no Spark job
                    return hydrated
            return self._hydrate(
                ctx, ctx.engine.df_of_batch(delta), delta.rows > small_rows, unsigned=unsigned
            )
        folded = self._fold(ctx, delta, functools.partial(self._old_rows, arr))
        if folded is not None:
            return folded
        has_history = arr.rows > 0
        # 1. T and each key's next time: bookkeeping on the delta's keys, done on the driver
        times_table = key_times(delta.arrow(), self.key, ctx.lo - 1 if has_history else None)
        # 2. C, the touched keys' history and the delta: looked up on the driver when the
        # arrangement serves lookups (Spark gets the touched groups only), else read by Spark
        driver_rows = ctx.engine.settings.driver_rows
        limit = max(small_rows, driver_rows) if self._driver_ok(in_desc) else small_rows
        looked_up = (
            self._lookup(arr, delta, times_table, ctx.lo - 1, limit) if has_history else None
        )
        big = delta.rows > small_rows
        if (
            looked_up is not None
            and not self._capturing
            and self._on_driver(in_desc, looked_up, driver_rows)
        ):
            # Small enough for pyarrow, and aggregates it computes exactly: no Spark job
            out = self._reduce_on_driver(ctx, looked_up, times_table)
            if out is not None:
                return out
        times_table, times = self._t(ctx, times_table)
        if looked_up is not None:
            rows = ctx.engine.slot_of_table(f"{self.name}-rows", looked_up, in_desc)
            big = looked_up.num_rows > small_rows
        else:
            rows = ctx.engine.df_of_batch(delta)
            history = arr.df()
            if history is not None:
                rows = self._history(
                    history, times, times_table, ctx.lo - 1, small=not big
                ).unionByName(rows)
        return self._changes(ctx, rows, times, times_table, big, small_rows)

    def _fold(
        self,
        ctx: StepContext,
        delta: Batch | pa.Table,
        history: Callable[[pa.Table], pa.Table | None],
    ) -> Lazy | None:
        """The step from the reduce's accumulators (:mod:`.reduce_state`; ``history``: the
        old rows of given keys), or ``None``: the caller computes it (and the accumulators
        are forgotten when it commits)."""
        state = self._accumulators(ctx)
        if state is None or (isinstance(delta, Batch) and delta.rows > state.capacity):
            if state is not None:
                ctx.on_commit(state.clear)
            return None
        delta = delta.arrow() if isinstance(delta, Batch) else delta
        return folded_step(state, ctx, delta, history, capturing=self._capturing)

    def _accumulators(self, ctx: StepContext) -> KeyedState | None:
        """The reduce's accumulators or the TopK's summaries (made at the first call), ``None``
        when it has none."""
        capacity, in_desc = ctx.engine.settings.driver_rows, self.input.desc
        if self._state is not None or self.kind not in ("reduce", "topk"):
            return self._state
        if self.kind == "topk":
            if self.limit is not None and topk_state.supported(in_desc, self.limit):
                layout = topk_state.TopKLayout(
                    self.key, self.order_by, self.limit, self.offset, in_desc
                )
                self._state = topk_state.TopKState(layout, capacity=capacity)
        elif accumulators.supported(self.key, self.aggregates, in_desc, self.desc):
            acc = accumulators.Layout(self.key, self.aggregates, in_desc, self.desc)
            self._state = ReduceState(acc, capacity=capacity)
        return self._state

    def _old_rows(self, arr: Arrangement, keys: pa.Table) -> pa.Table | None:
        """The rows of ``keys`` (a superset) in the input arrangement, if it serves lookups."""
        if not self.key:  # one global group: all of it
            return arr.resident()
        usable = lookup_columns(self.input.desc, self.key, null_safe=True)
        if not usable:
            return None
        wanted = keys.select([keys.column_names[i] for i in usable])
        return arr.lookup([self.key[i] for i in usable], wanted, null_safe=True)

    def _reduce_on_driver(
        self, ctx: StepContext, rows: pa.Table, times_table: pa.Table
    ) -> Lazy | None:
        """Steps 3 and 4 on the driver (:mod:`.driver_reduce`), ``None`` if Spark must."""
        out = reduce_on_driver(
            rows,
            with_from(times_table, ctx.lo),
            self.key,
            self.aggregates,
            self.input.desc,
            self.desc,
        )
        if out is None:
            return None
        if out.num_rows == 0:
            return Lazy.empty()
        return ctx.engine.lazy_of_batch(Batch(self.desc, table=out, rows=out.num_rows))

    def _on_driver(self, in_desc: RelationDesc, rows: pa.Table, driver_rows: int) -> bool:
        """Whether this step's groups (``rows``) can be reduced on the driver
        (:mod:`.driver_reduce`)."""
        return rows.num_rows <= driver_rows and self._driver_ok(in_desc)

    def _driver_ok(self, in_desc: RelationDesc) -> bool:
        """Whether this operator's steps may reduce on the driver."""
        if self._driver is None:
            self._driver = self.kind == "reduce" and driver_supported(
                self.key, self.aggregates, in_desc
            )
        return self._driver

    def _t(self, ctx: StepContext, times_table: pa.Table) -> tuple[pa.Table, DataFrame]:
        """``T`` (:func:`key_times`) with ``_from``, and as a DataFrame."""
        keys = [col_name(k) for k in self.key] or ["_g"]  # a global group: one constant key
        times_table = with_from(times_table, ctx.lo)
        # through a slot: a step's plan over it is built once (spate.render.templates)
        named = t_named(times_table, keys)
        return times_table, ctx.engine.slot_of_table(f"{self.name}-T", named, None)

    def _step_over_join(self, ctx: StepContext, join: JoinNode) -> Lazy:
        """The step when the join under the input serves the history: the input's rows are
        the touched keys' old join and the delta, in one Spark plan (module docs of
        :mod:`spate.render.operators.join_history`)."""
        if self._state is not None:  # its delta alone, when the accumulators serve
            folded = folded_over_join(self.input, ctx, join, self._state, capturing=self._capturing)
            if folded is not None:
                return folded
        lazy = self.input.step(ctx)
        touched = join.touched
        if lazy.is_empty or touched is None:
            return Lazy.empty()
        if ctx.first and ctx.hi == ctx.lo + 1:
            return self._hydrate(ctx, lazy.frame(), lazy.big, unsigned=touched.unsigned())
        name = col_name(self.key[0])
        pairs = touched.pairs(name, internal_schema(self.input.desc).field(self.key[0]).type)
        if pairs.num_rows == 0:
            return Lazy.empty()
        before = ctx.lo - 1 if touched.has_history else None
        times_table = key_times(pairs, self.key, before)
        found = lazy.batch.table if lazy.batch is not None else None
        if found is not None:
            is_new = pc.greater_equal(found.column(TIME_COLUMN), ctx.lo)
            old = found.filter(pc.invert(is_new))
            keys = [col_name(k) for k in self.key]
            folded = self._fold(
                ctx, found.filter(is_new), lambda k: semi_join(old, keys, k, null_safe=False)
            )
            if folded is not None:
                return folded
        elif self._state is not None:
            ctx.on_commit(self._state.clear)
        driver_rows = ctx.engine.settings.driver_rows
        if (
            found is not None
            and not self._capturing
            and self._on_driver(self.input.desc, found, driver_rows)
        ):
            out = self._reduce_on_driver(ctx, found, times_table)
            if out is not None:
                return out
        times_table, times = self._t(ctx, times_table)
        return self._changes(
            ctx, lazy.frame(), times, times_table, lazy.big, ctx.engine.settings.small_rows
        )

    def _changes(
        self,
        ctx: StepContext,
        rows: DataFrame,
        times: DataFrame,
        times_table: pa.Table,
        big: bool,
        small_rows: int,
    ) -> Lazy:
        """Steps 3 and 4 (module docs) over ``rows`` (history and delta of the touched
        groups) and ``T``: a plan built once per shape when its inputs are slots or
        templates (:mod:`spate.render.templates`)."""
        broadcast = big and times_table.num_rows <= small_rows
        key = ("changes", self.name, self._capturing, big, broadcast)
        df = ctx.engine.templates.template(
            key, [rows, times], lambda: self._changes_plan(rows, times, big, broadcast)
        )
        return Lazy(df, big=big)

    def _changes_plan(
        self, rows: DataFrame, times: DataFrame, big: bool, broadcast: bool
    ) -> DataFrame:
        from pyspark.sql import functions as F

        keys = [col_name(k) for k in self.key] or ["_g"]
        if not self.key:
            rows = rows.withColumn("_g", F.lit(0))
        in_desc = self.input.desc
        # 3. every touched group, accumulated at every time of T
        t = times
        if not big:
            # Small: one partition, so that neither the join nor the groupings below need a
            # shuffle or a broadcast (each a Spark job or stage of its own): one stage in all.
            rows, t = rows.coalesce(1), t.coalesce(1).hint("shuffle_hash")
        else:
            if broadcast:
                t = F.broadcast(t)
            if self.key:
                # One shuffle by key, before the join with T, serves both groupings below
                # (by row, then by group: each clusters by the key), where each would shuffle
                # its own input, the first twice as many rows (a row per entry of T)
                rows = rows.repartition(*keys)
        data = data_names(in_desc.arity)
        memo = self._columns
        cond = memo.get("cond", lambda: self._t_condition(keys))
        groups = memo.group_agg(
            rows.join(t, on=cond, how="inner"),
            "groups",
            lambda: [F.col(c) for c in (_AT, *_CARRY, *data)],
            lambda: [F.sum(DIFF_COLUMN).alias(DIFF_COLUMN)],
        ).where(memo.get("nonzero", self._nonzero))
        # 4. differences between consecutive times of each key (`_next` rode along), both
        # signs in one pass over the outputs (a union would compute the plan twice)
        joined = self._outputs(groups)
        return memo.select(joined, "signed", self._signed_columns)

    def _nonzero(self) -> Column:
        """A group's rows with a non-zero multiplicity, failing on a negative one (an
        evaluation error, except for Threshold): the check rides in the filter, so it costs
        the plan no operator."""
        from pyspark.sql import functions as F

        diff = F.col(DIFF_COLUMN)
        if self.kind == "threshold":
            return diff != 0
        message = f"{self.kind} {self.name}: an input row has a negative multiplicity"
        return F.when(diff < 0, F.raise_error(F.lit(message))).otherwise(diff) != 0

    @staticmethod
    def _t_condition(keys: list[str]) -> Column:
        """A row belongs to a ``T`` entry: same key (NULL-safe), time at or before ``_at``."""
        from pyspark.sql import functions as F

        cond = F.col(TIME_COLUMN) <= F.col(_AT)
        for i, k in enumerate(keys):
            cond = cond & F.col(f"_tk{i}").eqNullSafe(F.col(k))
        return cond

    def _signed_columns(self) -> list[Column]:
        """Each output row ``+m`` at ``_from`` and ``-m`` at ``_next``, either left out when
        NULL: the data columns and ``inline`` of the (filtered) pair, one operator."""
        from pyspark.sql import functions as F

        cols = data_names(self._out_arity)
        pair = F.array(
            F.struct(F.col(_FROM).alias(TIME_COLUMN), F.col(_M).alias(DIFF_COLUMN)),
            F.struct(F.col(_NEXT).alias(TIME_COLUMN), (-F.col(_M)).alias(DIFF_COLUMN)),
        )
        present = F.filter(pair, lambda s: s[TIME_COLUMN].isNotNull())
        return [*[F.col(c) for c in cols], F.inline(present)]

    def _lookup(
        self, arr: Arrangement, delta: Batch, times: pa.Table, before: int, small_rows: int
    ) -> pa.Table | None:
        """The touched keys' history and the delta, as one table, when the arrangement serves
        the lookup (a superset of the touched groups is fine: Spark joins with ``T``)."""
        if delta.rows > small_rows:
            return None
        if not self.key:  # one global group: all of it
            whole = arr.resident()
            return None if whole is None else concat_like(whole, delta.arrow())
        usable = lookup_columns(self.input.desc, self.key, null_safe=True)
        if not usable:
            return None
        names = [col_name(self.key[i]) for i in usable]
        keys = times.filter(pc.equal(times.column(TIME_COLUMN), before)).select(names)
        found = arr.lookup([self.key[i] for i in usable], keys, null_safe=True)
        if found is None:
            return None
        return concat_like(found, delta.arrow())

    def _history(
        self,
        history: DataFrame,
        times: DataFrame,
        times_table: pa.Table,
        before: int,
        *,
        small: bool,
    ) -> DataFrame:
        """The touched keys' rows of ``history`` (all of it for a global group), in Spark
        (``times``: ``T`` as the plan joins it, keys ``_tk0…`` and ``_at``)."""
        from pyspark.sql import functions as F

        keys = [col_name(k) for k in self.key]
        if not keys:
            return history
        listed = in_list(keys[0], times_table.column(keys[0])) if len(keys) == 1 else None
        if listed is not None:
            return history.where(listed)
        touched = times.where(F.col(_AT) == before).select(
            *[F.col(f"_tk{i}").alias(k) for i, k in enumerate(keys)]
        )
        if small:
            touched = F.broadcast(touched)
        return history.join(touched, on=null_safe(history, touched, keys, keys), how="left_semi")

    def _hydrate(self, ctx: StepContext, d: DataFrame, big: bool, *, unsigned: bool) -> Lazy:
        """The first step when every update is at the as_of: one group per key, no history.

        ``unsigned``: no update has a negative diff. A reduce then aggregates the rows as they
        are: every aggregate is a function of the multiset of values, which spreading a value's
        multiplicity over several rows leaves unchanged (:mod:`spate.render.aggregates`), and
        no group can be negative. One aggregation by key, which Spark pre-aggregates before its
        shuffle, instead of consolidating every row first (a shuffle of the whole input); a
        reduce with accumulators aggregates those (:mod:`.hydrate_state`).
        """
        from pyspark.sql import functions as F

        at, state = ctx.lo, self._accumulators(ctx)
        if unsigned and self.key and not self._capturing and isinstance(state, ReduceState):
            hydrated = hydrate_with_state(state, ctx, d, at, big)
            if hydrated is not None:
                return hydrated

        stamped = [
            F.lit(at).cast("long").alias(_AT),
            F.lit(None).cast("long").alias(_NEXT),
            F.lit(at).cast("long").alias(_FROM),
        ]
        if not big:  # one partition: no shuffle at all (see `step`)
            d = d.coalesce(1)
        if unsigned and self.kind == "reduce":
            out = self._outputs(d, stamped=stamped)
        else:
            if big and self.key:  # one shuffle by key serves both groupings below
                d = d.repartition(*[col_name(k) for k in self.key])
            groups = (
                d.groupBy(*data_names(self.input.desc.arity))
                .agg(F.sum(DIFF_COLUMN).alias(DIFF_COLUMN))
                .where(self._columns.get("nonzero", self._nonzero))
            )
            if isinstance(state, topk_state.TopKState):  # its summaries, and its output
                return hydrate_summaries(state, ctx, groups, big)
            out = self._outputs(groups, stamped=stamped)
        cols = data_names(self._out_arity)
        return Lazy(
            out.select(*cols, F.col(_AT).alias(TIME_COLUMN), F.col(_M).alias(DIFF_COLUMN)),
            big,
            consolidated=True,  # one row per output row of each group, all at `at`
        )

    def _outputs(self, groups: DataFrame, stamped: list[Column] | None = None) -> DataFrame:
        """The output rows of every ``(key, _at)`` group: data columns, ``_at``, the carried
        ``_next`` and ``_from``, and the multiplicity ``_m``.

        ``stamped``: ``groups`` has no ``_at``, ``_next``, ``_from`` columns; these constants
        give them (hydration: one time). A reduce then groups by its key alone, and the
        constants are added to its (fewer) output rows. (A global reduce keeps them as its
        grouping: grouping by nothing would give a row for an empty input.)"""
        from pyspark.sql import functions as F

        in_desc = self.input.desc
        if stamped is not None and (self.kind != "reduce" or not self.key):
            groups = groups.select("*", *stamped)
            stamped = None
        if self.kind == "reduce":
            keys = [col_name(k) for k in self.key]
            out_types = [c.type for c in self.desc.columns[len(self.key) :]]
            aggs = self._columns.get("aggs", lambda: self._aggregate_columns(out_types))
            by = keys if stamped is not None else [*keys, _AT, *_CARRY]
            tag = "stamped" if stamped is not None else "timed"

            def by_columns() -> list[Column]:
                return [F.col(c) for c in by]

            if aggs:
                grouped = self._columns.group_agg(groups, f"reduce-{tag}", by_columns, lambda: aggs)
            else:
                grouped = self._columns.select(groups, f"by-{tag}", by_columns).distinct()

            def out_columns() -> list[Column]:
                n = len(keys)
                cols = [F.col(k).alias(col_name(i)) for i, k in enumerate(keys)]
                cols += [F.col(f"_a{i}").alias(col_name(n + i)) for i in range(len(aggs))]
                carried = [F.col(c) for c in (_AT, *_CARRY)]
                return [*cols, *carried, F.lit(1).cast("long").alias(_M)]

            if stamped is not None:  # the carried columns (after the data) are constants
                out = self._columns.get("out", out_columns)
                return grouped.select(*out[: len(keys) + len(aggs)], *stamped, out[-1])
            return self._columns.select(grouped, "out", out_columns)
        data = data_names(in_desc.arity)
        if self.kind == "distinct":
            return self._columns.select(
                groups,
                "distinct",
                lambda: [
                    *[F.col(c) for c in (*data, _AT, *_CARRY)],
                    F.lit(1).cast("long").alias(_M),
                ],
            )
        if self.kind == "threshold":
            positive = self._columns.get("positive", lambda: F.col(DIFF_COLUMN) > 0)
            return self._columns.select(
                groups.where(positive),
                "threshold",
                lambda: [
                    *[F.col(c) for c in (*data, _AT, *_CARRY)],
                    F.col(DIFF_COLUMN).alias(_M),
                ],
            )
        keys, carried = [col_name(k) for k in self.key], [*data, _AT, *_CARRY]
        window = (self.order_by, self.limit, self.offset)
        return topk_state.spark_window(self._columns, window, groups, keys, data, carried)

    def _aggregate_columns(self, out_types: list[ScalarType]) -> list[Column]:
        """The aggregates ``_a0…``; capturing, then the group's error record (NULL if none)."""
        from pyspark.sql import functions as F

        from spate.render.aggregates import aggregate_column, aggregate_failure

        in_desc, capture = self.input.desc, self._capturing
        out = [
            aggregate_column(a, in_desc, t, diff=DIFF_COLUMN, capture=capture).alias(f"_a{i}")
            for i, (a, t) in enumerate(zip(self.aggregates, out_types, strict=True))
        ]
        if capture:
            found = [aggregate_failure(a, in_desc) for a in self.aggregates]
            errors = [e for e in found if e is not None]
            error = errors[0] if len(errors) == 1 else F.coalesce(*errors)
            out.append(error.alias(f"_a{len(out)}"))
        return out

    def drop(self) -> None:
        if self.arrangement is not None:
            self.arrangement.drop()
        self.input.drop()
