"""One SELECT block: FROM → WHERE → GROUP BY → HAVING → SELECT → DISTINCT → ORDER BY/LIMIT."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from sqlglot import exp

from spate.plan.aggregate import AggregateExpr, AggregateFunc
from spate.plan.expr import BinaryFunc, CallBinary, Case, Cast, ColumnRef, Literal, ScalarExpr
from spate.plan.relation import Distinct, FlatMap, Map, Reduce, RelationExpr, TopK
from spate.plan.table_func import TableFunc
from spate.repr.types import BOOL, FLOAT64, INT64, ScalarKind, numeric
from spate.sql.errors import (
    FeatureNotSupported,
    GroupingError,
    InvalidColumnReference,
    SqlError,
    UndefinedFunction,
)
from spate.sql.parse import position
from spate.sql.query import Context, Output, QueryPlanner
from spate.sql.relops import build_join, global_defaults
from spate.sql.scalar import ScalarBinder, Typed
from spate.sql.scope import Col, Rel, Scope, hide, project, unique_names
from spate.sql.types import FLOAT8, INT8, PG_BOOL, PG_TEXT, UNKNOWN, PgType, from_scalar, pg_numeric

_AGGS = (
    exp.Count,
    exp.Sum,
    exp.Avg,
    exp.Min,
    exp.Max,
    exp.LogicalAnd,
    exp.LogicalOr,
    exp.GroupConcat,
)


def is_aggregate(node: exp.Expression) -> bool:
    if isinstance(node, exp.Filter):
        return is_aggregate(node.this)
    if isinstance(node, _AGGS):
        return True
    return isinstance(node, exp.Anonymous) and node.name.lower() in ("every", "string_agg")


def find_aggregates(node: exp.Expression) -> list[exp.Expression]:
    """Aggregate calls in ``node``, not looking into subqueries or inside other aggregates."""
    out: list[exp.Expression] = []

    def go(n: exp.Expression) -> None:
        if isinstance(n, (exp.Subquery, exp.Select, exp.Exists)):
            return
        if isinstance(n, exp.Window):
            # the window's own function is not an aggregate of the query; its arguments,
            # partition and order keys may hold some
            fn = n.this.this if isinstance(n.this, exp.Filter) else n.this
            for child in [*fn.iter_expressions(), *(n.args.get("partition_by") or [])]:
                go(child)
            if n.args.get("order") is not None:
                go(n.args["order"])
            return
        if is_aggregate(n):
            out.append(n)
            return
        for child in n.iter_expressions():
            go(child)

    go(node)
    return out


def has_subquery(node: exp.Expression) -> bool:
    return any(isinstance(n, (exp.Subquery, exp.Exists, exp.Select)) for n in node.walk())


def plan_select(qp: QueryPlanner, node: exp.Select, ctx: Context | None) -> Output:
    from spate.sql.subquery import SubqueryPlanner
    from spate.sql.windows import find_windows, plan_windows, reject_windows, top_k_rewrite

    rel, pending = from_clause(qp, node, ctx)
    k = ctx.arity if ctx is not None else 0
    sq = SubqueryPlanner(qp)
    where = node.args.get("where")
    conds = list(pending)
    if where is not None:
        conds.extend(_split_and(where.this))
        aggs = [a for c in conds for a in find_aggregates(c)]
        if aggs:
            raise qp.err(GroupingError, "aggregate functions are not allowed in WHERE", aggs[0])
    for c in conds:
        reject_windows(qp, c, "WHERE")
    plain = [c for c in conds if not has_subquery(c)]
    nested = [c for c in conds if has_subquery(c)]
    if plain:
        b = qp.binder(rel.scope, "WHERE")
        preds = [b.predicate(c) for c in plain]
        rel = rel.with_cols(top_k_rewrite(_joined(rel, preds)), rel.scope.cols)
    for c in nested:
        rel = sq.where(rel, c)

    group = node.args.get("group")
    having = node.args.get("having")
    selects = expand_star(qp, node.expressions, rel.scope)
    order = node.args.get("order")
    order_items = list(order.expressions) if order is not None else []
    agg_nodes = [a for s in selects for a in find_aggregates(s)]
    if having is not None:
        agg_nodes += find_aggregates(having.this)
    for o in order_items:
        agg_nodes += find_aggregates(o.this)
    override: Callable[[exp.Expression], Typed | None] | None = None
    if group is not None:
        reject_windows(qp, group, "GROUP BY")
    if having is not None:
        reject_windows(qp, having.this, "HAVING")
    if group is not None or agg_nodes or having is not None:
        rel, override = aggregate(qp, rel, k, group, selects, agg_nodes, ctx)
        if having is not None:
            if has_subquery(having.this):
                rel = sq.where(rel, having.this, override=override, clause="HAVING")
            else:
                b = qp.binder(rel.scope, "HAVING", override)
                rel = rel.with_cols(_joined(rel, [b.predicate(having.this)]), rel.scope.cols)

    windows = [w for s in selects for w in find_windows(s)]
    windows += [w for o in order_items for w in find_windows(o.this)]
    if windows:
        named = {w.name: w for w in node.args.get("windows") or []}
        rel, override = plan_windows(qp, rel, windows, named, override)

    # SELECT list
    names: list[str] = []
    types: list[PgType] = []
    scalars: list[ScalarExpr] = []
    literals: dict[int, str | None] = {}
    for s in selects:
        if has_subquery(s):
            rel, t = sq.scalar(rel, s, override)
        else:
            t = qp.binder(rel.scope, "SELECT", override).bind(s)
        if t.type.name == "unknown":
            literals[len(names)] = t.raw
            t = qp.binder(rel.scope).coerce(t, PG_TEXT, s)
        if t.interval_ms is not None or t.type.scalar is None or t.type.name == "interval":
            raise qp.err(FeatureNotSupported, f"a {t.type} column is not supported", s)
        names.append(output_name(s))
        types.append(t.type)
        scalars.append(t.expr)
    base = rel.arity
    computed = [x for x in scalars if not isinstance(x, ColumnRef)]
    out_cols = [Col(n, None, t) for n, t in zip(names, types, strict=True)]
    input_scope = Scope(rel.scope.cols, rel.scope.parent, qp.text)
    positions = []
    at = base
    for x in scalars:
        if isinstance(x, ColumnRef):
            positions.append(x.index)
        else:
            positions.append(at)
            at += 1
    if computed:
        computed_names = [
            n for n, x in zip(names, scalars, strict=True) if not isinstance(x, ColumnRef)
        ]
        fresh = unique_names([*rel.expr.desc.names, *computed_names])[base:]
        mapped = Map(rel.expr, tuple(computed), tuple(fresh))
        helper = [
            Col(None, None, t, hidden=True)
            for t, x in zip(types, scalars, strict=True)
            if not isinstance(x, ColumnRef)
        ]
        rel = rel.with_cols(mapped, rel.scope.cols + helper)
    input_scope = Scope(rel.scope.cols, rel.scope.parent, qp.text)

    # ORDER BY keys: output columns first, else expressions over the input
    distinct = node.args.get("distinct")
    orders: list[tuple[int, exp.Expression]] = []
    extra: list[ScalarExpr] = []
    extra_types: list[PgType] = []
    for o in order_items:
        pos = _output_ref(qp, o.this, names)
        if pos is not None:
            orders.append((positions[pos], o))
            continue
        match = next((i for i, s in enumerate(selects) if _strip_alias(s) == o.this), None)
        if match is not None:
            orders.append((positions[match], o))
            continue
        if distinct is not None and distinct.args.get("on") is None:
            raise qp.err(
                InvalidColumnReference,
                "for SELECT DISTINCT, ORDER BY expressions must appear in select list",
                o.this,
            )
        if has_subquery(o.this):
            raise qp.err(FeatureNotSupported, "subqueries in ORDER BY are not supported", o.this)
        t = qp.binder(input_scope, "ORDER BY", override).bind(o.this)
        if t.type.name == "unknown":
            t = qp.binder(input_scope).coerce(t, PG_TEXT, o.this)
        orders.append((rel.arity + len(extra), o))
        extra.append(t.expr)
        extra_types.append(t.type)
    if extra:
        mapped2 = Map(rel.expr, tuple(extra))
        rel = rel.with_cols(
            mapped2, rel.scope.cols + [Col(None, None, t, hidden=True) for t in extra_types]
        )

    # keep prefix, outputs, order helpers
    order_helpers = list(range(at, rel.arity))
    keep = [*range(k), *positions, *order_helpers]
    where_in_keep: dict[int, int] = {}
    for new_pos, old_pos in enumerate(keep):
        where_in_keep.setdefault(old_pos, new_pos)
    expr = project(rel.expr, keep)
    cols = [*rel.scope.cols[:k], *out_cols, *(rel.scope.cols[i] for i in order_helpers)]
    rel = rel.with_cols(expr, cols)
    column_orders = [qp.column_order(where_in_keep[p], o) for p, o in orders]

    if distinct is not None:
        on = distinct.args.get("on")
        if on is None:
            rel = rel.with_cols(Distinct(rel.expr), rel.scope.cols)
        else:
            on_positions: list[int] = []
            for e in on.expressions:
                p = _output_ref(qp, e, names)
                if p is None:
                    p = next((i for i, s in enumerate(selects) if _strip_alias(s) == e), None)
                if p is None:
                    raise qp.err(
                        FeatureNotSupported,
                        "DISTINCT ON expressions must be output columns",
                        e,
                    )
                on_positions.append(k + p)
            lead = [o.column for o in column_orders[: len(on_positions)]]
            if column_orders and sorted(lead) != sorted(on_positions):
                raise qp.err(
                    InvalidColumnReference,
                    "SELECT DISTINCT ON expressions must match initial ORDER BY expressions",
                    on.expressions[0],
                )
            rest = [o for o in column_orders if o.column not in on_positions]
            topk = TopK(rel.expr, tuple([*range(k), *on_positions]), tuple(rest), 1, 0)
            rel = rel.with_cols(topk, rel.scope.cols)
    limit, offset = qp.limit_offset(node.args.get("limit"), node.args.get("offset"))
    return Output(rel, names, types, k, column_orders, limit, offset, literals)


def _strip_alias(node: exp.Expression) -> exp.Expression:
    return node.this if isinstance(node, exp.Alias) else node


def _output_ref(qp: QueryPlanner, node: exp.Expression, names: list[str]) -> int | None:
    if isinstance(node, exp.Literal) and not node.is_string:
        n = int(str(node.this))
        if not 1 <= n <= len(names):
            raise qp.err(InvalidColumnReference, f"position {n} is not in select list", node)
        return n - 1
    if isinstance(node, exp.Column) and not node.table and isinstance(node.this, exp.Identifier):
        hits = [i for i, name in enumerate(names) if name == node.name]
        if len(hits) > 1:
            raise qp.err(SqlError, f'ORDER BY "{node.name}" is ambiguous', node)
        if hits:
            return hits[0]
    return None


def _split_and(node: exp.Expression) -> list[exp.Expression]:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        return _split_and(node.this) + _split_and(node.expression)
    return [node]


def _joined(rel: Rel, preds: list[ScalarExpr]) -> RelationExpr:
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


def output_name(node: exp.Expression) -> str:
    """PostgreSQL's name for a select item."""
    if isinstance(node, exp.Alias):
        return node.alias
    n = node
    while isinstance(n, (exp.Paren,)):
        n = n.this
    if isinstance(n, exp.Column):
        return n.name
    if isinstance(n, (exp.Cast, exp.TryCast)):
        inner = n.this
        if isinstance(inner, exp.Column):
            return inner.name
        return _type_output_name(n.args["to"])
    if isinstance(n, exp.Filter):
        n = n.this
    if isinstance(n, exp.Case):
        return "case"
    if isinstance(n, exp.Anonymous):
        return n.name.lower()
    if isinstance(n, exp.Exists):
        return "exists"
    if isinstance(n, exp.Func) and not isinstance(n, (exp.Binary,)):
        names = {
            exp.LogicalAnd: "bool_and",
            exp.LogicalOr: "bool_or",
            exp.GroupConcat: "string_agg",
            exp.TimestampTrunc: "date_trunc",
            exp.DateTrunc: "date_trunc",
            exp.Substring: "substring",
            exp.CurrentTimestamp: "now",
            exp.Extract: "extract",
            exp.Length: "length",
        }
        if type(n) in names:
            return names[type(n)]
        sql_name = n.sql_name() if hasattr(n, "sql_name") else type(n).__name__
        return str(sql_name).lower()
    return "?column?"


