"""Name scopes: which SQL names denote which columns of the relation being built.

A :class:`Rel` is an IR relation together with a :class:`Scope` that has one :class:`Col` per
column of the relation. Names resolve in the scope first, then outward through
:class:`Correlation`: a subquery lowered with a *context* (the distinct values of the outer
columns it uses, as its first columns, the "prefix") sees an outer column as the prefix column
that carries it. A correlation built with every outer column available records which ones the
subquery used; the planner then lowers the subquery again with exactly those.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlglot import exp

from spate.plan.expr import Literal
from spate.plan.relation import Map, Project, RelationExpr
from spate.sql.errors import AmbiguousColumn, UndefinedColumn
from spate.sql.parse import position
from spate.sql.types import PgType


@dataclass(frozen=True, slots=True)
class Col:
    """One column as SQL sees it."""

    name: str | None
    table: str | None
    type: PgType
    hidden: bool = False
    """Not part of ``*`` (context prefixes, USING duplicates, helper columns)."""
    qualified_only: bool = False
    """Found only as ``table.name`` (the right-hand copy of a USING column)."""


class Correlation:
    """The outer columns a subquery can see, as its prefix columns ``0 … k-1``."""

    def __init__(self, outer: Scope, positions: Sequence[int]) -> None:
        self.outer = outer
        self.positions = list(positions)
        self.used: set[int] = set()

    def local(self, outer_position: int) -> int:
        self.used.add(outer_position)
        return self.positions.index(outer_position)


@dataclass
class Scope:
    cols: list[Col]
    parent: Correlation | None = None
    text: str | None = field(default=None, repr=False)

    def resolve(self, table: str | None, name: str, node: exp.Expression | None) -> int:
        """The position of ``[table.]name``; errors 42703 (unknown) and 42702 (ambiguous)."""
        hits = [
            i
            for i, c in enumerate(self.cols)
            if c.name == name
            and (table is None or c.table == table)
            and not (table is None and c.qualified_only)
        ]
        if len(hits) > 1:
            shown = f"{table}.{name}" if table else name
            raise AmbiguousColumn(
                f'column reference "{shown}" is ambiguous', position=position(node), text=self.text
            )
        if hits:
            return hits[0]
        if self.parent is not None:
            try:
                outer = self.parent.outer.resolve(table, name, node)
            except UndefinedColumn:
                pass
            else:
                return self.parent.local(outer)
        if table is not None and not self.has_table(table):
            raise UndefinedColumn(
                f'missing FROM-clause entry for table "{table}"',
                position=position(node),
                text=self.text,
                sqlstate="42P01",
            )
        shown = f"{table}.{name}" if table else name
        raise UndefinedColumn(
            f'column "{shown}" does not exist', position=position(node), text=self.text
        )

    def has_table(self, table: str) -> bool:
        if any(c.table == table for c in self.cols):
            return True
        return self.parent is not None and self.parent.outer.has_table(table)

    def star(self, table: str | None) -> list[int]:
        if table is None:
            return [i for i, c in enumerate(self.cols) if not c.hidden]
        return [i for i, c in enumerate(self.cols) if c.table == table and not c.qualified_only]


@dataclass
class Rel:
    """An IR relation and the scope of its columns (same length)."""

    expr: RelationExpr
    scope: Scope

    @property
    def arity(self) -> int:
        return self.expr.desc.arity

    def with_cols(self, expr: RelationExpr, cols: list[Col]) -> Rel:
        return Rel(expr, Scope(cols, self.scope.parent, self.scope.text))


def project(expr: RelationExpr, positions: Sequence[int]) -> RelationExpr:
    """``Project`` with output names made unique (``a``, ``a_1``…)."""
    positions = tuple(positions)
    if positions == tuple(range(expr.desc.arity)):
        return expr
    names = unique_names([expr.desc.names[p] for p in positions])
    return Project(expr, positions, tuple(names))


def unique_names(names: Sequence[str]) -> list[str]:
    taken: set[str] = set()
    out: list[str] = []
    for n in names:
        name, k = n, 1
        while name in taken:
            name = f"{n}_{k}"
            k += 1
        taken.add(name)
        out.append(name)
    return out


def append_nulls(expr: RelationExpr, cols: Sequence[Col], like: RelationExpr) -> RelationExpr:
    """``expr`` with typed NULL columns appended, one per column of ``like``."""
    del cols
    nulls = [Literal(None, c.type) for c in like.desc.columns]
    names = unique_names([*expr.desc.names, *like.desc.names])[expr.desc.arity :]
    return Map(expr, tuple(nulls), tuple(names))


def hide(cols: Sequence[Col]) -> list[Col]:
    return [dataclasses.replace(c, hidden=True, name=None) for c in cols]
