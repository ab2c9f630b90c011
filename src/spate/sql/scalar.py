"""Scalar expressions: sqlglot AST → typed IR scalars, with PostgreSQL's typing rules.

:class:`ScalarBinder` binds one expression against a :class:`~spate.sql.scope.Scope`. The query
planner hooks into it (``override``) to substitute aggregates, group keys and subquery results
that it has already computed as columns.

The forms are bound in :mod:`spate.sql.binding` (coercion), :mod:`spate.sql.operators` and
:mod:`spate.sql.temporal`; this module adds columns, literals, casts and functions, and
dispatches on the node's type.
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
    ColumnRef,
    Literal,
    RaiseError,
    ScalarExpr,
    UnaryFunc,
    VariadicFunc,
    lift,
)
from spate.repr.types import BOOL, INT64, INTERVAL, TEXT
from spate.sql.binding import BinderBase, Override, Typed
from spate.sql.checks import SUBSTRING_ERROR, int_range, strict_cast
from spate.sql.errors import (
    CannotCoerce,
    DatatypeMismatch,
    FeatureNotSupported,
    GroupingError,
    SqlError,
    UndefinedFunction,
    UndefinedParameter,
)
from spate.sql.fixed_functions import ANONYMOUS, FIXED_BUILTINS
from spate.sql.functions import BUILTINS
from spate.sql.operators import _ARITH, _VARIADIC, COMPARISON_OPS, OperatorBinding
from spate.sql.parameters import current as current_parameters
from spate.sql.parameters import no_parameters
from spate.sql.parse import UNARY_PLUS, position
from spate.sql.temporal import TemporalBinding, interval_constant, parse_interval
from spate.sql.types import (
    FLOAT8,
    INT4,
    INT8,
    PG_BOOL,
    PG_INTERVAL_VALUE,
    PG_TEXT,
    UNKNOWN,
    PgType,
    display_name,
    named_type,
    pg_numeric,
)
from spate.sql.values import number_literal

__all__ = ["BinderBase", "Override", "ScalarBinder", "Typed", "parse_interval", "type_from_ast"]


class ScalarBinder(OperatorBinding, TemporalBinding):
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

    def parameter(self, node: exp.Expression) -> Typed:
        """``$n``: a NULL of its type while a statement's parameters are typed
        (:mod:`spate.sql.parameters`); one of unknown type until a context decides it."""
        assert isinstance(node, exp.Parameter)
        params = current_parameters()
        if params is None or not node.name.isdigit():
            raise self.err(UndefinedParameter, f"there is no parameter ${node.name}", node)
        n = int(node.name)
        if params.arguments is not None:  # an EXECUTE's argument, cast to the parameter's type
            if not 1 <= n <= len(params.arguments):
                raise self.err(UndefinedParameter, f"there is no parameter ${n}", node)
            target = params.declared[n - 1]
            assert target is not None
            with no_parameters():
                return self.cast_to(params.arguments[n - 1], target, node)
        known = params.type_of(n)
        if known is not None:
            scalar = known.scalar if known.scalar is not None else INTERVAL
            return Typed(Literal(None, scalar), known)
        return Typed(Literal(None, TEXT), UNKNOWN, param=n)

    def boolean(self, node: exp.Expression) -> Typed:
        assert isinstance(node, exp.Boolean)
        return Typed(Literal(bool(node.this), BOOL), PG_BOOL)

    def _interval_cast(self, t: Typed, node: exp.Expression) -> Typed:
        """``x::interval`` of an expression: an interval as it is, a text read at run time
        (:mod:`spate.repr.interval_input`)."""
        if t.type.name == "interval" or t.type.name == "unknown":
            return self.coerce(t, PG_INTERVAL_VALUE, node)
        if t.type.scalar is TEXT:
            return Typed(CallVariadic(VariadicFunc.INTERVAL_OF_TEXT, (t.expr,)), PG_INTERVAL_VALUE)
        raise self.err(CannotCoerce, f"cannot cast type {display_name(t.type)} to interval", node)

    def paren(self, node: exp.Expression) -> Typed:
        t = self._bind(node.this)
        return self.unary_plus(t, node) if node.meta.get(UNARY_PLUS) else t

    def alias(self, node: exp.Expression) -> Typed:
        return self._bind(node.this)

    def cast(self, node: exp.Expression) -> Typed:
        assert isinstance(node, (exp.Cast, exp.TryCast))
        target = self.type_of(node.args["to"])
        return self.cast_to(node.this, target, node, to=node.args["to"])

    def cast_to(
        self,
        inner: exp.Expression,
        target: PgType,
        node: exp.Expression,
        *,
        to: exp.Expression | None = None,
    ) -> Typed:
        """``CAST(inner AS target)`` (``node``: the cast, a ``TRY_CAST`` gives NULL where
        a text does not convert; ``to``: the type as written, its modifiers)."""
        if target.name == "interval":
            if isinstance(inner, exp.Literal) and inner.is_string:
                return interval_constant(str(inner.this), node, self)
            return self._interval_cast(self._bind(inner), node)
        t = self._bind(inner)
        if (
            to is not None
            and target.name == "text"
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
            if isinstance(node, exp.TryCast) and target.scalar is not None:
                try:  # a text that does not convert is NULL (a CAST fails on it)
                    return self.coerce(t, target, node)
                except SqlError as e:
                    if not e.sqlstate.startswith("22"):  # not a value's problem: say so
                        raise
                    return Typed(Literal(None, target.scalar), target)
            return self.coerce(t, target, node)
        if target.scalar is None:
            raise self.err(FeatureNotSupported, f"cannot cast to {display_name(target)}", node)
        if t.type.category == "U" and target.name != "text" and t.type.name != target.name:
            raise self.err(
                DatatypeMismatch,
                f"cannot cast type {display_name(t.type)} to {display_name(target)}",
                node,
            )
        out = self.coerce(t, target, node, explicit=True)
        if isinstance(node, exp.TryCast) or t.type.scalar is None:
            return out
        if (
            target.name == "numeric"
            and (to is None or not to.expressions)
            and isinstance(out.expr, Literal)
            and isinstance(t.expr, Literal)
            and isinstance(t.expr.value, (int, Decimal))
            and not isinstance(t.expr.value, bool)
            and self.dialect != "spark"
        ):
            # a constant cast to unconstrained numeric keeps its own digits (1::numeric is 1,
            # not 1.0000000000), as PostgreSQL's value does
            value = Decimal(t.expr.value)
            sign_digits_exponent = value.as_tuple()
            exponent = sign_digits_exponent.exponent
            if (
                isinstance(exponent, int)
                and -38 <= exponent <= 0
                and len(sign_digits_exponent.digits) <= 38
            ):
                tight = lift(value)
                assert isinstance(tight, Literal)
                return Typed(tight, pg_numeric(tight.type))
        # CAST fails where it cannot convert a value (TRY_CAST gives NULL)
        name = display_name(target)
        checked = strict_cast(out.expr, t.expr, t.type.scalar, target.scalar, name)
        if t.type.category == "N" and not (t.type.name == "int2" and target.name == "int4"):
            checked = int_range(checked, target.name)  # bigint, numeric, float: 32/16 bits
        return Typed(checked, target)

    def type_of(self, node: exp.Expression) -> PgType:
        return type_from_ast(node, self)

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
            count = self.coerce(self._bind(length), INT8, length).expr
            if self.dialect == "spark":
                # Spark: a negative length is an empty string (PostgreSQL: an error)
                negative = CallBinary(BinaryFunc.LT, count, Literal(0, INT64))
                count = Case(((negative, Literal(0, INT64)),), count)
            else:
                # PostgreSQL: a negative length is an error (22011), not NULL
                negative = CallBinary(BinaryFunc.LT, count, Literal(0, INT64))
                failed = RaiseError(SUBSTRING_ERROR, "negative substring length not allowed", INT64)
                count = Case(((negative, failed),), count)
            args.append(count)
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
            return FIXED_BUILTINS[exp.Trim](self, node)
        return Typed(CallUnary(f, t.expr), PG_TEXT)

    def abs_(self, node: exp.Expression) -> Typed:
        t = self._bind(node.this)
        if t.type.name == "unknown":
            t = self.coerce(t, FLOAT8, node.this)
        if not t.type.is_numeric:
            raise self.err(
                UndefinedFunction, f"function abs({display_name(t.type)}) does not exist", node
            )
        return Typed(int_range(CallUnary(UnaryFunc.ABS, t.expr), t.type.name), t.type)

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
        fixed = FIXED_BUILTINS.get(type(node))
        if fixed is None and isinstance(node, exp.Anonymous):
            fixed = ANONYMOUS.get(name)
        if fixed is not None:
            return fixed(self, node)
        builtin = BUILTINS.get(type(node))
        if builtin is not None:
            return builtin(self, node)
        raise self.err(UndefinedFunction, f"function {name} does not exist", node)


_AGGREGATE_NAMES = frozenset(
    {"count", "sum", "avg", "min", "max", "bool_and", "bool_or", "string_agg", "every", "some"}
)


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
    exp.Parameter: ScalarBinder.parameter,
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
    exp.SimilarTo: ScalarBinder.like,
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
    **{k: ScalarBinder.comparison for k in COMPARISON_OPS},
    **{k: ScalarBinder.arith for k in _ARITH},
    **{k: ScalarBinder.variadic for k in _VARIADIC},
    **{k: ScalarBinder.unary_text for k in _UNARY_TEXT},
}
