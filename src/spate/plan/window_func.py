"""Window functions: ``WindowFunc``, ``WindowExpr``, their types and the builder helpers
(``row_number()``, ``lag(…)``…). The ``Window`` node and the semantics are in
:mod:`spate.plan.window`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from spate.plan.aggregate import AggregateExpr, AggregateFunc, aggregate_type
from spate.plan.errors import InvalidPlan, PlanTypeError
from spate.plan.expr import ColumnType, ScalarExpr, lift, show
from spate.plan.infer import coerce, common_type, resolve
from spate.plan.node_checks import no_now
from spate.repr.desc import Column
from spate.repr.types import FLOAT64, INT64, ScalarKind, ScalarType, numeric
from spate.wire import wire

K = ScalarKind


class WindowFunc(StrEnum):
    """The window functions that are not aggregates (those are :class:`AggregateExpr`)."""

    ROW_NUMBER = "row_number"
    RANK = "rank"
    DENSE_RANK = "dense_rank"
    LAG = "lag"
    LEAD = "lead"
    FIRST_VALUE = "first_value"
    LAST_VALUE = "last_value"
    NTH_VALUE = "nth_value"
    NTILE = "ntile"
    PERCENT_RANK = "percent_rank"
    CUME_DIST = "cume_dist"


_VALUE_FUNCS = frozenset(
    {
        WindowFunc.LAG,
        WindowFunc.LEAD,
        WindowFunc.FIRST_VALUE,
        WindowFunc.LAST_VALUE,
        WindowFunc.NTH_VALUE,
    }
)
"""The functions of a value ``expr`` (the others take none)."""


WINDOW_AGGREGATES = frozenset(
    {
        AggregateFunc.COUNT,
        AggregateFunc.SUM,
        AggregateFunc.AVG,
        AggregateFunc.MIN,
        AggregateFunc.MAX,
        AggregateFunc.BOOL_AND,
        AggregateFunc.BOOL_OR,
        AggregateFunc.STRING_AGG,
    }
)
"""The aggregates a ``Window`` computes over a frame (``string_agg`` concatenates in the frame's
order, not sorted as in ``Reduce``)."""

_FRAMED = frozenset({WindowFunc.FIRST_VALUE, WindowFunc.LAST_VALUE, WindowFunc.NTH_VALUE})
"""The functions that read the frame (with the aggregates); the others read the partition."""


class FrameMode(StrEnum):
    """How a frame's bounds count: ``ROWS`` by positions, ``RANGE`` by peer groups."""

    ROWS = "rows"
    RANGE = "range"


