"""One SELECT block: FROM → WHERE → GROUP BY → HAVING → SELECT → DISTINCT → ORDER BY/LIMIT.

The FROM clause is planned in :mod:`spate.sql.from_clause`, grouping and aggregates in
:mod:`spate.sql.aggregates`; this module orders the clauses and builds the select list."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Final

from sqlglot import exp

from spate.plan.expr import CallVariadic, ColumnRef, ScalarExpr, VariadicFunc
from spate.plan.relation import Distinct, Map, TopK
from spate.repr.types import INTERVAL, numeric
from spate.sql.aggregates import aggregate, find_aggregates, is_aggregate, strip_alias
from spate.sql.errors import (
    FeatureNotSupported,
    GroupingError,
    InvalidColumnReference,
    SqlError,
)
from spate.sql.from_clause import from_clause, joined, split_and, table_function
from spate.sql.grouping_sets import is_grouping
from spate.sql.interval_ops import canonical_rows
from spate.sql.interval_ops import key as interval_key
from spate.sql.parse import UNARY_PLUS, position
from spate.sql.query import Context, Output, QueryPlanner
from spate.sql.scalar import Typed
from spate.sql.scope import Col, Scope, project, unique_names
from spate.sql.types import PG_INTERVAL_VALUE, PG_TEXT, UNKNOWN, PgType, pg_numeric


def has_subquery(node: exp.Expression) -> bool:
    return any(isinstance(n, (exp.Subquery, exp.Exists, exp.Select)) for n in node.walk())


def interval_column(qp: QueryPlanner, t: Typed, s: exp.Expression) -> Typed:
    """An interval result column: its months, days and microseconds as PostgreSQL splits them
    (an interval value; a column of a subquery stays one)."""
    if t.type.scalar is INTERVAL:
        return t
    if t.interval_parts is None:
        raise qp.err(
            FeatureNotSupported,
            f"column {output_name(s)!r}: this interval expression cannot be a result column",
            s,
        )
    return Typed(CallVariadic(VariadicFunc.MAKE_INTERVAL, t.interval_parts), PG_INTERVAL_VALUE)


def plan_select(qp: QueryPlanner, node: exp.Select, ctx: Context | None) -> Output:
    from spate.sql.subquery import SubqueryPlanner
    from spate.sql.windows import find_windows, plan_windows, reject_windows, top_k_rewrite

    rel, pending = from_clause(qp, node, ctx)
    k = ctx.arity if ctx is not None else 0
    sq = SubqueryPlanner(qp)
    where = node.args.get("where")
    conds = list(pending)
    if where is not None:
        conds.extend(split_and(where.this))
        aggs = [a for c in conds for a in find_aggregates(c)]
        if aggs:
            what = "grouping operations" if is_grouping(aggs[0]) else "aggregate functions"
            raise qp.err(GroupingError, f"{what} are not allowed in WHERE", aggs[0])
    for c in conds:
        reject_windows(qp, c, "WHERE")
    plain = [c for c in conds if not has_subquery(c)]
    nested = [c for c in conds if has_subquery(c)]
    if plain:
        b = qp.binder(rel.scope, "WHERE")
        preds = [b.predicate(c) for c in plain]
        rel = rel.with_cols(top_k_rewrite(joined(rel, preds)), rel.scope.cols)
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
                rel = rel.with_cols(joined(rel, [b.predicate(having.this)]), rel.scope.cols)

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
        if t.type.name == "interval":
            t = interval_column(qp, t, s)
        elif t.type.scalar is None:
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
        match = next((i for i, s in enumerate(selects) if strip_alias(s) == o.this), None)
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
    for n, (column, o) in enumerate(orders):  # an interval sorts by its span
        width = rel.arity
        kind = rel.scope.cols[column].type if column < width else extra_types[column - width]
        if kind.name == "interval":
            source = ColumnRef(column) if column < width else extra[column - width]
            orders[n] = (width + len(extra), o)
            extra.append(interval_key(source))
            extra_types.append(pg_numeric(numeric(38, 0)))
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
            rel = rel.with_cols(Distinct(canonical_rows(rel.expr)), rel.scope.cols)
        else:
            on_positions: list[int] = []
            for e in on.expressions:
                p = _output_ref(qp, e, names)
                if p is None:
                    p = next((i for i, s in enumerate(selects) if strip_alias(s) == e), None)
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


def output_name(node: exp.Expression) -> str:
    """PostgreSQL's name for a select item."""
    if isinstance(node, exp.Alias):
        return node.alias
    n = node
    while isinstance(n, (exp.Paren,)) and not n.meta.get(UNARY_PLUS):
        n = n.this
    if isinstance(n, exp.Column):
        return n.name
    if isinstance(n, (exp.Cast, exp.TryCast)):
        # PostgreSQL names a cast after what it casts when that has a name of its own (a
        # column, a function call, a cast of one: count(*)::int is "count"), else its type
        inner = output_name(n.this)
        if inner not in _WEAK_NAMES:
            return inner
        return _type_output_name(n.args["to"])
    if isinstance(n, exp.Window):  # PostgreSQL names a window call after its function
        n = n.this
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


_WEAK_NAMES: Final = frozenset({"?column?", "case"})
"""Names PostgreSQL gives an expression that a cast of it does not keep (a constant, an
operator, a CASE: ``CASE … END::text`` is ``text``)."""


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


__all__ = [
    "UNKNOWN",
    "dataclasses",
    "find_aggregates",
    "from_clause",
    "has_subquery",
    "is_aggregate",
    "plan_select",
    "position",
    "table_function",
]
