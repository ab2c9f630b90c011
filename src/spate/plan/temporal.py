"""Temporal filters: ``Filter`` predicates on ``now()``, turned into validity intervals.

A predicate that mentions :class:`~spate.plan.expr.Now` must have the form ``now() <op> e`` or
``e <op> now()`` with ``<op>`` one of ``< <= > >= =`` and ``e`` free of ``now()`` (top-level
``AND`` is split first). ``now()`` is the logical time ``t`` (ms) at which the result is
observed, so each such predicate bounds ``t`` by a function of the row:

=====================  ===========================  ===========================================
predicate              ``int64`` ms ``e``             ``timestamp`` ``e`` (µs precision)
=====================  ===========================  ===========================================
``now() <  e``         upper ``e``                  upper ``epoch_ms_ceil(e)``
``now() <= e``         upper ``e + 1``              upper ``epoch_ms(e) + 1``
``now() >  e``         lower ``e + 1``              lower ``epoch_ms(e) + 1``
``now() >= e``         lower ``e``                  lower ``epoch_ms_ceil(e)``
``now() =  e``         lower ``e``, upper ``e + 1``   both of the above
=====================  ===========================  ===========================================

For a row ``r`` let ``lower(r) = max(0, every lower bound)`` and ``upper(r) = min(every upper
bound)`` (``∞`` without upper bounds; any bound NULL: the row never passes). The filter keeps
``r`` at time ``t`` iff the other predicates hold and ``lower(r) <= t < upper(r)``: its
**validity interval** is ``[lower(r), upper(r))``. An input update ``(r, time, diff)`` therefore
becomes the output updates ``(r, max(time, lower), diff)`` and, when ``upper`` is finite,
``(r, upper, -diff)`` — both only if ``max(time, lower) < upper``. The second one lies in the
future: a renderer holds it back until its frontier reaches ``upper``.

:func:`temporal_bounds` returns the bound expressions as ``int64`` IR expressions over the
Filter's input, ready to compile like any other scalar expression.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from spate.plan.errors import InvalidPlan
from spate.plan.expr import (
    BinaryFunc,
    CallBinary,
    CallUnary,
    Literal,
    Now,
    ScalarExpr,
    UnaryFunc,
    contains_now,
    show,
)
from spate.repr.types import INT64, TIMESTAMP

_FLIP = {
    BinaryFunc.LT: BinaryFunc.GT,
    BinaryFunc.LE: BinaryFunc.GE,
    BinaryFunc.GT: BinaryFunc.LT,
    BinaryFunc.GE: BinaryFunc.LE,
    BinaryFunc.EQ: BinaryFunc.EQ,
}


@dataclass(frozen=True, slots=True)
class TemporalBounds:
    """A filter's predicates split into ordinary ones and bounds on the logical time.

    ``predicates`` never mention ``now()``; ``lower`` (inclusive) and ``upper`` (exclusive) are
    ``int64`` millisecond expressions over the same input columns.
    """

    predicates: tuple[ScalarExpr, ...]
    lower: tuple[ScalarExpr, ...]
    upper: tuple[ScalarExpr, ...]

    def is_temporal(self) -> bool:
        return bool(self.lower or self.upper)


def conjuncts(predicates: Iterable[ScalarExpr]) -> list[ScalarExpr]:
    """The predicates with top-level ``AND`` split apart."""
    out: list[ScalarExpr] = []
    stack = list(reversed(list(predicates)))
    while stack:
        p = stack.pop()
        if isinstance(p, CallBinary) and p.func is BinaryFunc.AND:
            stack.append(p.right)
            stack.append(p.left)
        else:
            out.append(p)
    return out


def temporal_bounds(
    predicates: Iterable[ScalarExpr], names: tuple[str, ...] | None = None
) -> TemporalBounds:
    """Split resolved ``predicates`` (see the module doc); unsupported uses of now() raise."""
    plain: list[ScalarExpr] = []
    lower: list[ScalarExpr] = []
    upper: list[ScalarExpr] = []
    for p in conjuncts(predicates):
        if not contains_now(p):
            plain.append(p)
            continue
        form = _temporal_form(p)
        if form is None:
            raise InvalidPlan(
                f"unsupported use of now() in {show(p, names)}: a filter may only compare now() "
                "with an expression without now(), as now() <op> expr with <op> one of "
                "< <= > >= ="
            )
        op, now, e = form
        lo, up = _bounds(op, now, e)
        lower.extend(lo)
        upper.extend(up)
    return TemporalBounds(tuple(plain), tuple(lower), tuple(upper))


def _temporal_form(p: ScalarExpr) -> tuple[BinaryFunc, Now, ScalarExpr] | None:
    if not isinstance(p, CallBinary) or p.func not in _FLIP:
        return None
    if isinstance(p.left, Now) and not contains_now(p.right):
        return p.func, p.left, p.right
    if isinstance(p.right, Now) and not contains_now(p.left):
        return _FLIP[p.func], p.right, p.left
    return None


def _plus_one(e: ScalarExpr) -> ScalarExpr:
    return CallBinary(BinaryFunc.ADD, e, Literal(1, INT64))


def _bounds(op: BinaryFunc, now: Now, e: ScalarExpr) -> tuple[list[ScalarExpr], list[ScalarExpr]]:
    if now.type == TIMESTAMP:
        floor_ms: ScalarExpr = CallUnary(UnaryFunc.EPOCH_MS, e)
        ceil_ms: ScalarExpr = CallUnary(UnaryFunc.EPOCH_MS_CEIL, e)
    else:
        floor_ms = ceil_ms = e
    if op is BinaryFunc.LT:
        return [], [ceil_ms]
    if op is BinaryFunc.LE:
        return [], [_plus_one(floor_ms)]
    if op is BinaryFunc.GT:
        return [_plus_one(floor_ms)], []
    if op is BinaryFunc.GE:
        return [ceil_ms], []
    assert op is BinaryFunc.EQ
    return [ceil_ms], [_plus_one(floor_ms)]
