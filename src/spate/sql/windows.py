"""Window functions: ``f(…) OVER (PARTITION BY … ORDER BY …)`` → the IR's ``Window`` node.

Windows are computed after GROUP BY/HAVING and before the SELECT list, DISTINCT and ORDER BY:
the partition keys, order keys and arguments are mapped as columns, and the functions of one
partitioning and order become one ``Window`` node, each with its own frame (so that, as in
PostgreSQL, they read the same positions of one ordering even among identical rows); different
partitionings or orders stack nodes. Supported: ``row_number``, ``rank``, ``dense_rank``,
``percent_rank``, ``cume_dist``, ``ntile``, ``lag``, ``lead``, ``first_value``, ``last_value``,
``nth_value`` and ``count``/``sum``/``avg``/``min``/``max``/``bool_and``/``bool_or``/
``string_agg`` over ``ROWS BETWEEN`` any bounds or ``RANGE BETWEEN`` UNBOUNDED/CURRENT ROW
bounds (PostgreSQL's default when none is given); ``RANGE`` with offsets, ``GROUPS`` and
``EXCLUDE`` are refused.

:func:`top_k_rewrite` turns ``… WHERE rn <= k`` over ``row_number() OVER (PARTITION BY p ORDER
BY o) AS rn`` into a ``TopK`` (the same rows: both break ties by the whole row) with the
``Window`` numbering only the ``k`` rows kept per partition.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from spate.plan.aggregate import AggregateExpr, AggregateFunc, avg_scale
from spate.plan.errors import PlanTypeError
from spate.plan.expr import (
    BinaryFunc,
    CallBinary,
    CallVariadic,
    Case,
    Cast,
    ColumnRef,
    Literal,
    ScalarExpr,
    VariadicFunc,
)
from spate.plan.finishing import ColumnOrder
from spate.plan.relation import Filter, Map, Project, RelationExpr, TopK
from spate.plan.window import (
    DEFAULT_FRAME,
    FrameMode,
    Window,
    WindowExpr,
    WindowFrame,
    WindowFunc,
)
from spate.repr.types import BOOL, FLOAT64, INT64, numeric
from spate.sql import interval_aggs, interval_ops
from spate.sql.binding import BinderBase
from spate.sql.errors import FeatureNotSupported, UndefinedFunction, WindowingError
from spate.sql.query import QueryPlanner
from spate.sql.scalar import ScalarBinder, Typed
from spate.sql.scope import Col, Rel, unique_names
from spate.sql.types import (
    FLOAT4,
    FLOAT8,
    INT4,
    INT8,
    PG_BOOL,
    PG_INTERVAL_VALUE,
    PgType,
    common_type,
    from_scalar,
    pg_numeric,
)

Override = Callable[[exp.Expression], "Typed | None"]

_RANKING = {
    exp.RowNumber: WindowFunc.ROW_NUMBER,
}


def find_windows(node: exp.Expression) -> list[exp.Window]:
    out: list[exp.Window] = []

    def go(n: exp.Expression) -> None:
        if isinstance(n, (exp.Subquery, exp.Select, exp.Exists)):
            return
        if isinstance(n, exp.Window):
            out.append(n)
            return
        for child in n.iter_expressions():
            go(child)

    go(node)
    return out


def reject_windows(qp: QueryPlanner, node: exp.Expression, clause: str) -> None:
    found = find_windows(node)
    if found:
        raise qp.err(WindowingError, f"window functions are not allowed in {clause}", found[0])


def plan_windows(
    qp: QueryPlanner,
    rel: Rel,
    windows: list[exp.Window],
    named: dict[str, exp.Window],
    override: Override | None,
) -> tuple[Rel, Override]:
    """``rel`` with one column per window call appended; the override mapping each call onto
    its column."""
    found: dict[int, Typed] = {}
    groups: dict[
        tuple[tuple[int, ...], tuple[ColumnOrder, ...]],
        list[tuple[exp.Window, object, PgType, WindowFrame]],
    ] = {}  # a call: a WindowExpr, an AggregateExpr, or the aggregates of an interval's
    binder = qp.binder(rel.scope, "window", override)
    extra: list[ScalarExpr] = []
    extra_types: list[PgType] = []
    base = rel.arity

    def column_of(node: exp.Expression) -> int:
        t = binder.bind(node)
        if interval_ops.is_interval(t):  # partitioned and ordered by the span
            span = interval_ops.key(interval_ops.value(binder, t, node))
            t = Typed(span, pg_numeric(numeric(38, 0)))
        if t.type.name == "unknown":
            t = binder.coerce(t, t.type if t.type.scalar else _text(), node)
        if isinstance(t.expr, ColumnRef):
            return t.expr.index
        extra.append(t.expr)
        extra_types.append(t.type)
        return base + len(extra) - 1

    for w in windows:
        spec = _resolve_named(qp, w, named)
        partition = tuple(column_of(p) for p in spec.args.get("partition_by") or [])
        order_node = spec.args.get("order")
        orders = tuple(
            qp.column_order(column_of(o.this), o)
            for o in (order_node.expressions if order_node else [])
        )
        frame = _frame(qp, binder, spec.args.get("spec"), w)
        call, t = _call(qp, binder, w.this, column_of)
        groups.setdefault((partition, orders), []).append((w, call, t, frame))
    if extra:
        names = unique_names([*rel.expr.desc.names, *(f"w{i}" for i in range(len(extra)))])
        expr: RelationExpr = Map(rel.expr, tuple(extra), tuple(names[base:]))
        rel = rel.with_cols(
            expr, rel.scope.cols + [Col(None, None, t, hidden=True) for t in extra_types]
        )
    for (partition, orders), calls in groups.items():
        at = rel.arity
        funcs = tuple(f for _, c, _, _ in calls for f in _funcs(c))
        frames = tuple(fr for _, c, _, fr in calls for _ in _funcs(c))
        names = unique_names([*rel.expr.desc.names, *(f"win{i}" for i in range(len(funcs)))])[at:]
        window = Window(rel.expr, partition, orders, funcs, tuple(names), frames)  # type: ignore[arg-type]
        cols = list(rel.scope.cols)
        i = 0
        for w, c, t, _ in calls:
            if isinstance(c, interval_aggs.Lowered):
                refs = [ColumnRef(at + i + j) for j in range(len(c.aggs))]
                found[id(w)] = Typed(c.final(refs), t)
                out_cols = window.desc.columns[at + i : at + i + len(c.aggs)]
                cols += [Col(None, None, from_scalar(oc.type), hidden=True) for oc in out_cols]
                i += len(c.aggs)
                continue
            value: ScalarExpr = ColumnRef(at + i)
            if t.name == "numeric" and window.desc.columns[at + i].type.kind.value == "int64":
                value = Cast(value, numeric(38, 0))
            found[id(w)] = Typed(value, t)
            cols.append(
                Col(
                    None,
                    None,
                    INT8
                    if t.name == "numeric"
                    and window.desc.columns[at + i].type.kind.value == "int64"
                    else t,
                    hidden=True,
                )
            )
            i += 1
        rel = rel.with_cols(window, cols)
        # avg over integers / numerics: finish as numeric (PostgreSQL's type)

    def combined(n: exp.Expression) -> Typed | None:
        if id(n) in found:
            return found[id(n)]
        return override(n) if override is not None else None

    return rel, combined


def _constant_count(
    qp: QueryPlanner, binder: BinderBase, node: exp.Expression | None, what: str
) -> int:
    """A positive integer constant argument (1 when absent)."""
    if node is None:
        return 1
    t = binder.bind(node)
    if not isinstance(t.expr, Literal) or not isinstance(t.expr.value, int) or t.expr.value < 1:
        raise qp.err(FeatureNotSupported, f"{what}: the argument must be a positive constant", node)
    return t.expr.value


def _text() -> PgType:
    from spate.sql.types import PG_TEXT

    return PG_TEXT


def _resolve_named(qp: QueryPlanner, w: exp.Window, named: dict[str, exp.Window]) -> exp.Window:
    alias = w.args.get("alias")
    if alias is None:
        return w
    base = named.get(alias.name)
    if base is None:
        raise qp.err(WindowingError, f'window "{alias.name}" does not exist', w)
    merged = base.copy()
    for key in ("order", "spec"):
        if w.args.get(key) is not None:
            merged.set(key, w.args[key])
    return merged


def _frame(
    qp: QueryPlanner, binder: BinderBase, spec: exp.Expression | None, w: exp.Window
) -> WindowFrame:
    """The frame clause as a :class:`WindowFrame` (none: PostgreSQL's default)."""
    if spec is None:
        return DEFAULT_FRAME
    kind = str(spec.args.get("kind") or "RANGE").upper()
    if kind not in ("ROWS", "RANGE"):
        raise qp.err(FeatureNotSupported, f"{kind} window frames are not supported", spec)
    exclude = spec.args.get("exclude")
    if exclude is not None and " ".join(str(exclude.name).upper().split()) != "NO OTHERS":
        raise qp.err(FeatureNotSupported, "EXCLUDE in a window frame is not supported", spec)

    def bound(node: object, side: object, end: bool) -> int | None:
        side_text = str(side or "").upper()
        if node is None:  # ROWS n PRECEDING: the end is the current row
            return 0
        if isinstance(node, str):
            text = node.upper()
            if text == "CURRENT ROW":
                return 0
            if text == "UNBOUNDED":
                if side_text == ("PRECEDING" if end else "FOLLOWING"):
                    which = "end" if end else "start"
                    raise qp.err(
                        WindowingError, f"frame {which} cannot be UNBOUNDED {side_text}", spec
                    )
                return None
        assert isinstance(node, exp.Expression)
        if kind == "RANGE":
            raise qp.err(
                FeatureNotSupported,
                "RANGE with offset PRECEDING/FOLLOWING is not supported (use ROWS)",
                node,
            )
        t = binder.bind(node)
        value = t.expr.value if isinstance(t.expr, Literal) else None
        if not isinstance(value, int) or isinstance(value, bool):
            raise qp.err(
                FeatureNotSupported, "a window frame offset must be an integer constant", node
            )
        if value < 0:
            which = "ending" if end else "starting"
            raise qp.err(WindowingError, f"frame {which} offset must not be negative", node)
        return -value if side_text == "PRECEDING" else value

    start = bound(spec.args.get("start"), spec.args.get("start_side"), False)
    end = bound(spec.args.get("end"), spec.args.get("end_side"), True)
    mode = FrameMode.ROWS if kind == "ROWS" else FrameMode.RANGE
    try:
        return WindowFrame(mode, start, end)
    except PlanTypeError as e:
        raise qp.err(WindowingError, str(e), spec) from None


def _call(
    qp: QueryPlanner,
    binder: object,
    fn: exp.Expression,
    column_of: Callable[[exp.Expression], int],
) -> tuple[WindowExpr | AggregateExpr | interval_aggs.Lowered, PgType]:
    from spate.sql.scalar import ScalarBinder

    assert isinstance(binder, ScalarBinder)
    filter_cond: ScalarExpr | None = None
    if isinstance(fn, exp.Filter):
        where = fn.expression
        filter_cond = binder.predicate(where.this if isinstance(where, exp.Where) else where)
        fn = fn.this
    if isinstance(fn, exp.RowNumber):
        return WindowExpr(WindowFunc.ROW_NUMBER), INT8
    name = fn.name.lower() if isinstance(fn, exp.Anonymous) else type(fn).__name__.lower()
    if name in ("rank", "denserank", "dense_rank"):
        f = WindowFunc.RANK if name == "rank" else WindowFunc.DENSE_RANK
        return WindowExpr(f), INT8
    if isinstance(fn, (exp.Lag, exp.Lead)) or name in ("lag", "lead"):
        f = WindowFunc.LAG if name == "lag" else WindowFunc.LEAD
        x = binder.bind(fn.this)
        offset = 1
        off_node = fn.args.get("offset")
        if off_node is not None:
            off = binder.bind(off_node)
            if not isinstance(off.expr, Literal) or not isinstance(off.expr.value, int):
                raise qp.err(
                    FeatureNotSupported, f"{name}: the offset must be an integer constant", off_node
                )
            offset = off.expr.value
        default_node = fn.args.get("default")
        default: ScalarExpr | None = None
        t = x.type
        if default_node is not None:
            d = binder.bind(default_node)
            target = common_type([x.type, d.type])
            if target is None:
                raise qp.err(UndefinedFunction, f"{name}: default of another type", default_node)
            x = binder.coerce(x, target, fn.this)
            default = binder.coerce(d, target, default_node).expr
            t = target
        if t.name == "unknown":
            x = binder.coerce(x, _text(), fn.this)
            t = x.type
        return WindowExpr(f, x.expr, offset, default), t
    if isinstance(fn, (exp.FirstValue, exp.LastValue, exp.NthValue)):
        f = {
            exp.FirstValue: WindowFunc.FIRST_VALUE,
            exp.LastValue: WindowFunc.LAST_VALUE,
            exp.NthValue: WindowFunc.NTH_VALUE,
        }[type(fn)]
        x = binder.bind(fn.this)
        if x.type.name == "unknown":
            x = binder.coerce(x, _text(), fn.this)
        n = _constant_count(qp, binder, fn.args.get("offset"), f.value)
        return WindowExpr(f, x.expr, n), x.type
    if isinstance(fn, exp.Ntile):
        return WindowExpr(
            WindowFunc.NTILE, None, _constant_count(qp, binder, fn.this, "ntile")
        ), INT4
    if isinstance(fn, (exp.PercentRank, exp.CumeDist)):
        f = WindowFunc.PERCENT_RANK if isinstance(fn, exp.PercentRank) else WindowFunc.CUME_DIST
        return WindowExpr(f), FLOAT8
    if isinstance(fn, exp.GroupConcat) or name == "string_agg":
        return _string_agg(qp, binder, fn, filter_cond), _text()
    agg_name = {
        exp.Count: "count",
        exp.Sum: "sum",
        exp.Avg: "avg",
        exp.Min: "min",
        exp.Max: "max",
        exp.LogicalAnd: "bool_and",
        exp.LogicalOr: "bool_or",
    }.get(type(fn))  # type: ignore[arg-type]
    if agg_name is None:
        raise qp.err(UndefinedFunction, f"window function {name} is not supported", fn)
    arg = fn.this
    if isinstance(arg, exp.Distinct):
        raise qp.err(FeatureNotSupported, "DISTINCT is not implemented for window functions", fn)

    def guard(x: ScalarExpr) -> ScalarExpr:
        return x if filter_cond is None else Case(((filter_cond, x),), None)

    if agg_name == "count":
        value: ScalarExpr = (
            Literal(True, BOOL)
            if arg is None or isinstance(arg, exp.Star)
            else binder.bind(arg).expr
        )
        return AggregateExpr(AggregateFunc.COUNT, guard(value)), INT8
    t_arg = binder.bind(arg)
    if agg_name in ("bool_and", "bool_or"):
        f_agg = AggregateFunc.BOOL_AND if agg_name == "bool_and" else AggregateFunc.BOOL_OR
        return AggregateExpr(f_agg, guard(t_arg.expr)), PG_BOOL
    if agg_name in interval_aggs.AGGREGATES and interval_ops.is_interval(t_arg):
        # min and max by the span (the span's canonical interval), sum and avg by the fields
        iv = interval_ops.value(binder, t_arg, arg)
        return interval_aggs.lower(agg_name, iv, guard), PG_INTERVAL_VALUE
    if agg_name in ("min", "max"):
        f_agg = AggregateFunc.MIN if agg_name == "min" else AggregateFunc.MAX
        return AggregateExpr(f_agg, guard(t_arg.expr)), t_arg.type
    if not t_arg.type.is_numeric:
        raise qp.err(UndefinedFunction, f"function {agg_name}({t_arg.type}) does not exist", fn)
    if agg_name == "sum":
        if t_arg.type.name == "int8":
            # PostgreSQL's sum(bigint) is numeric: summed as numeric (no overflow at 2**63)
            summed = guard(Cast(t_arg.expr, numeric(19, 0)))
            return AggregateExpr(AggregateFunc.SUM, summed), pg_numeric(numeric(38, 0))
        if t_arg.type.is_integer:
            out = INT8
        elif t_arg.type.name == "float4":
            # sum(real) is real: summed in double precision, rounded to single per row
            total = AggregateExpr(AggregateFunc.SUM, guard(t_arg.expr))
            rounded = interval_aggs.Lowered(
                (total,),
                lambda c: CallVariadic(VariadicFunc.FLOAT4, (c[0],)),
                (Literal(None, FLOAT64),),
            )
            return rounded, FLOAT4
        elif t_arg.type.name == "numeric":
            assert t_arg.type.scalar is not None
            out = pg_numeric(numeric(38, t_arg.type.scalar.scale or 0))
        else:
            out = FLOAT8
        return AggregateExpr(AggregateFunc.SUM, guard(t_arg.expr)), out
    if t_arg.type.name in ("float4", "float8"):
        return AggregateExpr(AggregateFunc.AVG, guard(t_arg.expr)), FLOAT8
    # PostgreSQL's avg of integers and numerics: the numeric sum divided by the count
    numeric_arg = t_arg.type.name == "numeric" and t_arg.type.scalar is not None
    arg = t_arg.expr if numeric_arg else Cast(t_arg.expr, numeric(19, 0))
    scale = (t_arg.type.scalar.scale or 0) if numeric_arg and t_arg.type.scalar else 0
    return (
        AggregateExpr(AggregateFunc.AVG, guard(arg)),
        pg_numeric(numeric(38, avg_scale(scale))),
    )


def _string_agg(
    qp: QueryPlanner, binder: ScalarBinder, fn: exp.Expression, filter_cond: ScalarExpr | None
) -> AggregateExpr:
    """``string_agg(value, 'delimiter')`` over the frame, in the frame's order."""
    if isinstance(fn, exp.Anonymous):
        args = list(fn.expressions)
        arg, sep = args[0] if args else None, args[1] if len(args) > 1 else None
    else:
        arg, sep = fn.this, fn.args.get("separator")
    if isinstance(arg, exp.Order):
        raise qp.err(
            FeatureNotSupported, "aggregate ORDER BY is not implemented for window functions", fn
        )
    if isinstance(arg, exp.Distinct):
        raise qp.err(FeatureNotSupported, "DISTINCT is not implemented for window functions", fn)
    if arg is None or not isinstance(sep, exp.Literal) or not sep.is_string:
        raise qp.err(FeatureNotSupported, "string_agg needs a constant text delimiter", fn)
    t = binder.bind(arg)
    t = binder.coerce(t, _text(), arg, explicit=t.type.name != "unknown")
    value = t.expr if filter_cond is None else Case(((filter_cond, t.expr),), None)
    return AggregateExpr(AggregateFunc.STRING_AGG, value, delimiter=str(sep.this))


def _funcs(call: object) -> tuple[object, ...]:
    """The ``Window`` functions of a call (several for an interval aggregate)."""
    return call.aggs if isinstance(call, interval_aggs.Lowered) else (call,)


# --- WHERE rn <= k -------------------------------------------------------------------------------


def top_k_rewrite(expr: RelationExpr) -> RelationExpr:
    """``Filter(rn <= k)`` over (projections of) a ``row_number()`` ``Window``: the window over
    a ``TopK`` of ``k`` rows per partition (same order, same tie-break), the filter kept."""
    if not isinstance(expr, Filter):
        return expr
    chain: list[Project] = []
    node = expr.input
    while isinstance(node, Project):
        chain.append(node)
        node = node.input
    if not isinstance(node, Window) or len(node.funcs) != 1:
        return expr
    call = node.funcs[0]
    if not isinstance(call, WindowExpr) or call.func is not WindowFunc.ROW_NUMBER:
        return expr
    rn = node.input.desc.arity
    limit: int | None = None
    for p in expr.predicates:
        column = _through(chain, p)
        if column is None or column[0] != rn:
            continue
        op, k = column[1], column[2]
        bound = (
            k
            if op is BinaryFunc.LE
            else k - 1
            if op is BinaryFunc.LT
            else 1
            if (op is BinaryFunc.EQ and k == 1)
            else None
        )
        if bound is not None:
            limit = max(0, bound) if limit is None else min(limit, max(0, bound))
    if limit is None:
        return expr
    topk = TopK(node.input, node.partition_by, node.order_by, limit, 0)
    rebuilt: RelationExpr = Window(
        topk, node.partition_by, node.order_by, node.funcs, node.names, node.frames
    )
    for proj in reversed(chain):
        rebuilt = Project(rebuilt, proj.outputs, proj.names)
    return Filter(rebuilt, expr.predicates)


def _through(chain: list[Project], pred: ScalarExpr) -> tuple[int, BinaryFunc, int] | None:
    if not (
        isinstance(pred, CallBinary)
        and pred.func in (BinaryFunc.LE, BinaryFunc.LT, BinaryFunc.EQ)
        and isinstance(pred.left, ColumnRef)
        and isinstance(pred.right, Literal)
        and isinstance(pred.right.value, int)
        and not isinstance(pred.right.value, bool)
    ):
        return None
    column = pred.left.index
    for proj in chain:
        column = proj.outputs[column]
    return column, pred.func, pred.right.value


__all__ = ["INT64", "find_windows", "plan_windows", "reject_windows", "top_k_rewrite"]
