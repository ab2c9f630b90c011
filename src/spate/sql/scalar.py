"""Scalar expressions: sqlglot AST → typed IR scalars, with PostgreSQL's typing rules.

:class:`ScalarBinder` binds one expression against a :class:`~spate.sql.scope.Scope`. The query
planner hooks into it (``override``) to substitute aggregates, group keys and subquery results
that it has already computed as columns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

from sqlglot import exp

from spate.plan.expr import (
    BinaryFunc,
    CallBinary,
    CallUnary,
    CallVariadic,
    Case,
    Cast,
    ColumnRef,
    DateTrunc,
    Extract,
    Literal,
    Now,
    ScalarExpr,
    TimeUnit,
    UnaryFunc,
    VariadicFunc,
)
from spate.repr.types import BOOL, FLOAT64, INT64, TEXT, TIMESTAMP, ScalarKind, numeric
from spate.sql.errors import (
    DatatypeMismatch,
    FeatureNotSupported,
    GroupingError,
    NumericOutOfRange,
    SqlError,
    UndefinedFunction,
)
from spate.sql.parse import position
from spate.sql.scope import Scope
from spate.sql.types import (
    FLOAT8,
    INT4,
    INT8,
    PG_BOOL,
    PG_DATE,
    PG_INTERVAL,
    PG_TEXT,
    PG_TIMESTAMP,
    UNKNOWN,
    PgType,
    can_implicit,
    common_type,
    display_name,
    named_type,
    pg_numeric,
)
from spate.sql.values import convert_text, fit_numeric, number_literal

_DAY_MS = 86_400_000
_UNIT_MS = {
    "microsecond": 0.001,
    "millisecond": 1,
    "second": 1000,
    "minute": 60_000,
    "hour": 3_600_000,
    "day": _DAY_MS,
    "week": 7 * _DAY_MS,
}
_UNIT_ALIASES = {
    "us": "microsecond",
    "microseconds": "microsecond",
    "ms": "millisecond",
    "milliseconds": "millisecond",
    "s": "second",
    "sec": "second",
    "secs": "second",
    "seconds": "second",
    "m": "minute",
    "min": "minute",
    "mins": "minute",
    "minutes": "minute",
    "h": "hour",
    "hr": "hour",
    "hrs": "hour",
    "hours": "hour",
    "d": "day",
    "days": "day",
    "w": "week",
    "weeks": "week",
    "mon": "month",
    "mons": "month",
    "months": "month",
    "y": "year",
    "years": "year",
    "mm": "month",
    "yyyy": "year",
    "yy": "year",
    "dd": "day",
    "dayofweek": "dow",
    "dayofyear": "doy",
}


@dataclass(frozen=True, slots=True)
class Typed:
    """A bound expression: the IR scalar and its PostgreSQL type.

    ``raw`` is the text of a quoted literal whose type is still unknown (its context converts
    it); ``interval_ms`` marks an interval constant (only an operand of time arithmetic)."""

    expr: ScalarExpr
    type: PgType
    raw: str | None = None
    interval_ms: int | None = None


Override = Callable[[exp.Expression], "Typed | None"]


class ScalarBinder:
    def __init__(
        self,
        scope: Scope,
        *,
        text: str | None = None,
        dialect: str = "postgres",
        override: Override | None = None,
        allow_now: bool = False,
        clause: str = "",
    ) -> None:
        self.scope = scope
        self.text = text
        self.dialect = dialect
        self.override = override
        self.allow_now = allow_now
        self.clause = clause

    # -- entry points -------------------------------------------------------------------------

    def bind(self, node: exp.Expression) -> Typed:
        try:
            return self._bind(node)
        except SqlError as e:
            raise e.located(position(node), self.text) from None

    def bind_as(self, node: exp.Expression, target: PgType) -> Typed:
        return self.coerce(self.bind(node), target, node)

    def predicate(self, node: exp.Expression) -> ScalarExpr:
        t = self.bind(node)
        if t.type.name == "unknown":
            t = self.coerce(t, PG_BOOL, node)
        if t.type.name != "bool":
            raise DatatypeMismatch(
                f"argument of {self.clause or 'WHERE'} must be type boolean, "
                f"not type {display_name(t.type)}",
                position=position(node),
                text=self.text,
            )
        return t.expr

    # -- errors -------------------------------------------------------------------------------

    def err(self, cls: type[SqlError], message: str, node: exp.Expression) -> SqlError:
        return cls(message, position=position(node), text=self.text)

    # -- coercion -----------------------------------------------------------------------------

    def coerce(
        self, t: Typed, target: PgType, node: exp.Expression, explicit: bool = False
    ) -> Typed:
        if target.scalar is None:
            raise self.err(
                FeatureNotSupported, f"type {display_name(target)} is not a column type", node
            )
        if t.type.name == "unknown":
            if isinstance(t.expr, Literal) and t.expr.value is None:
                return Typed(Literal(None, target.scalar), target)
            assert t.raw is not None
            try:
                value = convert_text(t.raw, target)
            except SqlError as e:
                raise e.located(position(node), self.text) from None
            return Typed(Literal(value, target.scalar), target)
        if t.type == target:
            return t
        if not explicit and not can_implicit(t.type, target):
            raise self.err(
                DatatypeMismatch,
                f"cannot convert {display_name(t.type)} to {display_name(target)}",
                node,
            )
        if t.type.scalar == target.scalar:
            return Typed(t.expr, target)
        if isinstance(t.expr, Literal) and t.expr.value is None:
            return Typed(Literal(None, target.scalar), target)
        if (
            isinstance(t.expr, Literal)
            and target.scalar.kind is ScalarKind.FLOAT64
            and isinstance(t.expr.value, (int, Decimal))
            and not isinstance(t.expr.value, bool)
        ):
            return Typed(Literal(float(t.expr.value), target.scalar), target)
        if (
            isinstance(t.expr, Literal)
            and t.expr.value is not None
            and target.scalar.kind is ScalarKind.INT64
            and isinstance(t.expr.value, (Decimal, float))
        ):
            v = t.expr.value
            if isinstance(v, float):
                if v != v or v in (float("inf"), float("-inf")):
                    raise self.err(NumericOutOfRange, "integer out of range", node)
                rounded = round(v)
            else:
                rounded = int(v.quantize(Decimal(1), rounding="ROUND_HALF_UP"))
            return Typed(Literal(rounded, INT64), target)
        if (
            t.type.name == "numeric"
            and target.scalar.kind is ScalarKind.INT64
            and not isinstance(t.expr, Literal)
        ):
            half = Literal(Decimal("0.5"), numeric(1, 1))
            neg = CallBinary(BinaryFunc.LT, t.expr, Literal(Decimal(0), numeric(1, 0)))
            rounded_expr = Case(
                ((neg, Cast(CallBinary(BinaryFunc.SUB, t.expr, half), INT64)),),
                Cast(CallBinary(BinaryFunc.ADD, t.expr, half), INT64),
            )
            return Typed(rounded_expr, target)
        if (
            isinstance(t.expr, Literal)
            and target.scalar.kind is ScalarKind.NUMERIC
            and isinstance(t.expr.value, (int, Decimal))
        ):
            try:
                value = fit_numeric(Decimal(t.expr.value), target.scalar)
            except SqlError as e:
                raise e.located(position(node), self.text) from None
            return Typed(Literal(value, target.scalar), target)
        return Typed(Cast(t.expr, target.scalar), target)

    def unify(
        self, items: list[tuple[Typed, exp.Expression]], what: str
    ) -> tuple[list[Typed], PgType]:
        target = common_type([t.type for t, _ in items])
        if target is None:
            shown = " and ".join(sorted({display_name(t.type) for t, _ in items}))
            raise self.err(DatatypeMismatch, f"{what} types {shown} cannot be matched", items[0][1])
        return [self.coerce(t, target, n) for t, n in items], target

    # -- the walk -----------------------------------------------------------------------------

    def _bind(self, node: exp.Expression) -> Typed:
        if self.override is not None:
            hit = self.override(node)
            if hit is not None:
                return hit
        method = _DISPATCH.get(type(node))
        if method is not None:
            return method(self, node)
        if isinstance(node, exp.Func):
            return self.function(node)
        raise self.err(
            FeatureNotSupported, f"unsupported expression: {node.sql(dialect='postgres')}", node
        )

    def column(self, node: exp.Expression) -> Typed:
        assert isinstance(node, exp.Column)
        if isinstance(node.this, exp.Star):
            raise self.err(FeatureNotSupported, "* is not allowed here", node)
        table = node.table or None
        pos = self.scope.resolve(table, node.name, node)
        return Typed(ColumnRef(pos), self.scope.cols[pos].type)

    def literal(self, node: exp.Expression) -> Typed:
        assert isinstance(node, exp.Literal)
        if node.is_string:
            return Typed(Literal(node.this, TEXT), UNKNOWN, raw=str(node.this))
        lit, t = number_literal(str(node.this))
        return Typed(lit, t)

    def null(self, node: exp.Expression) -> Typed:
        return Typed(Literal(None, TEXT), UNKNOWN)

    def boolean(self, node: exp.Expression) -> Typed:
        assert isinstance(node, exp.Boolean)
        return Typed(Literal(bool(node.this), BOOL), PG_BOOL)

    def paren(self, node: exp.Expression) -> Typed:
        return self._bind(node.this)

    def alias(self, node: exp.Expression) -> Typed:
        return self._bind(node.this)

    # -- operators ----------------------------------------------------------------------------

    def logic(self, node: exp.Expression) -> Typed:
        f = BinaryFunc.AND if isinstance(node, exp.And) else BinaryFunc.OR
        left = self.bool_operand(node.this)
        right = self.bool_operand(node.expression)
        return Typed(CallBinary(f, left, right), PG_BOOL)

    def bool_operand(self, node: exp.Expression) -> ScalarExpr:
        t = self._bind(node)
        if t.type.name == "unknown":
            t = self.coerce(t, PG_BOOL, node)
        if t.type.name != "bool":
            raise self.err(
                DatatypeMismatch,
                f"argument of AND/OR/NOT must be type boolean, not type {display_name(t.type)}",
                node,
            )
        return t.expr

    def not_(self, node: exp.Expression) -> Typed:
        return Typed(CallUnary(UnaryFunc.NOT, self.bool_operand(node.this)), PG_BOOL)

    def neg(self, node: exp.Expression) -> Typed:
        if isinstance(node.this, exp.Literal) and not node.this.is_string:
            inner = self._bind(node.this)
            assert isinstance(inner.expr, Literal) and inner.expr.value is not None
            value = -inner.expr.value  # type: ignore[operator]
            if inner.type.name == "int8" and value == -(2**31):
                return Typed(Literal(value, INT64), INT4)
            return Typed(Literal(value, inner.expr.type), inner.type)
        t = self._bind(node.this)
        if t.type.name == "unknown":
            t = self.coerce(t, FLOAT8, node)
        if not t.type.is_numeric:
            raise self.err(
                UndefinedFunction, f"operator does not exist: - {display_name(t.type)}", node
            )
        return Typed(CallUnary(UnaryFunc.NEG, t.expr), t.type)

    def comparison(self, node: exp.Expression) -> Typed:
        f = _COMPARISONS[type(node)]
        left, right = self._bind(node.this), self._bind(node.expression)
        if left.type.name == "interval" or right.type.name == "interval":
            a, b = (
                self.interval_ms(x, n) for x, n in ((left, node.this), (right, node.expression))
            )
            return Typed(CallBinary(f, a, b), PG_BOOL)
        (left, right), _ = self.operands(left, right, node, "=")
        return Typed(CallBinary(f, left.expr, right.expr), PG_BOOL)

    def interval_ms(self, t: Typed, node: exp.Expression) -> ScalarExpr:
        """An interval operand as int64 milliseconds (a constant or ``timestamp - timestamp``)."""
        if t.interval_ms is not None:
            return Literal(t.interval_ms, INT64)
        if t.type.name == "interval":
            return t.expr
        if t.type.name == "unknown" and t.raw is not None:
            return Literal(parse_interval(t.raw, node, self), INT64)
        raise self.err(
            UndefinedFunction,
            f"operator does not exist: {display_name(t.type)} compared with interval",
            node,
        )

    def operands(
        self, left: Typed, right: Typed, node: exp.Expression, op: str
    ) -> tuple[tuple[Typed, Typed], PgType]:
        """Both operands converted to one type (an unknown takes the other's type)."""
        if left.type.name == "unknown" and right.type.name != "unknown":
            left = self.coerce(left, right.type, node.this)
        elif right.type.name == "unknown" and left.type.name != "unknown":
            right = self.coerce(right, left.type, node.expression)
        elif left.type.name == "unknown":
            left = self.coerce(left, PG_TEXT, node.this)
            right = self.coerce(right, PG_TEXT, node.expression)
        target = common_type([left.type, right.type])
        if target is None:
            raise self.err(
                UndefinedFunction,
                f"operator does not exist: {display_name(left.type)} {op} "
                f"{display_name(right.type)}",
                node,
            )
        left = self.coerce(left, target, node.this)
        right = self.coerce(right, target, node.expression)
        return (left, right), target

    def null_safe(self, node: exp.Expression) -> Typed:
        left, right = self._bind(node.this), self._bind(node.expression)
        (left, right), _ = self.operands(left, right, node, "IS DISTINCT FROM")
        a, b = left.expr, right.expr
        a_null, b_null = CallUnary(UnaryFunc.IS_NULL, a), CallUnary(UnaryFunc.IS_NULL, b)
        distinct = Case(
            (
                (a_null, CallUnary(UnaryFunc.NOT, b_null)),
                (b_null, Literal(True, BOOL)),
            ),
            CallBinary(BinaryFunc.NE, a, b),
        )
        if isinstance(node, exp.NullSafeEQ):
            return Typed(CallUnary(UnaryFunc.NOT, distinct), PG_BOOL)
        return Typed(distinct, PG_BOOL)

    def is_(self, node: exp.Expression) -> Typed:
        assert isinstance(node, exp.Is)
        target = node.expression
        inner = self._bind(node.this)
        if isinstance(target, exp.Null):
            out: ScalarExpr = CallUnary(UnaryFunc.IS_NULL, inner.expr)
        elif isinstance(target, exp.Boolean):
            if inner.type.name == "unknown":
                inner = self.coerce(inner, PG_BOOL, node.this)
            if inner.type.name != "bool":
                raise self.err(DatatypeMismatch, "IS TRUE/FALSE needs a boolean", node)
            value = CallBinary(BinaryFunc.EQ, inner.expr, Literal(bool(target.this), BOOL))
            out = CallBinary(
                BinaryFunc.AND,
                CallUnary(UnaryFunc.NOT, CallUnary(UnaryFunc.IS_NULL, inner.expr)),
                value,
            )
        else:
            raise self.err(FeatureNotSupported, f"unsupported IS: {node.sql()}", node)
        if node.args.get("negate"):
            out = CallUnary(UnaryFunc.NOT, out)
        return Typed(out, PG_BOOL)

    def between(self, node: exp.Expression) -> Typed:
        x, lo, hi = node.this, node.args["low"], node.args["high"]
        both = exp.And(
            this=exp.GTE(this=x, expression=lo), expression=exp.LTE(this=x, expression=hi)
        )
        if node.args.get("symmetric"):
            swapped = exp.And(
                this=exp.GTE(this=x, expression=hi), expression=exp.LTE(this=x, expression=lo)
            )
            return self._bind(exp.Or(this=exp.Paren(this=both), expression=exp.Paren(this=swapped)))
        return self._bind(both)

    def in_(self, node: exp.Expression) -> Typed:
        assert isinstance(node, exp.In)
        if node.args.get("query") is not None or node.args.get("unnest") is not None:
            raise self.err(FeatureNotSupported, "IN (subquery) is not supported here", node)
        values = node.expressions
        if not values:
            raise self.err(FeatureNotSupported, "IN () needs at least one value", node)
        items = [(self._bind(node.this), node.this)] + [(self._bind(v), v) for v in values]
        typed, _ = self.unify(items, "IN")
        x = typed[0].expr
        out: ScalarExpr | None = None
        for v in typed[1:]:
            eq = CallBinary(BinaryFunc.EQ, x, v.expr)
            out = eq if out is None else CallBinary(BinaryFunc.OR, out, eq)
        assert out is not None
        return Typed(out, PG_BOOL)

    def like(self, node: exp.Expression) -> Typed:
        escape = None
        if isinstance(node, exp.Escape):
            escape = node.expression
            node = node.this
        f = BinaryFunc.ILIKE if isinstance(node, exp.ILike) else BinaryFunc.LIKE
        value = self.coerce(self._bind(node.this), PG_TEXT, node.this)
        pattern = self.coerce(self._bind(node.expression), PG_TEXT, node.expression)
        if escape is not None:
            esc = self._bind(escape)
            if esc.raw != "\\":
                raise self.err(FeatureNotSupported, "LIKE … ESCAPE supports only '\\'", escape)
        out: ScalarExpr = CallBinary(f, value.expr, pattern.expr)
        if node.args.get("negate"):
            out = CallUnary(UnaryFunc.NOT, out)
        return Typed(out, PG_BOOL)

    def arith(self, node: exp.Expression) -> Typed:
        op = _ARITH[type(node)]
        left, right = self._bind(node.this), self._bind(node.expression)
        if op is BinaryFunc.MUL and (left.interval_ms is not None) != (
            right.interval_ms is not None
        ):
            # interval * integer: an interval computed per row, carried as int64 milliseconds
            iv, n, n_node = (
                (left, right, node.expression)
                if left.interval_ms is not None
                else (right, left, node.this)
            )
            count = self.coerce(n, INT8, n_node)
            assert iv.interval_ms is not None
            ms = CallBinary(BinaryFunc.MUL, Literal(iv.interval_ms, INT64), count.expr)
            return Typed(ms, PgType("interval", None))
        if (
            left.interval_ms is not None
            or right.interval_ms is not None
            or left.type.name == "interval"
            or right.type.name == "interval"
        ):
            return self.time_arith(node, op, left, right)
        lk, rk = left.type.category, right.type.category
        if lk == "D" or rk == "D":
            return self.date_arith(node, op, left, right)
        if left.type.name == "unknown" and right.type.name == "unknown":
            left = self.coerce(left, pg_numeric(numeric(38, 10)), node.this)
        original = (left.type, right.type)
        before = (left, right)
        (left, right), target = self.operands(left, right, node, _SYMBOL[op])
        if target.name == "numeric":
            # keep each operand's own scale: the IR widens int64 to numeric(38,0) itself
            left, right = (
                self.coerce(b, pg_numeric(numeric(38, 0)), n, explicit=True)
                if b.type.is_integer
                else b
                if b.type.name == "numeric"
                else a
                for a, b, n in ((left, before[0], node.this), (right, before[1], node.expression))
            )
        if not target.is_numeric:
            raise self.err(
                UndefinedFunction,
                f"operator does not exist: {display_name(left.type)} {_SYMBOL[op]} "
                f"{display_name(right.type)}",
                node,
            )
        if (
            op is BinaryFunc.DIV
            and isinstance(node, exp.Div)
            and not node.args.get("typed")
            and target.is_integer
        ):  # Spark's "/": fractional division
            a = Cast(left.expr, FLOAT64)
            b = Cast(right.expr, FLOAT64)
            return Typed(CallBinary(op, a, b), FLOAT8)
        if op is BinaryFunc.DIV and target.name == "numeric":
            # numeric division: through float64, stored at scale 16 (PostgreSQL's scale varies)
            assert left.type.scalar is not None and right.type.scalar is not None
            scale = max(16, left.type.scalar.scale or 0, right.type.scalar.scale or 0)
            out_t = numeric(38, min(scale, 38))
            a = Cast(left.expr, FLOAT8.scalar)  # type: ignore[arg-type]
            b = Cast(right.expr, FLOAT8.scalar)  # type: ignore[arg-type]
            return Typed(Cast(CallBinary(op, a, b), out_t), pg_numeric(out_t))
        out_type = target
        if target.name == "numeric":
            ls, rs = _scale(original[0]), _scale(original[1])
            scale = ls + rs if op is BinaryFunc.MUL else max(ls, rs)
            out_type = pg_numeric(numeric(38, min(38, scale)))
        elif target.name in ("int2",):
            out_type = INT4
        return Typed(CallBinary(op, left.expr, right.expr), out_type)

    def date_arith(self, node: exp.Expression, op: BinaryFunc, left: Typed, right: Typed) -> Typed:
        ln, rn = left.type.name, right.type.name
        if ln == "unknown":
            left = self.coerce(
                left,
                right.type if rn in ("date", "timestamp", "timestamptz") else PG_DATE,
                node.this,
            )
            ln = left.type.name
        if rn == "unknown":
            right = self.coerce(right, left.type if op is BinaryFunc.SUB else INT4, node.expression)
            rn = right.type.name
        if ln == "date" and right.type.is_integer and op in (BinaryFunc.ADD, BinaryFunc.SUB):
            days = right.expr if op is BinaryFunc.ADD else CallUnary(UnaryFunc.NEG, right.expr)
            return Typed(CallBinary(BinaryFunc.DATE_ADD_DAYS, left.expr, days), PG_DATE)
        if rn == "date" and left.type.is_integer and op is BinaryFunc.ADD:
            return Typed(CallBinary(BinaryFunc.DATE_ADD_DAYS, right.expr, left.expr), PG_DATE)
        if ln == "date" and rn == "date" and op is BinaryFunc.SUB:
            return Typed(CallBinary(BinaryFunc.DATE_DIFF_DAYS, left.expr, right.expr), INT4)
        times = ("timestamp", "timestamptz", "date")
        if ln in times and rn in times and op is BinaryFunc.SUB:
            a, b = (
                x.expr if x.type.name != "date" else Cast(x.expr, TIMESTAMP) for x in (left, right)
            )
            # an interval, carried as int64 milliseconds: comparable with interval constants
            return Typed(CallBinary(BinaryFunc.TIMESTAMP_DIFF_MS, a, b), PgType("interval", None))
        raise self.err(
            UndefinedFunction,
            f"operator does not exist: {display_name(left.type)} {_SYMBOL[op]} "
            f"{display_name(right.type)}",
            node,
        )

    def time_arith(self, node: exp.Expression, op: BinaryFunc, left: Typed, right: Typed) -> Typed:
        def is_interval(t: Typed) -> bool:
            return t.interval_ms is not None or t.type.name == "interval"

        if is_interval(left) and not is_interval(right) and op is BinaryFunc.ADD:
            left, right = right, left
        if not is_interval(right) or is_interval(left):
            raise self.err(FeatureNotSupported, "interval arithmetic is not supported", node)
        ms: ScalarExpr = (
            Literal(right.interval_ms, INT64) if right.interval_ms is not None else right.expr
        )
        if left.type.name == "unknown":
            left = self.coerce(left, PG_TIMESTAMP, node.this)
        name = left.type.name
        if op not in (BinaryFunc.ADD, BinaryFunc.SUB):
            raise self.err(FeatureNotSupported, "only + and - apply to intervals", node)
        if name == "date":
            left = Typed(Cast(left.expr, PG_TIMESTAMP.scalar), PG_TIMESTAMP)  # type: ignore[arg-type]
            name = "timestamp"
        if name in ("timestamp", "timestamptz"):
            f = BinaryFunc.TIMESTAMP_ADD_MS if op is BinaryFunc.ADD else BinaryFunc.TIMESTAMP_SUB_MS
            return Typed(CallBinary(f, left.expr, ms), left.type)
        raise self.err(
            UndefinedFunction,
            f"operator does not exist: {display_name(left.type)} {_SYMBOL[op]} interval",
            node,
        )

    def concat_op(self, node: exp.Expression) -> Typed:
        left = self.to_text(self._bind(node.this), node.this)
        right = self.to_text(self._bind(node.expression), node.expression)
        return Typed(CallBinary(BinaryFunc.CONCAT, left.expr, right.expr), PG_TEXT)

    def to_text(self, t: Typed, node: exp.Expression) -> Typed:
        if t.type.name in ("text", "unknown"):
            return self.coerce(t, PG_TEXT, node)
        return self.coerce(t, PG_TEXT, node, explicit=True)

    # -- special forms ------------------------------------------------------------------------

    def case(self, node: exp.Expression) -> Typed:
        assert isinstance(node, exp.Case)
        subject = node.this
        conds: list[ScalarExpr] = []
        results: list[tuple[Typed, exp.Expression]] = []
        for when in node.args.get("ifs") or []:
            cond_node = when.this
            if subject is not None:
                cond_node = exp.EQ(this=subject, expression=cond_node)
            conds.append(self.bool_operand(cond_node))
            results.append((self._bind(when.args["true"]), when.args["true"]))
        default = node.args.get("default")
        if default is not None:
            results.append((self._bind(default), default))
        typed, target = self.unify(results, "CASE")
        whens = tuple((c, r.expr) for c, r in zip(conds, typed, strict=False))
        otherwise = typed[-1].expr if default is not None else None
        return Typed(Case(whens, otherwise), target)

    def if_(self, node: exp.Expression) -> Typed:
        case = exp.Case(
            ifs=[exp.If(this=node.this, true=node.args["true"])],
            default=node.args.get("false"),
        )
        return self.case(case)

    def variadic(self, node: exp.Expression) -> Typed:
        f = _VARIADIC[type(node)]
        args = [node.this, *node.expressions]
        items = [(self._bind(a), a) for a in args]
        typed, target = self.unify(items, f.value.upper())
        return Typed(CallVariadic(f, tuple(t.expr for t in typed)), target)

    def nullif(self, node: exp.Expression) -> Typed:
        a, b = self._bind(node.this), self._bind(node.expression)
        (a2, b2), _ = self.operands(a, b, node, "=")
        assert a2.type.scalar is not None
        null = Literal(None, a2.type.scalar)
        return Typed(
            Case(((CallBinary(BinaryFunc.EQ, a2.expr, b2.expr), null),), a2.expr),
            a2.type,
        )

    def cast(self, node: exp.Expression) -> Typed:
        assert isinstance(node, (exp.Cast, exp.TryCast))
        target = self.type_of(node.args["to"])
        if target.name == "interval":
            inner = node.this
            if isinstance(inner, exp.Literal) and inner.is_string:
                return Typed(
                    Literal(None, INT64),
                    PG_INTERVAL,
                    interval_ms=parse_interval(str(inner.this), node, self),
                )
            raise self.err(FeatureNotSupported, "interval values are only constants", node)
        t = self._bind(node.this)
        to = node.args["to"]
        if (
            target.name == "text"
            and to.this in (exp.DataType.Type.VARCHAR, exp.DataType.Type.NVARCHAR)
            and to.expressions
        ):
            # varchar(n): an explicit cast truncates to n characters
            n = int(to.expressions[0].name)
            text = self.coerce(t, target, node, explicit=True)
            return Typed(
                CallVariadic(
                    VariadicFunc.SUBSTR, (text.expr, Literal(1, INT64), Literal(n, INT64))
                ),
                target,
            )
        if t.type.name == "unknown":
            return self.coerce(t, target, node)
        if target.scalar is None:
            raise self.err(FeatureNotSupported, f"cannot cast to {display_name(target)}", node)
        if t.type.category == "U" and target.name != "text" and t.type.name != target.name:
            raise self.err(
                DatatypeMismatch,
                f"cannot cast type {display_name(t.type)} to {display_name(target)}",
                node,
            )
        return self.coerce(t, target, node, explicit=True)

    def type_of(self, node: exp.Expression) -> PgType:
        return type_from_ast(node, self)

    def interval(self, node: exp.Expression) -> Typed:
        unit = node.args.get("unit")
        raw = node.this
        if not isinstance(raw, exp.Literal):
            raise self.err(FeatureNotSupported, "interval values are only constants", node)
        text = str(raw.this)
        if unit is not None:
            text = f"{text} {unit.name}"
        return Typed(
            Literal(None, INT64), PG_INTERVAL, interval_ms=parse_interval(text, node, self)
        )

    def now(self, node: exp.Expression) -> Typed:
        if not self.allow_now:
            raise self.err(
                FeatureNotSupported,
                "mz_now()/now() may only appear in WHERE or HAVING of a view, as "
                "mz_now() <op> <expression>",
                node,
            )
        return Typed(Now(PG_TIMESTAMP.scalar), PG_TIMESTAMP)  # type: ignore[arg-type]

    def wall_clock(self, node: exp.Expression) -> Typed:
        raise self.err(
            FeatureNotSupported,
            "now() / current_timestamp is not supported: results are kept up to date at every "
            "time; use mz_now() in a temporal filter",
            node,
        )

    def extract(self, node: exp.Expression) -> Typed:
        field = node.this.name.strip("'\"").lower()
        t = self._bind(node.expression)
        if t.type.name == "unknown":
            t = self.coerce(t, PG_TIMESTAMP, node.expression)
        if t.type.name not in ("date", "timestamp", "timestamptz"):
            raise self.err(UndefinedFunction, f"extract from {display_name(t.type)}", node)
        if field == "epoch":
            # seconds since 1970 (to the millisecond), numeric like PostgreSQL's
            stamp = t.expr if t.type.name != "date" else Cast(t.expr, TIMESTAMP)
            ms = Cast(CallUnary(UnaryFunc.EPOCH_MS, stamp), numeric(38, 0))
            seconds = CallBinary(BinaryFunc.MUL, ms, Literal(Decimal("0.001"), numeric(3, 3)))
            return Typed(Cast(seconds, numeric(38, 6)), pg_numeric(numeric(38, 6)))
        if field == "isodow":
            dow = Extract(TimeUnit.DOW, t.expr)
            value: ScalarExpr = Case(
                ((CallBinary(BinaryFunc.EQ, dow, Literal(0, INT64)), Literal(7, INT64)),), dow
            )
            return Typed(Cast(value, numeric(38, 0)), pg_numeric(numeric(38, 0)))
        unit = _time_unit(field, node, self)
        return Typed(Cast(Extract(unit, t.expr), numeric(38, 0)), pg_numeric(numeric(38, 0)))

    def date_trunc(self, node: exp.Expression) -> Typed:
        unit_node = node.args.get("unit")
        unit = _time_unit(unit_node.name if unit_node is not None else "", node, self)
        t = self._bind(node.this)
        if t.type.name == "unknown":
            t = self.coerce(t, PG_TIMESTAMP, node.this)
        if t.type.name == "date":
            t = Typed(Cast(t.expr, PG_TIMESTAMP.scalar), PG_TIMESTAMP)  # type: ignore[arg-type]
        if t.type.name not in ("timestamp", "timestamptz"):
            raise self.err(UndefinedFunction, f"date_trunc of {display_name(t.type)}", node)
        return Typed(DateTrunc(unit, t.expr), t.type)

    def substring(self, node: exp.Expression) -> Typed:
        s = self.to_text(self._bind(node.this), node.this)
        args: list[ScalarExpr] = [s.expr]
        start = node.args.get("start")
        length = node.args.get("length")
        if start is None:
            start = exp.Literal.number(1)
        st = self.coerce(self._bind(start), INT8, start)
        if self.dialect == "spark":
            # Spark: position 0 is 1, a negative position counts from the end
            if not isinstance(st.expr, Literal) or not isinstance(st.expr.value, int):
                raise self.err(
                    FeatureNotSupported, "substr in the Spark dialect needs a constant start", node
                )
            pos = st.expr.value
            if pos == 0:
                st = Typed(Literal(1, INT64), INT8)
            elif pos < 0:
                from_end = CallBinary(
                    BinaryFunc.ADD, CallUnary(UnaryFunc.LENGTH, s.expr), Literal(pos + 1, INT64)
                )
                st = Typed(CallVariadic(VariadicFunc.GREATEST, (from_end, Literal(1, INT64))), INT8)
        args.append(st.expr)
        if length is not None:
            args.append(self.coerce(self._bind(length), INT8, length).expr)
        return Typed(CallVariadic(VariadicFunc.SUBSTR, tuple(args)), PG_TEXT)

    def unary_text(self, node: exp.Expression) -> Typed:
        f = _UNARY_TEXT[type(node)]
        t = self._bind(node.this)
        if f is UnaryFunc.LENGTH:
            if t.type.name == "bytea":
                return Typed(CallUnary(f, t.expr), INT4)
            t = self.coerce(t, PG_TEXT, node.this)
            return Typed(CallUnary(f, t.expr), INT4)
        t = self.coerce(t, PG_TEXT, node.this)
        if isinstance(node, exp.Trim) and (
            node.expression is not None or node.args.get("position")
        ):
            raise self.err(FeatureNotSupported, "trim with characters or a side", node)
        return Typed(CallUnary(f, t.expr), PG_TEXT)

    def abs_(self, node: exp.Expression) -> Typed:
        t = self._bind(node.this)
        if t.type.name == "unknown":
            t = self.coerce(t, FLOAT8, node.this)
        if not t.type.is_numeric:
            raise self.err(
                UndefinedFunction, f"function abs({display_name(t.type)}) does not exist", node
            )
        return Typed(CallUnary(UnaryFunc.ABS, t.expr), t.type)

    def concat_fn(self, node: exp.Expression) -> Typed:
        parts = []
        for a in node.expressions:
            t = self.to_text(self._bind(a), a)
            if self.dialect == "spark":
                parts.append(t.expr)
            else:
                parts.append(CallVariadic(VariadicFunc.COALESCE, (t.expr, Literal("", TEXT))))
        out = parts[0]
        for p in parts[1:]:
            out = CallBinary(BinaryFunc.CONCAT, out, p)
        return Typed(out, PG_TEXT)

    def function(self, node: exp.Expression) -> Typed:
        name = node.name.lower() if isinstance(node, exp.Anonymous) else type(node).__name__.lower()
        if isinstance(node, exp.Anonymous) and name in ("mz_now",):
            return self.now(node)
        if isinstance(node, exp.AggFunc) or name in _AGGREGATE_NAMES:
            raise self.err(
                GroupingError,
                f"aggregate functions are not allowed in {self.clause or 'WHERE'}",
                node,
            )
        if isinstance(node, exp.Window):
            raise self.err(FeatureNotSupported, "window functions are not supported yet", node)
        from spate.sql.functions import BUILTINS

        builtin = BUILTINS.get(type(node))
        if builtin is not None:
            return builtin(self, node)
        raise self.err(UndefinedFunction, f"function {name} does not exist", node)


_AGGREGATE_NAMES = frozenset(
    {"count", "sum", "avg", "min", "max", "bool_and", "bool_or", "string_agg"}
)


def _scale(t: PgType) -> int:
    if t.name == "numeric" and t.scalar is not None:
        return t.scalar.scale or 0
    return 0


def _time_unit(name: str, node: exp.Expression, binder: ScalarBinder) -> TimeUnit:
    n = name.strip("'\"").lower()
    n = _UNIT_ALIASES.get(n, n)
    if n == "epoch":
        raise binder.err(FeatureNotSupported, "extract(epoch …) is not supported", node)
    try:
        return TimeUnit(n)
    except ValueError:
        raise binder.err(FeatureNotSupported, f'unit "{name}" not supported', node) from None


def parse_interval(text: str, node: exp.Expression, binder: ScalarBinder) -> int:
    """Milliseconds of an interval constant (fixed-length units only)."""
    import re

    parts = re.findall(r"([+-]?\d+(?:\.\d+)?)\s*([a-zA-Z]*)", text.strip())
    if not parts or re.sub(r"[+-]?\d+(?:\.\d+)?\s*[a-zA-Z]*|\s", "", text):
        hms = re.fullmatch(r"\s*(\d+):(\d+)(?::(\d+(?:\.\d+)?))?\s*", text)
        if hms:
            h, m, s = hms.group(1), hms.group(2), hms.group(3) or "0"
            return int(h) * 3_600_000 + int(m) * 60_000 + int(float(s) * 1000)
        raise binder.err(SqlError, f'invalid input syntax for type interval: "{text}"', node)
    total = 0.0
    for number, unit in parts:
        u = _UNIT_ALIASES.get(unit.lower(), unit.lower()) if unit else "second"
        if u.endswith("s") and u[:-1] in _UNIT_MS:
            u = u[:-1]
        if u in ("month", "year"):
            raise binder.err(
                FeatureNotSupported,
                "intervals of months or years have no fixed length; use days",
                node,
            )
        if u not in _UNIT_MS:
            raise binder.err(SqlError, f'invalid input syntax for type interval: "{text}"', node)
        total += float(number) * _UNIT_MS[u]
    return round(total)


def type_from_ast(node: exp.Expression, binder: ScalarBinder | None = None) -> PgType:
    """The PostgreSQL type a sqlglot ``DataType`` names."""
    assert isinstance(node, exp.DataType)
    text = node.sql(dialect="postgres").lower()
    base = text.split("(")[0].strip()
    params = [p for p in node.expressions]
    precision = scale = None
    if base in ("decimal", "numeric") and params:
        precision = int(params[0].name)
        scale = int(params[1].name) if len(params) > 1 else 0
        if not 1 <= precision <= 38 or not 0 <= scale <= precision:
            raise FeatureNotSupported(
                f"numeric({precision},{scale}) is not supported: precision 1..38, scale 0..p",
                position=position(node),
            )
    if base.startswith("char") and not base.startswith("character varying"):
        raise FeatureNotSupported("char(n) is not supported; use text or varchar")
    if (
        base in ("decimal", "numeric")
        and binder is not None
        and binder.dialect == "spark"
        and not params
    ):
        precision, scale = 10, 0
    try:
        return named_type(base, precision, scale)
    except KeyError:
        raise FeatureNotSupported(f'type "{base}" is not supported') from None


_COMPARISONS: dict[type, BinaryFunc] = {
    exp.EQ: BinaryFunc.EQ,
    exp.NEQ: BinaryFunc.NE,
    exp.LT: BinaryFunc.LT,
    exp.LTE: BinaryFunc.LE,
    exp.GT: BinaryFunc.GT,
    exp.GTE: BinaryFunc.GE,
}
_ARITH: dict[type, BinaryFunc] = {
    exp.Add: BinaryFunc.ADD,
    exp.Sub: BinaryFunc.SUB,
    exp.Mul: BinaryFunc.MUL,
    exp.Div: BinaryFunc.DIV,
    exp.Mod: BinaryFunc.MOD,
    exp.IntDiv: BinaryFunc.DIV,
}
_SYMBOL = {
    BinaryFunc.ADD: "+",
    BinaryFunc.SUB: "-",
    BinaryFunc.MUL: "*",
    BinaryFunc.DIV: "/",
    BinaryFunc.MOD: "%",
}
_VARIADIC: dict[type, VariadicFunc] = {
    exp.Coalesce: VariadicFunc.COALESCE,
    exp.Greatest: VariadicFunc.GREATEST,
    exp.Least: VariadicFunc.LEAST,
}
_UNARY_TEXT: dict[type, UnaryFunc] = {
    exp.Lower: UnaryFunc.LOWER,
    exp.Upper: UnaryFunc.UPPER,
    exp.Length: UnaryFunc.LENGTH,
    exp.Trim: UnaryFunc.TRIM,
}
_DISPATCH: dict[type, Callable[[ScalarBinder, exp.Expression], Typed]] = {
    exp.Column: ScalarBinder.column,
    exp.Literal: ScalarBinder.literal,
    exp.Null: ScalarBinder.null,
    exp.Boolean: ScalarBinder.boolean,
    exp.Paren: ScalarBinder.paren,
    exp.Alias: ScalarBinder.alias,
    exp.And: ScalarBinder.logic,
    exp.Or: ScalarBinder.logic,
    exp.Not: ScalarBinder.not_,
    exp.Neg: ScalarBinder.neg,
    exp.NullSafeEQ: ScalarBinder.null_safe,
    exp.NullSafeNEQ: ScalarBinder.null_safe,
    exp.Is: ScalarBinder.is_,
    exp.Between: ScalarBinder.between,
    exp.In: ScalarBinder.in_,
    exp.Like: ScalarBinder.like,
    exp.ILike: ScalarBinder.like,
    exp.Escape: ScalarBinder.like,
    exp.DPipe: ScalarBinder.concat_op,
    exp.Case: ScalarBinder.case,
    exp.If: ScalarBinder.if_,
    exp.Nullif: ScalarBinder.nullif,
    exp.Cast: ScalarBinder.cast,
    exp.TryCast: ScalarBinder.cast,
    exp.Interval: ScalarBinder.interval,
    exp.CurrentTimestamp: ScalarBinder.wall_clock,
    exp.Extract: ScalarBinder.extract,
    exp.TimestampTrunc: ScalarBinder.date_trunc,
    exp.DateTrunc: ScalarBinder.date_trunc,
    exp.Substring: ScalarBinder.substring,
    exp.Abs: ScalarBinder.abs_,
    exp.Concat: ScalarBinder.concat_fn,
    **{k: ScalarBinder.comparison for k in _COMPARISONS},
    **{k: ScalarBinder.arith for k in _ARITH},
    **{k: ScalarBinder.variadic for k in _VARIADIC},
    **{k: ScalarBinder.unary_text for k in _UNARY_TEXT},
}
