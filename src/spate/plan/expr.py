"""Scalar expressions: the per-row computations inside ``Map``, ``Filter``, ``Join``, ``Reduce``.

A scalar expression is a tree of immutable nodes. In the IR, columns are **positions**
(:class:`ColumnRef`); the builder writes them by **name** (:class:`ColumnName`, from ``col("x")``)
and every relational node resolves names against its input when it is constructed (see
:mod:`spate.plan.infer`), so a plan that exists never holds a name, an :class:`Interval` or a
mixed-type operation: resolution turns ``ts + interval(hours=1)`` into
``TIMESTAMP_ADD_MS(ts, 3600000)`` and ``int_col < 2.5`` into ``CAST(int_col AS float64) < 2.5``.

Semantics (the reference evaluator :mod:`spate.plan.evaluation.scalar` is their definition):

* **NULL** propagates through every function except ``AND``/``OR`` (three-valued: ``FALSE AND
  NULL = FALSE``, ``TRUE OR NULL = TRUE``), ``IS_NULL``, ``COALESCE``, ``GREATEST``/``LEAST``
  (which skip NULLs) and ``CASE``. A ``Filter`` keeps a row only when every predicate is TRUE.
* **Arithmetic** is on equal types. ``int64`` ``+ - *`` overflowing 64 bits is an evaluation
  error; ``/`` on ``int64`` truncates toward zero; ``/`` and ``%`` by zero give NULL (so their
  result is nullable); ``%`` takes the sign of the dividend. ``numeric(p1,s1) ± numeric(p2,s2)``
  is ``numeric(38, max(s1,s2))``, ``*`` is ``numeric(38, min(38, s1+s2))``, ``/`` is
  ``numeric(38, S)`` rounded as PostgreSQL rounds each quotient
  (:mod:`spate.plan.numeric_division`); a result with more than 38 digits is an evaluation
  error.
* **Comparison** of floats follows PostgreSQL and Spark: ``NaN = NaN`` and NaN is larger than
  every other number; ``-0.0 = 0.0``. Text compares by code point, bytes bytewise.
* **Casts** that cannot succeed for a value (unparseable text, out of range) give NULL.
* :class:`RaiseError` is an evaluation error as a value (lazily, inside ``CASE``).
* **Time**: ``date`` is ``datetime.date``; ``timestamp`` is a naive ``datetime.datetime`` with
  microseconds. :class:`Now` is the logical time at which the result is observed (an ``int``
  of milliseconds) seen either as ``int64`` milliseconds or as the ``timestamp``
  ``1970-01-01 + ms``. It may appear only in ``Filter`` predicates of the temporal form
  ``now() <op> expr`` (see :mod:`spate.plan.temporal`).
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING

from spate.plan.errors import PlanTypeError
from spate.plan.func_names import ARITHMETIC as ARITHMETIC
from spate.plan.func_names import COMPARISONS as COMPARISONS
from spate.plan.func_names import BinaryFunc as BinaryFunc
from spate.plan.func_names import TimeUnit as TimeUnit
from spate.plan.func_names import UnaryFunc as UnaryFunc
from spate.plan.func_names import VariadicFunc as VariadicFunc
from spate.repr.types import (
    BOOL,
    BYTES,
    DATE,
    FLOAT64,
    INT64,
    TEXT,
    TIMESTAMP,
    Datum,
    ScalarKind,
    ScalarType,
    numeric,
)
from spate.wire import wire

if TYPE_CHECKING:
    from collections.abc import Sequence


NAN = float("nan")
"""The one NaN object plans and evaluated rows carry (so that equal rows compare equal)."""


@dataclass(frozen=True, slots=True)
class ColumnType:
    """The type of a scalar expression's result: scalar type and whether it may be NULL."""

    type: ScalarType
    nullable: bool

    def __str__(self) -> str:
        return f"{self.type}{'' if self.nullable else ' not null'}"


