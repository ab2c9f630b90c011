"""Readable text of a plan: one node per line, expressions with column names.

::

    Reduce key=[auction] aggregates=[top = max(price)]  -> (auction int64 not null, top …)
      Filter (price > 10)
        Get u1 (auction int64 not null, bidder int64 not null, price int64 not null, …)

For logs and for the failure messages of oracle tests (``assert …, plan.explain()``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spate.plan.expr import show

if TYPE_CHECKING:
    from spate.plan.relation import RelationExpr


def explain(plan: RelationExpr) -> str:
    """The plan as an indented tree, inputs below their consumer."""
    lines: list[str] = []
    _explain(plan, 0, lines)
    return "\n".join(lines)


def _explain(node: RelationExpr, depth: int, lines: list[str]) -> None:
    from spate.plan import relation as r
    from spate.plan.window import Window, explain_line

    pad = "  " * depth
    inputs = node.inputs()
    names = inputs[0].desc.names if len(inputs) == 1 else node.desc.names
    match node:
        case r.Get(id, desc):
            text = f"Get {id} {desc}"
        case r.Constant(rows, desc):
            shown = ", ".join(f"{row}×{m}" for row, m in rows[:4])
            more = f" …(+{len(rows) - 4})" if len(rows) > 4 else ""
            text = f"Constant {desc} [{shown}{more}]"
        case r.Map(_, scalars, out_names):
            cols = list(names)
            parts = []
            for name, s in zip(out_names, scalars, strict=True):
                parts.append(f"{name} = {show(s, cols)}")
                cols.append(name)
            text = f"Map {', '.join(parts)}"
        case r.Filter(_, predicates):
            text = "Filter " + " AND ".join(show(p, names) for p in predicates)
        case r.Project(_, outputs, _):
            text = f"Project [{', '.join(names[i] for i in outputs)}] -> {node.desc}"
        case r.FlatMap(_, func, exprs, out_names):
            args = ", ".join(show(e, names) for e in exprs)
            text = f"FlatMap {out_names[0]} = {func.value}({args})"
        case r.Join(_, equivalences, predicates):
            classes = ["=".join(names[p] for p in cls) for cls in equivalences]
            text = f"Join on [{', '.join(classes)}]"
            if predicates:
                text += " where " + " AND ".join(show(p, names) for p in predicates)
        case r.Reduce(_, key, aggregates, out_names):
            aggs = [
                f"{n} = {a.func.value}({'DISTINCT ' if a.distinct else ''}{show(a.expr, names)})"
                for n, a in zip(out_names, aggregates, strict=True)
            ]
            text = f"Reduce key=[{', '.join(names[i] for i in key)}] [{', '.join(aggs)}]"
        case r.TopK(_, key, order_by, limit, offset):
            order = [
                f"{names[o.column]}{' DESC' if o.desc else ''}"
                + ("" if o.nulls_last is None else f" NULLS {'LAST' if o.nulls_last else 'FIRST'}")
                for o in order_by
            ]
            text = (
                f"TopK key=[{', '.join(names[i] for i in key)}] order=[{', '.join(order)}]"
                f" limit={limit} offset={offset}"
            )
        case Window():
            text = explain_line(node)
        case r.ArrangeBy(_, keys):
            text = "ArrangeBy " + " ".join(f"[{', '.join(names[i] for i in k)}]" for k in keys)
        case _:
            text = type(node).__name__
    lines.append(pad + text)
    for i in inputs:
        _explain(i, depth + 1, lines)
