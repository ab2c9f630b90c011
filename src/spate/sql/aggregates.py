"""GROUP BY and aggregates of a SELECT block: finding aggregate calls, planning the Reduce
and binding the expressions above it."""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from spate.plan.aggregate import AggregateExpr, AggregateFunc, avg_scale
from spate.plan.expr import CallVariadic, Case, Cast, ColumnRef, Literal, ScalarExpr, VariadicFunc
from spate.plan.finishing import ColumnOrder
from spate.plan.relation import Map, Reduce, RelationExpr
from spate.plan.window import DEFAULT_FRAME, WindowExpr, WindowFunc, rows_between
from spate.repr.types import BOOL, FLOAT64, INT64, ScalarKind, numeric
from spate.sql import interval_aggs, interval_ops
from spate.sql.errors import (
    FeatureNotSupported,
    GroupingError,
    InvalidColumnReference,
    SqlError,
    UndefinedFunction,
)
from spate.sql.group_windows import GroupWindow, with_group_windows
from spate.sql.grouping_sets import GROUPING_CALLS, expand, has_grouping_sets, union_of_reduces
from spate.sql.query import Context, QueryPlanner
from spate.sql.relops import global_defaults
from spate.sql.scalar import ScalarBinder, Typed
from spate.sql.scope import Col, Rel, Scope, project, unique_names
from spate.sql.types import (
    FLOAT4,
    FLOAT8,
    INT4,
    INT8,
    PG_BOOL,
    PG_INTERVAL_VALUE,
    PG_TEXT,
    PgType,
    pg_numeric,
)

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
    """An aggregate call, or a ``grouping(…)`` call (which, like one, is evaluated per group)."""
    if isinstance(node, exp.Filter):
        return is_aggregate(node.this)
    if isinstance(node, (*_AGGS, *GROUPING_CALLS)):
        return True
    return isinstance(node, exp.Anonymous) and node.name.lower() in _ANONYMOUS_AGGREGATES


