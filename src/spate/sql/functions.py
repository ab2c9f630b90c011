"""SQL functions the IR has no node for, written with the nodes it has.

``round``/``trunc``/``ceil``/``floor`` go through casts (numeric casts round half away from
zero, casts to ``int64`` truncate), ``sign`` is a CASE, ``left``/``right`` are ``substr``,
``concat_ws`` concatenates ``coalesce(sep || x, '')`` pieces, ``starts_with`` compares a
prefix. Each keeps PostgreSQL's result type and NULL behaviour; a float beyond the int64 range
gives NULL where PostgreSQL would answer (documented).
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

from sqlglot import exp

from spate.plan.expr import (
    BinaryFunc,
    CallBinary,
    CallUnary,
    CallVariadic,
    Case,
    Cast,
    Extract,
    Literal,
    ScalarExpr,
    TimeUnit,
    UnaryFunc,
    VariadicFunc,
)
from spate.repr.types import BOOL, DATE, FLOAT64, INT64, TEXT, numeric
from spate.sql.binding import BinderBase, Typed
from spate.sql.errors import FeatureNotSupported, UndefinedFunction
from spate.sql.types import (
    FLOAT8,
    INT4,
    INT8,
    PG_BOOL,
    PG_DATE,
    PG_TEXT,
    PG_TIMESTAMP,
    display_name,
    pg_numeric,
)

Builtin = Callable[[BinderBase, exp.Expression], Typed]


def _number(b: BinderBase, node: exp.Expression, what: str) -> Typed:
    t = b._bind(node)
    if t.type.name == "unknown":
        t = b.coerce(t, FLOAT8, node)
    if not t.type.is_numeric:
        raise b.err(
            UndefinedFunction, f"function {what}({display_name(t.type)}) does not exist", node
        )
    return t


def _constant_int(b: BinderBase, node: exp.Expression | None, what: str) -> int:
    if node is None:
        return 0
    t = b._bind(node)
    if not isinstance(t.expr, Literal) or not isinstance(t.expr.value, int):
        raise b.err(FeatureNotSupported, f"{what} needs a constant integer", node)
    return t.expr.value


def _float_trunc(x: ScalarExpr) -> ScalarExpr:
    return Cast(Cast(x, INT64), FLOAT64)


def _in_tens(x: ScalarExpr, n: int, whole: Callable[[ScalarExpr], ScalarExpr]) -> Typed:
    """``x`` at ``10^n`` (``n > 0``): ``x / 10^n`` made an integer by ``whole``, times
    ``10^n``, as ``numeric(38, 0)``."""
    n = min(n, 37)
    down = CallBinary(BinaryFunc.MUL, x, Literal(Decimal(1).scaleb(-n), numeric(n, n)))
    up = CallBinary(BinaryFunc.MUL, whole(down), Literal(Decimal(10) ** n, numeric(n + 1, 0)))
    return Typed(Cast(up, numeric(38, 0)), pg_numeric(numeric(38, 0)))


def round_(b: BinderBase, node: exp.Expression) -> Typed:
    t = _number(b, node.this, "round")
    has_digits = node.args.get("decimals") is not None
    digits = _constant_int(b, node.args.get("decimals"), "round's precision")
    if t.type.is_integer:
        if b.dialect == "spark" and digits >= 0:
            return t
        if not has_digits:
            # PostgreSQL has no round(integer): it takes round(double precision)
            return Typed(Cast(t.expr, FLOAT64), FLOAT8)
        t = b.coerce(t, pg_numeric(numeric(38, 0)), node.this, explicit=True)
    if t.type.name == "numeric" and digits < 0:
        # round(d, -n): round d / 10^n to an integer, times 10^n
        return _in_tens(t.expr, -digits, lambda down: Cast(down, numeric(38, 0)))
    if t.type.name == "numeric":
        scale = max(0, min(digits, 38))
        return Typed(Cast(t.expr, numeric(38, scale)), pg_numeric(numeric(38, scale)))
    if digits:
        raise b.err(FeatureNotSupported, "round(double precision, n) does not exist", node)
    if b.dialect == "spark":
        # Spark rounds half away from zero
        x = t.expr
        half = Literal(0.5, FLOAT64)
        pos = _floor(CallBinary(BinaryFunc.ADD, x, half))
        neg = CallUnary(
            UnaryFunc.NEG, _floor(CallBinary(BinaryFunc.ADD, CallUnary(UnaryFunc.NEG, x), half))
        )
        return Typed(
            Case(((CallBinary(BinaryFunc.LT, x, Literal(0.0, FLOAT64)), neg),), pos), FLOAT8
        )
    # half to even, as PostgreSQL's rint: floor(x + 0.5), minus one on an odd tie
    x = t.expr
    up = CallBinary(BinaryFunc.ADD, x, Literal(0.5, FLOAT64))
    fl = _floor(up)
    tie = CallBinary(BinaryFunc.EQ, up, fl)
    odd = CallBinary(
        BinaryFunc.NE,
        CallBinary(BinaryFunc.MOD, Cast(fl, INT64), Literal(2, INT64)),
        Literal(0, INT64),
    )
    value = Case(
        (
            (
                CallBinary(BinaryFunc.AND, tie, odd),
                CallBinary(BinaryFunc.SUB, fl, Literal(1.0, FLOAT64)),
            ),
        ),
        fl,
    )
    return Typed(value, FLOAT8)


def _floor(x: ScalarExpr) -> ScalarExpr:
    t = _float_trunc(x)
    return Case(
        ((CallBinary(BinaryFunc.LT, x, t), CallBinary(BinaryFunc.SUB, t, Literal(1.0, FLOAT64))),),
        t,
    )


def _ceil(x: ScalarExpr) -> ScalarExpr:
    t = _float_trunc(x)
    return Case(
        ((CallBinary(BinaryFunc.GT, x, t), CallBinary(BinaryFunc.ADD, t, Literal(1.0, FLOAT64))),),
        t,
    )


def trunc(b: BinderBase, node: exp.Expression) -> Typed:
    t = _number(b, node.this, "trunc")
    has_digits = node.args.get("decimals") is not None
    digits = _constant_int(b, node.args.get("decimals"), "trunc's precision")
    if t.type.is_integer:
        if b.dialect == "spark" and not has_digits:
            return t
        if not has_digits:
            # PostgreSQL has no trunc(integer): it takes trunc(double precision)
            return Typed(Cast(t.expr, FLOAT64), FLOAT8)
        t = b.coerce(t, pg_numeric(numeric(38, 0)), node.this, explicit=True)
    if t.type.name == "numeric" and digits > 0:
        # toward zero at n decimals: step half a unit toward zero, then round half away from
        # zero; within a unit of zero the answer is zero (a step would round to -0.1 or -0.0)
        n = min(digits, 37)
        unit = Decimal(1).scaleb(-n)
        half = Literal(Decimal(5).scaleb(-(n + 1)), numeric(n + 1, n + 1))
        x = t.expr
        moved = Case(
            (
                (
                    CallBinary(BinaryFunc.GE, x, Literal(unit, numeric(n, n))),
                    CallBinary(BinaryFunc.SUB, x, half),
                ),
                (
                    CallBinary(BinaryFunc.LE, x, Literal(-unit, numeric(n, n))),
                    CallBinary(BinaryFunc.ADD, x, half),
                ),
            ),
            Case(((x.is_null(), x),), Literal(Decimal(0), numeric(1, 0))),
        )
        return Typed(Cast(moved, numeric(38, n)), pg_numeric(numeric(38, n)))
    if t.type.name == "numeric" and digits < 0:
        # trunc(d, -n): d / 10^n truncated to an integer, times 10^n
        return _in_tens(t.expr, -digits, lambda down: Cast(Cast(down, INT64), numeric(38, 0)))
    if t.type.name == "numeric":
        return Typed(Cast(Cast(t.expr, INT64), numeric(38, 0)), pg_numeric(numeric(38, 0)))
    if has_digits:
        raise b.err(UndefinedFunction, "trunc(double precision, integer) does not exist", node)
    return Typed(_float_trunc(t.expr), FLOAT8)


def floor_ceil(b: BinderBase, node: exp.Expression) -> Typed:
    is_floor = isinstance(node, exp.Floor)
    t = _number(b, node.this, "floor" if is_floor else "ceil")
    if node.args.get("decimals") is not None:
        raise b.err(FeatureNotSupported, "floor/ceil take one argument", node)
    if t.type.is_integer:
        return t
    if t.type.name == "numeric":
        x = t.expr
        tr = Cast(Cast(x, INT64), numeric(38, 0))
        one = Literal(1, numeric(1, 0))
        if is_floor:
            value: ScalarExpr = Case(
                ((CallBinary(BinaryFunc.LT, x, tr), CallBinary(BinaryFunc.SUB, tr, one)),), tr
            )
        else:
            value = Case(
                ((CallBinary(BinaryFunc.GT, x, tr), CallBinary(BinaryFunc.ADD, tr, one)),), tr
            )
        return Typed(Cast(value, numeric(38, 0)), pg_numeric(numeric(38, 0)))
    return Typed(_floor(t.expr) if is_floor else _ceil(t.expr), FLOAT8)


def sign(b: BinderBase, node: exp.Expression) -> Typed:
    t = _number(b, node.this, "sign")
    if t.type.is_integer or t.type.name == "float4":
        # PostgreSQL has sign(numeric) and sign(double precision): an integer or a real is
        # converted to double precision (the preferred type)
        t = b.coerce(t, FLOAT8, node.this)
    x = t.expr
    scalar = t.type.scalar
    assert scalar is not None

    def lit(v: int) -> Literal:
        if scalar.kind.value == "float64":
            return Literal(float(v), FLOAT64)
        if scalar.kind.value == "numeric":
            return Literal(v, numeric(1, 0))
        return Literal(v, INT64)

    zero = lit(0)
    value = Case(
        (
            (CallUnary(UnaryFunc.IS_NULL, x), Literal(None, scalar)),
            (CallBinary(BinaryFunc.GT, x, zero), lit(1)),
            (CallBinary(BinaryFunc.LT, x, zero), lit(-1)),
        ),
        zero,
    )
    out = t.type if t.type.name != "numeric" else pg_numeric(numeric(38, 0))
    if out.name == "numeric":
        return Typed(Cast(value, numeric(38, 0)), out)
    return Typed(value, out)


def _text_arg(b: BinderBase, node: exp.Expression) -> Typed:
    t = b._bind(node)
    return b.to_text(t, node)


def left_right(b: BinderBase, node: exp.Expression) -> Typed:
    s = _text_arg(b, node.this).expr
    n = b.coerce(b._bind(node.expression), INT8, node.expression).expr
    length = CallUnary(UnaryFunc.LENGTH, s)
    zero = Literal(0, INT64)
    if isinstance(node, exp.Left):
        # left(s, n): the first n characters; n < 0: all but the last |n|
        count: ScalarExpr = Case(
            ((CallBinary(BinaryFunc.LT, n, zero), CallBinary(BinaryFunc.ADD, length, n)),), n
        )
        count = CallVariadic(VariadicFunc.GREATEST, (count, zero))
        return Typed(CallVariadic(VariadicFunc.SUBSTR, (s, Literal(1, INT64), count)), PG_TEXT)
    # right(s, n): the last n characters; n < 0: all but the first |n|
    start: ScalarExpr = Case(
        (
            (
                CallBinary(BinaryFunc.LT, n, zero),
                CallBinary(BinaryFunc.ADD, Literal(1, INT64), CallUnary(UnaryFunc.NEG, n)),
            ),
        ),
        CallBinary(BinaryFunc.ADD, CallBinary(BinaryFunc.SUB, length, n), Literal(1, INT64)),
    )
    start = CallVariadic(VariadicFunc.GREATEST, (start, Literal(1, INT64)))
    return Typed(CallVariadic(VariadicFunc.SUBSTR, (s, start)), PG_TEXT)


def concat_ws(b: BinderBase, node: exp.Expression) -> Typed:
    args = node.expressions
    if len(args) < 2:
        raise b.err(UndefinedFunction, "concat_ws needs a separator and values", node)
    sep = _text_arg(b, args[0]).expr
    pieces: ScalarExpr = Literal("", TEXT)
    for a in args[1:]:
        x = _text_arg(b, a).expr
        piece = CallVariadic(
            VariadicFunc.COALESCE, (CallBinary(BinaryFunc.CONCAT, sep, x), Literal("", TEXT))
        )
        pieces = CallBinary(BinaryFunc.CONCAT, pieces, piece)
    start = CallBinary(BinaryFunc.ADD, CallUnary(UnaryFunc.LENGTH, sep), Literal(1, INT64))
    value = CallVariadic(VariadicFunc.SUBSTR, (pieces, start))
    # a NULL separator makes the result NULL
    guarded = Case(((CallUnary(UnaryFunc.IS_NULL, sep), Literal(None, TEXT)),), value)
    return Typed(guarded, PG_TEXT)


def starts_with(b: BinderBase, node: exp.Expression) -> Typed:
    s = _text_arg(b, node.this).expr
    p = _text_arg(b, node.expression).expr
    prefix = CallVariadic(
        VariadicFunc.SUBSTR, (s, Literal(1, INT64), CallUnary(UnaryFunc.LENGTH, p))
    )
    return Typed(CallBinary(BinaryFunc.EQ, prefix, p), PG_BOOL)


_PARTS: dict[type, TimeUnit] = {
    exp.Year: TimeUnit.YEAR,
    exp.Quarter: TimeUnit.QUARTER,
    exp.Month: TimeUnit.MONTH,
    exp.WeekOfYear: TimeUnit.WEEK,
    exp.Day: TimeUnit.DAY,
    exp.DayOfMonth: TimeUnit.DAY,
    exp.DayOfYear: TimeUnit.DOY,
    exp.DayOfWeek: TimeUnit.DOW,
    exp.Hour: TimeUnit.HOUR,
    exp.Minute: TimeUnit.MINUTE,
    exp.Second: TimeUnit.SECOND,
}


def _time_arg(b: BinderBase, node: exp.Expression) -> Typed:
    t = b._bind(node)
    if t.type.name == "unknown":
        t = b.coerce(t, PG_TIMESTAMP, node)
    if t.type.name not in ("date", "timestamp", "timestamptz"):
        raise b.err(UndefinedFunction, f"a date or timestamp is needed, not {t.type}", node)
    return t


def date_part(b: BinderBase, node: exp.Expression) -> Typed:
    """``year(d)``, ``month(d)``…, ``dayofweek(d)`` (Spark: 1 = Sunday … 7): integers."""
    t = _time_arg(b, node.this)
    unit = _PARTS[type(node)]
    value: ScalarExpr = Extract(unit, t.expr)
    if unit is TimeUnit.DOW:
        value = CallBinary(BinaryFunc.ADD, value, Literal(1, INT64))
    return Typed(value, INT4)


def _as_date(b: BinderBase, node: exp.Expression) -> Typed:
    t = b._bind(node)
    if t.type.name == "date":
        return t
    if t.type.name == "unknown":
        return b.coerce(t, PG_DATE, node)
    return Typed(Cast(t.expr, DATE), PG_DATE)


def to_date(b: BinderBase, node: exp.Expression) -> Typed:
    return _as_date(b, node.this)


def date_diff(b: BinderBase, node: exp.Expression) -> Typed:
    """Spark's ``datediff(end, start)``: whole days."""
    end = _as_date(b, node.this)
    start = _as_date(b, node.expression)
    return Typed(CallBinary(BinaryFunc.DATE_DIFF_DAYS, end.expr, start.expr), INT4)


def date_add(b: BinderBase, node: exp.Expression) -> Typed:
    """Spark's ``date_add(d, n)`` / ``date_sub(d, n)``: a date ``n`` days later."""
    unit = node.args.get("unit")
    if unit is not None and unit.name.upper() not in ("DAY", "DAYS"):
        raise b.err(FeatureNotSupported, f"date_add by {unit.name}", node)
    d = _as_date(b, node.this)
    n = b.coerce(b._bind(node.expression), INT8, node.expression)
    return Typed(CallBinary(BinaryFunc.DATE_ADD_DAYS, d.expr, n.expr), PG_DATE)


BUILTINS: dict[type, Builtin] = {
    **{k: date_part for k in _PARTS},
    exp.TsOrDsToDate: to_date,
    exp.DateDiff: date_diff,
    exp.TsOrDsAdd: date_add,
    exp.Round: round_,
    exp.Trunc: trunc,
    exp.Floor: floor_ceil,
    exp.Ceil: floor_ceil,
    exp.Sign: sign,
    exp.Left: left_right,
    exp.Right: left_right,
    exp.ConcatWs: concat_ws,
    exp.StartsWith: starts_with,
}

__all__ = ["BOOL", "BUILTINS", "INT4"]