class ScalarExpr:
    """Base of the scalar expression nodes.

    Python operators build expressions: ``+ - * / %``, unary ``-``, ``< <= > >=``, ``&`` (AND),
    ``|`` (OR), ``~`` (NOT). ``==`` and ``!=`` keep their Python meaning (structural equality
    of trees); write SQL equality as ``a.eq(b)`` and ``a.ne(b)``.
    """

    __slots__ = ()

    # -- arithmetic -----------------------------------------------------------------------------

    def __add__(self, other: object) -> ScalarExpr:
        return CallBinary(BinaryFunc.ADD, self, lift(other))

    def __radd__(self, other: object) -> ScalarExpr:
        return CallBinary(BinaryFunc.ADD, lift(other), self)

    def __sub__(self, other: object) -> ScalarExpr:
        return CallBinary(BinaryFunc.SUB, self, lift(other))

    def __rsub__(self, other: object) -> ScalarExpr:
        return CallBinary(BinaryFunc.SUB, lift(other), self)

    def __mul__(self, other: object) -> ScalarExpr:
        return CallBinary(BinaryFunc.MUL, self, lift(other))

    def __rmul__(self, other: object) -> ScalarExpr:
        return CallBinary(BinaryFunc.MUL, lift(other), self)

    def __truediv__(self, other: object) -> ScalarExpr:
        return CallBinary(BinaryFunc.DIV, self, lift(other))

    def __rtruediv__(self, other: object) -> ScalarExpr:
        return CallBinary(BinaryFunc.DIV, lift(other), self)

    def __mod__(self, other: object) -> ScalarExpr:
        return CallBinary(BinaryFunc.MOD, self, lift(other))

    def __rmod__(self, other: object) -> ScalarExpr:
        return CallBinary(BinaryFunc.MOD, lift(other), self)

    def __neg__(self) -> ScalarExpr:
        return CallUnary(UnaryFunc.NEG, self)

    # -- comparison and logic -------------------------------------------------------------------

    def __lt__(self, other: object) -> ScalarExpr:
        return CallBinary(BinaryFunc.LT, self, lift(other))

    def __le__(self, other: object) -> ScalarExpr:
        return CallBinary(BinaryFunc.LE, self, lift(other))

    def __gt__(self, other: object) -> ScalarExpr:
        return CallBinary(BinaryFunc.GT, self, lift(other))

    def __ge__(self, other: object) -> ScalarExpr:
        return CallBinary(BinaryFunc.GE, self, lift(other))

    def eq(self, other: object) -> ScalarExpr:
        """SQL ``=`` (NULL if either side is NULL)."""
        return CallBinary(BinaryFunc.EQ, self, lift(other))

    def ne(self, other: object) -> ScalarExpr:
        """SQL ``<>``."""
        return CallBinary(BinaryFunc.NE, self, lift(other))

    def __and__(self, other: object) -> ScalarExpr:
        return CallBinary(BinaryFunc.AND, self, lift(other))

    def __rand__(self, other: object) -> ScalarExpr:
        return CallBinary(BinaryFunc.AND, lift(other), self)

    def __or__(self, other: object) -> ScalarExpr:
        return CallBinary(BinaryFunc.OR, self, lift(other))

    def __ror__(self, other: object) -> ScalarExpr:
        return CallBinary(BinaryFunc.OR, lift(other), self)

    def __invert__(self) -> ScalarExpr:
        return CallUnary(UnaryFunc.NOT, self)

    def is_null(self) -> ScalarExpr:
        return CallUnary(UnaryFunc.IS_NULL, self)

    def is_not_null(self) -> ScalarExpr:
        return CallUnary(UnaryFunc.NOT, CallUnary(UnaryFunc.IS_NULL, self))

    def between(self, low: object, high: object) -> ScalarExpr:
        """``low <= self AND self <= high``."""
        return (self >= low) & (self <= high)

    def isin(self, *values: object) -> ScalarExpr:
        """``self = v1 OR self = v2 …`` (SQL ``IN`` with its NULL semantics)."""
        if not values:
            raise PlanTypeError("isin() needs at least one value")
        out = self.eq(values[0])
        for v in values[1:]:
            out = out | self.eq(v)
        return out

    # -- functions ------------------------------------------------------------------------------

    def cast(self, to: ScalarType) -> ScalarExpr:
        return Cast(self, to)

    def abs(self) -> ScalarExpr:
        return CallUnary(UnaryFunc.ABS, self)

    def lower(self) -> ScalarExpr:
        return CallUnary(UnaryFunc.LOWER, self)

    def upper(self) -> ScalarExpr:
        return CallUnary(UnaryFunc.UPPER, self)

    def length(self) -> ScalarExpr:
        return CallUnary(UnaryFunc.LENGTH, self)

    def trim(self) -> ScalarExpr:
        return CallUnary(UnaryFunc.TRIM, self)

    def concat(self, other: object) -> ScalarExpr:
        """Text ``||`` (NULL if either side is NULL)."""
        return CallBinary(BinaryFunc.CONCAT, self, lift(other))

    def like(self, pattern: object) -> ScalarExpr:
        return CallBinary(BinaryFunc.LIKE, self, lift(pattern))

    def ilike(self, pattern: object) -> ScalarExpr:
        return CallBinary(BinaryFunc.ILIKE, self, lift(pattern))

    def substr(self, start: object, count: object | None = None) -> ScalarExpr:
        args = (self, lift(start)) if count is None else (self, lift(start), lift(count))
        return CallVariadic(VariadicFunc.SUBSTR, args)

    def date_trunc(self, unit: TimeUnit | str) -> ScalarExpr:
        return DateTrunc(TimeUnit(unit), self)

    def extract(self, unit: TimeUnit | str) -> ScalarExpr:
        return Extract(TimeUnit(unit), self)

    def epoch_ms(self) -> ScalarExpr:
        """timestamp → int64 milliseconds since 1970-01-01 (rounded down)."""
        return CallUnary(UnaryFunc.EPOCH_MS, self)

    def __str__(self) -> str:
        return show(self)


