"""Readable text of a plan: one node per line, expressions with column names.

::

    Reduce key=[auction] aggregates=[top = max(price)]  -> (auction int64 not null, top …)
      Filter (price > 10)
        Get u1 (auction int64 not null, bidder int64 not null, price int64 not null, …)

For logs and for the failure messages of oracle tests (``assert …, plan.explain()``).

Each node's line comes from its ``explain_line(names)`` method (``names``: the input's column
names, or the node's own for a leaf or a node of several inputs), which passes its fields to one
of the functions below; a node without one shows its type name. This module knows nodes only by
their shape (:class:`Explainable`): the IR imports it, not the other way round.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from spate.plan.aggregate import AggregateExpr
from spate.plan.expr import ScalarExpr, show
from spate.plan.finishing import ColumnOrder
from spate.plan.table_func import TableFunc
from spate.plan.window_func import DEFAULT_FRAME, WindowExpr, WindowFrame, show_call
from spate.repr.desc import RelationDesc
from spate.repr.types import Row


class Explainable(Protocol):
    """What :func:`explain` needs of a plan node."""

    @property
    def desc(self) -> RelationDesc: ...

    def inputs(self) -> Sequence[Explainable]: ...

    def explain_line(self, names: Sequence[str]) -> str: ...


def explain(plan: Explainable) -> str:
    """The plan as an indented tree, inputs below their consumer."""
    lines: list[str] = []
    _explain(plan, 0, lines)
    return "\n".join(lines)


def _explain(node: Explainable, depth: int, lines: list[str]) -> None:
    inputs = node.inputs()
    names = inputs[0].desc.names if len(inputs) == 1 else node.desc.names
    lines.append("  " * depth + node.explain_line(names))
    for i in inputs:
        _explain(i, depth + 1, lines)


def get_line(id: object, relation: RelationDesc) -> str:
    return f"Get {id} {relation}"


def constant_line(rows: Sequence[tuple[Row, int]], relation: RelationDesc) -> str:
    shown = ", ".join(f"{row}×{m}" for row, m in rows[:4])
    more = f" …(+{len(rows) - 4})" if len(rows) > 4 else ""
    return f"Constant {relation} [{shown}{more}]"


def map_line(names: Sequence[str], new: Sequence[str], scalars: Sequence[ScalarExpr]) -> str:
    cols = list(names)
    parts = []
    for name, s in zip(new, scalars, strict=True):
        parts.append(f"{name} = {show(s, cols)}")
        cols.append(name)
    return f"Map {', '.join(parts)}"


def filter_line(names: Sequence[str], predicates: Sequence[ScalarExpr]) -> str:
    return "Filter " + " AND ".join(show(p, names) for p in predicates)


def project_line(names: Sequence[str], outputs: Sequence[int], desc: RelationDesc) -> str:
    return f"Project [{', '.join(names[i] for i in outputs)}] -> {desc}"


def flat_map_line(
    names: Sequence[str], new: Sequence[str], func: TableFunc, exprs: Sequence[ScalarExpr]
) -> str:
    args = ", ".join(show(e, names) for e in exprs)
    return f"FlatMap {new[0]} = {func.value}({args})"


def join_line(
    names: Sequence[str],
    equivalences: Sequence[Sequence[int]],
    predicates: Sequence[ScalarExpr],
) -> str:
    classes = ["=".join(names[p] for p in cls) for cls in equivalences]
    text = f"Join on [{', '.join(classes)}]"
    if predicates:
        text += " where " + " AND ".join(show(p, names) for p in predicates)
    return text


def reduce_line(
    names: Sequence[str],
    group_key: Sequence[int],
    new: Sequence[str],
    aggregates: Sequence[AggregateExpr],
) -> str:
    aggs = [
        f"{n} = {a.func.value}({'DISTINCT ' if a.distinct else ''}{show(a.expr, names)})"
        for n, a in zip(new, aggregates, strict=True)
    ]
    return f"Reduce key=[{', '.join(names[i] for i in group_key)}] [{', '.join(aggs)}]"


def _order(order_by: Sequence[ColumnOrder], names: Sequence[str]) -> str:
    return ", ".join(
        f"{names[o.column]}{' DESC' if o.desc else ''}"
        + ("" if o.nulls_last is None else f" NULLS {'LAST' if o.nulls_last else 'FIRST'}")
        for o in order_by
    )


def top_k_line(
    names: Sequence[str],
    group_key: Sequence[int],
    order_by: Sequence[ColumnOrder],
    limit: int | None,
    offset: int,
) -> str:
    return (
        f"TopK key=[{', '.join(names[i] for i in group_key)}]"
        f" order=[{_order(order_by, names)}] limit={limit} offset={offset}"
    )


def window_line(
    names: Sequence[str],
    partition_by: Sequence[int],
    order_by: Sequence[ColumnOrder],
    new: Sequence[str],
    funcs: Sequence[WindowExpr | AggregateExpr],
    frames: Sequence[WindowFrame],
) -> str:
    calls = [
        f"{n} = {show_call(f, names)}" + ("" if fr == DEFAULT_FRAME else f" {fr.sql()}")
        for n, f, fr in zip(new, funcs, frames, strict=True)
    ]
    text = (
        f"Window partition=[{', '.join(names[i] for i in partition_by)}]"
        f" order=[{_order(order_by, names)}] [{', '.join(calls)}]"
    )
    if not partition_by:
        text += " (one partition: every change recomputes all of it)"
    return text


def arrange_by_line(names: Sequence[str], keys: Sequence[Sequence[int]]) -> str:
    return "ArrangeBy " + " ".join(f"[{', '.join(names[i] for i in k)}]" for k in keys)
