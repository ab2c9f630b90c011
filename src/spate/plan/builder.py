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

from spate.plan.aggregate import AggregateExpr, AggregateFunc
from spate.plan.arguments import ColumnSpec, SortKey, asc, desc, position
from spate.plan.errors import InvalidPlan
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
from spate.plan.relation import RelationExpr
from spate.repr.types import BOOL, INT64, TIMESTAMP, Datum, ScalarType

__all__ = [
    "ColumnSpec",
    "RelationBuilder",
    "SortKey",
    "asc",
    "avg",
    "bool_and",
    "bool_or",
    "case",
    "coalesce",
    "col",
    "count",
    "desc",
    "from_epoch_ms",
    "greatest",
    "interval",
    "least",
    "lit",
    "max_",
    "min_",
    "now",
    "now_ms",
    "position",
    "string_agg",
    "sum_",
    "timestamp",
]

RelationBuilder = RelationExpr
"""The fluent methods (``filter``, ``join``, ``reduce``…) are those of every relational node."""


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
