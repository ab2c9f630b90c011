"""Binding of SQL operators: logic, comparison, arithmetic (numbers, dates, intervals),
pattern matching, IN/BETWEEN and the conditional forms (CASE, NULLIF, COALESCE …)."""

from __future__ import annotations

from sqlglot import exp

from spate.plan.expr import (
    BinaryFunc,
    CallBinary,
    CallUnary,
    CallVariadic,
    Case,
    Cast,
    Literal,
    ScalarExpr,
    UnaryFunc,
    VariadicFunc,
)
from spate.plan.numeric_division import division_scale
from spate.repr.types import BOOL, FLOAT64, INT64, INTERVAL, TIMESTAMP, ScalarType, numeric
from spate.sql import interval_ops
from spate.sql.binding import BinderBase, Typed
from spate.sql.checks import checked_division, float_range, int_range
from spate.sql.errors import (
    DatatypeMismatch,
    FeatureNotSupported,
    SqlSyntaxError,
    UndefinedFunction,
)
from spate.sql.regex import similar_to
from spate.sql.temporal import parse_interval
from spate.sql.types import (
    FLOAT8,
    INT4,
    INT8,
    PG_BOOL,
    PG_DATE,
    PG_TEXT,
    PG_TIMESTAMP,
    PgType,
    common_type,
    display_name,
    pg_numeric,
)
from spate.sql.values import number_literal