@wire("plan.window_frame")
@dataclass(frozen=True, slots=True)
class WindowFrame:
    """SQL's ``{ROWS | RANGE} BETWEEN start AND end``: which rows of the partition, around the
    current row in the window order, a frame-reading function sees.

    A bound is ``None`` for UNBOUNDED (``start``: PRECEDING, ``end``: FOLLOWING), ``0`` for
    CURRENT ROW, ``-n`` for ``n PRECEDING`` and ``n`` for ``n FOLLOWING``. In ``ROWS`` mode the
    frame of the row at position ``i`` is positions ``[i + start, i + end]`` clipped to the
    partition; in ``RANGE`` mode a bound is ``None`` or ``0`` (offsets in value units are not
    supported), and CURRENT ROW is the row's first peer as a start and its last peer as an end.
    A frame may be empty (``ROWS BETWEEN 1 FOLLOWING AND 2 FOLLOWING`` at the partition's end):
    then ``count`` is 0 and every other function NULL. The default, ``RANGE BETWEEN UNBOUNDED
    PRECEDING AND CURRENT ROW``, is PostgreSQL's (the whole partition without ORDER BY, where
    every row is a peer).
    """

    mode: FrameMode = FrameMode.RANGE
    start: int | None = None
    end: int | None = 0

    def __post_init__(self) -> None:
        mode = FrameMode(self.mode)
        for what, b in (("start", self.start), ("end", self.end)):
            if b is not None and (isinstance(b, bool) or not isinstance(b, int)):
                raise PlanTypeError(f"window frame {what} must be an int or None, got {b!r}")
            if mode is FrameMode.RANGE and b not in (None, 0):
                raise PlanTypeError(
                    "a RANGE frame bound must be UNBOUNDED or CURRENT ROW (None or 0),"
                    f" got {what}={b}"
                )
        s, e = self.start, self.end
        # PostgreSQL's rule: a frame starting at the current row or after it looks no back
        if s is not None and e is not None and s >= 0 and e < (1 if s > 0 else 0):
            start = "current row" if s == 0 else "following row"
            raise PlanTypeError(f"frame starting from {start} cannot have preceding rows")

    def may_be_empty(self) -> bool:
        """Whether some row's frame can hold no row (it need not hold the row itself)."""
        return (self.start is not None and self.start > 0) or (
            self.end is not None and self.end < 0
        )

    def always_empty(self) -> bool:
        """Whether every row's frame is empty: ``ROWS`` bounds past each other (``ROWS BETWEEN
        2 FOLLOWING AND 1 FOLLOWING``), which PostgreSQL accepts."""
        s, e = self.start, self.end
        return self.mode is FrameMode.ROWS and s is not None and e is not None and s > e

    def sql(self) -> str:
        """``ROWS BETWEEN 1 PRECEDING AND CURRENT ROW``…"""
        start, end = _bound(self.start, "PRECEDING"), _bound(self.end, "FOLLOWING")
        return f"{self.mode.value.upper()} BETWEEN {start} AND {end}"


DEFAULT_FRAME: WindowFrame = WindowFrame()
"""``RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW``."""


def _bound(b: int | None, unbounded: str) -> str:
    if b is None:
        return f"UNBOUNDED {unbounded}"
    if b == 0:
        return "CURRENT ROW"
    return f"{abs(b)} {'PRECEDING' if b < 0 else 'FOLLOWING'}"


def rows_between(start: int | None, end: int | None) -> WindowFrame:
    """``ROWS BETWEEN …``: ``None`` unbounded, ``-n`` n PRECEDING, 0 CURRENT ROW, ``n``
    FOLLOWING."""
    return WindowFrame(FrameMode.ROWS, start, end)


def range_between(start: int | None, end: int | None) -> WindowFrame:
    """``RANGE BETWEEN …`` with bounds ``None`` (unbounded) or 0 (CURRENT ROW: the peers)."""
    return WindowFrame(FrameMode.RANGE, start, end)


@wire("plan.window_expr")
@dataclass(frozen=True, slots=True)
class WindowExpr:
    """A window function that is not an aggregate (the table in the module doc).

    ``expr`` is the value of ``lag``, ``lead``, ``first_value``, ``last_value`` and
    ``nth_value``, a scalar over the ``Window``'s input (the others take none); ``offset`` is
    ``lag``/``lead``'s offset, ``nth_value``'s ``n`` and ``ntile``'s bucket count (else 1);
    ``default`` is ``lag``/``lead``'s value past the partition's edge (``None``: NULL).
    """

    func: WindowFunc
    expr: ScalarExpr | None = None
    offset: int = 1
    default: ScalarExpr | None = None

    def __post_init__(self) -> None:
        f = WindowFunc(self.func)
        if isinstance(self.offset, bool) or not isinstance(self.offset, int):
            raise PlanTypeError(f"{f.value}: offset must be an int, got {self.offset!r}")
        if f in _VALUE_FUNCS:
            if not isinstance(self.expr, ScalarExpr):
                raise PlanTypeError(f"{f.value} needs a scalar expression, got {self.expr!r}")
        elif self.expr is not None:
            raise PlanTypeError(f"{f.value}() takes no value expression")
        if f in (WindowFunc.LAG, WindowFunc.LEAD):
            if self.default is not None and not isinstance(self.default, ScalarExpr):
                raise PlanTypeError(f"{f.value}: default must be a scalar, got {self.default!r}")
        elif self.default is not None:
            raise PlanTypeError(f"{f.value} takes no default")
        if f in (WindowFunc.NTH_VALUE, WindowFunc.NTILE):
            if self.offset < 1:
                raise PlanTypeError(f"{f.value}: the argument must be >= 1, got {self.offset}")
        elif f not in (WindowFunc.LAG, WindowFunc.LEAD) and self.offset != 1:
            raise PlanTypeError(f"{f.value} takes no offset")


