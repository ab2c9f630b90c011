"""Name resolution and type inference for scalar expressions.

:func:`resolve` takes an expression written against the columns of an input and returns the IR
form and its :class:`~spate.plan.expr.ColumnType`:

* ``ColumnName("x")`` becomes ``ColumnRef(i)`` (unknown: ``column 'x' not found; columns: …``);
* :class:`~spate.plan.expr.Interval` arithmetic becomes the typed time functions;
* operands of different numeric types meet at the wider one through an explicit ``Cast``
  (``int64 < numeric(38,0) < float64``; literals are converted in place), and a ``date``
  compared with a ``timestamp`` is cast to ``timestamp``.

Resolution is idempotent: a resolved expression resolves to itself (this is how decoded plans
are re-validated). Every error is a :class:`~spate.plan.errors.PlanTypeError` or
:class:`~spate.plan.errors.PlanColumnMissing` whose message shows the offending expression with
column names.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from decimal import Decimal

from spate.plan import numeric_math
from spate.plan.errors import PlanColumnMissing, PlanTypeError
from spate.plan.expr import (
    ARITHMETIC,
    COMPARISONS,
    BinaryFunc,
    CallBinary,
    CallUnary,
    CallVariadic,
    Case,
    Cast,
    ColumnName,
    ColumnRef,
    ColumnType,
    DateTrunc,
    Extract,
    Interval,
    Literal,
    Now,
    RaiseError,
    ScalarExpr,
    TimeUnit,
    UnaryFunc,
    VariadicFunc,
    show,
)
from spate.plan.funcs import CONSTANT_ARGS, NUMERIC_MATH, SAME, SIGNATURES
from spate.plan.numeric_division import division_scale
from spate.repr.desc import Column
from spate.repr.types import (
    BOOL,
    DATE,
    INT64,
    TEXT,
    TIMESTAMP,
    Datum,
    ScalarKind,
    ScalarType,
    numeric,
)

K = ScalarKind
_NUMBERS = (K.INT64, K.NUMERIC, K.FLOAT64)
_DAY_MS = 86_400_000


def resolve(expr: object, columns: Sequence[Column]) -> tuple[ScalarExpr, ColumnType]:
    """The IR form of ``expr`` over ``columns`` and its result type (see the module doc)."""
    if not isinstance(expr, ScalarExpr):
        hint = " (use .eq() for SQL =)" if isinstance(expr, bool) else ""
        raise PlanTypeError(
            f"expected a scalar expression, got {type(expr).__name__} {expr!r}{hint}"
        )
    return _Resolver(columns).go(expr)


def typ(expr: ScalarExpr, columns: Sequence[Column]) -> ColumnType:
    """The result type of an already resolved ``expr`` over ``columns``."""
    return resolve(expr, columns)[1]


class _Resolver:
    def __init__(self, columns: Sequence[Column]) -> None:
        self.columns = columns
        self.names = [c.name for c in columns]
        # by node identity: lowered SQL shares subexpressions (a checked float operation
        # repeats its operands), so a tree of 4^n nodes may be a DAG of n; resolve it once
        self.done: dict[int, tuple[ScalarExpr, tuple[ScalarExpr, ColumnType]]] = {}

    def show(self, e: ScalarExpr) -> str:
        return show(e, self.names)

    def go(self, e: ScalarExpr) -> tuple[ScalarExpr, ColumnType]:
        found = self.done.get(id(e))
        if found is not None and found[0] is e:
            return found[1]
        out = self.resolve(e)
        self.done[id(e)] = (e, out)
        return out

    def resolve(self, e: ScalarExpr) -> tuple[ScalarExpr, ColumnType]:
        match e:
            case ColumnRef(i):
                if i >= len(self.columns):
                    raise PlanColumnMissing(
                        f"column #{i} not found; the input has {len(self.columns)} columns"
                        f" ({', '.join(self.names)})"
                    )
                c = self.columns[i]
                return e, ColumnType(c.type, c.nullable)
            case ColumnName(name):
                for i, c in enumerate(self.columns):
                    if c.name == name:
                        return ColumnRef(i), ColumnType(c.type, c.nullable)
                raise PlanColumnMissing(
                    f"column {name!r} not found; columns: {', '.join(self.names)}"
                )
            case Literal(v, t):
                return e, ColumnType(t, v is None)
            case Now(t):
                return e, ColumnType(t, False)
            case RaiseError(code, _, t):
                if not (isinstance(code, str) and len(code) == 5 and isinstance(t, ScalarType)):
                    raise PlanTypeError(f"{self.show(e)}: needs a 5-character SQLSTATE and a type")
                return e, ColumnType(t, False)
            case Interval():
                raise PlanTypeError(
                    f"{self.show(e)} can only be added to or subtracted from a time"
                )
            case CallUnary(f, x):
                return self.unary(f, x)
            case CallBinary(f, left, right):
                return self.binary(e, f, left, right)
            case CallVariadic(f, xs):
                return self.variadic(e, f, xs)
            case Case(whens, otherwise):
                return self.case(whens, otherwise)
            case Cast(x, to):
                x2, xt = self.go(x)
                if not can_cast(xt.type, to):
                    raise PlanTypeError(f"cannot cast {xt.type} to {to}: {self.show(e)}")
                if xt.type == to:
                    return Cast(x2, to), xt
                return Cast(x2, to), ColumnType(to, xt.nullable or cast_can_fail(xt.type, to))
            case DateTrunc(unit, x):
                x2, xt = self.go(x)
                self.need_time(e, xt, unit)
                return DateTrunc(unit, x2), xt
            case Extract(unit, x):
                x2, xt = self.go(x)
                self.need_time(e, xt, unit)
                return Extract(unit, x2), ColumnType(INT64, xt.nullable)
        raise PlanTypeError(f"not a scalar expression node: {e!r}")

    def need_time(self, e: ScalarExpr, xt: ColumnType, unit: TimeUnit) -> None:
        if xt.type.kind not in (K.DATE, K.TIMESTAMP):
            raise PlanTypeError(f"{self.show(e)}: expected date or timestamp, got {xt.type}")
        if xt.type.kind is K.DATE and unit in (TimeUnit.HOUR, TimeUnit.MINUTE, TimeUnit.SECOND):
            raise PlanTypeError(f"{self.show(e)}: a date has no {unit.value}")

    # -- unary ----------------------------------------------------------------------------------

    def unary(self, f: UnaryFunc, x: ScalarExpr) -> tuple[ScalarExpr, ColumnType]:
        x2, xt = self.go(x)
        node = CallUnary(f, x2)
        k = xt.type.kind

        def need(*kinds: ScalarKind) -> None:
            if k not in kinds:
                want = " or ".join(str(kk.value) for kk in kinds)
                raise PlanTypeError(f"{f.value} expects {want}, got {xt.type}: {self.show(node)}")

        if f is UnaryFunc.NOT:
            need(K.BOOL)
            return node, xt
        if f is UnaryFunc.IS_NULL:
            return node, ColumnType(BOOL, False)
        if f in (UnaryFunc.NEG, UnaryFunc.ABS):
            need(*_NUMBERS)
            return node, xt
        if f in (UnaryFunc.LOWER, UnaryFunc.UPPER, UnaryFunc.TRIM):
            need(K.TEXT)
            return node, xt
        if f is UnaryFunc.LENGTH:
            need(K.TEXT, K.BYTES)
            return node, ColumnType(INT64, xt.nullable)
        if f in (UnaryFunc.EPOCH_MS, UnaryFunc.EPOCH_MS_CEIL):
            need(K.TIMESTAMP)
            return node, ColumnType(INT64, xt.nullable)
        if f is UnaryFunc.FROM_EPOCH_MS:
            need(K.INT64)
            return node, ColumnType(TIMESTAMP, xt.nullable)
        raise PlanTypeError(f"unknown unary function {f!r}")

    # -- binary ---------------------------------------------------------------------------------

    def binary(
        self, e: ScalarExpr, f: BinaryFunc, left: ScalarExpr, right: ScalarExpr
    ) -> tuple[ScalarExpr, ColumnType]:
        if f in (BinaryFunc.ADD, BinaryFunc.SUB) and isinstance(right, Interval):
            return self.interval_arith(e, f, left, right)
        if f is BinaryFunc.ADD and isinstance(left, Interval):
            return self.interval_arith(e, f, right, left)
        l2, lt = self.go(left)
        r2, rt = self.go(right)
        nullable = lt.nullable or rt.nullable
        lk, rk = lt.type.kind, rt.type.kind

        def mismatch(what: str) -> PlanTypeError:
            return PlanTypeError(
                f"{what}: {self.show(l2)} is {lt.type}, {self.show(r2)} is {rt.type}"
                f" in {self.show(CallBinary(f, l2, r2))}"
            )

        if f in (BinaryFunc.AND, BinaryFunc.OR):
            if lk is not K.BOOL or rk is not K.BOOL:
                raise mismatch(f"{f.value.upper()} needs bool operands")
            return CallBinary(f, l2, r2), ColumnType(BOOL, nullable)
        if f in COMPARISONS or f in ARITHMETIC:
            (l2, lt), (r2, rt) = self.unify((l2, lt), (r2, rt), f.value, mismatch)
            k = lt.type.kind
            node = CallBinary(f, l2, r2)
            if f in COMPARISONS:
                if k is K.JSONB and f not in (BinaryFunc.EQ, BinaryFunc.NE):
                    raise mismatch("jsonb values only compare with = and <>")
                return node, ColumnType(BOOL, nullable)
            if k not in _NUMBERS:
                raise mismatch(f"{f.value} needs numbers")
            if k is K.NUMERIC:
                return node, self.numeric_arith(f, lt.type, rt.type, nullable)
            return node, ColumnType(lt.type, nullable or f in (BinaryFunc.DIV, BinaryFunc.MOD))
        sig = _BINARY_SIGNATURES.get(f)
        if sig is None:
            raise PlanTypeError(f"unknown binary function {f!r}")
        want_l, want_r, out = sig
        if lk is not want_l or rk is not want_r:
            raise mismatch(f"{f.value} expects {want_l.value} and {want_r.value}")
        return CallBinary(f, l2, r2), ColumnType(out, nullable)

    def numeric_arith(
        self,
        f: BinaryFunc,
        a: ScalarType,
        b: ScalarType,
        nullable: bool,
    ) -> ColumnType:
        assert a.scale is not None and b.scale is not None
        if f in (BinaryFunc.ADD, BinaryFunc.SUB, BinaryFunc.MOD):
            return ColumnType(numeric(38, max(a.scale, b.scale)), nullable or f is BinaryFunc.MOD)
        if f is BinaryFunc.MUL:
            return ColumnType(numeric(38, min(38, a.scale + b.scale)), nullable)
        # division: PostgreSQL's rounding (spate.plan.numeric_division); NULL for a zero divisor
        return ColumnType(numeric(38, division_scale(a, b)), True)

    def unify(
        self,
        a: tuple[ScalarExpr, ColumnType],
        b: tuple[ScalarExpr, ColumnType],
        what: str,
        mismatch: Callable[[str], PlanTypeError],
    ) -> tuple[tuple[ScalarExpr, ColumnType], tuple[ScalarExpr, ColumnType]]:
        """Cast the narrower operand to the wider type, or fail."""
        ta, tb = a[1].type, b[1].type
        if ta.kind is tb.kind:
            return a, b
        target = common_type(ta, tb)
        if target is None:
            raise mismatch(f"{what} needs operands of one type")
        return coerce(a, target), coerce(b, target)

    def interval_arith(
        self, e: ScalarExpr, f: BinaryFunc, x: ScalarExpr, iv: Interval
    ) -> tuple[ScalarExpr, ColumnType]:
        x2, xt = self.go(x)
        ms = Literal(iv.ms, INT64)
        k = xt.type.kind
        if k is K.TIMESTAMP:
            g = BinaryFunc.TIMESTAMP_ADD_MS if f is BinaryFunc.ADD else BinaryFunc.TIMESTAMP_SUB_MS
            return CallBinary(g, x2, ms), xt
        if k is K.INT64:
            return CallBinary(f, x2, ms), xt
        if k is K.DATE:
            if iv.ms % _DAY_MS:
                raise PlanTypeError(
                    f"{self.show(e)}: a date moves by whole days; cast it to timestamp first"
                )
            days = iv.ms // _DAY_MS if f is BinaryFunc.ADD else -(iv.ms // _DAY_MS)
            return CallBinary(BinaryFunc.DATE_ADD_DAYS, x2, Literal(days, INT64)), xt
        raise PlanTypeError(
            f"{self.show(e)}: an interval applies to timestamp, date or int64 ms, not {xt.type}"
        )

    # -- variadic and case ----------------------------------------------------------------------

    def variadic(
        self, e: ScalarExpr, f: VariadicFunc, xs: tuple[ScalarExpr, ...]
    ) -> tuple[ScalarExpr, ColumnType]:
        typed = [self.go(x) for x in xs]
        if f in SIGNATURES:
            return self.fixed(e, f, typed)
        if f is VariadicFunc.SUBSTR:
            kinds = [t.type.kind for _, t in typed]
            if (
                len(typed) not in (2, 3)
                or kinds[0] is not K.TEXT
                or any(k is not K.INT64 for k in kinds[1:])
            ):
                shown = ", ".join(str(t.type) for _, t in typed)
                raise PlanTypeError(
                    f"substr expects (text, int64[, int64]), got ({shown}): {self.show(e)}"
                )
            nullable = any(t.nullable for _, t in typed)
            return CallVariadic(f, tuple(x for x, _ in typed)), ColumnType(TEXT, nullable)
        if not typed:
            raise PlanTypeError(f"{f.value} needs at least one argument")
        unified, out_type = self.unify_all(typed, f.value)
        if f is VariadicFunc.COALESCE:
            nullable = all(t.nullable for _, t in unified)
        else:
            if out_type.kind is K.JSONB:
                raise PlanTypeError(f"{f.value} cannot order jsonb: {self.show(e)}")
            nullable = all(t.nullable for _, t in unified)
        return CallVariadic(f, tuple(x for x, _ in unified)), ColumnType(out_type, nullable)

    def fixed(
        self, e: ScalarExpr, f: VariadicFunc, typed: list[tuple[ScalarExpr, ColumnType]]
    ) -> tuple[ScalarExpr, ColumnType]:
        node = CallVariadic(f, tuple(x for x, _ in typed))
        nullable = any(t.nullable for _, t in typed)
        types = [t.type for _, t in typed]
        kinds = tuple(t.kind for t in types)
        shown = ", ".join(str(t) for t in types)
        signatures, result = SIGNATURES[f]
        if kinds not in signatures:
            want = " or ".join(f"({', '.join(k.value for k in s)})" for s in signatures)
            raise PlanTypeError(f"{f.value} expects {want}, got ({shown}): {self.show(node)}")
        at = CONSTANT_ARGS.get(f)
        if at is not None:
            arg = typed[at][0]
            if not isinstance(arg, Literal) or arg.value is None:
                raise PlanTypeError(
                    f"{f.value} needs a constant argument {at + 1}: {self.show(node)}"
                )
        if result is NUMERIC_MATH:
            result = numeric_math.result_type(f.value.removeprefix("numeric_"), types)
        return node, ColumnType(types[0] if result is SAME else result, nullable)

    def unify_all(
        self, typed: list[tuple[ScalarExpr, ColumnType]], what: str
    ) -> tuple[list[tuple[ScalarExpr, ColumnType]], ScalarType]:
        target = typed[0][1].type
        for _, t in typed[1:]:
            if t.type.kind is target.kind:
                if target.kind is K.NUMERIC and t.type != target:
                    assert t.type.scale is not None and target.scale is not None
                    target = numeric(38, max(t.type.scale, target.scale))
                continue
            common = common_type(target, t.type)
            if common is None:
                shown = ", ".join(f"{self.show(x)} is {tt.type}" for x, tt in typed)
                raise PlanTypeError(f"{what} needs values of one type: {shown}")
            target = common
        return [coerce(x, target) for x in typed], target

    def case(
        self, whens: tuple[tuple[ScalarExpr, ScalarExpr], ...], otherwise: ScalarExpr | None
    ) -> tuple[ScalarExpr, ColumnType]:
        conds: list[ScalarExpr] = []
        for c, _ in whens:
            c2, ct = self.go(c)
            if ct.type.kind is not K.BOOL:
                raise PlanTypeError(f"CASE condition must be bool, got {ct.type}: {self.show(c2)}")
            conds.append(c2)
        results = [self.go(r) for _, r in whens]
        if otherwise is not None:
            results.append(self.go(otherwise))
        unified, out = self.unify_all(results, "CASE")
        nullable = otherwise is None or any(t.nullable for _, t in unified)
        new_whens = tuple(zip(conds, (x for x, _ in unified[: len(whens)]), strict=True))
        new_otherwise = unified[-1][0] if otherwise is not None else None
        return Case(new_whens, new_otherwise), ColumnType(out, nullable)


_BINARY_SIGNATURES: dict[BinaryFunc, tuple[ScalarKind, ScalarKind, ScalarType]] = {
    BinaryFunc.CONCAT: (K.TEXT, K.TEXT, TEXT),
    BinaryFunc.LIKE: (K.TEXT, K.TEXT, BOOL),
    BinaryFunc.ILIKE: (K.TEXT, K.TEXT, BOOL),
    BinaryFunc.TIMESTAMP_ADD_MS: (K.TIMESTAMP, K.INT64, TIMESTAMP),
    BinaryFunc.TIMESTAMP_SUB_MS: (K.TIMESTAMP, K.INT64, TIMESTAMP),
    BinaryFunc.TIMESTAMP_DIFF_MS: (K.TIMESTAMP, K.TIMESTAMP, INT64),
    BinaryFunc.DATE_ADD_DAYS: (K.DATE, K.INT64, DATE),
    BinaryFunc.DATE_DIFF_DAYS: (K.DATE, K.DATE, INT64),
}

_WIDTH = {K.INT64: 0, K.NUMERIC: 1, K.FLOAT64: 2}


def common_type(a: ScalarType, b: ScalarType) -> ScalarType | None:
    """The type two operands of different kinds meet at, or ``None``."""
    if a.kind in _WIDTH and b.kind in _WIDTH:
        wide = a if _WIDTH[a.kind] >= _WIDTH[b.kind] else b
        if wide.kind is K.NUMERIC:
            assert wide.scale is not None
            return numeric(38, wide.scale)
        return wide
    if {a.kind, b.kind} == {K.DATE, K.TIMESTAMP}:
        return TIMESTAMP
    return None


def coerce(typed: tuple[ScalarExpr, ColumnType], to: ScalarType) -> tuple[ScalarExpr, ColumnType]:
    """Cast ``typed`` to ``to`` (a literal is converted in place)."""
    x, t = typed
    if t.type == to or (t.type.kind is to.kind and to.kind is not K.NUMERIC):
        return typed
    if t.type.kind is K.NUMERIC and to.kind is K.NUMERIC:
        # Numerics of different precision meet without a cast when the value fits.
        assert t.type.scale is not None and to.scale is not None
        if t.type.scale <= to.scale:
            return typed
    if isinstance(x, Literal):
        if x.value is None:
            return Literal(None, to), ColumnType(to, True)
        converted = _convert_literal(x.value, to)
        if converted is not None:
            return Literal(converted, to), ColumnType(to, False)
    return Cast(x, to), ColumnType(to, t.nullable or cast_can_fail(t.type, to))


def _convert_literal(value: Datum, to: ScalarType) -> Datum:
    if to.kind is K.FLOAT64 and isinstance(value, (int, Decimal)) and not isinstance(value, bool):
        f = float(value)
        return f if Decimal(f) == Decimal(value) else None
    if to.kind is K.NUMERIC and isinstance(value, int) and not isinstance(value, bool):
        d = Decimal(value)
        return d if to.problem(d) is None else None
    if to.kind is K.TIMESTAMP and isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return dt.datetime(value.year, value.month, value.day)
    return None


# --- casts -----------------------------------------------------------------------------------

_TO_TEXT = {K.BOOL, K.INT64, K.FLOAT64, K.NUMERIC, K.TEXT, K.DATE, K.TIMESTAMP, K.JSONB}
_FROM_TEXT = {K.BOOL, K.INT64, K.FLOAT64, K.NUMERIC, K.TEXT, K.DATE, K.TIMESTAMP, K.JSONB}


def can_cast(a: ScalarType, b: ScalarType) -> bool:
    """Whether ``CAST(a AS b)`` is defined (see :mod:`spate.plan.evaluation.scalar`)."""
    if a.kind is b.kind:
        return True
    if a.kind in _NUMBERS and b.kind in _NUMBERS:
        return True
    if b.kind is K.TEXT:
        return a.kind in _TO_TEXT
    if a.kind is K.TEXT:
        return b.kind in _FROM_TEXT
    pairs = {(K.BOOL, K.INT64), (K.INT64, K.BOOL), (K.DATE, K.TIMESTAMP), (K.TIMESTAMP, K.DATE)}
    return (a.kind, b.kind) in pairs


def cast_can_fail(a: ScalarType, b: ScalarType) -> bool:
    """Whether ``CAST(a AS b)`` may give NULL for a non-NULL value."""
    if a == b:
        return False
    if a.kind is K.TEXT:
        return b.kind is not K.TEXT
    if b.kind is K.NUMERIC:
        if a.kind is K.INT64:
            assert b.precision is not None and b.scale is not None
            return b.precision - b.scale < 19
        if a.kind is K.NUMERIC:
            assert a.precision is not None and a.scale is not None
            assert b.precision is not None and b.scale is not None
            return b.precision - b.scale < a.precision - a.scale
        return True
    if b.kind is K.INT64:
        return a.kind in (K.FLOAT64, K.NUMERIC)
    return False