@wire("plan.expr.column")
@dataclass(frozen=True, slots=True, eq=True)
class ColumnRef(ScalarExpr):
    """The value of the input column at position ``index``."""

    index: int

    def __post_init__(self) -> None:
        if isinstance(self.index, bool) or not isinstance(self.index, int) or self.index < 0:
            raise PlanTypeError(f"column position must be a non-negative int, got {self.index!r}")


@dataclass(frozen=True, slots=True)
class ColumnName(ScalarExpr):
    """Builder only: the input column called ``name``; resolved to a :class:`ColumnRef`."""

    name: str


@wire("plan.expr.literal")
@dataclass(frozen=True, slots=True)
class Literal(ScalarExpr):
    """The constant ``value`` of type ``type`` (``None`` is a typed NULL)."""

    value: Datum
    type: ScalarType

    def __post_init__(self) -> None:
        if not isinstance(self.type, ScalarType):
            raise PlanTypeError(f"literal type must be a ScalarType, got {self.type!r}")
        v = self.value
        if v is None:
            return
        problem = self.type.problem(v)
        if problem is not None:
            raise PlanTypeError(f"literal of type {self.type}: got {problem}")
        # Canonical Python values, so that equal literals are equal trees.
        if self.type.kind is ScalarKind.FLOAT64:
            f = float(v)  # type: ignore[arg-type]
            object.__setattr__(self, "value", NAN if math.isnan(f) else f)
        elif self.type.kind is ScalarKind.NUMERIC and isinstance(v, int):
            object.__setattr__(self, "value", Decimal(v))


@wire("plan.expr.now")
@dataclass(frozen=True, slots=True)
class Now(ScalarExpr):
    """The logical time at which the result is observed: ``int64`` ms or a ``timestamp``."""

    type: ScalarType = TIMESTAMP

    def __post_init__(self) -> None:
        if self.type not in (INT64, TIMESTAMP):
            raise PlanTypeError(f"now() is int64 (milliseconds) or timestamp, not {self.type}")


@wire("plan.expr.unary")
@dataclass(frozen=True, slots=True)
class CallUnary(ScalarExpr):
    func: UnaryFunc
    expr: ScalarExpr