WindowCall = WindowExpr | AggregateExpr
"""One function of a ``Window``: a :class:`WindowExpr` or an aggregate over the frame."""


def func_name(f: object) -> str:
    """The default output name of a window function (its function name)."""
    if isinstance(f, WindowExpr):
        return f.func.value
    if isinstance(f, AggregateExpr):
        return f.func.value
    raise InvalidPlan(f"not a window function: {f!r} (use WindowExpr or AggregateExpr)")


def reads_frame(f: WindowExpr | AggregateExpr) -> bool:
    """Whether the function's value depends on its frame: the aggregates and
    ``first_value``/``last_value``/``nth_value`` (the others read the partition)."""
    return isinstance(f, AggregateExpr) or f.func in _FRAMED


def resolve_call(
    f: WindowExpr | AggregateExpr, columns: Sequence[Column], frame: WindowFrame = DEFAULT_FRAME
) -> tuple[WindowExpr | AggregateExpr, ColumnType]:
    """The call with its scalars resolved against ``columns``, and its output type (nullable
    where ``frame``, the call's own, may be empty)."""
    call, t = _resolve(f, columns)
    is_count = isinstance(call, AggregateExpr) and call.func is AggregateFunc.COUNT
    if reads_frame(call) and not is_count and frame.may_be_empty():
        t = ColumnType(t.type, True)
    return call, t


def _resolve(
    f: WindowExpr | AggregateExpr, columns: Sequence[Column]
) -> tuple[WindowExpr | AggregateExpr, ColumnType]:
    names = [c.name for c in columns]
    if isinstance(f, AggregateExpr):
        if f.func not in WINDOW_AGGREGATES:
            allowed = ", ".join(sorted(a.value for a in WINDOW_AGGREGATES))
            raise PlanTypeError(f"{f.func.value} is not a window aggregate (use {allowed})")
        if f.distinct:
            raise PlanTypeError(f"{f.func.value}(DISTINCT …) is not supported in a window")
        r, t = resolve(f.expr, columns)
        no_now(r, names)
        out = aggregate_type(f.func, t)
        return dataclasses.replace(f, expr=r), out
    if f.func in (WindowFunc.ROW_NUMBER, WindowFunc.RANK, WindowFunc.DENSE_RANK, WindowFunc.NTILE):
        return f, ColumnType(INT64, False)
    if f.func in (WindowFunc.PERCENT_RANK, WindowFunc.CUME_DIST):
        return f, ColumnType(FLOAT64, False)
    assert f.expr is not None
    x, xt = resolve(f.expr, columns)
    no_now(x, names)
    if f.func in (WindowFunc.FIRST_VALUE, WindowFunc.LAST_VALUE, WindowFunc.NTH_VALUE):
        nullable = xt.nullable or f.func is WindowFunc.NTH_VALUE
        return dataclasses.replace(f, expr=x), ColumnType(xt.type, nullable)
    if f.default is None:
        nullable = f.offset != 0 or xt.nullable
        return dataclasses.replace(f, expr=x), ColumnType(xt.type, nullable)
    d, dt = resolve(f.default, columns)
    no_now(d, names)
    target = _common(xt.type, dt.type)
    if target is None:
        raise PlanTypeError(
            f"{f.func.value}: the value {show(x, names)} is {xt.type} but the default"
            f" {show(d, names)} is {dt.type}"
        )
    x, xt = coerce((x, xt), target)
    d, dt = coerce((d, dt), target)
    nullable = xt.nullable or (f.offset != 0 and dt.nullable)
    return dataclasses.replace(f, expr=x, default=d), ColumnType(target, nullable)


