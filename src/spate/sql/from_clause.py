"""The FROM clause of a SELECT block: tables, joins, table functions and the WHERE conjuncts
that a join takes into its classes and inputs."""

from __future__ import annotations

from sqlglot import exp

from spate.plan.expr import BinaryFunc, CallBinary, ColumnRef, ScalarExpr
from spate.plan.relation import FlatMap, RelationExpr
from spate.plan.table_func import TableFunc
from spate.sql.checks import nonzero_step
from spate.sql.errors import (
    FeatureNotSupported,
    SqlError,
    UndefinedFunction,
)
from spate.sql.parse import UNARY_PLUS
from spate.sql.query import Context, QueryPlanner
from spate.sql.relops import build_join
from spate.sql.scope import Col, Rel, Scope, hide, unique_names
from spate.sql.types import INT8, from_scalar


def from_clause(
    qp: QueryPlanner, node: exp.Select, ctx: Context | None
) -> tuple[Rel, list[exp.Expression]]:
    """The FROM items joined (outer joins lowered), as one relation with the context prefix;
    plus the inner joins' ON conditions, still to apply with WHERE."""
    from_ = node.args.get("from_") or node.args.get("from")
    items: list[Rel] = []
    pending: list[exp.Expression] = []
    if from_ is not None:
        first, joins = _flattened(from_.this, list(node.args.get("joins") or []))
        items.append(qp.table(first, ctx))
        for j in joins:
            if (
                isinstance(j.this, exp.Table)
                and isinstance(j.this.this, exp.Func)
                and not j.side
                and j.args.get("on") is None
                and _references_columns(j.this.this)
            ):
                # a set-returning function over the items before it (implicit LATERAL)
                left = _combine(qp, items, pending, None)
                pending = []
                alias_node = j.this.args.get("alias")
                func = j.this.this
                assert isinstance(func, exp.Expression)
                items = [
                    table_function(
                        qp,
                        func,
                        alias_node.name if alias_node is not None and alias_node.name else None,
                        [c.name for c in alias_node.columns] if alias_node is not None else [],
                        over=left,
                    )
                ]
                continue
            right = qp.table(j.this, ctx)
            side = (j.side or "").upper()
            kind = (j.kind or "").upper()
            on = j.args.get("on")
            using = [u.name for u in j.args.get("using") or []]
            if kind in ("SEMI", "ANTI") or j.args.get("method"):
                raise qp.err(FeatureNotSupported, f"{kind or j.args.get('method')} JOIN", j)
            if side in ("LEFT", "RIGHT", "FULL"):
                from spate.sql.joins import outer_join

                left = _combine(qp, items, pending, None)
                pending = []
                items = [outer_join(qp, left, right, side, on, using)]
                continue
            if using:
                from spate.sql.joins import using_inner

                left = _combine(qp, items, pending, None)
                pending = []
                items = [using_inner(qp, left, right, using)]
                continue
            items.append(right)
            if on is not None:
                pending.extend(split_and(on))
    prefix_cols: list[Col] = []
    inputs: list[RelationExpr] = []
    if ctx is not None:
        inputs.append(ctx.relation)
        prefix_cols = hide(
            [Col(None, None, from_scalar(c.type)) for c in ctx.relation.desc.columns]
        )
    cols = list(prefix_cols)
    for r in items:
        inputs.append(r.expr)
        cols.extend(r.scope.cols)
    if not inputs:
        from spate.sql.relops import unit

        inputs.append(unit())
    expr = build_join(inputs, [])
    scope = Scope(cols, ctx.correlation if ctx is not None else None, qp.text)
    _check_duplicate_aliases(qp, items, node)
    return Rel(expr, scope), pending


def _group(node: exp.Expression) -> exp.Table | None:
    """The join group of a parenthesized join without an alias (``(a CROSS JOIN b)``):
    sqlglot reads it as an unaliased subquery of a table with joins."""
    if (
        isinstance(node, exp.Subquery)
        and not node.alias
        and isinstance(node.this, exp.Table)
        and node.this.args.get("joins")
    ):
        return node.this
    return None


def _inner(j: exp.Join) -> bool:
    return (
        not j.side and (j.kind or "").upper() in ("", "INNER", "CROSS") and not j.args.get("using")
    )


