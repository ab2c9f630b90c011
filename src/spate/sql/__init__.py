"""SQL → spate's plan IR.

::

    from spate.sql import MemoryCatalog, plan_statements

    catalog = MemoryCatalog()
    catalog.add("bids", RelationDesc.of(("auction", INT64), ("price", INT64)))
    [stmt] = plan_statements("SELECT auction, max(price) FROM bids GROUP BY auction", catalog)
    stmt.plan        # a spate.plan RelationExpr

:func:`plan_statements` parses ``;``-separated statements (sqlglot; dialect ``"postgres"``, the
PostgreSQL that Materialize speaks, or ``"spark"``) and plans each against ``catalog`` (anything
implementing :class:`Catalog`), returning plain :mod:`spate.sql.statements` values. Every
statement is planned against the same catalog: to run statements that depend on earlier ones
(CREATE TABLE t; INSERT INTO t …) use :func:`parse` and :func:`plan_statement` one at a time, as
``Environment.sql`` does. Errors are :class:`SqlError` with a SQLSTATE and a position.

The package never imports the environment, Spark or the JVM.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot.tokenizer_core import Token

from spate.sql.catalog import Catalog, CatalogObject, MemoryCatalog
from spate.sql.depth import run_deep
from spate.sql.errors import SqlError
from spate.sql.parameters import Argument, binding_arguments
from spate.sql.parse import Source, split
from spate.sql.statements import Statement


@dataclass(frozen=True, slots=True)
class Parsed:
    """One statement of a text, split but not planned yet.

    ``arguments``: the values of its parameters ``$1``, ``$2``… as an ``EXECUTE`` of it gives
    them (expressions, each cast to its parameter's type: :func:`~spate.sql.parameters.
    binding_arguments`); planned with them, the statement MUST NOT be rewritten as text.
    ``None``: its parameters (if any) are unbound.
    """

    source: Source
    tokens: tuple[Token, ...]
    arguments: tuple[Argument, ...] | None = None

    @property
    def sql(self) -> str:
        return self.source.sql


def parse(text: str, *, dialect: str = "postgres") -> list[Parsed]:
    """Split ``text`` into its statements (tokenizing it; syntax inside a statement is checked
    when it is planned)."""
    return [Parsed(src, tuple(tokens)) for src, tokens in split(text, dialect)]


def plan_statement(
    parsed: Parsed, catalog: Catalog, *, recursion_limit: int | None = None
) -> Statement:
    """Plan one parsed statement against ``catalog``; ``recursion_limit``: the rounds a WITH
    RECURSIVE may take before it fails (SQLSTATE 54001; default 10,000). A statement nested
    too deeply to parse and plan fails with SQLSTATE 54001 as well (:mod:`spate.sql.depth`)."""
    from spate.plan.recursive import DEFAULT_MAX_ITERATIONS
    from spate.sql.plan import plan_one

    limit = DEFAULT_MAX_ITERATIONS if recursion_limit is None else recursion_limit

    # sqlglot's parser and the planner recurse: a deeply nested statement is planned on a
    # deep stack, or fails with 54001 (spate.sql.depth)
    def plan() -> Statement:
        if parsed.arguments is None:
            return plan_one(parsed.source, list(parsed.tokens), catalog, limit)
        with binding_arguments(parsed.arguments):  # set on the thread that plans
            return plan_one(parsed.source, list(parsed.tokens), catalog, limit)

    return run_deep(plan)


def plan_statements(text: str, catalog: Catalog, *, dialect: str = "postgres") -> list[Statement]:
    """Parse and plan every statement of ``text`` against ``catalog``."""
    return [plan_statement(p, catalog) for p in parse(text, dialect=dialect)]


__all__ = [
    "Argument",
    "Catalog",
    "CatalogObject",
    "MemoryCatalog",
    "Parsed",
    "SqlError",
    "Statement",
    "parse",
    "plan_statement",
    "plan_statements",
]
