"""The Python builder: plans that read like the query they compute.

::

    bids = Get(BIDS_ID, BIDS)
    top = bids.filter(col("price") > 10).reduce(["auction"], top=max_(col("price")))
    q = (
        Get(AUCTIONS_ID, AUCTIONS)
        .join(bids, on=[("id", "auction")])
        .filter(now() < col("date_time") + interval(hours=1))
        .top_k(["category"], order_by=[desc("price")], limit=3)
    )

Columns are written by name (``col("price")``, ``"auction"``) or by position (``3``); every node
resolves them against its input when built, and errors name what exists. SQL equality is
``a.eq(b)`` (``==`` compares trees); ``&``, ``|``, ``~`` are AND, OR, NOT.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from spate.plan.aggregate import AggregateExpr, AggregateFunc
from spate.plan.errors import InvalidPlan, PlanColumnMissing
from spate.plan.expr import (
    CallUnary,
    CallVariadic,
    Case,
    ColumnName,
    Interval,
    Literal,
    Now,
    ScalarExpr,
    UnaryFunc,
    VariadicFunc,
    lift,
    literal_type,
)
from spate.plan.finishing import ColumnOrder
from spate.repr.types import BOOL, INT64, TIMESTAMP, Datum, ScalarType

if TYPE_CHECKING:
    from spate.plan import relation as rel
    from spate.plan import window as win
    from spate.repr.desc import RelationDesc

ColumnSpec = str | int
"""A column by name or by position."""


# --- scalar helpers --------------------------------------------------------------------------


def col(name: str) -> ScalarExpr:
    """The input column called ``name``."""
    if not isinstance(name, str) or not name:
        raise InvalidPlan(f"col() takes a column name, got {name!r}")
    return ColumnName(name)


def lit(value: Datum, type: ScalarType | None = None) -> ScalarExpr:
    """A literal; the type is inferred from the Python value unless given (NULL needs it)."""
    if type is None:
        if value is None:
            raise InvalidPlan("lit(None) needs a type: lit(None, INT64)")
        type = literal_type(value)
    return Literal(value, type)


def now() -> ScalarExpr:
    """The logical time as a ``timestamp`` (for temporal filters)."""
    return Now(TIMESTAMP)


def now_ms() -> ScalarExpr:
    """The logical time as ``int64`` milliseconds (for temporal filters on ms columns)."""
    return Now(INT64)


def interval(
    *, days: int = 0, hours: int = 0, minutes: int = 0, seconds: int = 0, ms: int = 0
) -> ScalarExpr:
    """A time span to add to or subtract from a timestamp, a date or an int64 ms column."""
    total = (((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000 + ms
    return Interval(total)


def case(*whens: tuple[object, object], otherwise: object | None = None) -> ScalarExpr:
    """``CASE WHEN c1 THEN r1 … ELSE otherwise END`` (no ``otherwise``: ELSE NULL)."""
    return Case(
        tuple((lift(c), lift(r)) for c, r in whens),
        None if otherwise is None else lift(otherwise),
    )


def coalesce(*values: object) -> ScalarExpr:
    return CallVariadic(VariadicFunc.COALESCE, tuple(lift(v) for v in values))


def greatest(*values: object) -> ScalarExpr:
    return CallVariadic(VariadicFunc.GREATEST, tuple(lift(v) for v in values))


def least(*values: object) -> ScalarExpr:
    return CallVariadic(VariadicFunc.LEAST, tuple(lift(v) for v in values))


def from_epoch_ms(value: object) -> ScalarExpr:
    """int64 milliseconds since 1970-01-01 → timestamp."""
    return CallUnary(UnaryFunc.FROM_EPOCH_MS, lift(value))


def timestamp(text: str) -> ScalarExpr:
    """A timestamp literal from ISO text: ``timestamp("2024-01-01 10:00:00")``."""
    return Literal(dt.datetime.fromisoformat(text), TIMESTAMP)


# --- aggregates ------------------------------------------------------------------------------


def count(expr: object | None = None, *, distinct: bool = False) -> AggregateExpr:
    """``count(expr)`` (non-NULL values) or, without ``expr``, ``count(*)``."""
    e = Literal(True, BOOL) if expr is None else lift(expr)
    return AggregateExpr(AggregateFunc.COUNT, e, distinct)


def sum_(expr: object, *, distinct: bool = False) -> AggregateExpr:
    return AggregateExpr(AggregateFunc.SUM, lift(expr), distinct)


def min_(expr: object) -> AggregateExpr:
    return AggregateExpr(AggregateFunc.MIN, lift(expr))


def max_(expr: object) -> AggregateExpr:
    return AggregateExpr(AggregateFunc.MAX, lift(expr))


def avg(expr: object, *, distinct: bool = False) -> AggregateExpr:
    return AggregateExpr(AggregateFunc.AVG, lift(expr), distinct)


def bool_and(expr: object) -> AggregateExpr:
    return AggregateExpr(AggregateFunc.BOOL_AND, lift(expr))


def bool_or(expr: object) -> AggregateExpr:
    return AggregateExpr(AggregateFunc.BOOL_OR, lift(expr))


def string_agg(expr: object, delimiter: str, *, distinct: bool = False) -> AggregateExpr:
    """The non-NULL values sorted ascending, joined by ``delimiter``."""
    return AggregateExpr(AggregateFunc.STRING_AGG, lift(expr), distinct, delimiter)


# --- ordering --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SortKey:
    """Builder only: order by a column by name or position (see :func:`asc`, :func:`desc`)."""

    column: ColumnSpec
    desc: bool = False
    nulls_last: bool | None = None


def asc(column: ColumnSpec, *, nulls_last: bool | None = None) -> SortKey:
    """Ascending (NULLs last unless told otherwise)."""
    return SortKey(column, False, nulls_last)


def desc(column: ColumnSpec, *, nulls_last: bool | None = None) -> SortKey:
    """Descending (NULLs first unless told otherwise)."""
    return SortKey(column, True, nulls_last)


# --- relation methods ------------------------------------------------------------------------


def position(desc: RelationDesc, column: ColumnSpec, what: str = "column") -> int:
    """The position of ``column`` (a name or a position) in ``desc``."""
    if isinstance(column, str):
        for i, name in enumerate(desc.names):
            if name == column:
                return i
        raise PlanColumnMissing(f"{what} {column!r} not found; columns: {', '.join(desc.names)}")
    if isinstance(column, bool) or not isinstance(column, int):
        raise InvalidPlan(f"{what} must be a name or a position, got {column!r}")
    if not 0 <= column < desc.arity:
        raise PlanColumnMissing(
            f"{what} #{column} not found; the input has {desc.arity} columns"
            f" ({', '.join(desc.names)})"
        )
    return column


def _order(desc: RelationDesc, item: SortKey | ColumnSpec | ColumnOrder) -> ColumnOrder:
    if isinstance(item, ColumnOrder):
        return item
    if isinstance(item, SortKey):
        return ColumnOrder(position(desc, item.column, "order by"), item.desc, item.nulls_last)
    return ColumnOrder(position(desc, item, "order by"))


def _me(obj: object) -> rel.RelationExpr:
    from spate.plan.relation import RelationExpr

    assert isinstance(obj, RelationExpr)
    return obj


class RelationBuilder:
    """Fluent methods of every relational node (mixed into ``RelationExpr``)."""

    __slots__ = ()

    def explain(self) -> str:
        """The plan as indented text with column names (see :mod:`spate.plan.explain`)."""
        from spate.plan.explain import explain

        return explain(_me(self))

    def filter(self, *predicates: ScalarExpr) -> rel.Filter:
        """Keep rows where every predicate is TRUE."""
        from spate.plan.relation import Filter

        me = _me(self)
        return Filter(me, tuple(predicates))

    def map(self, **columns: object) -> rel.Map:
        """Append columns: ``.map(total=col("price") * col("qty"))`` (in argument order)."""
        from spate.plan.relation import Map

        me = _me(self)
        return Map(me, tuple(lift(v) for v in columns.values()), tuple(columns))

    def project(self, *columns: ColumnSpec) -> rel.Project:
        """Keep these columns, in this order."""
        from spate.plan.relation import Project

        me = _me(self)
        return Project(me, tuple(position(me.desc, c) for c in columns))

    def select(self, *columns: ColumnSpec, **computed: object) -> rel.RelationExpr:
        """Keep ``columns``, then the ``computed`` ones: ``.select("id", total=col("a") + 1)``."""
        from spate.plan.relation import Map, Project

        me = _me(self)
        kept = [position(me.desc, c) for c in columns]
        if not computed:
            return Project(me, tuple(kept))
        mapped = Map(me, tuple(lift(v) for v in computed.values()), tuple(computed))
        arity = me.desc.arity
        return Project(mapped, (*kept, *range(arity, arity + len(computed))))

    def rename(self, **names: str) -> rel.Project:
        """Rename columns: ``.rename(price="top_price")`` (old name = new name)."""
        from spate.plan.relation import Project

        me = _me(self)
        for old in names:
            position(me.desc, old)
        new = tuple(names.get(n, n) for n in me.desc.names)
        return Project(me, tuple(range(me.desc.arity)), new)

    def flat_map(self, func: str, *args: object, name: str | None = None) -> rel.FlatMap:
        """``.flat_map("generate_series", 1, col("n"), name="i")``; also ``unnest``,
        ``string_to_table``."""
        from spate.plan.relation import FlatMap
        from spate.plan.table_func import TableFunc

        me = _me(self)
        f = TableFunc(func)
        return FlatMap(me, f, tuple(lift(a) for a in args), () if name is None else (name,))

    def join(
        self,
        other: rel.RelationExpr,
        on: Sequence[str | tuple[ColumnSpec, ColumnSpec]] = (),
        *,
        where: Sequence[ScalarExpr] = (),
    ) -> rel.Join:
        """Inner join; ``on`` lists ``(left column, right column)`` pairs, or one name present on
        both sides. ``where`` holds residual predicates over the output columns."""
        from spate.plan.relation import Join

        me = _me(self)
        offset = me.desc.arity
        classes: list[tuple[int, int]] = []
        for item in on:
            left, right = (item, item) if isinstance(item, str) else item
            classes.append(
                (
                    position(me.desc, left, "left join column"),
                    offset + position(other.desc, right, "right join column"),
                )
            )
        return Join((me, other), tuple(classes), tuple(where))

    def cross_join(self, *others: rel.RelationExpr) -> rel.Join:
        from spate.plan.relation import Join

        me = _me(self)
        return Join((me, *others))

    def reduce(
        self, group_key: Sequence[ColumnSpec] = (), **aggregates: AggregateExpr
    ) -> rel.Reduce:
        """Group by ``group_key``; ``.reduce(["auction"], top=max_(col("price")))``."""
        from spate.plan.relation import Reduce

        me = _me(self)
        key = tuple(position(me.desc, c, "group key") for c in group_key)
        return Reduce(me, key, tuple(aggregates.values()), tuple(aggregates))

    def top_k(
        self,
        group_key: Sequence[ColumnSpec] = (),
        *,
        order_by: Sequence[SortKey | ColumnSpec | ColumnOrder] = (),
        limit: int | None = None,
        offset: int = 0,
    ) -> rel.TopK:
        from spate.plan.relation import TopK

        me = _me(self)
        key = tuple(position(me.desc, c, "group key") for c in group_key)
        order = tuple(_order(me.desc, o) for o in order_by)
        return TopK(me, key, order, limit, offset)

    def window(
        self,
        partition_by: Sequence[ColumnSpec] = (),
        *,
        order_by: Sequence[SortKey | ColumnSpec | ColumnOrder] = (),
        **funcs: win.WindowExpr | AggregateExpr,
    ) -> win.Window:
        """Window functions over one ``OVER (PARTITION BY … ORDER BY …)``, appended as columns:
        ``.window(["auction"], order_by=[desc("price")], rn=row_number(), prev=lag(col("price")),
        total=sum_(col("price")))`` (see :mod:`spate.plan.window`)."""
        from spate.plan.window import Window

        me = _me(self)
        key = tuple(position(me.desc, c, "partition by") for c in partition_by)
        order = tuple(_order(me.desc, o) for o in order_by)
        return Window(me, key, order, tuple(funcs.values()), tuple(funcs))

    def distinct(self) -> rel.Distinct:
        from spate.plan.relation import Distinct

        me = _me(self)
        return Distinct(me)

    def negate(self) -> rel.Negate:
        from spate.plan.relation import Negate

        me = _me(self)
        return Negate(me)

    def threshold(self) -> rel.Threshold:
        from spate.plan.relation import Threshold

        me = _me(self)
        return Threshold(me)

    def union(self, *others: rel.RelationExpr) -> rel.Union:
        """UNION ALL."""
        from spate.plan.relation import Union

        me = _me(self)
        return Union((me, *others))

    def except_all(self, other: rel.RelationExpr) -> rel.Threshold:
        """SQL ``EXCEPT ALL``: ``Threshold(self + Negate(other))``."""
        from spate.plan.relation import Negate, Threshold, Union

        me = _me(self)
        return Threshold(Union((me, Negate(other))))

    def arrange_by(self, *keys: Sequence[ColumnSpec]) -> rel.ArrangeBy:
        from spate.plan.relation import ArrangeBy

        me = _me(self)
        return ArrangeBy(me, tuple(tuple(position(me.desc, c, "key") for c in k) for k in keys))
