"""Binding of interval values: comparisons, arithmetic, negation, and the canonical
representative that grouping, ``DISTINCT`` and set operations use.

An interval constant or ``timestamp - timestamp`` keeps its older form (milliseconds for time
arithmetic and temporal filters, :class:`~spate.sql.binding.Typed`'s ``interval_ms``); wherever
an interval column (``interval`` values: ``PG_INTERVAL_VALUE``) takes part, or an operation
has no millisecond form (months compared, interval ± interval, ``/``, a fractional factor),
every operand becomes a value and the operation one of :mod:`spate.plan.interval_funcs`.
PostgreSQL compares intervals by their span (``'1 mon' = '30 days'``):
``interval_key`` gives the span for ``=``, ``<`` …, and ``interval_canon`` the one
representative of equal spans that group keys, ``DISTINCT`` and set operations carry.
"""

from __future__ import annotations

from sqlglot import exp

from spate.plan.expr import (
    BinaryFunc,
    CallBinary,
    CallUnary,
    CallVariadic,
    Case,
    Cast,
    ColumnRef,
    Literal,
    ScalarExpr,
    UnaryFunc,
    VariadicFunc,
)
from spate.plan.relation import Map, Project, RelationExpr
from spate.repr.interval import USECS_PER_DAY, Interval
from spate.repr.types import FLOAT64, INT64, INTERVAL, TIMESTAMP, ScalarKind, ScalarType
from spate.sql.binding import BinderBase, Typed
from spate.sql.errors import UndefinedFunction
from spate.sql.types import (
    FLOAT8,
    PG_BOOL,
    PG_INTERVAL_VALUE,
    PG_TIMESTAMP,
    display_name,
)

V = VariadicFunc


def is_interval(t: Typed) -> bool:
    return t.interval_ms is not None or t.type.name == "interval"


def is_value(t: Typed) -> bool:
    """An interval value (a column, or computed by the functions here)."""
    return t.type.scalar is INTERVAL


def value(b: BinderBase, t: Typed, node: exp.Expression) -> ScalarExpr:
    """An interval operand as an interval value (a quoted constant is read as an interval)."""
    if is_value(t):
        return t.expr
    if t.type.name == "unknown":
        return b.coerce(t, PG_INTERVAL_VALUE, node).expr
    if is_interval(t):
        return b.coerce(t, PG_INTERVAL_VALUE, node).expr
    raise b.err(
        UndefinedFunction,
        f"operator does not exist: {display_name(t.type)} compared with interval",
        node,
    )


def constant_value(parts: tuple[ScalarExpr, ScalarExpr, ScalarExpr]) -> ScalarExpr:
    """``make_interval`` of the parts, folded to a literal where they are literals."""
    if all(isinstance(p, Literal) and isinstance(p.value, int) for p in parts):
        m, d, u = (p.value for p in parts)  # type: ignore[attr-defined]
        return Literal(Interval(m, d, u), INTERVAL)
    return CallVariadic(V.MAKE_INTERVAL, parts)


def wants_values(left: Typed, right: Typed) -> bool:
    """Whether a comparison of ``left`` and ``right`` compares interval values (rather than
    the milliseconds of constants and ``timestamp - timestamp``)."""
    if not (is_interval(left) or is_interval(right)):
        return False
    return (
        is_value(left)
        or is_value(right)
        or bool(left.interval_months)
        or bool(right.interval_months)
    )


def key(x: ScalarExpr) -> ScalarExpr:
    return CallVariadic(V.INTERVAL_KEY, (x,))


def of_key(x: ScalarExpr) -> ScalarExpr:
    """The canonical interval of a span (:func:`key`)."""
    return CallVariadic(V.INTERVAL_OF_KEY, (x,))


def canonical(x: ScalarExpr) -> ScalarExpr:
    return CallVariadic(V.INTERVAL_CANON, (x,))


def equal(a: ScalarExpr, b: ScalarExpr, t: ScalarType) -> ScalarExpr:
    """``a = b``: by the span where they are intervals."""
    if t is INTERVAL:
        return CallBinary(BinaryFunc.EQ, key(a), key(b))
    return CallBinary(BinaryFunc.EQ, a, b)


def extreme(f: VariadicFunc, xs: list[ScalarExpr]) -> ScalarExpr:
    """``greatest``/``least`` of intervals: by the span, NULLs ignored (the first of equal
    spans kept, as PostgreSQL keeps it)."""
    op = BinaryFunc.GT if f is V.GREATEST else BinaryFunc.LT
    out = xs[0]
    for x in xs[1:]:
        better = CallBinary(op, key(x), key(out))
        out = Case(
            (
                (CallUnary(UnaryFunc.IS_NULL, out), x),
                (CallUnary(UnaryFunc.IS_NULL, x), out),
                (better, x),
            ),
            out,
        )
    return out


def compare(b: BinderBase, f: BinaryFunc, left: Typed, right: Typed, node: exp.Expression) -> Typed:
    a = value(b, left, node.this)
    c = value(b, right, node.expression)
    return Typed(CallBinary(f, key(a), key(c)), PG_BOOL)


def fields(x: ScalarExpr) -> tuple[ScalarExpr, ScalarExpr, ScalarExpr]:
    return (
        CallVariadic(V.INTERVAL_MONTHS, (x,)),
        CallVariadic(V.INTERVAL_DAYS, (x,)),
        CallVariadic(V.INTERVAL_MICROS, (x,)),
    )