def _flattened(
    first: exp.Expression, joins: list[exp.Join]
) -> tuple[exp.Expression, list[exp.Join]]:
    """``first`` and ``joins`` with parenthesized join groups spelled out, as PostgreSQL
    reads them: a group first in FROM is the same left-deep join without parentheses; a
    group joined by an inner join whose own joins are inner is the same inner joins with the
    group's ON conditions and the join's (the parse tree is not changed)."""
    group = _group(first)
    if group is not None:
        head = group.copy()
        inner = list(head.args.get("joins") or [])
        head.set("joins", None)
        head_first, head_joins = _flattened(head, inner)
        return _flattened(head_first, [*head_joins, *joins])
    out: list[exp.Join] = []
    for j in joins:
        g = _group(j.this)
        if g is None or not _inner(j) or not all(_inner(k) for k in g.args.get("joins") or []):
            out.append(j)
            continue
        head = g.copy()
        inner = list(head.args.get("joins") or [])
        head.set("joins", None)
        head_first, head_joins = _flattened(head, inner)
        out.append(exp.Join(this=head_first, kind="CROSS"))
        out.extend(head_joins)
        on = j.args.get("on")
        if on is not None and out:
            last = out[-1]
            both = on if last.args.get("on") is None else exp.and_(last.args["on"], on)
            last = last.copy()
            last.set("on", both)
            last.set("kind", None)
            out[-1] = last
    return first, out


def _references_columns(node: exp.Expr) -> bool:
    return any(isinstance(n, exp.Column) for n in node.walk())


def _check_duplicate_aliases(qp: QueryPlanner, items: list[Rel], node: exp.Expression) -> None:
    seen: set[str] = set()
    for r in items:
        tables = {c.table for c in r.scope.cols if c.table is not None and not c.qualified_only}
        for t in tables:
            if t in seen:
                raise qp.err(SqlError, f'table name "{t}" specified more than once', node).located(
                    None, None
                )
        seen |= tables


def _combine(
    qp: QueryPlanner, items: list[Rel], pending: list[exp.Expression], ctx: Context | None
) -> Rel:
    del ctx
    cols = [c for r in items for c in r.scope.cols]
    scope = Scope(cols, None, qp.text)
    expr = build_join([r.expr for r in items], [])
    rel = Rel(expr, scope)
    if pending:
        b = qp.binder(scope, "JOIN/ON")
        preds = [b.predicate(p) for p in pending]
        rel = rel.with_cols(joined(rel, preds), cols)
    return rel


def table_function(
    qp: QueryPlanner,
    node: exp.Expression,
    alias: str | None,
    col_aliases: list[str],
    over: Rel | None = None,
) -> Rel:
    """A set-returning function in FROM; ``over``: the FROM items before it, whose columns its
    arguments may use (an implicit LATERAL: the function runs once per row of ``over``)."""
    from spate.sql.relops import unit

    name = node.name.lower() if isinstance(node, exp.Anonymous) else type(node).__name__.lower()
    scope = over.scope if over is not None else Scope([], text=qp.text)
    b = qp.binder(scope, "FROM")
    if (
        isinstance(node, (exp.ExplodingGenerateSeries, exp.GenerateSeries))
        or name == "generate_series"
    ):
        args = [node.args.get("start"), node.args.get("end")]
        if node.args.get("step") is not None:
            args.append(node.args["step"])
        exprs = tuple(b.bind_as(a, INT8).expr for a in args if a is not None)
        if len(exprs) == 3:  # step 0 fails as in PostgreSQL (the IR's gives no rows)
            exprs = (*exprs[:2], nonzero_step(*exprs))
        base = over.expr if over is not None else unit()
        out_name = unique_names([*base.desc.names, col_aliases[0] if col_aliases else "g"])[-1]
        fm = FlatMap(base, TableFunc.GENERATE_SERIES, exprs, (out_name,))
        col = Col(
            col_aliases[0] if col_aliases else (alias or "generate_series"),
            alias or "generate_series",
            INT8,
        )
        cols = [*(over.scope.cols if over is not None else []), col]
        return Rel(fm, Scope(cols, None, qp.text))
    raise qp.err(UndefinedFunction, f"function {name} does not exist", node)


def split_and(node: exp.Expression) -> list[exp.Expression]:
    while isinstance(node, exp.Paren) and not node.meta.get(UNARY_PLUS):
        node = node.this
    if isinstance(node, exp.And):
        return split_and(node.this) + split_and(node.expression)
    return [node]


def joined(rel: Rel, preds: list[ScalarExpr]) -> RelationExpr:
    """Filter ``rel`` by ``preds``; a join below takes them into its classes and inputs."""
    from spate.plan.relation import Join

    expr = rel.expr
    if isinstance(expr, Join):
        existing = list(expr.predicates)
        for cls in expr.equivalences:
            first = cls[0]
            for other in cls[1:]:
                existing.append(CallBinary(BinaryFunc.EQ, ColumnRef(first), ColumnRef(other)))
        inputs = list(expr.operands)
        return build_join(inputs, [*existing, *preds])
    return build_join([expr], preds)
