"""Stateless operators: each output update is a function of one input update, at its time.

Get, Constant, Map, Filter (ordinary predicates), Project, FlatMap, Negate, Union, ArrangeBy.
They compose into one Spark plan per step and never materialize anything themselves. Project
and Filter over a delta already on the driver (an import's updates) compute it there, with
pyarrow, so that a step that needs no other Spark work runs no Spark job.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from spate.ids import GlobalId
from spate.plan.expr import ScalarExpr
from spate.plan.relation import Filter, Get
from spate.plan.table_func import TableFunc
from spate.render.batch import Batch, Lazy
from spate.render.layout import col_name, data_names
from spate.render.operators.node import ColumnMemo, Node, StepContext, scalar
from spate.repr.arrow import updates_to_table
from spate.repr.desc import DIFF_COLUMN, TIME_COLUMN, RelationDesc
from spate.repr.types import Row

if TYPE_CHECKING:
    from pyspark.sql import Column

    from spate.plan.evaluation.vectorized import CompiledPlan

_DRIVER_INPUT = GlobalId.transient(0)
"""The input id of a filter's predicates compiled for the driver."""


def internal_columns(columns: list[Column]) -> list[Column]:
    """Data columns ``columns`` (named ``c0…``), then ``_time`` and ``_diff``: a select list."""
    from pyspark.sql import functions as F

    named = [c.alias(col_name(i)) for i, c in enumerate(columns)]
    return [*named, F.col(TIME_COLUMN), F.col(DIFF_COLUMN)]


def _layout_columns(arity: int) -> list[Column]:
    """The internal layout's columns by name: ``c0…``, ``_time``, ``_diff``."""
    from pyspark.sql import functions as F

    return [F.col(n) for n in (*data_names(arity), TIME_COLUMN, DIFF_COLUMN)]


@dataclass
class GetNode:
    id: GlobalId
    desc: RelationDesc

    def step(self, ctx: StepContext) -> Lazy:
        return ctx.engine.lazy_of_batch(ctx.collections[self.id])

    def drop(self) -> None:
        pass


@dataclass
class ConstantNode:
    rows: tuple[tuple[Row, int], ...]
    desc: RelationDesc

    def step(self, ctx: StepContext) -> Lazy:
        if not ctx.first or not self.rows:
            return Lazy.empty()
        from spate.render.layout import to_internal

        table = updates_to_table(self.desc, [(r, ctx.lo, m) for r, m in self.rows])
        batch = ctx.engine.batch_of_table(to_internal(table, self.desc), self.desc)
        return ctx.engine.lazy_of_batch(batch)

    def drop(self) -> None:
        pass


@dataclass
class MapNode:
    input: Node
    scalars: tuple[ScalarExpr, ...]
    desc: RelationDesc
    _columns: ColumnMemo = field(default_factory=ColumnMemo)

    def step(self, ctx: StepContext) -> Lazy:
        lazy = self.input.step(ctx)
        if lazy.is_empty:
            return lazy
        arity = self.input.desc.arity
        memo = self._columns
        if ctx.capture:
            captured = memo.get("capture", self._captured)
            if captured is not None:
                return ctx.split_errors(_with_errors(lazy, arity, *captured), self.desc)
        df = memo.select(lazy.frame(), "in", lambda: _layout_columns(arity))

        def compiled() -> list[Column]:
            return [
                scalar(s, RelationDesc(self.desc.columns[: arity + i]))
                for i, s in enumerate(self.scalars)
            ]

        for i, c in enumerate(memo.get("scalars", compiled)):
            df = df.withColumn(col_name(arity + i), c)
        return Lazy(memo.select(df, "out", lambda: _layout_columns(self.desc.arity)), lazy.big)

    def _captured(self) -> tuple[list[Column], Column] | None:
        """The scalars compiled in capture mode and the row's error record (``None``: no
        scalar can fail)."""
        from pyspark.sql import functions as F

        from spate.plan.expr import show
        from spate.render.errors import first_failure, row_text
        from spate.render.scalar import Failure, compile_scalar

        arity = self.input.desc.arity
        values: list[Column] = []
        errors: list[Column] = []
        row = row_text(self.input.desc)
        for i, s in enumerate(self.scalars):
            desc = RelationDesc(self.desc.columns[: arity + i])
            failures: list[Failure] = []
            values.append(compile_scalar(s, desc, data_names(desc.arity), failures=failures))
            err = first_failure(failures, row, show(s, desc.names))
            if err is not None:
                errors.append(err)
        if not errors:
            return None
        return values, errors[0] if len(errors) == 1 else F.coalesce(*errors)

    def drop(self) -> None:
        self.input.drop()


