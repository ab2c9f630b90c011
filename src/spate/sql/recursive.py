"""WITH RECURSIVE: a CTE that reads itself, lowered to :class:`~spate.plan.recursive.Recursive`.

PostgreSQL's form and rules: the CTE's body is ``non-recursive term UNION [ALL] recursive
term``; the non-recursive term must not read the CTE, the recursive term reads it exactly once
(there it denotes the working table: the rows of the previous round). The output columns take
the non-recursive term's types; a recursive term of other types is refused. A CTE under
``WITH RECURSIVE`` that does not read itself is an ordinary CTE.

Like every CTE, a recursive one is planned where it is read (each reference gets its own
``Recursive`` node, with a binding of its own).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from spate.plan.recursive import Recursive, RecursiveRef
from spate.plan.relation import RelationExpr
from spate.repr.desc import Column, RelationDesc
from spate.sql.errors import DatatypeMismatch, FeatureNotSupported, SqlError
from spate.sql.relops import rename
from spate.sql.scope import project

if TYPE_CHECKING:
    from spate.sql.query import QueryPlanner
    from spate.sql.types import PgType


def reads(node: exp.Expression, name: str) -> int:
    """How many times ``node`` reads a table named ``name`` (unqualified)."""
    return sum(
        1
        for t in node.find_all(exp.Table)
        if isinstance(t.this, exp.Identifier) and t.name == name and not t.args.get("db")
    )


def is_recursive(cte: exp.Expression, name: str) -> bool:
    return reads(cte, name) > 0


def plan_recursive(
    qp: QueryPlanner,
    name: str,
    body: exp.Expression,
    cols: list[str] | None,
) -> tuple[Recursive, list[PgType], list[str]]:
    """The ``Recursive`` node of the CTE ``name`` (its types and column names); called with the
    CTE frames the CTE may see (not itself)."""
    if not isinstance(body, exp.Union):
        raise qp.err(
            SqlError,
            f'recursive query "{name}" does not have the form non-recursive-term UNION [ALL] '
            "recursive-term",
            body,
        )
    base_node, step_node = body.this, body.expression
    if reads(base_node, name):
        raise qp.err(
            FeatureNotSupported,
            f'recursive reference to query "{name}" must not appear within its non-recursive term',
            base_node,
        )
    if reads(step_node, name) > 1:
        raise qp.err(
            FeatureNotSupported,
            f'recursive reference to query "{name}" must not appear more than once',
            step_node,
        )
    _check_recursive_term(qp, name, step_node)
    for clause in ("order", "limit", "offset"):
        if body.args.get(clause) is not None:
            raise qp.err(
                FeatureNotSupported,
                f"{clause.upper()} BY in a recursive query is not implemented"
                if clause == "order"
                else f"{clause.upper()} in a recursive query is not implemented",
                body.args[clause],
            )
    base = qp.relation(base_node)
    names = list(cols or base.names)
    if len(names) != len(base.names):
        raise qp.err(
            SqlError,
            f'WITH query "{name}" has {len(base.names)} columns available but {len(names)} '
            "columns specified",
            body,
        )
    types = base.types
    binding = qp.next_binding()
    working = RelationDesc(
        [Column(n, c.type, True) for n, c in zip(names, base.rel.expr.desc.columns, strict=True)]
    )
    ref = RecursiveRef(binding, working)
    with qp.working_table(name, ref, types, names):
        step = qp.relation(step_node)
    if len(step.names) != len(names):
        raise qp.err(
            SqlError,
            "each UNION query must have the same number of columns",
            step_node,
        )
    step_expr = step.rel.expr
    for i, (have, want) in enumerate(zip(step.types, types, strict=True)):
        if i in step.literals or have.scalar == want.scalar:
            continue
        raise qp.err(
            DatatypeMismatch,
            f'recursive query "{name}" column {i + 1} has type {want} in non-recursive term '
            f"but type {have} overall",
            step_node,
        )
    if step.literals or step_expr.desc.types != working.types:
        step_expr = qp.cast_outputs(step, types, step_node)
    base_expr = _renamed(base.rel.expr, names)
    step_expr = _renamed(step_expr, names)
    distinct = body.args.get("distinct", True) is not False
    node = Recursive(base_expr, step_expr, binding, distinct, qp.recursion_limit)
    return node, types, names


def _check_recursive_term(qp: QueryPlanner, name: str, step: exp.Expression) -> None:
    """PostgreSQL's restrictions on where the recursive reference may be."""
    for table in step.find_all(exp.Table):
        if table.name != name or table.args.get("db"):
            continue
        scope = table.find_ancestor(exp.Select)
        if scope is not step or table.find_ancestor(exp.Subquery, exp.Select) is not scope:
            raise qp.err(
                FeatureNotSupported,
                f'recursive reference to query "{name}" must not appear within a subquery',
                table,
            )
        join = table.find_ancestor(exp.Join)
        sides = [j.side.upper() for j in scope.args.get("joins") or []]
        inside = sides[scope.args["joins"].index(join)] if join is not None else None
        later = sides[scope.args["joins"].index(join) + 1 :] if join is not None else sides
        if inside in ("LEFT", "FULL") or any(s in ("RIGHT", "FULL") for s in later):
            raise qp.err(
                FeatureNotSupported,
                f'recursive reference to query "{name}" must not appear within an outer join',
                table,
            )
    if isinstance(step, exp.Select):
        items = [*step.expressions, *([step.args["having"]] if step.args.get("having") else [])]
        if step.args.get("group") is not None or any(_has_aggregate(i) for i in items):
            raise qp.err(
                FeatureNotSupported,
                "aggregate functions are not allowed in a recursive query's recursive term",
                step,
            )


def _has_aggregate(node: exp.Expression) -> bool:
    """An aggregate call in ``node``, not looking into subqueries or window calls."""
    if isinstance(node, (exp.Subquery, exp.Select, exp.Window)):
        return False
    if isinstance(node, exp.AggFunc):
        return True
    return any(_has_aggregate(c) for c in node.iter_expressions())


def _renamed(expr: RelationExpr, names: list[str]) -> RelationExpr:
    return rename(project(expr, range(expr.desc.arity)), names)


__all__ = ["is_recursive", "plan_recursive", "reads"]