_ANONYMOUS_AGGREGATES = ("every", "some", "string_agg")


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

    def resolve(g: exp.Expression) -> exp.Expression:
        """A grouping element as written → the expression it groups by."""
        out: exp.Expression = g
        if isinstance(g, exp.Literal) and not g.is_string:
            n = int(str(g.this))
            if not 1 <= n <= len(selects):
                raise qp.err(
                    InvalidColumnReference, f"GROUP BY position {n} is not in select list", g
                )
            out = strip_alias(selects[n - 1])
        elif isinstance(g, exp.Column) and not g.table:
            try:
                scope.resolve(None, g.name, g)
            except SqlError:
                alias = next(
                    (s for s in selects if isinstance(s, exp.Alias) and s.alias == g.name), None
                )
                if alias is None:
                    raise
                out = alias.this
        if find_aggregates(out):
            raise qp.err(GroupingError, "aggregate functions are not allowed in GROUP BY", g)
        return out

    key_nodes: list[exp.Expression] = []
    sets: list[list[int]] | None = None
    if has_grouping_sets(group):
        assert group is not None
        key_nodes, sets = expand(group, resolve)
    else:
        for g in group.expressions if group is not None else []:
            if isinstance(g, exp.Tuple) and not g.expressions:
                continue
            key_nodes.append(resolve(g))
    grouping_nodes = [n for n in agg_nodes if isinstance(n, GROUPING_CALLS)]
    agg_nodes = [n for n in agg_nodes if not isinstance(n, GROUPING_CALLS)]
    if grouping_nodes and sets is None:
        sets = [list(range(len(key_nodes)))]
    keys = [b.bind(n) for n in key_nodes]
    if sets is None:  # GROUP BY a, a groups by a once (PostgreSQL); GROUPING keeps positions
        first = [i for i, t in enumerate(keys) if all(t.expr != u.expr for u in keys[:i])]
        key_nodes, keys = [key_nodes[i] for i in first], [keys[i] for i in first]
    canon_cols: dict[int, int] = {}  # interval columns grouped by their canonical value
    for i, (key_node, key_t) in enumerate(zip(key_nodes, keys, strict=True)):
        if interval_ops.is_interval(key_t):
            if isinstance(key_t.expr, ColumnRef):
                canon_cols[key_t.expr.index] = k + i
            iv = interval_ops.value(b, key_t, key_node)
            keys[i] = Typed(interval_ops.canonical(iv), PG_INTERVAL_VALUE)
    for key_node, key_t in zip(key_nodes, keys, strict=True):
        if key_t.type.name == "unknown":
            raise qp.err(FeatureNotSupported, "GROUP BY a constant", key_node)
    aggs: list[AggregateExpr | GroupWindow] = []  # the Reduce's, several for some calls
    agg_types: list[PgType] = []  # per call
    agg_index: dict[int, int] = {}  # a call's node → its index among the calls
    slots: list[range] = []  # per call: its aggregates in ``aggs``
    finals: list[Callable[[list[ScalarExpr]], ScalarExpr]] = []  # per call, of its aggregates
    defaults: list[ScalarExpr] = []  # per aggregate
    inner = qp.binder(scope, "aggregate")
    seen: list[tuple[exp.Expression, int]] = []
    for node in agg_nodes:
        dup = next((i for n, i in seen if n == node), None)
        if dup is not None:
            agg_index[id(node)] = dup
            continue
        agg_index[id(node)] = len(slots)
        seen.append((node, len(slots)))
        call = _aggregate_call(qp, inner, node)
        if isinstance(call, interval_aggs.Lowered):
            slots.append(range(len(aggs), len(aggs) + len(call.aggs)))
            aggs.extend(call.aggs)
            agg_types.append(PG_INTERVAL_VALUE)
            finals.append(call.final)
            defaults.extend(call.defaults)
            continue
        agg, agg_t, final, default = call
        slots.append(range(len(aggs), len(aggs) + 1))
        aggs.append(agg)
        agg_types.append(agg_t)
        finals.append(lambda cols, f=final: f(cols[0]))  # type: ignore[misc]
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
    plain_keys.update(canon_cols)
    if extra:
        mapped = Map(mapped, tuple(extra))
    if sets is not None:
        windowed = [
            n for n in agg_nodes if isinstance(aggs[slots[agg_index[id(n)]][0]], GroupWindow)
        ]
        ordered = windowed[0] if windowed else None
        if ordered is not None:
            raise qp.err(
                FeatureNotSupported,
                "string_agg ordered other than by its value, or count(DISTINCT (…)), with "
                "GROUPING SETS, ROLLUP or CUBE",
                ordered,
            )
    mapped, reduce_aggs = with_group_windows(mapped, key_positions, aggs)
    names = unique_names(
        [*(mapped.desc.names[p] for p in key_positions), *(a.func.value for a in reduce_aggs)]
    )
    context = ctx.relation if ctx is not None else None
    grouping_args = [_grouping_args(qp, b, n, keys) for n in grouping_nodes]
    reduced: RelationExpr
    if sets is not None:
        reduced = union_of_reduces(
            mapped,
            prefix=k,
            key_positions=key_positions[k:],
            key_types=[t.type.scalar or INT64 for t in keys],
            sets=sets,
            aggregates=reduce_aggs,
            names=names,
            defaults=defaults,
            grouping_args=grouping_args,
            context=context,
        )
    else:
        reduced = Reduce(
            mapped, tuple(key_positions), reduce_aggs, tuple(names[len(key_positions) :])
        )
        if not key_nodes:
            reduced = global_defaults(reduced, context, defaults)
    # finishing scalars (avg of numerics, casts back)
    nkeys = len(key_positions)
    post = [f([ColumnRef(nkeys + j) for j in slot]) for f, slot in zip(finals, slots, strict=True)]
    if len(post) != len(aggs) or any(p != ColumnRef(nkeys + i) for i, p in enumerate(post)):
        width = reduced.desc.arity
        reduced = Map(reduced, tuple(post))
        bits_at = nkeys + len(aggs)
        reduced = project(
            reduced,
            [
                *range(nkeys),
                *range(width, width + len(post)),
                *range(bits_at, bits_at + len(grouping_nodes)),
            ],
        )
    cols: list[Col] = list(scope.cols[:k])
    for key_node, key_t in zip(key_nodes, keys, strict=True):
        name = key_node.name if isinstance(key_node, exp.Column) else None
        table = key_node.table if isinstance(key_node, exp.Column) and key_node.table else None
        if isinstance(key_t.expr, ColumnRef):
            c = scope.cols[key_t.expr.index]
            name, table = c.name, c.table
        cols.append(Col(name, table, key_t.type, hidden=True))
    cols += [Col(None, None, t, hidden=True) for t in agg_types]
    cols += [Col(None, None, _grouping_type(n), hidden=True) for n in grouping_nodes]
    out = Rel(reduced, Scope(cols, scope.parent, qp.text))
    grouping_index = {id(n): i for i, n in enumerate(grouping_nodes)}

    def override(node: exp.Expression) -> Typed | None:
        if id(node) in agg_index:
            i = agg_index[id(node)]
            return Typed(ColumnRef(nkeys + i), agg_types[i])
        if id(node) in grouping_index:
            i = grouping_index[id(node)]
            return Typed(ColumnRef(nkeys + len(slots) + i), _grouping_type(node))
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