def _type_output_name(node: exp.Expression) -> str:
    text = node.sql(dialect="postgres").lower().split("(")[0]
    return {
        "int": "int4",
        "integer": "int4",
        "bigint": "int8",
        "smallint": "int2",
        "double precision": "float8",
        "real": "float4",
        "boolean": "bool",
        "decimal": "numeric",
    }.get(text, text)


def expand_star(
    qp: QueryPlanner, items: list[exp.Expression], scope: Scope
) -> list[exp.Expression]:
    out: list[exp.Expression] = []
    for item in items:
        table = None
        if isinstance(item, exp.Star):
            pass
        elif isinstance(item, exp.Column) and isinstance(item.this, exp.Star):
            table = item.table
        else:
            out.append(item)
            continue
        positions = scope.star(table)
        if table is not None and not positions:
            raise qp.err(
                SqlError,
                f'missing FROM-clause entry for table "{table}"',
                item,
            )
        if table is None and not positions and not scope.cols:
            raise qp.err(SqlError, "SELECT * with no tables specified is not valid", item)
        for p in positions:
            c = scope.cols[p]
            assert c.name is not None
            col = exp.column(c.name, table=c.table) if c.table else exp.column(c.name)
            out.append(col)
    return out


# --- FROM ------------------------------------------------------------------------------------