def _common(a: ScalarType, b: ScalarType) -> ScalarType | None:
    if a.kind is b.kind:
        if a.kind is K.NUMERIC and a != b:
            assert a.scale is not None and b.scale is not None
            return numeric(38, max(a.scale, b.scale))
        return a
    return common_type(a, b)


# --- builder helpers -------------------------------------------------------------------------


def row_number() -> WindowExpr:
    """``row_number()``: 1, 2, … in the window's order (ties broken by the whole row)."""
    return WindowExpr(WindowFunc.ROW_NUMBER)


def rank() -> WindowExpr:
    """``rank()``: peers share the rank; the next rank skips (1, 1, 3)."""
    return WindowExpr(WindowFunc.RANK)


def dense_rank() -> WindowExpr:
    """``dense_rank()``: peers share the rank; no gaps (1, 1, 2)."""
    return WindowExpr(WindowFunc.DENSE_RANK)


def lag(expr: object, offset: int = 1, default: object | None = None) -> WindowExpr:
    """``lag(expr, offset, default)``: ``expr`` of the row ``offset`` rows back, else
    ``default`` (NULL when not given)."""
    return WindowExpr(
        WindowFunc.LAG, lift(expr), offset, None if default is None else lift(default)
    )


def lead(expr: object, offset: int = 1, default: object | None = None) -> WindowExpr:
    """``lead(expr, offset, default)``: ``expr`` of the row ``offset`` rows ahead, else
    ``default`` (NULL when not given)."""
    return WindowExpr(
        WindowFunc.LEAD, lift(expr), offset, None if default is None else lift(default)
    )


def first_value(expr: object) -> WindowExpr:
    """``first_value(expr)``: ``expr`` of the partition's first row."""
    return WindowExpr(WindowFunc.FIRST_VALUE, lift(expr))


def last_value(expr: object) -> WindowExpr:
    """``last_value(expr)``: ``expr`` of the frame's last row (the row's last peer)."""
    return WindowExpr(WindowFunc.LAST_VALUE, lift(expr))


def nth_value(expr: object, n: int) -> WindowExpr:
    """``nth_value(expr, n)``: ``expr`` of the frame's ``n``-th row, else NULL."""
    return WindowExpr(WindowFunc.NTH_VALUE, lift(expr), n)


def ntile(buckets: int) -> WindowExpr:
    """``ntile(buckets)``: the row's bucket, 1…buckets, by position."""
    return WindowExpr(WindowFunc.NTILE, offset=buckets)


def percent_rank() -> WindowExpr:
    """``percent_rank()``: ``(rank - 1) / (rows - 1)``, 0 for one row."""
    return WindowExpr(WindowFunc.PERCENT_RANK)


def cume_dist() -> WindowExpr:
    """``cume_dist()``: rows up to the row's last peer / rows."""
    return WindowExpr(WindowFunc.CUME_DIST)


def show_call(f: WindowExpr | AggregateExpr, names: Sequence[str]) -> str:
    """``row_number()``, ``lag(price, 1, 0)``, ``sum(price)``… with column names."""
    if isinstance(f, AggregateExpr):
        if f.delimiter is not None:
            return f"{f.func.value}({show(f.expr, names)}, {f.delimiter!r})"
        return "count(*)" if f.is_count_star() else f"{f.func.value}({show(f.expr, names)})"
    if f.func is WindowFunc.NTILE:
        return f"ntile({f.offset})"
    if f.expr is None:
        return f"{f.func.value}()"
    if f.func in (WindowFunc.FIRST_VALUE, WindowFunc.LAST_VALUE):
        return f"{f.func.value}({show(f.expr, names)})"
    args = [show(f.expr, names), str(f.offset)]
    if f.default is not None:
        args.append(show(f.default, names))
    return f"{f.func.value}({', '.join(args)})"
