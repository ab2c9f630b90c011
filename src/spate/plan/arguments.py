"""The arguments of the fluent methods, normalised to the IR: a column given by name or by
position becomes a position, a sort key a ``ColumnOrder``, ``on`` pairs join equivalence
classes. Errors name what the input has."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from spate.plan.errors import InvalidPlan, PlanColumnMissing
from spate.plan.finishing import ColumnOrder

if TYPE_CHECKING:
    from spate.repr.desc import RelationDesc

ColumnSpec = str | int
"""A column by name or by position."""


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


def columns(
    desc: RelationDesc, specs: Sequence[ColumnSpec], what: str = "column"
) -> tuple[int, ...]:
    """The positions of ``specs`` in ``desc``, in order."""
    return tuple(position(desc, c, what) for c in specs)


SortSpec = SortKey | ColumnSpec | ColumnOrder
"""An ``order_by`` item: a sort key, a column (ascending) or an IR ``ColumnOrder``."""


def ordering(desc: RelationDesc, items: Sequence[SortSpec]) -> tuple[ColumnOrder, ...]:
    """``order_by`` items as ``ColumnOrder`` values over ``desc``."""
    return tuple(_order(desc, item) for item in items)


def _order(desc: RelationDesc, item: SortSpec) -> ColumnOrder:
    if isinstance(item, ColumnOrder):
        return item
    if isinstance(item, SortKey):
        return ColumnOrder(position(desc, item.column, "order by"), item.desc, item.nulls_last)
    return ColumnOrder(position(desc, item, "order by"))


def join_classes(
    left: RelationDesc, right: RelationDesc, on: Sequence[str | tuple[ColumnSpec, ColumnSpec]]
) -> tuple[tuple[int, int], ...]:
    """``on`` items (``(left column, right column)`` pairs, or one name present on both sides)
    as equivalence classes over the concatenation of ``left`` and ``right``."""
    classes: list[tuple[int, int]] = []
    for item in on:
        l_col, r_col = (item, item) if isinstance(item, str) else item
        classes.append(
            (
                position(left, l_col, "left join column"),
                left.arity + position(right, r_col, "right join column"),
            )
        )
    return tuple(classes)


def renamed(desc: RelationDesc, names: dict[str, str]) -> tuple[str, ...]:
    """``desc``'s names with ``old → new`` applied (every old name must exist)."""
    for old in names:
        position(desc, old)
    return tuple(names.get(n, n) for n in desc.names)
