"""The core of scalar binding: a bound expression (:class:`Typed`) and the coercions every
form of expression shares.

:class:`BinderBase` holds the binder's settings, its entry points and PostgreSQL's conversion
rules; the forms themselves (operators, time, casts and functions) are bound by the classes that
build on it, which :class:`~spate.sql.scalar.ScalarBinder` combines.
"""

from __future__ import annotations

import datetime as dt
import math
import struct
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

from sqlglot import exp

from spate.plan.evaluation.casts import float_text
from spate.plan.expr import (
    BinaryFunc,
    CallBinary,
    CallVariadic,
    Case,
    Cast,
    Literal,
    ScalarExpr,
    VariadicFunc,
)
from spate.repr.types import (
    FLOAT64,
    INT64,
    INT64_MAX,
    INT64_MIN,
    INTERVAL,
    TEXT,
    ScalarKind,
    numeric,
)
from spate.sql.checks import strict_cast
from spate.sql.errors import (
    DatatypeMismatch,
    FeatureNotSupported,
    NumericOutOfRange,
    SqlError,
)
from spate.sql.parameters import current as current_parameters
from spate.sql.parse import position
from spate.sql.scope import Scope
from spate.sql.types import (
    PG_BOOL,
    PG_INTERVAL_VALUE,
    PG_TEXT,
    PgType,
    can_implicit,
    common_type,
    display_name,
)
from spate.sql.values import convert_text, fit_numeric


@dataclass(frozen=True, slots=True)
class Typed:
    """A bound expression: the IR scalar and its PostgreSQL type.

    ``raw`` is the text of a quoted literal whose type is still unknown (its context converts
    it); ``interval_ms`` marks an interval constant (only an operand of time arithmetic)."""

    expr: ScalarExpr
    type: PgType
    raw: str | None = None
    interval_ms: int | None = None
    interval_months: int = 0
    """The months of an interval constant (added before its ``interval_ms``)."""
    interval_parts: tuple[ScalarExpr, ScalarExpr, ScalarExpr] | None = None
    """An interval's months, days and microseconds (int64 expressions) as PostgreSQL splits
    them, for a result column (``expr`` is what comparisons and time arithmetic use)."""
    param: int | None = None
    """``n`` of a parameter ``$n`` of unknown type: its first coercion types it
    (:mod:`spate.sql.parameters`)."""


Override = Callable[[exp.Expression], "Typed | None"]


def _rint_to_int(x: ScalarExpr) -> ScalarExpr:
    """A float64 rounded half to even (PostgreSQL's rint) as int64."""
    one = Literal(1, INT64)
    half = Literal(0.5, FLOAT64)
    tr = Cast(x, INT64)
    floor = Case(
        ((CallBinary(BinaryFunc.GT, Cast(tr, FLOAT64), x), CallBinary(BinaryFunc.SUB, tr, one)),),
        tr,
    )
    diff = CallBinary(BinaryFunc.SUB, x, Cast(floor, FLOAT64))
    odd = CallBinary(
        BinaryFunc.NE, CallBinary(BinaryFunc.MOD, floor, Literal(2, INT64)), Literal(0, INT64)
    )
    up = CallBinary(
        BinaryFunc.OR,
        CallBinary(BinaryFunc.GT, diff, half),
        CallBinary(BinaryFunc.AND, CallBinary(BinaryFunc.EQ, diff, half), odd),
    )
    return Case(((up, CallBinary(BinaryFunc.ADD, floor, one)),), floor)