def _with_errors(lazy: Lazy, arity: int, values: list[Column], error: Column) -> Lazy:
    """The input's columns, ``values`` after them, then the error record; ``_time``, ``_diff``."""

    df = lazy.frame().select(*_layout_columns(arity))
    for i, c in enumerate(values):
        df = df.withColumn(col_name(arity + i), c)
    n = arity + len(values)
    df = df.withColumn(col_name(n), error)
    return Lazy(df.select(*_layout_columns(n + 1)), lazy.big)


@dataclass
class FilterNode:
    input: Node
    predicates: tuple[ScalarExpr, ...]
    desc: RelationDesc
    _columns: ColumnMemo = field(default_factory=ColumnMemo)
    _driver: CompiledPlan | None = None
    """The predicates compiled for the driver (:meth:`_on_driver`), once tried."""
    _driver_tried: bool = False

    def step(self, ctx: StepContext) -> Lazy:
        lazy = self.input.step(ctx)
        if lazy.is_empty or not self.predicates:
            return lazy
        if ctx.capture:
            captured = self._columns.get(
                "capture", lambda: captured_predicates(self.predicates, self.input.desc)
            )
            if captured is not None:
                return filter_capturing(ctx, lazy, self.desc, *captured)
        batch = lazy.batch
        if batch is not None and batch.table is not None:
            kept = self._on_driver(batch.table, ctx.engine.settings.driver_rows)
            if kept is not None:  # no Spark job for a delta already on the driver
                out = Batch(
                    self.desc, table=kept, rows=kept.num_rows, consolidated=batch.consolidated
                )
                return ctx.engine.lazy_of_batch(out)
        cond = self._columns.get("cond", lambda: all_true(self.predicates, self.input.desc))
        return Lazy(self._columns.frame(lazy.frame(), "where", lambda df: df.where(cond)), lazy.big)

    def _on_driver(self, table: pa.Table, driver_rows: int) -> pa.Table | None:
        """The rows of ``table`` (internal layout, on the driver) where every predicate is
        TRUE, by :mod:`spate.plan.evaluation.vectorized` (the reference's results, column at a
        time); ``None`` when it does not evaluate these predicates (their types, an overflow:
        the Spark path computes them, or raises the error) or the table is beyond
        ``driver_rows``."""
        from spate.plan.evaluation import vectorized

        if table.num_rows > driver_rows:
            return None
        if not self._driver_tried:
            self._driver_tried = True
            try:
                get = Get(_DRIVER_INPUT, self.input.desc)
                self._driver = vectorized.compile_plan(Filter(get, self.predicates))
            except vectorized.Unsupported:
                pass
        if self._driver is None:
            return None
        # The filter's input: the data columns and, as the "multiplicity" it carries along
        # untouched, each row's index, which says which rows were kept
        arity = self.input.desc.arity
        index = pa.array(np.arange(table.num_rows, dtype=np.int64))
        try:
            out = self._driver({_DRIVER_INPUT: pa.Table.from_arrays(
                [*table.columns[:arity], index], names=[*data_names(arity), "_n"]
            )})  # fmt: skip
        except (vectorized.Unsupported, pa.ArrowException):
            return None
        return table.take(out.column(out.num_columns - 1))

    def drop(self) -> None:
        self.input.drop()


def captured_predicates(
    predicates: tuple[ScalarExpr, ...], desc: RelationDesc
) -> tuple[Column, Column] | None:
    """Capture mode: every predicate (over rows of ``desc``) TRUE, and the row's error record
    (``None``: no predicate can fail)."""
    from pyspark.sql import functions as F

    from spate.plan.expr import show
    from spate.render.errors import first_failure, row_text
    from spate.render.scalar import Failure, compile_scalar

    row = row_text(desc)
    keep: Column | None = None
    errors: list[Column] = []
    for p in predicates:
        failures: list[Failure] = []
        c = F.coalesce(compile_scalar(p, desc, failures=failures), F.lit(False))
        keep = c if keep is None else (keep & c)
        err = first_failure(failures, row, show(p, desc.names))
        if err is not None:
            errors.append(err)
    if not errors or keep is None:
        return None
    return keep, errors[0] if len(errors) == 1 else F.coalesce(*errors)