def from_clause(
    qp: QueryPlanner, node: exp.Select, ctx: Context | None
) -> tuple[Rel, list[exp.Expression]]:
    """The FROM items joined (outer joins lowered), as one relation with the context prefix;
    plus the inner joins' ON conditions, still to apply with WHERE."""
    from_ = node.args.get("from_") or node.args.get("from")
    items: list[Rel] = []
    pending: list[exp.Expression] = []
    if from_ is not None:
        items.append(qp.table(from_.this, ctx))
        for j in node.args.get("joins") or []:
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
                pending.extend(_split_and(on))
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
        rel = rel.with_cols(_joined(rel, preds), cols)
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


# --- GROUP BY and aggregates -----------------------------------------------------------------


def aggregate(
    qp: QueryPlanner,
    rel: Rel,
    k: int,
    group: exp.Expression | None,
    selects: list[exp.Expression],
    agg_nodes: list[exp.Expression],
    ctx: Context | None,
) -> tuple[Rel, Callable[[exp.Expression], Typed | None]]:
    """``Reduce`` by the context prefix and the GROUP BY keys; the override that maps
    aggregate calls and group keys onto its output for the clauses after it."""
    scope = rel.scope
    b = qp.binder(scope, "GROUP BY")
    key_nodes: list[exp.Expression] = []
    for g in group.expressions if group is not None else []:
        if isinstance(g, exp.Tuple) and not g.expressions:
            continue
        if isinstance(g, (exp.Rollup, exp.Cube, exp.GroupingSets)):
            raise qp.err(FeatureNotSupported, "GROUPING SETS, ROLLUP and CUBE", g)
        if isinstance(g, exp.Literal) and not g.is_string:
            n = int(str(g.this))
            if not 1 <= n <= len(selects):
                raise qp.err(
                    InvalidColumnReference, f"GROUP BY position {n} is not in select list", g
                )
            key_nodes.append(_strip_alias(selects[n - 1]))
        elif isinstance(g, exp.Column) and not g.table:
            try:
                scope.resolve(None, g.name, g)
                key_nodes.append(g)
            except SqlError:
                alias = next(
                    (s for s in selects if isinstance(s, exp.Alias) and s.alias == g.name), None
                )
                if alias is None:
                    raise
                key_nodes.append(alias.this)
        else:
            key_nodes.append(g)
        if find_aggregates(key_nodes[-1]):
            raise qp.err(GroupingError, "aggregate functions are not allowed in GROUP BY", g)
    keys = [b.bind(n) for n in key_nodes]
    for key_node, key_t in zip(key_nodes, keys, strict=True):
        if key_t.type.name == "unknown":
            raise qp.err(FeatureNotSupported, "GROUP BY a constant", key_node)
    aggs: list[AggregateExpr] = []
    agg_types: list[PgType] = []
    agg_index: dict[int, int] = {}
    finals: list[Callable[[ScalarExpr], ScalarExpr]] = []
    defaults: list[ScalarExpr] = []
    inner = qp.binder(scope, "aggregate")
    seen: list[tuple[exp.Expression, int]] = []
    for node in agg_nodes:
        dup = next((i for n, i in seen if n == node), None)
        if dup is not None:
            agg_index[id(node)] = dup
            continue
        agg, agg_t, final, default = _aggregate_call(qp, inner, node)
        agg_index[id(node)] = len(aggs)
        seen.append((node, len(aggs)))
        aggs.append(agg)
        agg_types.append(agg_t)
        finals.append(final)
        defaults.append(default)
    # Map the keys, reduce by prefix + keys
    base = rel.arity
    mapped: RelationExpr = rel.expr
    key_positions = list(range(k))
    plain_keys: dict[int, int] = {}
    extra: list[ScalarExpr] = []
    for i, t in enumerate(keys):
        if isinstance(t.expr, ColumnRef):
            key_positions.append(t.expr.index)
            plain_keys[t.expr.index] = k + i
        else:
            key_positions.append(base + len(extra))
            extra.append(t.expr)
    if extra:
        mapped = Map(mapped, tuple(extra))
    names = unique_names(
        [*(mapped.desc.names[p] for p in key_positions), *(a.func.value for a in aggs)]
    )
    reduced: RelationExpr = Reduce(
        mapped, tuple(key_positions), tuple(aggs), tuple(names[len(key_positions) :])
    )
    if not key_nodes:
        reduced = global_defaults(reduced, ctx.relation if ctx is not None else None, defaults)
    # finishing scalars (avg of numerics, casts back)
    nkeys = len(key_positions)
    post = [f(ColumnRef(nkeys + i)) for i, f in enumerate(finals)]
    if any(p != ColumnRef(nkeys + i) for i, p in enumerate(post)):
        width = reduced.desc.arity
        reduced = Map(reduced, tuple(post))
        reduced = project(reduced, [*range(nkeys), *range(width, width + len(post))])
    cols: list[Col] = list(scope.cols[:k])
    for key_node, key_t in zip(key_nodes, keys, strict=True):
        name = key_node.name if isinstance(key_node, exp.Column) else None
        table = key_node.table if isinstance(key_node, exp.Column) and key_node.table else None
        if isinstance(key_t.expr, ColumnRef):
            c = scope.cols[key_t.expr.index]
            name, table = c.name, c.table
        cols.append(Col(name, table, key_t.type, hidden=True))
    cols += [Col(None, None, t, hidden=True) for t in agg_types]
    out = Rel(reduced, Scope(cols, scope.parent, qp.text))

    def override(node: exp.Expression) -> Typed | None:
        if id(node) in agg_index:
            i = agg_index[id(node)]
            return Typed(ColumnRef(nkeys + i), agg_types[i])
        for i, kn in enumerate(key_nodes):
            if not isinstance(kn, exp.Column) and node == kn:
                return Typed(ColumnRef(k + i), keys[i].type)
        if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
            try:
                p = scope.resolve(node.table or None, node.name, node)
            except SqlError:
                return None
            if p < k:
                return Typed(ColumnRef(p), scope.cols[p].type)
            if p in plain_keys:
                return Typed(ColumnRef(plain_keys[p]), scope.cols[p].type)
            c = scope.cols[p]
            shown = f"{c.table}.{c.name}" if c.table else c.name
            raise qp.err(
                GroupingError,
                f'column "{shown}" must appear in the GROUP BY clause or be used in an '
                "aggregate function",
                node,
            )
        return None

    return out, override


