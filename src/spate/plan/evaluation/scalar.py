"""The semantics of scalar expressions, in plain Python.

:func:`compile_scalar` turns a resolved expression over known input columns into a function
``(row, now) -> datum``; ``now`` is the logical time in milliseconds. This module is the
executable definition of what :mod:`spate.plan.expr` documents; a renderer must agree with it.
It favours being obviously right over being fast.

Values are canonical Python datums: ``float`` for float64 (NaN as one shared object, ``-0.0``
as ``0.0``), ``Decimal`` for numeric, naive ``datetime`` for timestamp (see :func:`canonical`).

Long chains (:data:`CHAIN_MIN` links or more, each a function call one of whose operands is
the next: a 2,000-term sum, a 600-element ``IN`` list, which the planner builds as a left-deep
``OR`` of ``=``, ``1 + (1 + (1 + …))``) are compiled and evaluated in a loop, so their length is
not bounded by Python's stack; only input nested otherwise (``CASE`` in ``CASE``) recurses.
"""

from __future__ import annotations

import datetime as dt
import functools
import math
import re
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any, Final

from spate.plan.errors import EvalError
from spate.plan.evaluation.casts import cast_function
from spate.plan.evaluation.funcs import fixed_function
from spate.plan.evaluation.values import (
    _CTX,
    EPOCH,
    _Fn1,
    _Fn2,
    canonical,
    canonical_row,
    check_int64,
    compare,
    compare_nulls_last,
    compare_rows,
    fit_numeric,
    format_timestamp,
    row_key,
    value_key,
)
from spate.plan.expr import (
    NAN,
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
    RaiseError,
    ScalarExpr,
    TimeUnit,
    UnaryFunc,
    VariadicFunc,
    children,
    show,
    walk,
)
from spate.plan.funcs import SIGNATURES
from spate.plan.infer import typ
from spate.plan.numeric_division import divide
from spate.repr.desc import Column
from spate.repr.types import Datum, Row, ScalarKind, ScalarType

K = ScalarKind
_MS = dt.timedelta(milliseconds=1)
Evaluator = Callable[[Row, int], Datum]

__all__ = [
    "EPOCH",
    "NAN",
    "Evaluator",
    "canonical",
    "canonical_row",
    "check_int64",
    "compare",
    "compare_nulls_last",
    "compare_rows",
    "compile_scalar",
    "eval_scalar",
    "fit_numeric",
    "format_timestamp",
    "row_key",
    "shown",
    "value_key",
]


# --- compilation -----------------------------------------------------------------------------


def compile_scalar(expr: ScalarExpr, columns: Sequence[Column]) -> Evaluator:
    """A function computing resolved ``expr`` on rows of ``columns`` at logical time ``now``."""
    return _Compiler(columns).go(expr)


def eval_scalar(expr: ScalarExpr, columns: Sequence[Column], row: Row, now: int) -> Datum:
    """``expr`` on one row (compiles each time; use :func:`compile_scalar` in loops)."""
    return compile_scalar(expr, columns)(canonical_row(row, columns), now)


class _Shown:
    """``show(expr)``, built only when an error message prints it: the text of a large
    expression is costly, and most evaluators never fail."""

    __slots__ = ("expr", "names")

    def __init__(self, expr: ScalarExpr, names: Sequence[str]) -> None:
        self.expr = expr
        self.names = names

    def __str__(self) -> str:
        return shown(self.expr, self.names)