def negate(b: BinderBase, t: Typed, node: exp.Expression) -> Typed:
    x = value(b, t, node)
    parts = tuple(CallUnary(UnaryFunc.NEG, p) for p in fields(x))
    return Typed(CallVariadic(V.MAKE_INTERVAL, parts), PG_INTERVAL_VALUE)


def wants_arith(op: BinaryFunc, left: Typed, right: Typed) -> bool:
    """Whether ``left <op> right`` is interval arithmetic on values (see the module)."""
    li, ri = is_interval(left), is_interval(right)
    if not (li or ri):
        return False
    if is_value(left) or is_value(right) or (li and ri):
        return True
    if op is BinaryFunc.DIV:
        return li
    if op is BinaryFunc.MUL:
        other = right if li else left
        return not (other.type.is_integer or other.type.name == "unknown")
    return False


def arith(b: BinderBase, node: exp.Expression, op: BinaryFunc, left: Typed, right: Typed) -> Typed:
    symbol = {BinaryFunc.ADD: "+", BinaryFunc.SUB: "-", BinaryFunc.MUL: "*", BinaryFunc.DIV: "/"}
    li, ri = is_interval(left), is_interval(right)
    lnode, rnode = node.this, node.expression
    if li and ri and op in (BinaryFunc.ADD, BinaryFunc.SUB):
        x, y = fields(value(b, left, lnode)), fields(value(b, right, rnode))
        parts = tuple(CallBinary(op, p, q) for p, q in zip(x, y, strict=True))
        return Typed(CallVariadic(V.MAKE_INTERVAL, parts), PG_INTERVAL_VALUE)
    if op in (BinaryFunc.MUL, BinaryFunc.DIV) and li != ri and (li or op is BinaryFunc.MUL):
        iv, n, n_node = (left, right, rnode) if li else (right, left, lnode)
        factor = b.coerce(n, FLOAT8, n_node) if n.type.name != "float8" else n
        if not (factor.type.name == "float8"):
            raise _no_operator(b, node, left, right, symbol.get(op, "?"))
        f = V.INTERVAL_MUL if op is BinaryFunc.MUL else V.INTERVAL_DIV
        return Typed(
            CallVariadic(f, (value(b, iv, lnode if li else rnode), factor.expr)), PG_INTERVAL_VALUE
        )
    if op in (BinaryFunc.ADD, BinaryFunc.SUB) and li != ri:
        if li and op is BinaryFunc.SUB:
            raise _no_operator(b, node, left, right, "-")
        stamp, iv, s_node, i_node = (
            (right, left, rnode, lnode) if li else (left, right, lnode, rnode)
        )
        if stamp.type.name == "unknown":
            stamp = b.coerce(stamp, PG_TIMESTAMP, s_node)
        if stamp.type.name == "date":
            stamp = Typed(Cast(stamp.expr, TIMESTAMP), PG_TIMESTAMP)
        if stamp.type.name not in ("timestamp", "timestamptz"):
            raise _no_operator(b, node, left, right, symbol[op])
        m, d, u = fields(value(b, iv, i_node))
        if op is BinaryFunc.SUB:
            m, d, u = (CallUnary(UnaryFunc.NEG, p) for p in (m, d, u))
        shifted = CallVariadic(V.ADD_MONTHS, (stamp.expr, m))
        day_us = CallBinary(BinaryFunc.MUL, d, Literal(USECS_PER_DAY, INT64))
        us = CallBinary(BinaryFunc.ADD, day_us, u)
        return Typed(CallVariadic(V.TIMESTAMP_ADD_US, (shifted, us)), stamp.type)
    raise _no_operator(b, node, left, right, symbol.get(op, "?"))


def _no_operator(
    b: BinderBase, node: exp.Expression, left: Typed, right: Typed, symbol: str
) -> Exception:
    return b.err(
        UndefinedFunction,
        f"operator does not exist: {display_name(left.type)} {symbol} {display_name(right.type)}",
        node,
    )


_JUSTIFY: dict[type, VariadicFunc] = {
    exp.JustifyDays: V.JUSTIFY_DAYS,
    exp.JustifyHours: V.JUSTIFY_HOURS,
    exp.JustifyInterval: V.JUSTIFY_INTERVAL,
}


def justify(b: BinderBase, node: exp.Expression) -> Typed:
    """``justify_days(i)``, ``justify_hours(i)``, ``justify_interval(i)``."""
    f = _JUSTIFY[type(node)]
    t = b._bind(node.this)
    if not (is_interval(t) or t.type.name == "unknown"):
        raise b.err(
            UndefinedFunction, f"function {f.value}({display_name(t.type)}) does not exist", node
        )
    return Typed(CallVariadic(f, (value(b, t, node.this),)), PG_INTERVAL_VALUE)


def epoch(x: ScalarExpr) -> ScalarExpr:
    return CallVariadic(V.INTERVAL_EPOCH, (x,))


def epoch_float(x: ScalarExpr) -> ScalarExpr:
    return Cast(epoch(x), FLOAT64)


def canonical_rows(expr: RelationExpr) -> RelationExpr:
    """``expr`` with every interval column replaced by its canonical representative (before a
    ``DISTINCT`` or a set operation, which PostgreSQL decides by the span)."""
    cols = expr.desc.columns
    positions = [i for i, c in enumerate(cols) if c.type.kind is ScalarKind.INTERVAL]
    if not positions:
        return expr
    width = len(cols)
    mapped = Map(expr, tuple(canonical(ColumnRef(i)) for i in positions))
    where = {p: width + j for j, p in enumerate(positions)}
    names = tuple(c.name for c in cols)
    return Project(mapped, tuple(where.get(i, i) for i in range(width)), names)
