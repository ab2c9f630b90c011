"""What the planners of single statement kinds (:mod:`~spate.sql.objects`,
:mod:`~spate.sql.ddl`, :mod:`~spate.sql.dml`, :mod:`~spate.sql.show`) use of the statement
planner in :mod:`spate.sql.plan`, which dispatches to them: its shape, so that they do not
import the module that imports them.
"""

from __future__ import annotations

from typing import Protocol

from sqlglot import exp
from sqlglot.tokenizer_core import Token

from spate.plan.relation import RelationExpr
from spate.sql.catalog import Catalog, CatalogObject
from spate.sql.errors import SqlError
from spate.sql.parse import Cursor, Source
from spate.sql.query import QueryPlanner
from spate.sql.scope import Scope


class StatementPlanner(Protocol):
    """One statement being planned: its text and tokens, the catalog, a cursor over the
    statement's head, and the query planner for the queries inside it."""

    src: Source
    tokens: list[Token]
    catalog: Catalog
    cur: Cursor
    qp: QueryPlanner

    def unsupported(self, message: str) -> SqlError:
        """A ``feature_not_supported`` error located at the statement."""
        ...

    def table_object(self, name: str, node: exp.Expression | None) -> CatalogObject:
        """The table ``name`` a write goes to (an error for anything else)."""
        ...

    def readable(self, name: str, at: int) -> CatalogObject:
        """The readable object ``name`` (an error if it is missing or cannot be read)."""
        ...

    def filter_where(self, plan: RelationExpr, scope: Scope, cond: exp.Expression) -> RelationExpr:
        """``plan`` filtered by the WHERE condition ``cond`` (subqueries included)."""
        ...