def filter_capturing(
    ctx: StepContext, lazy: Lazy, desc: RelationDesc, keep: Column, error: Column
) -> Lazy:
    """The rows of ``lazy`` (internal layout of ``desc``) where ``keep`` holds; those whose
    ``error`` record is not NULL go to the step's errors instead (:func:`captured_predicates`)."""
    if lazy.is_empty:
        return lazy
    arity = desc.arity
    df = lazy.frame().where(error.isNotNull() | keep).withColumn(col_name(arity), error)
    out = Lazy(df.select(*_layout_columns(arity + 1)), lazy.big)
    return ctx.split_errors(out, desc)


def all_true(predicates: tuple[ScalarExpr, ...], desc: RelationDesc) -> Column:
    """TRUE exactly when every predicate is TRUE (NULL counts as false)."""
    from pyspark.sql import functions as F

    cond: Column | None = None
    for p in predicates:
        c = F.coalesce(scalar(p, desc), F.lit(False))
        cond = c if cond is None else (cond & c)
    assert cond is not None
    return cond


@dataclass
class ProjectNode:
    input: Node
    outputs: tuple[int, ...]
    desc: RelationDesc
    _columns: ColumnMemo = field(default_factory=ColumnMemo)

    def step(self, ctx: StepContext) -> Lazy:
        from pyspark.sql import functions as F

        lazy = self.input.step(ctx)
        if lazy.is_empty:
            return lazy
        batch = lazy.batch
        if batch is not None and batch.table is not None:
            # Columns of a delta already on the driver (an import's updates or snapshot): chosen
            # as it is read (moving data, not computing it), so that no Spark job runs for it.
            # Small deltas are consolidated here; a large pick stays unconsolidated like the
            # snapshot it comes from (spate.render.batch).
            table = batch.table
            names = [*(col_name(i) for i in self.outputs), TIME_COLUMN, DIFF_COLUMN]
            picked = table.select(names).rename_columns(
                [*data_names(len(self.outputs)), TIME_COLUMN, DIFF_COLUMN]
            )
            return ctx.engine.lazy_of_batch(
                ctx.engine.batch_of_table(picked, self.desc, consolidated=False)
            )

        def columns() -> list[Column]:
            return internal_columns([F.col(col_name(i)) for i in self.outputs])

        return Lazy(self._columns.select(lazy.frame(), "out", columns), lazy.big)

    def drop(self) -> None:
        self.input.drop()


@dataclass
class FlatMapNode:
    input: Node
    func: TableFunc
    exprs: tuple[ScalarExpr, ...]
    desc: RelationDesc
    _columns: ColumnMemo = field(default_factory=ColumnMemo)

    def step(self, ctx: StepContext) -> Lazy:
        from pyspark.sql import functions as F

        from spate.render.table_funcs import table_func_column

        lazy = self.input.step(ctx)
        if lazy.is_empty:
            return lazy
        arity = self.input.desc.arity

        def columns() -> list[Column]:
            args = [scalar(e, self.input.desc) for e in self.exprs]
            values = table_func_column(self.func, args)
            return internal_columns([F.col(c) for c in data_names(arity)] + [F.explode(values)])

        return Lazy(self._columns.select(lazy.frame(), "out", columns), lazy.big)

    def drop(self) -> None:
        self.input.drop()


@dataclass
class NegateNode:
    input: Node
    desc: RelationDesc
    _columns: ColumnMemo = field(default_factory=ColumnMemo)

    def step(self, ctx: StepContext) -> Lazy:
        from pyspark.sql import functions as F

        lazy = self.input.step(ctx)
        if lazy.is_empty:
            return lazy
        negated = self._columns.get("negated", lambda: -F.col(DIFF_COLUMN))
        return Lazy(lazy.frame().withColumn(DIFF_COLUMN, negated), lazy.big)

    def drop(self) -> None:
        self.input.drop()


@dataclass
class UnionNode:
    inputs: tuple[Node, ...]
    desc: RelationDesc

    def step(self, ctx: StepContext) -> Lazy:
        parts = [i.step(ctx) for i in self.inputs]
        dfs = [p.frame() for p in parts if not p.is_empty]
        if not dfs:
            return Lazy.empty()
        out = dfs[0]
        for df in dfs[1:]:
            out = out.unionByName(df)
        return Lazy(out, any(p.big for p in parts))

    def drop(self) -> None:
        for i in self.inputs:
            i.drop()


@dataclass
class PassNode:
    """ArrangeBy: the input unchanged (every arranged collection here is keyed by need)."""

    input: Node
    desc: RelationDesc

    def step(self, ctx: StepContext) -> Lazy:
        return self.input.step(ctx)

    def drop(self) -> None:
        self.input.drop()
