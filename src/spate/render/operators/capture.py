"""Rows whose expressions fail, split off before an operator that evaluates them per row.

FlatMap (its table function's arguments), Window (its functions' values and defaults) and a
temporal filter (its predicates and time bounds) evaluate scalars on each input row inside
their own Spark plans. :class:`CaptureNode` sits under such an operator: outside capture mode
it passes its input on untouched; in capture mode (:mod:`spate.render.errors`) it evaluates
the operator's expressions on every input update and routes each update on which one fails to
the step's errors, with the update's time and multiplicity, passing the others on. The
operator above then only ever meets rows it can evaluate, and because the split is a function
of the row, retracting the row retracts its error and the operator's state never held it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from spate.plan.expr import ScalarExpr
from spate.render.batch import Lazy
from spate.render.layout import col_name, data_names
from spate.render.operators.node import ColumnMemo, Node, StepContext
from spate.repr.desc import DIFF_COLUMN, TIME_COLUMN, RelationDesc

if TYPE_CHECKING:
    from pyspark.sql import Column

    from spate.plan.aggregate import AggregateExpr
    from spate.plan.window import WindowExpr


def error_record(exprs: tuple[ScalarExpr, ...], desc: RelationDesc) -> Column | None:
    """The error record of a row of ``desc`` where one of ``exprs`` fails (NULL where none
    does); ``None`` when none can fail."""
    from pyspark.sql import functions as F

    from spate.plan.expr import show
    from spate.render.errors import first_failure, row_text
    from spate.render.scalar import Failure, compile_scalar

    row = row_text(desc)
    errors: list[Column] = []
    for e in exprs:
        failures: list[Failure] = []
        compile_scalar(e, desc, data_names(desc.arity), failures=failures)
        err = first_failure(failures, row, show(e, desc.names))
        if err is not None:
            errors.append(err)
    if not errors:
        return None
    return errors[0] if len(errors) == 1 else F.coalesce(*errors)


@dataclass
class CaptureNode:
    """The input; in capture mode without the updates on which one of ``exprs`` (over the
    input's rows) fails, which go to the step's errors (module docs)."""

    input: Node
    exprs: tuple[ScalarExpr, ...]
    desc: RelationDesc
    _columns: ColumnMemo = field(default_factory=ColumnMemo)

    def step(self, ctx: StepContext) -> Lazy:
        from pyspark.sql import functions as F

        lazy = self.input.step(ctx)
        if not ctx.capture or lazy.is_empty or not self.exprs:
            return lazy
        error = self._columns.get("error", lambda: error_record(self.exprs, self.desc))
        if error is None:
            return lazy
        arity = self.desc.arity
        df = lazy.frame().withColumn(col_name(arity), error)
        columns = [F.col(n) for n in (*data_names(arity + 1), TIME_COLUMN, DIFF_COLUMN)]
        return ctx.split_errors(Lazy(df.select(*columns), lazy.big), self.desc)

    def drop(self) -> None:
        self.input.drop()


def capturing(node: Node, exprs: tuple[ScalarExpr, ...]) -> Node:
    """``node`` under a :class:`CaptureNode` of ``exprs`` (``node`` itself if there are none)."""
    return CaptureNode(node, exprs, node.desc) if exprs else node


def window_arguments(funcs: tuple[WindowExpr | AggregateExpr, ...]) -> tuple[ScalarExpr, ...]:
    """The scalars a Window evaluates on each input row: its functions' values and defaults,
    its aggregates' inputs."""
    from spate.plan.window import WindowExpr

    out: list[ScalarExpr] = []
    for f in funcs:
        if isinstance(f, WindowExpr):
            out.extend(e for e in (f.expr, f.default) if e is not None)
        else:
            out.append(f.expr)
    return tuple(out)