@wire("plan.expr.binary")
@dataclass(frozen=True, slots=True)
class CallBinary(ScalarExpr):
    func: BinaryFunc
    left: ScalarExpr
    right: ScalarExpr


@wire("plan.expr.variadic")
@dataclass(frozen=True, slots=True)
class CallVariadic(ScalarExpr):
    func: VariadicFunc
    exprs: tuple[ScalarExpr, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "exprs", tuple(self.exprs))


@wire("plan.expr.case")
@dataclass(frozen=True, slots=True)
class Case(ScalarExpr):
    """``CASE WHEN c1 THEN r1 … ELSE otherwise END``; a NULL condition counts as false.

    ``otherwise = None`` is ``ELSE NULL``.
    """

    whens: tuple[tuple[ScalarExpr, ScalarExpr], ...]
    otherwise: ScalarExpr | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "whens", tuple((c, r) for c, r in self.whens))
        if not self.whens:
            raise PlanTypeError("CASE needs at least one WHEN")


@wire("plan.expr.cast")
@dataclass(frozen=True, slots=True)
class Cast(ScalarExpr):
    """``CAST(expr AS type)``; a value that cannot be converted becomes NULL."""

    expr: ScalarExpr
    type: ScalarType


@wire("plan.expr.date_trunc")
@dataclass(frozen=True, slots=True)
class DateTrunc(ScalarExpr):
    """Round a date or timestamp down to the start of its ``unit``."""

    unit: TimeUnit
    expr: ScalarExpr

    def __post_init__(self) -> None:
        if self.unit in (TimeUnit.DOW, TimeUnit.DOY):
            raise PlanTypeError(f"date_trunc does not take unit {self.unit}")


@wire("plan.expr.extract")
@dataclass(frozen=True, slots=True)
class Extract(ScalarExpr):
    """A field of a date or timestamp, as int64 (``second``: whole seconds)."""

    unit: TimeUnit
    expr: ScalarExpr


@wire("plan.expr.raise_error")
@dataclass(frozen=True, slots=True)
class RaiseError(ScalarExpr):
    """An evaluation error of type ``type``: ``message`` with PostgreSQL's ``sqlstate``."""

    sqlstate: str
    message: str
    type: ScalarType


@dataclass(frozen=True, slots=True)
class Interval(ScalarExpr):
    """Builder only: a span of ``ms`` milliseconds, added to or subtracted from a time.

    ``timestamp ± interval`` resolves to ``TIMESTAMP_ADD_MS``/``TIMESTAMP_SUB_MS``; ``int64 ±
    interval`` (a millisecond column) to plain ``ADD``/``SUB``; ``date ± interval`` of whole days
    to ``DATE_ADD_DAYS``.
    """

    ms: int


# --- helpers ---------------------------------------------------------------------------------


def literal_type(value: object) -> ScalarType:
    """The scalar type of a Python value written in a plan (``1`` → int64, ``'a'`` → text…)."""
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, int):
        return INT64
    if isinstance(value, float):
        return FLOAT64
    if isinstance(value, str):
        return TEXT
    if isinstance(value, bytes):
        return BYTES
    if isinstance(value, dt.datetime):
        return TIMESTAMP
    if isinstance(value, dt.date):
        return DATE
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise PlanTypeError(f"numeric literal must be finite, got {value}")
        exponent = value.as_tuple().exponent
        assert isinstance(exponent, int)
        scale = max(0, -exponent)
        digits = len(value.as_tuple().digits)
        precision = max(digits, scale, 1)
        return numeric(min(precision, 38), min(scale, 38))
    raise PlanTypeError(
        f"cannot use a {type(value).__name__} as a literal; "
        "use lit(value, type) or a column/expression"
    )


def lift(value: object) -> ScalarExpr:
    """An expression as is; a Python value as a :class:`Literal` (``None`` is not allowed)."""
    if isinstance(value, ScalarExpr):
        return value
    if value is None:
        raise PlanTypeError("a bare None has no type; write lit(None, type) or use is_null()")
    return Literal(value, literal_type(value))  # type: ignore[arg-type]