def _aggregate_call(
    qp: QueryPlanner, b: ScalarBinder, node: exp.Expression
) -> tuple[AggregateExpr, PgType, Callable[[ScalarExpr], ScalarExpr], ScalarExpr]:
    """The IR aggregate of ``node``, its SQL type, a finishing scalar and the empty default."""
    filter_cond: ScalarExpr | None = None
    if isinstance(node, exp.Filter):
        where = node.expression
        filter_cond = b.predicate(where.this if isinstance(where, exp.Where) else where)
        node = node.this
    distinct = False
    arg = node.this
    if isinstance(arg, exp.Distinct):
        distinct = True
        if len(arg.expressions) != 1:
            raise qp.err(FeatureNotSupported, "DISTINCT over several arguments", node)
        arg = arg.expressions[0]
    if find_aggregates(arg) if arg is not None else False:
        raise qp.err(GroupingError, "aggregate function calls cannot be nested", node)

    def ident(x: ScalarExpr) -> ScalarExpr:
        return x

    def guard(x: ScalarExpr) -> ScalarExpr:
        if filter_cond is None:
            return x
        return Case(((filter_cond, x),), None)

    name = _agg_name(node)
    if name == "count":
        if isinstance(arg, exp.Star) or arg is None:
            value: ScalarExpr = guard(Literal(True, BOOL))
        else:
            value = guard(b.bind(arg).expr)
        return (
            AggregateExpr(AggregateFunc.COUNT, value, distinct),
            INT8,
            ident,
            Literal(0, INT64),
        )
    if arg is None:
        raise qp.err(UndefinedFunction, f"{name}() needs an argument", node)
    if name == "string_agg":
        return _string_agg(qp, b, node, guard, distinct)
    t = b.bind(arg)
    if t.type.name == "unknown":
        t = b.coerce(t, PG_TEXT if name in ("min", "max") else pg_numeric(numeric(38, 10)), arg)
    x = guard(t.expr)
    null = Literal(None, t.type.scalar or INT64)
    if name in ("bool_and", "bool_or", "every"):
        if t.type.name != "bool":
            raise qp.err(UndefinedFunction, f"function {name}({t.type}) does not exist", node)
        f = AggregateFunc.BOOL_AND if name in ("bool_and", "every") else AggregateFunc.BOOL_OR
        return AggregateExpr(f, x, distinct), PG_BOOL, ident, Literal(None, BOOL)
    if name in ("min", "max"):
        f = AggregateFunc.MIN if name == "min" else AggregateFunc.MAX
        if t.type.scalar is None or t.type.scalar.kind is ScalarKind.JSONB:
            raise qp.err(UndefinedFunction, f"function {name}({t.type}) does not exist", node)
        return AggregateExpr(f, x, distinct), t.type, ident, null
    if not t.type.is_numeric:
        raise qp.err(UndefinedFunction, f"function {name}({t.type}) does not exist", node)
    if name == "sum":
        if t.type.name == "int8":
            # PostgreSQL's sum(bigint) is numeric: summed in int64, then cast (so that it
            # divides as a numeric); an int64 overflow stays an error
            return (
                AggregateExpr(AggregateFunc.SUM, x, distinct),
                pg_numeric(numeric(38, 0)),
                lambda v: Cast(v, numeric(38, 0)),
                Literal(None, INT64),
            )
        if t.type.is_integer:
            out_t = INT8
        elif t.type.name == "numeric":
            assert t.type.scalar is not None
            out_t = pg_numeric(numeric(38, t.type.scalar.scale or 0))
        else:
            out_t = FLOAT8
        default = Literal(None, out_t.scalar)  # type: ignore[arg-type]
        return AggregateExpr(AggregateFunc.SUM, x, distinct), out_t, ident, default
    if name == "avg":
        if t.type.name in ("float4", "float8"):
            return (
                AggregateExpr(AggregateFunc.AVG, x, distinct),
                FLOAT8,
                ident,
                Literal(None, FLOAT64),
            )
        scale = (
            12 if t.type.is_integer else max(12, (t.type.scalar.scale or 0) if t.type.scalar else 0)
        )
        scale = min(scale, 34)
        wide = numeric(38, scale)
        out = pg_numeric(numeric(38, scale + 4))
        return (
            AggregateExpr(AggregateFunc.AVG, Cast(x, wide), distinct),
            out,
            ident,
            Literal(None, out.scalar),  # type: ignore[arg-type]
        )
    raise qp.err(UndefinedFunction, f"function {name} does not exist", node)


