"""Peek finishing: order by, offset, limit and projection applied to a peek's result.

Applied after the rows at the peek's timestamp are accumulated (a row with multiplicity ``n``
counts as ``n`` rows for offset and limit). Ordering follows PostgreSQL: ascending puts NULLs
last, descending puts them first, unless ``nulls_last`` says otherwise. Without ``order_by`` the
order is unspecified, and offset/limit pick an unspecified subset.
"""

from __future__ import annotations

from dataclasses import dataclass

from spate.errors import InvalidFinishing as InvalidFinishing
from spate.wire import wire


@wire("plan.column_order")
@dataclass(frozen=True, slots=True)
class ColumnOrder:
    """Order by column ``column`` (a position), ascending unless ``desc``."""

    column: int
    desc: bool = False
    nulls_last: bool | None = None

    def effective_nulls_last(self) -> bool:
        return (not self.desc) if self.nulls_last is None else self.nulls_last


@wire("plan.row_set_finishing")
@dataclass(frozen=True, slots=True)
class RowSetFinishing:
    """Order by, then skip ``offset`` rows, keep ``limit``, then keep columns ``project``."""

    order_by: tuple[ColumnOrder, ...] = ()
    limit: int | None = None
    offset: int = 0
    project: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.limit is not None and self.limit < 0:
            raise InvalidFinishing(f"limit must be >= 0, got {self.limit}")
        if self.offset < 0:
            raise InvalidFinishing(f"offset must be >= 0, got {self.offset}")

    def validate(self, arity: int) -> None:
        """Every column position refers to one of ``arity`` columns."""
        for o in self.order_by:
            if not 0 <= o.column < arity:
                raise InvalidFinishing(f"order by column {o.column}: relation has {arity} columns")
        for c in self.project or ():
            if not 0 <= c < arity:
                raise InvalidFinishing(f"projected column {c}: relation has {arity} columns")

    def is_trivial(self, arity: int) -> bool:
        """True when the finishing changes nothing."""
        return (
            not self.order_by
            and self.limit is None
            and self.offset == 0
            and (self.project is None or self.project == tuple(range(arity)))
        )