class _Compiler:
    def __init__(self, columns: Sequence[Column]) -> None:
        self.columns = columns
        self.names = [c.name for c in columns]
        # by node identity: lowered SQL shares subexpressions (a checked float operation
        # repeats its operands), so compile and type each shared node once
        self.compiled: dict[int, tuple[ScalarExpr, Evaluator]] = {}
        self.types: dict[int, tuple[ScalarExpr, ScalarType]] = {}

    def type_of(self, e: ScalarExpr) -> ScalarType:
        found = self.types.get(id(e))
        if found is not None and found[0] is e:
            return found[1]
        out = typ(e, self.columns).type
        self.types[id(e)] = (e, out)
        return out

    def go(self, e: ScalarExpr) -> Evaluator:
        found = self.compiled.get(id(e))
        if found is not None and found[0] is e:
            return found[1]
        spine = _spine(e)
        out = self.chain(spine) if len(spine) >= CHAIN_MIN else self.node(e)
        self.compiled[id(e)] = (e, out)
        return out

    def chain(self, spine: list[tuple[ScalarExpr, int]]) -> Evaluator:
        """A long chain (module docs), evaluated in a loop: each link is compiled as the node
        with its deep operand replaced by an extra input column holding the link below's
        value, so neither compiling, typing nor evaluating recurses along the chain. (The
        deep operand is evaluated first; a link's operands are all evaluated either way.)"""
        last, i = spine[-1]
        base = _operands(last)[i]
        below = self.go(base)
        below_type = typ(base, self.columns)
        links: list[Evaluator] = []
        for node, i in reversed(spine):
            extended = [*self.columns, Column("…", below_type.type, below_type.nullable)]
            shallow = _with_operand(node, i, ColumnRef(len(self.columns)))
            links.append(_Compiler(extended).node(shallow))
            below_type = typ(shallow, extended)

        def chained(row: Row, now: int) -> Datum:
            value = below(row, now)
            for link in links:
                value = link((*row, value), now)
            return value

        return chained

    def node(self, e: ScalarExpr) -> Evaluator:
        match e:
            case ColumnRef(i):
                return lambda row, now: row[i]
            case Literal(v, t):
                value = canonical(v, t)
                return lambda row, now: value
            case Now(t):
                if t.kind is K.INT64:
                    return lambda row, now: now
                return lambda row, now: EPOCH + dt.timedelta(milliseconds=now)
            case RaiseError(code, message, _):

                def fail(row: Row, now: int) -> Datum:
                    raise EvalError(message, sqlstate=code)

                return fail
            case CallUnary(f, x):
                return self.unary(e, f, x)
            case CallBinary(f, left, right):
                return self.binary(e, f, left, right)
            case CallVariadic(f, xs):
                return self.variadic(f, xs)
            case Case(whens, otherwise):
                conds = [(self.go(c), self.go(r)) for c, r in whens]
                other = self.go(otherwise) if otherwise is not None else (lambda row, now: None)

                def case(row: Row, now: int) -> Datum:
                    for c, r in conds:
                        if c(row, now) is True:
                            return r(row, now)
                    return other(row, now)

                return case
            case Cast(x, to):
                inner = self.go(x)
                conv = cast_function(self.type_of(x), to)
                return lambda row, now: _none_or(inner(row, now), conv)
            case DateTrunc(unit, x):
                inner = self.go(x)
                return lambda row, now: _none_or(inner(row, now), lambda v: date_trunc(unit, v))
            case Extract(unit, x):
                inner = self.go(x)
                return lambda row, now: _none_or(inner(row, now), lambda v: extract(unit, v))
        raise EvalError(f"cannot evaluate {e!r}")

    def unary(self, e: ScalarExpr, f: UnaryFunc, x: ScalarExpr) -> Evaluator:
        inner = self.go(x)
        what = _Shown(e, self.names)
        if f is UnaryFunc.IS_NULL:
            return lambda row, now: inner(row, now) is None
        fn: _Fn1
        match f:
            case UnaryFunc.NOT:
                fn = lambda v: not v  # noqa: E731
            case UnaryFunc.NEG:
                fn = lambda v: _neg(v, what)  # noqa: E731
            case UnaryFunc.ABS:
                fn = lambda v: _abs(v, what)  # noqa: E731
            case UnaryFunc.LOWER:
                fn = lambda v: v.lower()  # noqa: E731
            case UnaryFunc.UPPER:
                fn = lambda v: v.upper()  # noqa: E731
            case UnaryFunc.LENGTH:
                fn = lambda v: len(v)  # noqa: E731
            case UnaryFunc.TRIM:
                fn = lambda v: v.strip(" ")  # noqa: E731
            case UnaryFunc.EPOCH_MS:
                fn = lambda v: (v - EPOCH) // _MS  # noqa: E731
            case UnaryFunc.EPOCH_MS_CEIL:
                fn = lambda v: -((EPOCH - v) // _MS)  # noqa: E731
            case UnaryFunc.FROM_EPOCH_MS:
                fn = lambda v: _from_epoch_ms(v, what)  # noqa: E731
            case _:
                raise EvalError(f"unknown unary function {f}")
        return lambda row, now: _none_or(inner(row, now), fn)

    def binary(
        self, e: ScalarExpr, f: BinaryFunc, left: ScalarExpr, right: ScalarExpr
    ) -> Evaluator:
        a, b = self.go(left), self.go(right)
        what = _Shown(e, self.names)
        if f is BinaryFunc.AND:

            def and_(row: Row, now: int) -> Datum:
                x, y = a(row, now), b(row, now)
                if x is False or y is False:
                    return False
                return None if x is None or y is None else True

            return and_
        if f is BinaryFunc.OR:

            def or_(row: Row, now: int) -> Datum:
                x, y = a(row, now), b(row, now)
                if x is True or y is True:
                    return True
                return None if x is None or y is None else False

            return or_
        fn = self.binary_function(
            f, self.type_of(left), self.type_of(e), what, divisor=self.type_of(right)
        )

        def strict(row: Row, now: int) -> Datum:
            x, y = a(row, now), b(row, now)
            if x is None or y is None:
                return None
            return fn(x, y)

        return strict

    def binary_function(
        self,
        f: BinaryFunc,
        operand: ScalarType,
        result: ScalarType,
        what: object,
        *,
        divisor: ScalarType,
    ) -> _Fn2:
        k = operand.kind
        cmp_ops: dict[BinaryFunc, Callable[[int], bool]] = {
            BinaryFunc.EQ: lambda c: c == 0,
            BinaryFunc.NE: lambda c: c != 0,
            BinaryFunc.LT: lambda c: c < 0,
            BinaryFunc.LE: lambda c: c <= 0,
            BinaryFunc.GT: lambda c: c > 0,
            BinaryFunc.GE: lambda c: c >= 0,
        }
        if f in cmp_ops:
            test = cmp_ops[f]
            return lambda x, y: test(compare(x, y))
        if f in (BinaryFunc.ADD, BinaryFunc.SUB, BinaryFunc.MUL):
            if k is K.NUMERIC:
                dop = {
                    BinaryFunc.ADD: _CTX.add,
                    BinaryFunc.SUB: _CTX.subtract,
                    BinaryFunc.MUL: _CTX.multiply,
                }[f]
                return lambda x, y: fit_numeric(dop(x, y), result, what)
            op: dict[BinaryFunc, _Fn2] = {
                BinaryFunc.ADD: lambda x, y: x + y,
                BinaryFunc.SUB: lambda x, y: x - y,
                BinaryFunc.MUL: lambda x, y: x * y,
            }
            plain = op[f]
            if k is K.INT64:
                return lambda x, y: check_int64(plain(x, y), what)  # type: ignore[arg-type]
            return lambda x, y: canonical(plain(x, y), result)
        if f is BinaryFunc.DIV:
            if k is K.INT64:
                return lambda x, y: _int_div(x, y, what)
            if k is K.NUMERIC:
                return _numeric_div(operand, divisor, result, what)
            return lambda x, y: None if y == 0 else canonical(x / y, result)
        if f is BinaryFunc.MOD:
            if k is K.INT64:
                return lambda x, y: _int_mod(x, y)
            if k is K.FLOAT64:
                return lambda x, y: _float_mod(x, y)
            return lambda x, y: None if y == 0 else fit_numeric(_CTX.remainder(x, y), result, what)
        simple: dict[BinaryFunc, _Fn2] = {
            BinaryFunc.CONCAT: lambda x, y: x + y,
            BinaryFunc.LIKE: lambda x, y: like(x, y, ignore_case=False),
            BinaryFunc.ILIKE: lambda x, y: like(x, y, ignore_case=True),
            BinaryFunc.TIMESTAMP_ADD_MS: lambda x, y: _shift(x, y, what),
            BinaryFunc.TIMESTAMP_SUB_MS: lambda x, y: _shift(x, -y, what),
            BinaryFunc.TIMESTAMP_DIFF_MS: lambda x, y: (x - y) // _MS,
            BinaryFunc.DATE_ADD_DAYS: lambda x, y: _add_days(x, y, what),
            BinaryFunc.DATE_DIFF_DAYS: lambda x, y: (x - y).days,
        }
        if f not in simple:
            raise EvalError(f"unknown binary function {f}")
        return simple[f]

    def variadic(self, f: VariadicFunc, xs: tuple[ScalarExpr, ...]) -> Evaluator:
        args = [self.go(x) for x in xs]
        if f in SIGNATURES:
            e = CallVariadic(f, xs)
            types = [self.type_of(x) for x in xs]
            fn = fixed_function(f, xs, types, self.type_of(e), shown(e, self.names))

            def fixed(row: Row, now: int) -> Datum:
                values = [a(row, now) for a in args]
                return None if any(v is None for v in values) else fn(values)

            return fixed
        if f is VariadicFunc.COALESCE:

            def coalesce(row: Row, now: int) -> Datum:
                for a in args:
                    v = a(row, now)
                    if v is not None:
                        return v
                return None

            return coalesce
        if f in (VariadicFunc.GREATEST, VariadicFunc.LEAST):
            pick = max if f is VariadicFunc.GREATEST else min

            def extreme(row: Row, now: int) -> Datum:
                values = [v for v in (a(row, now) for a in args) if v is not None]
                return pick(values, key=value_key) if values else None

            return extreme
        if f is VariadicFunc.SUBSTR:

            def substr_(row: Row, now: int) -> Datum:
                values: list[Any] = [a(row, now) for a in args]
                if any(v is None for v in values):
                    return None
                return substr(*values)

            return substr_
        raise EvalError(f"unknown variadic function {f}")


SHOWN_CHARS: Final = 300


def shown(e: ScalarExpr, names: Sequence[str]) -> str:
    """``show(e)`` for messages: at most :data:`SHOWN_CHARS` characters, and a placeholder for
    an expression nested too deeply to print or holding a literal too long to (a 10 MiB
    string's ``repr`` took 0.2 s, on every evaluation of a statement that held one)."""
    for x in walk(e):
        value = x.value if isinstance(x, Literal) else None
        if isinstance(value, (str, bytes)) and len(value) > SHOWN_CHARS:
            return f"(an expression over a literal of {len(value)} characters)"
    try:
        text = show(e, names)
    except RecursionError:
        return "(an expression nested too deeply to print)"
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"


CHAIN_MIN: Final = 64
"""The length from which a chain of calls (``a + b + c …``, ``x = 1 OR x = 2 OR …`` as the
planner builds ``IN`` lists, a function of a function …) is compiled and evaluated in a loop
instead of recursively (one Python frame or two per link)."""


_LINKS: Final = (CallUnary, CallBinary, CallVariadic, Cast, DateTrunc, Extract)


def _operands(e: ScalarExpr) -> tuple[ScalarExpr, ...]:
    return children(e) if isinstance(e, _LINKS) else ()


def _deep_operand(e: ScalarExpr) -> int | None:
    """Which operand of ``e`` a chain continues through: the first that is itself a link
    (``None``: ``e`` ends the chain)."""
    for i, x in enumerate(_operands(e)):
        if isinstance(x, _LINKS):
            return i
    return None


def _with_operand(e: ScalarExpr, i: int, x: ScalarExpr) -> ScalarExpr:
    """``e`` with its operand ``i`` replaced by ``x``."""
    match e:
        case CallUnary(f, _):
            return CallUnary(f, x)
        case Cast(_, to):
            return Cast(x, to)
        case DateTrunc(unit, _):
            return DateTrunc(unit, x)
        case Extract(unit, _):
            return Extract(unit, x)
        case CallBinary(f, left, right):
            return CallBinary(f, x, right) if i == 0 else CallBinary(f, left, x)
        case CallVariadic(f, xs):
            return CallVariadic(f, (*xs[:i], x, *xs[i + 1 :]))
    raise AssertionError(f"not a link of a chain: {e!r}")


def _spine(e: ScalarExpr) -> list[tuple[ScalarExpr, int]]:
    """The links from ``e`` down, each with the operand the chain continues through (top
    first); the last link's operand is where the chain starts."""
    out: list[tuple[ScalarExpr, int]] = []
    while (i := _deep_operand(e)) is not None:
        out.append((e, i))
        e = _operands(e)[i]
    return out


# --- function definitions --------------------------------------------------------------------


def _none_or(value: Datum, fn: _Fn1) -> Datum:
    return None if value is None else fn(value)


def _neg(v: Any, what: object) -> Any:
    if isinstance(v, int) and not isinstance(v, bool):
        return check_int64(-v, what)
    return canonical(-v, _FLOAT) if isinstance(v, float) else -v


def _abs(v: Any, what: object) -> Datum:
    if isinstance(v, int) and not isinstance(v, bool):
        return check_int64(abs(v), what)
    return canonical(abs(v), _FLOAT) if isinstance(v, float) else abs(v)


_FLOAT = ScalarType(K.FLOAT64)


def _numeric_div(a: ScalarType, b: ScalarType, result: ScalarType, what: object) -> _Fn2:
    """PostgreSQL's rounding of each quotient (:mod:`spate.plan.numeric_division`), the
    operands' type scales standing for their display scales."""
    assert a.scale is not None and b.scale is not None and result.scale is not None
    a_scale, b_scale, out = a.scale, b.scale, result.scale

    def div(x: Datum, y: Datum) -> Datum:
        assert isinstance(x, (Decimal, int)) and isinstance(y, (Decimal, int))
        if y == 0:
            return None
        try:
            return fit_numeric(divide(Decimal(x), Decimal(y), a_scale, b_scale, out), result, what)
        except EvalError:  # beyond the 38 digits: PostgreSQL's message, as the renderer's
            raise EvalError(f"value overflows numeric format in {what}", sqlstate="22003") from None

    return div


def _int_div(x: int, y: int, what: object) -> int | None:
    if y == 0:
        return None
    q = abs(x) // abs(y)
    return check_int64(q if (x < 0) == (y < 0) else -q, what)


def _int_mod(x: int, y: int) -> int | None:
    if y == 0:
        return None
    r = abs(x) % abs(y)
    return -r if x < 0 else r


def _float_mod(x: float, y: float) -> float | None:
    if y == 0:
        return None
    if math.isinf(x) or math.isnan(x) or math.isnan(y):
        return NAN
    out = math.fmod(x, y)
    return 0.0 if out == 0 else out


def _from_epoch_ms(v: Any, what: object) -> Datum:
    try:
        return EPOCH + dt.timedelta(milliseconds=v)
    except OverflowError:
        raise EvalError(f"timestamp out of range in {what}: {v} ms", sqlstate="22008") from None


def _shift(ts: dt.datetime, ms: int, what: object) -> dt.datetime:
    try:
        return ts + dt.timedelta(milliseconds=ms)
    except OverflowError:
        raise EvalError(f"timestamp out of range in {what}", sqlstate="22008") from None


def _add_days(d: dt.date, days: int, what: object) -> dt.date:
    try:
        return d + dt.timedelta(days=days)
    except OverflowError:
        raise EvalError(f"date out of range in {what}", sqlstate="22008") from None


@functools.lru_cache(maxsize=1024)
def _like_regex(pattern: str, ignore_case: bool) -> re.Pattern[str]:
    out: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
        i += 1
    return re.compile("".join(out), re.DOTALL)


def like(value: str, pattern: str, *, ignore_case: bool) -> bool:
    """SQL LIKE: ``%`` any run, ``_`` one character, ``\\`` escapes the next character."""
    if ignore_case:
        value, pattern = value.lower(), pattern.lower()
    return _like_regex(pattern, ignore_case).fullmatch(value) is not None


def substr(text: str, start: int, count: int | None = None) -> str | None:
    """PostgreSQL ``substr``: 1-based; a start before 1 consumes count; negative count: NULL."""
    if count is not None and count < 0:
        return None
    first = max(start, 1)
    end = None if count is None else start + count  # exclusive, 1-based
    if end is not None and end <= first:
        return ""
    return text[first - 1 : None if end is None else end - 1]


def date_trunc(unit: TimeUnit, v: Datum) -> Datum:
    is_ts = isinstance(v, dt.datetime)
    d = v.date() if isinstance(v, dt.datetime) else v
    assert isinstance(d, dt.date)
    day: dt.date
    if unit is TimeUnit.YEAR:
        day = d.replace(month=1, day=1)
    elif unit is TimeUnit.QUARTER:
        day = d.replace(month=(d.month - 1) // 3 * 3 + 1, day=1)
    elif unit is TimeUnit.MONTH:
        day = d.replace(day=1)
    elif unit is TimeUnit.WEEK:
        day = d - dt.timedelta(days=d.weekday())
    elif unit is TimeUnit.DAY:
        day = d
    else:
        assert isinstance(v, dt.datetime)
        if unit is TimeUnit.HOUR:
            return v.replace(minute=0, second=0, microsecond=0)
        if unit is TimeUnit.MINUTE:
            return v.replace(second=0, microsecond=0)
        return v.replace(microsecond=0)
    return dt.datetime(day.year, day.month, day.day) if is_ts else day


def extract(unit: TimeUnit, v: Datum) -> int:
    assert isinstance(v, dt.date)
    match unit:
        case TimeUnit.YEAR:
            return v.year
        case TimeUnit.QUARTER:
            return (v.month - 1) // 3 + 1
        case TimeUnit.MONTH:
            return v.month
        case TimeUnit.WEEK:
            return v.isocalendar()[1]
        case TimeUnit.DAY:
            return v.day
        case TimeUnit.DOW:
            return v.isoweekday() % 7
        case TimeUnit.DOY:
            return v.timetuple().tm_yday
    assert isinstance(v, dt.datetime)
    if unit is TimeUnit.HOUR:
        return v.hour
    if unit is TimeUnit.MINUTE:
        return v.minute
    return v.second
