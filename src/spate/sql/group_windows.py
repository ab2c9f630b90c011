"""Aggregates of a GROUP BY that a ``Window`` over each group computes, read back by ``max``.

Two aggregates depend on an order of the group's rows that ``Reduce`` does not keep:

* ``string_agg(v, d ORDER BY e …)`` (other than ``ORDER BY v`` ascending, which ``Reduce``'s
  sorted ``string_agg`` is): ``string_agg(v, d) OVER (PARTITION BY <group keys> ORDER BY e …
  ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)``, the same value on every row of
  the group;
* ``count(DISTINCT (a, b, …))``, the number of distinct rows of values (a row with NULL fields
  is a value too; NULLs equal, as PostgreSQL compares records): ``dense_rank() OVER
  (PARTITION BY <group keys> ORDER BY a, b, …)`` is, on the group's last peer group, that
  number.

The ``Reduce`` then takes ``max`` of the window's column per group. Both are maintained as the
window is: every touched group recomputed (the cost follows the group's size).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from spate.plan.aggregate import AggregateExpr, AggregateFunc
from spate.plan.expr import ColumnRef, ScalarExpr
from spate.plan.finishing import ColumnOrder
from spate.plan.relation import Map, RelationExpr, Window
from spate.plan.window import WindowExpr, WindowFrame

__all__ = ["GroupWindow", "with_group_windows"]


@dataclass(frozen=True)
class GroupWindow:
    """One aggregate computed by a window over its group: ``call`` over the group's rows in the
    order of ``order`` (scalars over the Reduce's input, each with its ``ColumnOrder`` flags;
    the ``ColumnOrder.column`` is ignored) within ``frame``."""

    call: AggregateExpr | WindowExpr
    order: tuple[tuple[ScalarExpr, ColumnOrder], ...]
    frame: WindowFrame


def with_group_windows(
    mapped: RelationExpr,
    key: Sequence[int],
    aggs: Sequence[AggregateExpr | GroupWindow],
) -> tuple[RelationExpr, tuple[AggregateExpr, ...]]:
    """``mapped`` with one column per :class:`GroupWindow` appended (a ``Window`` partitioned
    by ``key``), and the aggregates with each of them replaced by ``max`` of its column."""
    out: list[AggregateExpr] = []
    for agg in aggs:
        if isinstance(agg, AggregateExpr):
            out.append(agg)
            continue
        at = mapped.desc.arity
        if agg.order:
            mapped = Map(mapped, tuple(e for e, _ in agg.order))
        order = tuple(
            ColumnOrder(at + i, o.desc, o.nulls_last) for i, (_, o) in enumerate(agg.order)
        )
        width = mapped.desc.arity
        name = f"group_window{width}"
        while name in mapped.desc.names:
            name += "_"
        mapped = Window(mapped, tuple(key), order, (agg.call,), (name,), (agg.frame,))
        out.append(AggregateExpr(AggregateFunc.MAX, ColumnRef(width)))
    return mapped, tuple(out)