def _agg_name(node: exp.Expression) -> str:
    if isinstance(node, exp.Anonymous):
        return node.name.lower()
    return {
        exp.Count: "count",
        exp.Sum: "sum",
        exp.Avg: "avg",
        exp.Min: "min",
        exp.Max: "max",
        exp.LogicalAnd: "bool_and",
        exp.LogicalOr: "bool_or",
        exp.GroupConcat: "string_agg",
    }.get(type(node), type(node).__name__.lower())  # type: ignore[arg-type]


def _string_agg(
    qp: QueryPlanner,
    b: ScalarBinder,
    node: exp.Expression,
    guard: Callable[[ScalarExpr], ScalarExpr],
    distinct: bool,
) -> tuple[AggregateExpr, PgType, Callable[[ScalarExpr], ScalarExpr], ScalarExpr]:
    arg = node.this
    if isinstance(arg, exp.Distinct):
        arg = arg.expressions[0]
    order = None
    if isinstance(arg, exp.Order):
        order = arg
        arg = arg.this
    sep = node.args.get("separator")
    if isinstance(node, exp.Anonymous):
        arg, sep = node.expressions[0], node.expressions[1] if len(node.expressions) > 1 else None
    if sep is None or not isinstance(sep, exp.Literal) or not sep.is_string:
        raise qp.err(FeatureNotSupported, "string_agg needs a constant text delimiter", node)
    if order is not None:
        items = order.expressions
        if len(items) != 1 or items[0].this != arg or items[0].args.get("desc"):
            raise qp.err(
                FeatureNotSupported,
                "string_agg orders its values ascending; ORDER BY other than the value "
                "itself ascending is not supported",
                order,
            )
    t = b.bind(arg)
    t = b.coerce(t, PG_TEXT, arg, explicit=t.type.name != "unknown")
    return (
        AggregateExpr(AggregateFunc.STRING_AGG, guard(t.expr), distinct, str(sep.this)),
        PG_TEXT,
        lambda x: x,
        Literal(None, PG_TEXT.scalar),  # type: ignore[arg-type]
    )


__all__ = ["UNKNOWN", "dataclasses", "plan_select", "position"]
