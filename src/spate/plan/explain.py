"""Readable text of a plan: one node per line, expressions with column names.

::

    Reduce key=[auction] aggregates=[top = max(price)]  -> (auction int64 not null, top …)
      Filter (price > 10)
        Get u1 (auction int64 not null, bidder int64 not null, price int64 not null, …)

For logs and for the failure messages of oracle tests (``assert …, plan.explain()``).

Each node's line comes from its ``explain_line(names)`` method (``names``: the input's column
names, or the node's own for a leaf or a node of several inputs), which is one of the functions
below; a node without one shows its type name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from spate.plan.expr import show
from spate.plan.finishing import ColumnOrder
from spate.plan.window_func import show_call

if TYPE_CHECKING:
    from spate.plan.relation import (
        ArrangeBy,
        Constant,
        Filter,
        FlatMap,
        Get,
        Join,
        Map,
        Project,
        Reduce,
        RelationExpr,
        TopK,
        Window,
    )


def explain(plan: RelationExpr) -> str:
    """The plan as an indented tree, inputs below their consumer."""
    lines: list[str] = []
    _explain(plan, 0, lines)
    return "\n".join(lines)


def _explain(node: RelationExpr, depth: int, lines: list[str]) -> None:
    inputs = node.inputs()
    names = inputs[0].desc.names if len(inputs) == 1 else node.desc.names
    lines.append("  " * depth + node.explain_line(names))
    for i in inputs:
        _explain(i, depth + 1, lines)


def get_line(node: Get, names: Sequence[str]) -> str:
    return f"Get {node.id} {node.relation}"


def constant_line(node: Constant, names: Sequence[str]) -> str:
    rows = node.rows
    shown = ", ".join(f"{row}×{m}" for row, m in rows[:4])
    more = f" …(+{len(rows) - 4})" if len(rows) > 4 else ""
    return f"Constant {node.relation} [{shown}{more}]"


def map_line(node: Map, names: Sequence[str]) -> str:
    cols = list(names)
    parts = []
    for name, s in zip(node.names, node.scalars, strict=True):
        parts.append(f"{name} = {show(s, cols)}")
        cols.append(name)
    return f"Map {', '.join(parts)}"


def filter_line(node: Filter, names: Sequence[str]) -> str:
    return "Filter " + " AND ".join(show(p, names) for p in node.predicates)


def project_line(node: Project, names: Sequence[str]) -> str:
    return f"Project [{', '.join(names[i] for i in node.outputs)}] -> {node.desc}"


def flat_map_line(node: FlatMap, names: Sequence[str]) -> str:
    args = ", ".join(show(e, names) for e in node.exprs)
    return f"FlatMap {node.names[0]} = {node.func.value}({args})"


def join_line(node: Join, names: Sequence[str]) -> str:
    classes = ["=".join(names[p] for p in cls) for cls in node.equivalences]
    text = f"Join on [{', '.join(classes)}]"
    if node.predicates:
        text += " where " + " AND ".join(show(p, names) for p in node.predicates)
    return text


def reduce_line(node: Reduce, names: Sequence[str]) -> str:
    aggs = [
        f"{n} = {a.func.value}({'DISTINCT ' if a.distinct else ''}{show(a.expr, names)})"
        for n, a in zip(node.names, node.aggregates, strict=True)
    ]
    return f"Reduce key=[{', '.join(names[i] for i in node.group_key)}] [{', '.join(aggs)}]"


def _order(order_by: Sequence[ColumnOrder], names: Sequence[str]) -> str:
    return ", ".join(
        f"{names[o.column]}{' DESC' if o.desc else ''}"
        + ("" if o.nulls_last is None else f" NULLS {'LAST' if o.nulls_last else 'FIRST'}")
        for o in order_by
    )


def top_k_line(node: TopK, names: Sequence[str]) -> str:
    return (
        f"TopK key=[{', '.join(names[i] for i in node.group_key)}]"
        f" order=[{_order(node.order_by, names)}] limit={node.limit} offset={node.offset}"
    )


def window_line(node: Window, names: Sequence[str]) -> str:
    calls = [f"{n} = {show_call(f, names)}" for n, f in zip(node.names, node.funcs, strict=True)]
    text = (
        f"Window partition=[{', '.join(names[i] for i in node.partition_by)}]"
        f" order=[{_order(node.order_by, names)}] [{', '.join(calls)}]"
    )
    if not node.partition_by:
        text += " (one partition: every change recomputes all of it)"
    return text


def arrange_by_line(node: ArrangeBy, names: Sequence[str]) -> str:
    return "ArrangeBy " + " ".join(f"[{', '.join(names[i] for i in k)}]" for k in node.keys)