def children(expr: ScalarExpr) -> tuple[ScalarExpr, ...]:
    """The direct sub-expressions, in order."""
    match expr:
        case CallUnary(_, e) | Cast(e, _) | DateTrunc(_, e) | Extract(_, e):
            return (e,)
        case CallBinary(_, left, right):
            return (left, right)
        case CallVariadic(_, exprs):
            return exprs
        case Case(whens, otherwise):
            out = [x for pair in whens for x in pair]
            if otherwise is not None:
                out.append(otherwise)
            return tuple(out)
    return ()


def walk(expr: ScalarExpr) -> list[ScalarExpr]:
    """Every node of ``expr``, pre-order."""
    out: list[ScalarExpr] = []
    stack = [expr]
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(reversed(children(node)))
    return out


def contains_now(expr: ScalarExpr) -> bool:
    return any(isinstance(e, Now) for e in walk(expr))


def column_refs(expr: ScalarExpr) -> frozenset[int]:
    """The input positions ``expr`` reads."""
    return frozenset(e.index for e in walk(expr) if isinstance(e, ColumnRef))


_OP_SYMBOLS: dict[BinaryFunc, str] = {
    BinaryFunc.ADD: "+",
    BinaryFunc.SUB: "-",
    BinaryFunc.MUL: "*",
    BinaryFunc.DIV: "/",
    BinaryFunc.MOD: "%",
    BinaryFunc.EQ: "=",
    BinaryFunc.NE: "<>",
    BinaryFunc.LT: "<",
    BinaryFunc.LE: "<=",
    BinaryFunc.GT: ">",
    BinaryFunc.GE: ">=",
    BinaryFunc.AND: "AND",
    BinaryFunc.OR: "OR",
    BinaryFunc.CONCAT: "||",
    BinaryFunc.LIKE: "LIKE",
    BinaryFunc.ILIKE: "ILIKE",
}


def show(expr: ScalarExpr, names: Sequence[str] | None = None) -> str:
    """SQL-like text of ``expr``; positions print as column names when ``names`` are given."""

    def go(e: ScalarExpr) -> str:
        match e:
            case ColumnRef(i):
                return names[i] if names is not None and i < len(names) else f"#{i}"
            case ColumnName(n):
                return n
            case Literal(v, t):
                if v is None:
                    return f"NULL::{t}"
                return repr(v) if isinstance(v, (str, bytes)) else str(v)
            case Now(t):
                return "now()" if t == TIMESTAMP else "now_ms()"
            case Interval(ms):
                return f"interval({ms} ms)"
            case RaiseError(_, message, _):
                return f"error({message!r})"
            case CallUnary(UnaryFunc.NOT, x):
                return f"NOT {go(x)}"
            case CallUnary(UnaryFunc.IS_NULL, x):
                return f"{go(x)} IS NULL"
            case CallUnary(UnaryFunc.NEG, x):
                return f"-{go(x)}"
            case CallUnary(f, x):
                return f"{f.value}({go(x)})"
            case CallBinary(f, left, right) if f in _OP_SYMBOLS:
                return f"({go(left)} {_OP_SYMBOLS[f]} {go(right)})"
            case CallBinary(f, left, right):
                return f"{f.value}({go(left)}, {go(right)})"
            case CallVariadic(f, xs):
                return f"{f.value}({', '.join(go(x) for x in xs)})"
            case Case(whens, otherwise):
                parts = " ".join(f"WHEN {go(c)} THEN {go(r)}" for c, r in whens)
                tail = f" ELSE {go(otherwise)}" if otherwise is not None else ""
                return f"CASE {parts}{tail} END"
            case Cast(x, t):
                return f"CAST({go(x)} AS {t})"
            case DateTrunc(u, x):
                return f"date_trunc('{u.value}', {go(x)})"
            case Extract(u, x):
                return f"extract({u.value} FROM {go(x)})"
        return repr(e)

    return go(expr)