class BinderBase:
    def __init__(
        self,
        scope: Scope,
        *,
        text: str | None = None,
        dialect: str = "postgres",
        override: Override | None = None,
        allow_now: bool = False,
        clause: str = "",
        today: dt.date | None = None,
    ) -> None:
        self.scope = scope
        self.text = text
        self.dialect = dialect
        self.override = override
        self.allow_now = allow_now
        self.clause = clause
        self.today = today
        """The current date of a one-off query (``age(timestamp)`` reads it); ``None`` where
        the result is kept up to date (a view), which cannot read the clock."""

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
        if target.name == "text" and t.type.name == "float4":
            # real prints its single-precision value's shortest digits (0.1, not 0.100000001…)
            x = t.expr
            if isinstance(x, Literal) and isinstance(x.value, float):
                return Typed(Literal(float_text(x.value, single=True), TEXT), target)
            return Typed(CallVariadic(VariadicFunc.FLOAT4_TEXT, (x,)), target)
        out = self._coerce(t, target, node, explicit)
        if target.name == "float4" and t.type.name != "float4":
            # real: rounded to single precision
            x = out.expr
            if isinstance(x, Literal) and isinstance(x.value, float) and math.isfinite(x.value):
                single = struct.unpack("f", struct.pack("f", x.value))[0]
                if math.isinf(single) or (single == 0 and x.value != 0):
                    raise self.err(NumericOutOfRange, '"real" value out of range', node)
                return Typed(Literal(single, x.type), target)
            if not isinstance(x, Literal):
                return Typed(CallVariadic(VariadicFunc.FLOAT4, (x,)), target)
        return out

    def _coerce(self, t: Typed, target: PgType, node: exp.Expression, explicit: bool) -> Typed:
        if target.scalar is None:
            raise self.err(
                FeatureNotSupported, f"type {display_name(target)} is not a column type", node
            )
        if t.type.name == "unknown":
            params = current_parameters()
            if t.param is not None and params is not None:
                params.note(t.param, target)
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
        if t.type.name == "interval" and target.name == "interval" and t.type.scalar is None:
            if t.interval_parts is None:
                raise self.err(
                    FeatureNotSupported, "this interval expression is not a value here", node
                )
            return Typed(CallVariadic(VariadicFunc.MAKE_INTERVAL, t.interval_parts), target)
        if t.type.name == "interval" and target.name == "text" and explicit:
            iv = t if t.type.scalar is INTERVAL else self._coerce(t, PG_INTERVAL_VALUE, node, True)
            return Typed(CallVariadic(VariadicFunc.INTERVAL_TEXT, (iv.expr,)), target)
        if t.type.name == "interval" and target.name != "interval":
            raise self.err(
                DatatypeMismatch,
                f"cannot convert interval to {display_name(target)}",
                node,
            )
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
            if not INT64_MIN <= rounded <= INT64_MAX:
                # -9223372036854775808::bigint is -(9223372036854775808::bigint): the cast binds
                # first, and its numeric operand does not fit (PostgreSQL: 22003)
                name = "bigint" if target.name == "int8" else display_name(target)
                raise self.err(NumericOutOfRange, f"{name} out of range", node)
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
            t.type.scalar is not None
            and t.type.scalar.kind is ScalarKind.FLOAT64
            and target.scalar.kind is ScalarKind.INT64
            and not isinstance(t.expr, Literal)
            and self.dialect != "spark"  # Spark truncates
        ):
            return Typed(_rint_to_int(t.expr), target)
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
        cast = Cast(t.expr, target.scalar)
        if not explicit and target.scalar.kind is ScalarKind.NUMERIC and t.type.scalar is not None:
            # An implicit conversion to a numeric of fewer integer digits (a common type capped
            # at 38 digits) fails with 22003 where the value does not fit, never gives NULL.
            checked = strict_cast(cast, t.expr, t.type.scalar, target.scalar, "numeric")
            return Typed(checked, target)
        return Typed(cast, target)

    def unify(
        self, items: list[tuple[Typed, exp.Expression]], what: str
    ) -> tuple[list[Typed], PgType]:
        target = common_type([t.type for t, _ in items])
        if target is None:
            shown = " and ".join(sorted({display_name(t.type) for t, _ in items}))
            raise self.err(DatatypeMismatch, f"{what} types {shown} cannot be matched", items[0][1])
        return [self.coerce(t, target, n) for t, n in items], target

    def to_text(self, t: Typed, node: exp.Expression) -> Typed:
        if t.type.name in ("text", "unknown"):
            return self.coerce(t, PG_TEXT, node)
        return self.coerce(t, PG_TEXT, node, explicit=True)

    # -- the walk -----------------------------------------------------------------------------

    def _bind(self, node: exp.Expression) -> Typed:
        """One node bound (without locating errors); the complete binder dispatches on its type."""
        raise NotImplementedError