class OperatorBinding(BinderBase):
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
        # As PostgreSQL's grammar does, minus signs in front of a number (through parentheses)
        # are folded into it before it is typed: -(-2147483648) is the bigint 2147483648, and
        # -2147483648 an integer.
        inner, negative = node.this, True
        while isinstance(inner, (exp.Paren, exp.Neg)):
            negative ^= isinstance(inner, exp.Neg)
            inner = inner.this
        if isinstance(inner, exp.Literal) and not inner.is_string:
            lit, pg = number_literal(("-" if negative else "") + str(inner.this))
            return Typed(lit, pg)
        t = self._bind(node.this)
        if interval_ops.is_interval(t):
            return interval_ops.negate(self, t, node.this)
        if t.type.name == "unknown":
            t = self.coerce(t, FLOAT8, node)
        if not t.type.is_numeric:
            raise self.err(
                UndefinedFunction, f"operator does not exist: - {display_name(t.type)}", node
            )
        return Typed(int_range(CallUnary(UnaryFunc.NEG, t.expr), t.type.name), t.type)

    def unary_plus(self, t: Typed, node: exp.Expression) -> Typed:
        """``+ x``: ``x`` itself, for numbers only, as PostgreSQL's prefix ``+`` operators."""
        if t.type.name == "unknown":
            return self.coerce(t, FLOAT8, node)
        if not t.type.is_numeric:
            raise self.err(
                UndefinedFunction, f"operator does not exist: + {display_name(t.type)}", node
            )
        return t

    def comparison(self, node: exp.Expression) -> Typed:
        f = COMPARISON_OPS[type(node)]
        if isinstance(node.this, exp.Tuple) or isinstance(node.expression, exp.Tuple):
            return self._bind(self._row_comparison(node))
        left, right = self._bind(node.this), self._bind(node.expression)
        if interval_ops.wants_values(left, right):
            return interval_ops.compare(self, f, left, right, node)
        if left.type.name == "interval" or right.type.name == "interval":
            a, b = (
                self.interval_ms(x, n) for x, n in ((left, node.this), (right, node.expression))
            )
            return Typed(CallBinary(f, a, b), PG_BOOL)
        left, right = self.compared(left, right, node, "=")
        if null_constant(left.expr) or null_constant(right.expr):
            # PostgreSQL folds a strict operator with a NULL constant operand to NULL when it
            # plans the query: the other operand is never evaluated (``x / 0 = NULL`` is NULL)
            return Typed(Literal(None, BOOL), PG_BOOL)
        return Typed(CallBinary(f, left.expr, right.expr), PG_BOOL)

    def compared(
        self, left: Typed, right: Typed, node: exp.Expression, op: str
    ) -> tuple[Typed, Typed]:
        """The operands of a comparison: numerics of different types each in its own type
        (:meth:`exact_numeric_operands`), anything else converted to one type."""
        exact = self.exact_numeric_operands(left, right, node)
        if exact is not None:
            return exact
        (left, right), _ = self.operands(left, right, node, op)
        return left, right

    def exact_numeric_operands(
        self, left: Typed, right: Typed, node: exp.Expression
    ) -> tuple[Typed, Typed] | None:
        """Operands of a comparison of two numerics of different types (or a numeric and an
        integer), each kept in its own type: PostgreSQL compares them exactly, and the common
        ``numeric(p,s)`` of at most 38 digits may hold neither (``numeric(38,0)`` against
        ``numeric(38,10)``), where a cast would give NULL. An integer operand becomes the
        ``numeric(19,0)`` that holds every int64. ``None``: not such a pair."""
        names = (left.type.name, right.type.name)
        if "numeric" not in names or left.type == right.type:
            return None
        if not all(t.type.name == "numeric" or t.type.is_integer for t in (left, right)):
            return None
        whole = pg_numeric(numeric(19, 0))
        out = [
            t if t.type.name == "numeric" else self.coerce(t, whole, n)
            for t, n in ((left, node.this), (right, node.expression))
        ]
        return out[0], out[1]

    def _row_comparison(self, node: exp.Expression) -> exp.Expression:
        """``(a, b) op (c, d)`` as PostgreSQL compares rows, spelled with scalar comparisons:
        ``=`` every pair equal, ``<>`` some pair unequal, an ordering comparison decided by the
        first pair that is not equal (NULL where that pair holds a NULL)."""
        a, b = node.this, node.expression
        if not (isinstance(a, exp.Tuple) and isinstance(b, exp.Tuple)):
            raise self.err(FeatureNotSupported, "comparing a row with a non-row value", node)
        left, right = [x.copy() for x in a.expressions], [x.copy() for x in b.expressions]
        if len(left) != len(right):
            raise self.err(SqlSyntaxError, "unequal number of entries in row expressions", node)
        pairs = list(zip(left, right, strict=True))

        def both(x: exp.Expression, y: exp.Expression, op: type[exp.Binary]) -> exp.Expression:
            joined: object = op(this=exp.Paren(this=x), expression=exp.Paren(this=y))
            assert isinstance(joined, exp.Expression)
            return joined

        if isinstance(node, (exp.EQ, exp.NEQ)):
            joiner = exp.And if isinstance(node, exp.EQ) else exp.Or
            out: exp.Expression = type(node)(this=pairs[0][0], expression=pairs[0][1])
            for x, y in pairs[1:]:
                out = both(out, type(node)(this=x, expression=y), joiner)
            return out
        strict = exp.LT if isinstance(node, (exp.LT, exp.LTE)) else exp.GT
        x, y = pairs[-1]
        out = type(node)(this=x, expression=y)
        for x, y in reversed(pairs[:-1]):
            equal = exp.EQ(this=x.copy(), expression=y.copy())
            out = both(strict(this=x, expression=y), both(equal, out, exp.And), exp.Or)
        return out

    def interval_ms(self, t: Typed, node: exp.Expression) -> ScalarExpr:
        """An interval operand as int64 milliseconds (a constant or ``timestamp - timestamp``)."""
        self.refuse_interval_column(t, node)
        if t.interval_months:
            raise self.err(
                FeatureNotSupported, "comparing intervals of months is not supported", node
            )
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
        if target is not None and target.name == "float4" and left.type != right.type:
            # real with another numeric type: PostgreSQL's real-and-double operators (float48pl,
            # float84eq…) win over the real ones, so the other operand becomes double precision
            target = FLOAT8
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
        if interval_ops.is_interval(left) or interval_ops.is_interval(right):
            a = interval_ops.key(interval_ops.value(self, left, node.this))
            b = interval_ops.key(interval_ops.value(self, right, node.expression))
        else:
            left, right = self.compared(left, right, node, "IS DISTINCT FROM")
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
        typed, target = self.unify(items, "IN")
        if null_constant(typed[0].expr) or (len(typed) == 2 and null_constant(typed[1].expr)):
            # as PostgreSQL plans it: a NULL constant IN a list is NULL, the list never
            # evaluated (its strict = ANY); so is x IN (NULL), its x = NULL
            return Typed(Literal(None, BOOL), PG_BOOL)
        span = interval_ops.key if target.scalar is INTERVAL else (lambda e: e)
        x = span(typed[0].expr)
        out: ScalarExpr | None = None
        for v in typed[1:]:
            eq = CallBinary(BinaryFunc.EQ, x, span(v.expr))
            out = eq if out is None else CallBinary(BinaryFunc.OR, out, eq)
        assert out is not None
        return Typed(out, PG_BOOL)

    def like(self, node: exp.Expression) -> Typed:
        escape = None
        if isinstance(node, exp.Escape):
            escape = node.expression
            node = node.this
        if isinstance(node, exp.SimilarTo):
            return similar_to(self, node, escape)
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
        if interval_ops.wants_arith(op, left, right):
            return interval_ops.arith(self, node, op, left, right)
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
            if iv.interval_months:
                raise self.err(
                    FeatureNotSupported,
                    "a multiple of an interval of months is not supported",
                    node,
                )
            ms = CallBinary(BinaryFunc.MUL, Literal(iv.interval_ms, INT64), count.expr)
            parts = None
            if iv.interval_parts is not None:
                parts = tuple(CallBinary(BinaryFunc.MUL, p, count.expr) for p in iv.interval_parts)
            return Typed(ms, PgType("interval", None), interval_parts=parts)  # type: ignore[arg-type]
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
            # keep each operand's own type: an integer becomes the numeric holding its values
            left, right = (
                self.coerce(b, pg_numeric(_integer_numeric(b)), n, explicit=True)
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
        out = self.numeric_arith(node, op, left, right, target, original)
        if null_constant(left.expr) or null_constant(right.expr):
            return null_of(out)  # folded, as PostgreSQL folds a strict operator of a NULL
        return out

    def numeric_arith(
        self,
        node: exp.Expression,
        op: BinaryFunc,
        left: Typed,
        right: Typed,
        target: PgType,
        original: tuple[PgType, PgType],
    ) -> Typed:
        if (
            op is BinaryFunc.DIV
            and isinstance(node, exp.Div)
            and not node.args.get("typed")
            and target.is_integer
        ):  # Spark's "/": fractional division
            a = Cast(left.expr, FLOAT64)
            b = Cast(right.expr, FLOAT64)
            quotient = float_range(op, CallBinary(op, a, b), a, b, FLOAT64)
            return Typed(
                checked_division(op, quotient, b, FLOAT64, FLOAT64, a, nan_check=False), FLOAT8
            )
        if op is BinaryFunc.DIV and target.name == "numeric":
            # numeric division: exact, each quotient rounded as PostgreSQL rounds it
            assert left.type.scalar is not None and right.type.scalar is not None
            out_t = numeric(38, division_scale(left.type.scalar, right.type.scalar))
            quotient = CallBinary(op, left.expr, right.expr)
            return Typed(
                checked_division(op, quotient, right.expr, right.type.scalar, out_t, left.expr),
                pg_numeric(out_t),
            )
        out_type = target
        if target.name == "numeric":
            ls, rs = _scale(original[0]), _scale(original[1])
            scale = ls + rs if op is BinaryFunc.MUL else max(ls, rs)
            out_type = pg_numeric(numeric(38, min(38, scale)))
        value: ScalarExpr = CallBinary(op, left.expr, right.expr)
        if out_type.name == "float8":
            value = float_range(op, value, left.expr, right.expr, FLOAT64)
        elif out_type.name == "float4":
            # real op real: computed in double precision and rounded to single, which gives
            # PostgreSQL's single-precision + - * / exactly
            value = CallVariadic(VariadicFunc.FLOAT4, (value,))
        if out_type.scalar is not None and right.type.scalar is not None:
            value = checked_division(
                op, value, right.expr, right.type.scalar, out_type.scalar, left.expr
            )
        if op is not BinaryFunc.MOD:
            value = int_range(value, out_type.name)
        return Typed(value, out_type)

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
            # an interval, carried as int64 milliseconds: comparable with interval constants;
            # as a result column, whole days and the time (PostgreSQL's interval_justify_hours)
            us = CallVariadic(VariadicFunc.TIMESTAMP_DIFF_US, (a, b))
            day = Literal(86_400_000_000, INT64)
            parts = (
                Literal(0, INT64),
                CallBinary(BinaryFunc.DIV, us, day),
                CallBinary(BinaryFunc.MOD, us, day),
            )
            return Typed(
                CallBinary(BinaryFunc.TIMESTAMP_DIFF_MS, a, b),
                PgType("interval", None),
                interval_parts=parts,
            )
        raise self.err(
            UndefinedFunction,
            f"operator does not exist: {display_name(left.type)} {_SYMBOL[op]} "
            f"{display_name(right.type)}",
            node,
        )

    def refuse_interval_column(self, t: Typed, node: exp.Expression) -> None:
        if t.type.scalar is INTERVAL:
            raise self.err(
                FeatureNotSupported,
                "an interval column of a subquery can only be selected (not compared or "
                "computed with)",
                node,
            )

    def time_arith(self, node: exp.Expression, op: BinaryFunc, left: Typed, right: Typed) -> Typed:
        for t, n in ((left, node.this), (right, node.expression)):
            self.refuse_interval_column(t, n)

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
            base = left.expr
            if right.interval_months:
                # months first, then the fixed part (PostgreSQL's order)
                n = right.interval_months if op is BinaryFunc.ADD else -right.interval_months
                base = CallVariadic(VariadicFunc.ADD_MONTHS, (base, Literal(n, INT64)))
                if right.interval_ms == 0:
                    return Typed(base, left.type)
            return Typed(CallBinary(f, base, ms), left.type)
        raise self.err(
            UndefinedFunction,
            f"operator does not exist: {display_name(left.type)} {_SYMBOL[op]} interval",
            node,
        )

    def concat_op(self, node: exp.Expression) -> Typed:
        left = self.to_text(self._bind(node.this), node.this)
        right = self.to_text(self._bind(node.expression), node.expression)
        return Typed(CallBinary(BinaryFunc.CONCAT, left.expr, right.expr), PG_TEXT)

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
        if target.scalar is INTERVAL and f is not VariadicFunc.COALESCE:
            return Typed(interval_ops.extreme(f, [t.expr for t in typed]), target)
        return Typed(CallVariadic(f, tuple(t.expr for t in typed)), target)

    def nullif(self, node: exp.Expression) -> Typed:
        a, b = self._bind(node.this), self._bind(node.expression)
        (a2, b2), _ = self.operands(a, b, node, "=")
        assert a2.type.scalar is not None
        null = Literal(None, a2.type.scalar)
        return Typed(
            Case(((interval_ops.equal(a2.expr, b2.expr, a2.type.scalar), null),), a2.expr),
            a2.type,
        )


def _integer_numeric(t: Typed) -> ScalarType:
    """The numeric type an integer operand converts to: as many digits as its values have
    (a constant: its own digits), so that quotients keep room for fraction digits."""
    if isinstance(t.expr, Literal) and isinstance(t.expr.value, int):
        return numeric(max(1, len(str(abs(t.expr.value)))), 0)
    return numeric(19, 0)


def _scale(t: PgType) -> int:
    if t.name == "numeric" and t.scalar is not None:
        return t.scalar.scale or 0
    return 0


COMPARISON_OPS: dict[type, BinaryFunc] = {  # sqlglot comparison node -> IR function
    exp.EQ: BinaryFunc.EQ,
    exp.NEQ: BinaryFunc.NE,
    exp.LT: BinaryFunc.LT,
    exp.LTE: BinaryFunc.LE,
    exp.GT: BinaryFunc.GT,
    exp.GTE: BinaryFunc.GE,
}


def null_constant(e: ScalarExpr) -> bool:
    """Whether ``e`` is a NULL constant (a NULL literal, cast or not)."""
    while isinstance(e, Cast):
        e = e.expr
    return isinstance(e, Literal) and e.value is None


def null_of(t: Typed) -> Typed:
    """A NULL of ``t``'s type."""
    assert t.type.scalar is not None
    return Typed(Literal(None, t.type.scalar), t.type)


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
