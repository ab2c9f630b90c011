"""Window functions: ``Window``, a relation that appends one column per window function.

``Window(input, partition_by, order_by, funcs, names)`` is SQL's ``f(…) OVER (PARTITION BY …
ORDER BY …)`` for every ``f`` in ``funcs``, all sharing one partitioning and one order (a query
with several different ``OVER`` clauses stacks several nodes). Its output is the input's columns
followed by one column per function, named ``names`` (default: the function's name)::

    Window(
        bids,
        partition_by=(0,),                                   # PARTITION BY auction
        order_by=(ColumnOrder(2, desc=True),),               # ORDER BY price DESC
        funcs=(WindowExpr(WindowFunc.ROW_NUMBER), AggregateExpr(AggregateFunc.SUM, ColumnRef(2))),
        names=("rn", "running"),
    )
    # or, with the builder:
    bids.window(["auction"], order_by=[desc("price")], rn=row_number(), running=sum_(col("price")))

**Semantics** (PostgreSQL's, with one deterministic choice where PostgreSQL leaves the order
unspecified; :mod:`spate.plan.evaluation.relation` is the executable definition):

* The input must have non-negative multiplicities (as for ``TopK``). A row of multiplicity
  ``n`` is ``n`` separate rows: each gets its own output row (``row_number`` numbers them
  ``k, k+1, …``), and identical output rows add up again.
* Rows are partitioned by the ``partition_by`` columns (NULLs equal, as ``Reduce`` groups); no
  columns: one partition, the whole input.
* Within a partition rows are ordered by ``order_by`` (PostgreSQL's NULL placement: last for
  ascending, first for descending, unless ``nulls_last`` says otherwise), **then by the whole
  input row ascending, NULLs last** — the tie-break ``TopK`` uses, so that ``row_number``,
  ``lag`` and ``lead`` are defined even among rows with equal ORDER BY values (PostgreSQL picks
  an arbitrary order there; a comparison with PostgreSQL must order totally or look only at
  functions of peers). *Peers* are rows whose ``order_by`` values are all equal (NULL equals
  NULL, NaN equals NaN, ``-0.0`` equals ``0.0``); without ``order_by`` every row of a partition
  is a peer of every other.

==================  ============================  ==============================================
function            type                          value for the row at position ``i`` (0-based)
==================  ============================  ==============================================
``row_number()``    int64 not null                ``i + 1``
``rank()``          int64 not null                1 + the number of rows before the row's first
                                                  peer (peers share it: 1, 1, 3)
``dense_rank()``    int64 not null                the number of distinct peer groups up to the
                                                  row's (1, 1, 2)
``lag(x, n, d)``    common type of ``x`` and      ``x`` of the row at ``i - n`` in the
                    ``d``                         partition; ``d`` (evaluated on the current
                                                  row; default NULL) when there is none
``lead(x, n, d)``   the same                      ``x`` of the row at ``i + n``; else ``d``
``first_value(x)``  ``x``'s                       ``x`` of the frame's first row (the
                                                  partition's first)
``last_value(x)``   ``x``'s                       ``x`` of the frame's last row (the row's last
                                                  peer, in the tie-broken order)
``nth_value(x, n)`` ``x``'s, nullable             ``x`` of the frame's ``n``-th row; NULL when
                                                  the frame has fewer rows
``ntile(b)``        int64 not null                the row's bucket 1…b: ``N`` rows in ``b``
                                                  buckets by position, the first ``N mod b``
                                                  buckets one row larger
``percent_rank()``  float64 not null              ``(rank - 1) / (N - 1)``; 0 when ``N = 1``
``cume_dist()``     float64 not null              (rows up to the row's last peer) / ``N``
aggregate           as in ``Reduce``              the aggregate over the row's *frame*
==================  ============================  ==============================================

``N`` is the partition's number of rows. ``n`` (held in ``WindowExpr.offset``, like ``b``) is a
constant int: ``lag(x, -n)`` is ``lead(x, n)`` and ``n = 0`` the row's own ``x``; ``nth_value``
and ``ntile`` need ``n, b >= 1``.
Aggregates are ``count`` (``count(*)`` is ``count(TRUE)``), ``sum``, ``avg``, ``min``, ``max``,
``bool_and`` and ``bool_or`` without ``distinct`` (PostgreSQL has no DISTINCT in window
aggregates), typed as in ``Reduce`` (:mod:`spate.plan.aggregate`: ``sum(int64)`` is int64 and
``avg(int64)`` float64, where PostgreSQL answers numeric; a SQL front end wanting PostgreSQL's
types casts the argument to numeric first, or computes ``sum(x::numeric) / count(x)`` in a
``Map`` above the node). The frame is PostgreSQL's default: with ``order_by``, ``RANGE BETWEEN
UNBOUNDED PRECEDING AND CURRENT ROW`` — the partition's rows up to the row's **last peer**, so
``sum(x) OVER (ORDER BY y)`` over ``(x, y) = (1, 1), (2, 1), (3, 2)`` is 3, 3, 6; without
``order_by``, the whole partition. The frame always holds the row itself, so an aggregate is
NULL only when every value in it is.

**Maintenance.** A renderer recomputes every partition a change touches (the keyed operators'
approach), so the cost of a change follows its partition's size; without ``partition_by`` every
change recomputes the whole input (``explain()`` says so). ``SELECT … WHERE rn <= k`` over a
``row_number()`` is cheaper as a ``TopK`` with the same order (same tie-break, same rows).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from spate.plan.aggregate import AggregateExpr, AggregateFunc, aggregate_type
from spate.plan.errors import InvalidPlan, PlanTypeError
from spate.plan.expr import ColumnType, ScalarExpr, lift, show
from spate.plan.finishing import ColumnOrder
from spate.plan.infer import coerce, common_type, resolve
from spate.plan.node_checks import no_now, node_errors, output_names, positions, set_field
from spate.plan.relation import RelationExpr, _check_input
from spate.repr.desc import Column, RelationDesc
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
    }
)
"""The aggregates a ``Window`` computes over a frame (``string_agg`` sorts its values, which is
not PostgreSQL's frame order, so it is not one of them)."""


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


@wire("plan.window")
@dataclass(frozen=True, slots=True)
class Window(RelationExpr):
    """The input with one column appended per function in ``funcs``, each computed over the
    row's partition (``partition_by`` columns) in the order ``order_by`` (see the module doc for
    the semantics, the tie-break and the frame)."""

    input: RelationExpr
    partition_by: tuple[int, ...] = ()
    order_by: tuple[ColumnOrder, ...] = ()
    funcs: tuple[WindowExpr | AggregateExpr, ...] = ()
    names: tuple[str, ...] = ()
    _desc: RelationDesc = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        with node_errors("Window"):
            inp = _check_input(self.input)
            desc = inp.desc
            key = positions(self.partition_by, desc.arity, "partition by", desc)
            order = tuple(self.order_by)
            for o in order:
                if not isinstance(o, ColumnOrder):
                    raise InvalidPlan(f"order_by takes ColumnOrder values, got {o!r}")
                positions([o.column], desc.arity, "order by", desc)
                if desc.columns[o.column].type.kind is K.JSONB:
                    raise PlanTypeError(f"cannot order by jsonb column {desc.names[o.column]!r}")
            funcs = tuple(self.funcs)
            if not funcs:
                raise InvalidPlan("a window needs at least one function")
            defaults = [_func_name(f) for f in funcs]
            names = output_names(self.names, len(funcs), defaults, set(desc.names))
            cols = list(desc.columns)
            resolved: list[WindowExpr | AggregateExpr] = []
            for name, f in zip(names, funcs, strict=True):
                try:
                    r, t = _resolve_call(f, desc.columns)
                except InvalidPlan as e:
                    raise type(e)(f"{name}: {e}") from None
                resolved.append(r)
                cols.append(Column(name, t.type, t.nullable))
            taken: set[str] = set()
            for c in cols:
                if c.name in taken:
                    raise InvalidPlan(f"duplicate output column {c.name!r}; give other names")
                taken.add(c.name)
            set_field(self, "partition_by", key)
            set_field(self, "order_by", order)
            set_field(self, "funcs", tuple(resolved))
            set_field(self, "names", names)
            set_field(self, "_desc", RelationDesc(cols))

    def inputs(self) -> tuple[RelationExpr, ...]:
        return (self.input,)


def _func_name(f: object) -> str:
    if isinstance(f, WindowExpr):
        return f.func.value
    if isinstance(f, AggregateExpr):
        return f.func.value
    raise InvalidPlan(f"not a window function: {f!r} (use WindowExpr or AggregateExpr)")


def _resolve_call(
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


# --- explain ---------------------------------------------------------------------------------


def show_call(f: WindowExpr | AggregateExpr, names: Sequence[str]) -> str:
    """``row_number()``, ``lag(price, 1, 0)``, ``sum(price)``… with column names."""
    if isinstance(f, AggregateExpr):
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


def explain_line(node: Window) -> str:
    """The node's line in :func:`spate.plan.explain.explain`."""
    names = node.input.desc.names
    order = [
        f"{names[o.column]}{' DESC' if o.desc else ''}"
        + ("" if o.nulls_last is None else f" NULLS {'LAST' if o.nulls_last else 'FIRST'}")
        for o in node.order_by
    ]
    calls = [f"{n} = {show_call(f, names)}" for n, f in zip(node.names, node.funcs, strict=True)]
    text = (
        f"Window partition=[{', '.join(names[i] for i in node.partition_by)}]"
        f" order=[{', '.join(order)}] [{', '.join(calls)}]"
    )
    if not node.partition_by:
        text += " (one partition: every change recomputes all of it)"
    return text