def _grouping_type(node: exp.Expression) -> PgType:
    return INT8 if isinstance(node, exp.GroupingId) else INT4


def _grouping_args(
    qp: QueryPlanner, b: ScalarBinder, node: exp.Expression, keys: list[Typed]
) -> list[int]:
    """The positions among the grouping keys of a ``grouping(…)`` call's arguments (Spark's
    ``grouping_id()`` without arguments: every key)."""
    if isinstance(node, exp.GroupingId) and not node.expressions:
        return list(range(len(keys)))
    if len(node.expressions) > 31:
        raise qp.err(SqlError, "GROUPING must have fewer than 32 arguments", node)
    out = []
    for arg in node.expressions:
        bound = b.bind(arg).expr if not find_aggregates(arg) else None
        hit = next((i for i, t in enumerate(keys) if t.expr == bound), None)
        if hit is None:
            raise qp.err(
                GroupingError,
                "arguments to GROUPING must be grouping expressions of the associated query level",
                arg,
            )
        out.append(hit)
    return out


def _aggregate_call(
    qp: QueryPlanner, b: ScalarBinder, node: exp.Expression
) -> (
    tuple[AggregateExpr | GroupWindow, PgType, Callable[[ScalarExpr], ScalarExpr], ScalarExpr]
    | interval_aggs.Lowered
):
    """The IR aggregate of ``node``, its SQL type, a finishing scalar and the empty default
    (or, for an interval aggregate, the aggregates it is made of)."""
    filter_cond: ScalarExpr | None = None
    if isinstance(node, exp.Filter):
        where = node.expression
        filter_cond = b.predicate(where.this if isinstance(where, exp.Where) else where)
        node = node.this
    distinct = False
    arg = node.this
    if isinstance(node, exp.Anonymous):  # every(x), some(x): the argument is in expressions
        arg = node.expressions[0] if node.expressions else None
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
    if name == "count" and isinstance(arg, exp.Tuple):
        return _count_rows(qp, b, node, arg, distinct, filter_cond)
    if name == "count":
        if isinstance(arg, exp.Star) or arg is None:
            value: ScalarExpr = guard(Literal(True, BOOL))
        else:
            counted = b.bind(arg)
            if distinct and interval_ops.is_interval(counted):  # distinct by the span
                counted = Typed(interval_ops.key(interval_ops.value(b, counted, arg)), INT8)
            value = guard(counted.expr)
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
    if name in ("bool_and", "bool_or", "every", "some"):
        if t.type.name != "bool":
            raise qp.err(UndefinedFunction, f"function {name}({t.type}) does not exist", node)
        f = AggregateFunc.BOOL_AND if name in ("bool_and", "every") else AggregateFunc.BOOL_OR
        return AggregateExpr(f, x, distinct), PG_BOOL, ident, Literal(None, BOOL)
    if name in interval_aggs.AGGREGATES and interval_ops.is_interval(t):
        # min and max by the span (the span's canonical interval), sum and avg by the fields
        return interval_aggs.lower(name, interval_ops.value(b, t, arg), guard, distinct)
    if name in ("min", "max"):
        f = AggregateFunc.MIN if name == "min" else AggregateFunc.MAX
        if t.type.scalar is None or t.type.scalar.kind is ScalarKind.JSONB:
            raise qp.err(UndefinedFunction, f"function {name}({t.type}) does not exist", node)
        return AggregateExpr(f, x, distinct), t.type, ident, null
    if not t.type.is_numeric:
        raise qp.err(UndefinedFunction, f"function {name}({t.type}) does not exist", node)
    if name == "sum":
        if t.type.name == "int8":
            # PostgreSQL's sum(bigint) is numeric: summed as numeric, so a total beyond int64
            # is a value, not an overflow
            return (
                AggregateExpr(AggregateFunc.SUM, guard(Cast(t.expr, numeric(19, 0))), distinct),
                pg_numeric(numeric(38, 0)),
                ident,
                Literal(None, numeric(38, 0)),
            )
        if t.type.is_integer:
            out_t = INT8
        elif t.type.name == "float4":
            # sum(real) is real: summed in double precision, rounded to single at the end
            return (
                AggregateExpr(AggregateFunc.SUM, x, distinct),
                FLOAT4,
                lambda e: CallVariadic(VariadicFunc.FLOAT4, (e,)),
                Literal(None, FLOAT64),
            )
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
        # PostgreSQL's avg of integers and numerics: the numeric sum divided by the count
        arg = x if t.type.name == "numeric" else guard(Cast(t.expr, numeric(19, 0)))
        scale = (t.type.scalar.scale or 0) if t.type.name == "numeric" and t.type.scalar else 0
        out = pg_numeric(numeric(38, avg_scale(scale)))
        return (
            AggregateExpr(AggregateFunc.AVG, arg, distinct),
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


def _count_rows(
    qp: QueryPlanner,
    b: ScalarBinder,
    node: exp.Expression,
    row: exp.Tuple,
    distinct: bool,
    filter_cond: ScalarExpr | None,
) -> tuple[AggregateExpr | GroupWindow, PgType, Callable[[ScalarExpr], ScalarExpr], ScalarExpr]:
    """``count((a, b))`` (a row value is never NULL: every row counts) and ``count(DISTINCT
    (a, b))`` (the distinct rows of values, NULLs equal: :mod:`spate.sql.group_windows`)."""
    fields = [b.bind(x) for x in row.expressions]
    zero = Literal(0, INT64)
    if not distinct:
        value: ScalarExpr = Literal(True, BOOL)
        if filter_cond is not None:
            value = Case(((filter_cond, value),), None)
        return AggregateExpr(AggregateFunc.COUNT, value), INT8, lambda x: x, zero
    if filter_cond is not None:
        raise qp.err(FeatureNotSupported, "count(DISTINCT (…)) with FILTER", node)
    order = tuple((t.expr, ColumnOrder(0)) for t in fields)
    return (
        GroupWindow(WindowExpr(WindowFunc.DENSE_RANK), order, DEFAULT_FRAME),
        INT8,
        lambda x: x,
        zero,
    )


def _string_agg(
    qp: QueryPlanner,
    b: ScalarBinder,
    node: exp.Expression,
    guard: Callable[[ScalarExpr], ScalarExpr],
    distinct: bool,
) -> tuple[AggregateExpr | GroupWindow, PgType, Callable[[ScalarExpr], ScalarExpr], ScalarExpr]:
    arg = node.this
    if isinstance(arg, exp.Distinct):
        arg = arg.expressions[0]
    order = None
    if isinstance(arg, exp.Order):
        order = arg
        arg = arg.this
        if isinstance(arg, exp.Distinct):  # string_agg(DISTINCT v, d ORDER BY v)
            distinct, arg = True, arg.expressions[0]
    sep = node.args.get("separator")
    if isinstance(node, exp.Anonymous):
        arg, sep = node.expressions[0], node.expressions[1] if len(node.expressions) > 1 else None
    if sep is None or not isinstance(sep, exp.Literal) or not sep.is_string:
        raise qp.err(FeatureNotSupported, "string_agg needs a constant text delimiter", node)
    sorted_by_value = order is None or (
        len(order.expressions) == 1
        and order.expressions[0].this == arg
        and not order.expressions[0].args.get("desc")
    )
    if order is not None and not sorted_by_value and distinct:
        raise qp.err(
            FeatureNotSupported,
            "string_agg(DISTINCT …) orders its values ascending; ORDER BY other than the value "
            "itself ascending is not supported",
            order,
        )
    t = b.bind(arg)
    t = b.coerce(t, PG_TEXT, arg, explicit=t.type.name != "unknown")
    call = AggregateExpr(AggregateFunc.STRING_AGG, guard(t.expr), distinct, str(sep.this))
    if order is not None and not sorted_by_value:
        keys = tuple((_order_key(b, o.this), qp.column_order(0, o)) for o in order.expressions)
        whole = rows_between(None, None)
        return (
            GroupWindow(call, keys, whole),
            PG_TEXT,
            lambda x: x,
            Literal(None, PG_TEXT.scalar),  # type: ignore[arg-type]
        )
    return (
        call,
        PG_TEXT,
        lambda x: x,
        Literal(None, PG_TEXT.scalar),  # type: ignore[arg-type]
    )


def _order_key(b: ScalarBinder, node: exp.Expression) -> ScalarExpr:
    t = b.bind(node)
    if t.type.name == "unknown":
        t = b.coerce(t, PG_TEXT, node)
    return t.expr


def strip_alias(node: exp.Expression) -> exp.Expression:
    return node.this if isinstance(node, exp.Alias) else node
