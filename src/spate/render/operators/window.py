"""Window: the keyed operator whose groups are the window's partitions.

A step recomputes every partition its delta touches, at every time of the step where the
partition changes, and emits the difference from the partition's previous output
(:class:`~spate.render.operators.keyed.KeyedNode`'s machinery, with the partition key as the
key: the touched partitions' history from the input arrangement, or from the join's inputs
when the window sits over a join keyed by its one partition column). Hydration is one Spark
job like a reduce's.

Only the per-group output differs from the other keyed kinds: for every touched
``(partition, _at)`` group of consolidated rows,

1. each row of multiplicity ``n`` becomes ``n`` rows (``explode(sequence(1, _diff))``);
2. Spark window functions over ``partitionBy(partition columns, _at)`` compute every
   function in one ``select``, each over its own frame: ``row_number``, ``ntile``, ``lag``,
   ``lead`` and the functions of a ``ROWS`` frame in the total order (the ORDER BY with its
   NULL placement, then every input column ascending, NULLs last: the reference's tie-break,
   then the copy number, so that all of them read a copy at the same position), ``rank``,
   ``dense_rank``, ``percent_rank``, ``cume_dist`` and the functions of a ``RANGE`` frame in
   the ORDER BY alone, whose bounds are the partition's edges or the row's peers (no ORDER
   BY: the whole partition); ``last_value`` to the row's last peer is the last row by the
   tie-break among the row's peers (partitioned by the ORDER BY columns too), and
   ``nth_value`` is NULL where the frame has fewer than ``n`` rows; a ``ROWS`` frame whose
   bounds pass each other (``2 FOLLOWING AND 1 FOLLOWING``, refused by Spark) is empty
   everywhere: ``count`` 0, the others NULL;
3. identical annotated rows are counted back into one row with that multiplicity.

``lag``/``lead`` read a one-field struct of the value, so that a NULL value in the row
``offset`` rows away is told apart from there being no such row (then the default, evaluated on
the current row). Aggregates give :func:`spate.testing.reference.aggregate`'s values, computed as
:mod:`spate.render.aggregates` does (exact int64 and numeric sums, exactly rounded averages),
with that module's deviations for float sums and averages (summed in the frame's order).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from spate.plan.aggregate import AggregateExpr, AggregateFunc
from spate.plan.infer import typ
from spate.plan.window import FrameMode, WindowExpr, WindowFrame, WindowFunc, reads_frame
from spate.render.layout import col_name, data_names, sort_columns
from spate.render.operators.keyed import _AT, _CARRY, _M, KeyedNode
from spate.render.operators.node import scalar
from spate.repr.desc import DIFF_COLUMN
from spate.repr.types import ScalarKind, ScalarType

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.window import WindowSpec

K = ScalarKind
_COPY = "_copy"
_POS = "_pos"


@dataclass
class WindowNode(KeyedNode):
    """A ``Window`` plan node: ``kind = "window"``, ``key`` its partition columns."""

    funcs: tuple[WindowExpr | AggregateExpr, ...] = ()
    frames: tuple[WindowFrame, ...] = ()
    """One per function (the plan node's, settled: never empty for a node with functions)."""

    def _outputs(self, groups: DataFrame, stamped: list[Column] | None = None) -> DataFrame:
        """Every ``(partition, _at)`` group's output rows: data columns (the input's, then the
        functions'), ``_at``, the carried ``_next`` and ``_from``, and the multiplicity ``_m``."""
        from pyspark.sql import functions as F

        if stamped is not None:
            groups = groups.select("*", *stamped)
        memo = self._columns
        data = data_names(self.input.desc.arity)
        carried = (_AT, *_CARRY)

        def expanded() -> list[Column]:
            copies = F.explode(F.sequence(F.lit(1).cast("long"), F.col(DIFF_COLUMN)))
            return [*[F.col(c) for c in (*data, *carried)], copies.alias(_COPY)]

        def annotated() -> list[Column]:
            arity = self.input.desc.arity
            outs = self.desc.columns[arity:]
            values = [
                self._function(f, fr, c.type)
                for f, fr, c in zip(self.funcs, self.frames, outs, strict=True)
            ]
            funcs = [v.alias(col_name(arity + i)) for i, v in enumerate(values)]
            if self._capturing:
                funcs.append(self._error_record(values).alias(col_name(self.desc.arity)))
            return [*[F.col(c) for c in (*data, *carried)], *funcs]

        rows = memo.select(groups, "window-copies", expanded)
        if self._needs_position():
            rows = memo.select(rows, "window-position", self._with_position)
        rows = memo.select(rows, "window-funcs", annotated)
        out = data_names(self._out_arity)
        return memo.group_agg(
            rows,
            "window-count",
            lambda: [F.col(c) for c in (*out, *carried)],
            lambda: [F.count(F.lit(1)).alias(_M)],
        )

    # -- errors as data ----------------------------------------------------------------------------

    def _can_fail(self) -> bool:
        return any(
            self._overflow_message(f) is not None and not fr.always_empty()
            for f, fr in zip(self.funcs, self.frames, strict=True)
        )

    def _overflow_message(self, f: WindowExpr | AggregateExpr) -> str | None:
        """The error of an aggregate whose value over the frame can leave its type (``None``:
        it cannot fail; decided without building columns).

        An int64 ``sum`` is summed exactly in ``decimal(30,0)`` and fails beyond 64 bits; a
        numeric ``sum`` of a type with 38 digits fails where Spark's sum leaves them (its
        ``try_sum`` is NULL there), a numeric ``avg`` also where the average does not fit its
        type."""
        if not isinstance(f, AggregateExpr) or f.func not in (AggregateFunc.SUM, AggregateFunc.AVG):
            return None
        in_type = typ(f.expr, self.input.desc.columns).type
        if f.func is AggregateFunc.AVG:
            return "numeric field overflow" if in_type.kind is K.NUMERIC else None
        if in_type.kind is K.INT64:
            return "bigint out of range"
        wide = in_type.kind is K.NUMERIC and (in_type.precision or 0) + 10 > 38
        return "numeric field overflow" if wide else None

    def _overflow(self, f: AggregateExpr, frame: WindowFrame, value: Column) -> Column:
        """Where ``f`` (one with an :meth:`_overflow_message`) fails, given ``value``, its
        column as :meth:`_aggregate` builds it in capture mode (NULL beyond the type): an
        average's quotient is built once, for both."""
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        v = scalar(f.expr, self.input.desc)
        w = self._frame(frame)
        in_type = typ(f.expr, self.input.desc.columns).type
        if f.func is AggregateFunc.SUM and in_type.kind is K.INT64:
            total = F.sum(v.cast(T.DecimalType(20, 0))).over(w)
            return (total > F.lit(2**63 - 1)) | (total < F.lit(-(2**63)))
        # a numeric sum (Spark's try_sum: NULL beyond 38 digits) or average
        return value.isNull() & (F.count(v).over(w) > F.lit(0))

    def _error_record(self, values: Sequence[Column]) -> Column:
        """The row's error record: the first of its aggregates whose value over the frame
        (``values``: the functions' columns) fails, with the row (NULL when none does)."""
        from pyspark.sql import functions as F

        from spate.errors import error_record
        from spate.plan.expr import show
        from spate.render.errors import row_text

        row = row_text(self.input.desc)
        out: Column | None = None
        for f, frame, value in zip(self.funcs, self.frames, values, strict=True):
            message = self._overflow_message(f)
            if message is None or frame.always_empty():  # an empty frame's value fits
                continue
            assert isinstance(f, AggregateExpr)
            fails = self._overflow(f, frame, value)
            what = f"{f.func.value}({show(f.expr, self.input.desc.names)})"
            text = F.concat(F.lit(error_record("22003", message, what, "")), row)
            out = F.when(fails, text) if out is None else out.when(fails, text)
        assert out is not None
        return out

    # -- window specifications and functions ------------------------------------------------------

    def _partition(self) -> list[str]:
        return [*(col_name(k) for k in self.key), _AT]

    def _order(self) -> list[Column]:
        """The ORDER BY with explicit NULL placement."""
        return sort_columns(self.order_by)

    def _total(self) -> WindowSpec:
        """The ORDER BY, then every input column ascending, NULLs last, then the copy number:
        a total order of the expanded rows, so that every window expression over it, in
        whichever of Spark's window operators it lands, sees each copy at the same position
        (identical copies could otherwise be sorted differently by two sorts, pairing one
        function's value at one position with another's at another)."""
        from pyspark.sql import functions as F
        from pyspark.sql.window import Window

        order = [*self._order(), *self._tie(), F.col(_COPY).asc()]
        return Window.partitionBy(*self._partition()).orderBy(*order)

    def _tie(self) -> list[Column]:
        from pyspark.sql import functions as F

        return [F.col(c).asc_nulls_last() for c in data_names(self.input.desc.arity)]

    def _frame(self, frame: WindowFrame) -> WindowSpec:
        """A function's frame: ``ROWS`` over the total order, ``RANGE`` over the ORDER BY (the
        whole partition without one: every row is a peer)."""
        from pyspark.sql.window import Window

        start = Window.unboundedPreceding if frame.start is None else frame.start
        end = Window.unboundedFollowing if frame.end is None else frame.end
        if frame.mode is FrameMode.ROWS:
            return self._total().rowsBetween(start, end)
        spec = Window.partitionBy(*self._partition())
        if not self.order_by:
            return spec.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
        return spec.orderBy(*self._order()).rangeBetween(start, end)

    def _needs_position(self) -> bool:
        """Whether a function reads the rows' positions in the total order (``_pos``): those
        that need the frame's rows in order where a ``RANGE`` frame's Spark order is not it."""
        for f, frame in zip(self.funcs, self.frames, strict=True):
            if isinstance(f, AggregateExpr) and f.func is AggregateFunc.STRING_AGG:
                return True
            ranged = frame.mode is FrameMode.RANGE and frame.start == 0
            if ranged and isinstance(f, WindowExpr) and f.func is WindowFunc.NTH_VALUE:
                return True
        return False

    def _with_position(self) -> list[Column]:
        from pyspark.sql import functions as F

        return [F.col("*"), F.row_number().over(self._total()).alias(_POS)]

    def _in_order(self, frame: WindowFrame, value: Column) -> Column:
        """The frame's values as an array in the total order."""
        from pyspark.sql import functions as F

        held = F.collect_list(F.struct(F.col(_POS).alias("p"), value.alias("v")))
        return F.transform(F.array_sort(held.over(self._frame(frame))), lambda e: e["v"])

    def _framed(self, f: WindowExpr, frame: WindowFrame, value: Column) -> Column:
        """``first_value``, ``last_value`` or ``nth_value`` over the frame."""
        from pyspark.sql import functions as F
        from pyspark.sql.window import Window

        whole = (Window.unboundedPreceding, Window.unboundedFollowing)
        if frame.mode is FrameMode.ROWS:
            if f.func is WindowFunc.FIRST_VALUE:
                return F.first(value).over(self._frame(frame))
            if f.func is WindowFunc.LAST_VALUE:
                return F.last(value).over(self._frame(frame))
            return F.nth_value(value, f.offset).over(self._frame(frame))
        # RANGE: a bound is the partition's edge (None) or the row's peer group's (0)
        peers = [*self._partition(), *(col_name(o.column) for o in self.order_by)]
        by_peer = Window.partitionBy(*peers).orderBy(*(self._tie() or [F.lit(0)]))
        if f.func is WindowFunc.FIRST_VALUE:
            spec = self._total() if frame.start is None else by_peer
            return F.first(value).over(spec.rowsBetween(*whole))
        if f.func is WindowFunc.LAST_VALUE:
            spec = self._total() if frame.end is None else by_peer
            return F.last(value).over(spec.rowsBetween(*whole))
        if frame.start is None:
            nth = F.nth_value(value, f.offset).over(self._total().rowsBetween(*whole))
            return F.when(F.count(F.lit(1)).over(self._frame(frame)) >= F.lit(f.offset), nth)
        values = self._in_order(frame, value)
        return F.when(F.size(values) >= F.lit(f.offset), F.element_at(values, f.offset))

    def _function(
        self, f: WindowExpr | AggregateExpr, frame: WindowFrame, out: ScalarType
    ) -> Column:
        """``f``'s column; ``frame`` is its own (read by the aggregates and the value
        functions of the frame)."""
        from pyspark.sql import functions as F
        from pyspark.sql.window import Window

        from spate.repr.spark import spark_type

        if reads_frame(f) and frame.always_empty():  # Spark refuses such a frame
            if isinstance(f, AggregateExpr) and f.func is AggregateFunc.COUNT:
                return F.lit(0).cast(spark_type(out))
            return F.lit(None).cast(spark_type(out))
        if isinstance(f, AggregateExpr):
            return self._aggregate(f, frame, out)
        if f.func is WindowFunc.ROW_NUMBER:
            return F.row_number().over(self._total()).cast("long")
        if f.func is WindowFunc.NTILE:
            return F.ntile(f.offset).over(self._total()).cast("long")
        by_peers = {  # functions of the peer groups: their value when every row is a peer
            WindowFunc.RANK: (1, F.rank),
            WindowFunc.DENSE_RANK: (1, F.dense_rank),
            WindowFunc.PERCENT_RANK: (0.0, F.percent_rank),
            WindowFunc.CUME_DIST: (1.0, F.cume_dist),
        }
        if f.func in by_peers:
            alone, ranking = by_peers[f.func]
            if not self.order_by:  # every row is a peer of every other
                return F.lit(alone).cast(spark_type(out))
            by_order = Window.partitionBy(*self._partition()).orderBy(*self._order())
            return ranking().over(by_order).cast(spark_type(out))
        assert f.expr is not None
        in_desc = self.input.desc
        value = scalar(f.expr, in_desc)
        if f.func in (WindowFunc.FIRST_VALUE, WindowFunc.LAST_VALUE, WindowFunc.NTH_VALUE):
            return self._framed(f, frame, value)
        back = f.offset if f.func is WindowFunc.LAG else -f.offset
        if back == 0:
            return value.cast(spark_type(out))
        held = F.struct(value.alias("v"))
        other = F.lag(held, back) if back > 0 else F.lead(held, -back)
        other = other.over(self._total())
        default = F.lit(None) if f.default is None else scalar(f.default, in_desc)
        return F.when(other.isNull(), default).otherwise(other["v"]).cast(spark_type(out))

    def _aggregate(self, agg: AggregateExpr, frame: WindowFrame, out: ScalarType) -> Column:
        """``agg`` over its frame; every row counts once (the rows were expanded)."""
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        from spate.render.aggregates import int_ratio, numeric_ratio
        from spate.render.scalar_funcs import unchecked
        from spate.repr.spark import spark_type

        w = self._frame(frame)
        in_desc = self.input.desc
        v = scalar(agg.expr, in_desc)
        k = typ(agg.expr, in_desc.columns).type.kind
        f = agg.func
        exact_int = T.DecimalType(20, 0)
        result: Column
        if f is AggregateFunc.COUNT:
            result = F.count(v).over(w)
        elif f is AggregateFunc.MIN:
            result = F.min(v).over(w)
        elif f is AggregateFunc.MAX:
            result = F.max(v).over(w)
        elif f is AggregateFunc.BOOL_AND:
            result = F.bool_and(v).over(w)
        elif f is AggregateFunc.BOOL_OR:
            result = F.bool_or(v).over(w)
        elif f is AggregateFunc.STRING_AGG:  # in the frame's order, NULLs skipped
            assert agg.delimiter is not None
            present = F.filter(self._in_order(frame, v), lambda e: e.isNotNull())
            joined = F.array_join(present, agg.delimiter)
            result = F.when(F.size(present) > F.lit(0), joined)
        elif f is AggregateFunc.SUM:
            if k is K.INT64:
                result = F.sum(v.cast(exact_int)).over(w)
            elif self._capturing and k is K.NUMERIC:  # NULL beyond 38 digits: an error row
                result = F.try_sum(v).over(w)
            else:
                result = F.sum(v).over(w)
                if k is K.FLOAT64:
                    result = F.when(result == F.lit(0.0), F.lit(0.0)).otherwise(result)
        elif f is AggregateFunc.AVG:
            n = F.count(v).over(w)
            if k is K.INT64:
                total = F.sum(v.cast(exact_int)).over(w).cast(T.DecimalType(38, 0))
                result = int_ratio(total, n)
            elif k is K.NUMERIC:
                in_type = typ(agg.expr, in_desc.columns).type
                assert in_type.scale is not None and out.scale is not None
                if self._capturing:  # NULL beyond the type: an error row (_error_record)
                    total = F.try_sum(v).over(w)
                    result = numeric_ratio(total, n, in_type.scale, out.scale, unchecked)
                else:
                    result = numeric_ratio(F.sum(v).over(w), n, in_type.scale, out.scale)
            else:
                average = F.sum(v).over(w) / n.cast("double")
                result = F.when(average == F.lit(0.0), F.lit(0.0)).otherwise(average)
        else:
            raise TypeError(f"{f.value} is not a window aggregate")
        # capturing, a value beyond the type is NULL here and an error record (_error_record)
        return result.try_cast(spark_type(out)) if self._capturing else result.cast(spark_type(out))
