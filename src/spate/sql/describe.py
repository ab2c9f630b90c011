"""What a statement takes and returns, from its plan: parameter types and result columns.

A prepared statement is described before it runs (the extended protocol's Describe): the
types of its parameters as its contexts demand them (:mod:`spate.sql.parameters`) and the
columns of its result as the planner typed them. Describing plans the statement against the
catalog and reads nothing: the statement is not run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from spate.sql import Parsed, parse, plan_statement
from spate.sql import statements as st
from spate.sql.catalog import Catalog
from spate.sql.errors import SqlSyntaxError
from spate.sql.parameters import typing_parameters
from spate.sql.results import result_schema
from spate.sql.types import PgType


@dataclass(frozen=True, slots=True)
class Description:
    """``params[i]``: the type of ``$(i+1)``; ``columns``: the result's columns (``None``:
    the statement returns no rows); ``statement``: the planned statement."""

    params: tuple[PgType, ...]
    columns: pa.Schema | None
    statement: st.Statement


def describe(
    text: str | Parsed,
    catalog: Catalog,
    declared: Sequence[PgType | None] = (),
    *,
    dialect: str = "postgres",
) -> Description:
    """Plan the one statement of ``text`` (with parameters ``$n``) and describe it; a
    statement already split (:class:`~spate.sql.Parsed`) is not split again.

    ``declared[i]`` is the type the client gave ``$(i+1)`` (``None``: to be inferred); a
    declared type is kept. Raises the statement's planning error (as PostgreSQL reports it
    when the statement is prepared).
    """
    with typing_parameters(declared) as params:
        parsed = [text] if isinstance(text, Parsed) else parse(text, dialect=dialect)
        if len(parsed) != 1:
            raise SqlSyntaxError(f"cannot describe {len(parsed)} statements at once")
        stmt = plan_statement(parsed[0], catalog)
    return Description(params.types(), columns(stmt), stmt)


def columns(stmt: st.Statement) -> pa.Schema | None:
    """The result columns of a planned statement (``None``: it returns no rows)."""
    if isinstance(stmt, (st.Select, st.Subscribe)):
        return result_schema(stmt.plan.desc, stmt.names, stmt.types)
    if isinstance(stmt, st.Rows):
        fields = []
        for i, name in enumerate(stmt.names):
            values = [r[i] for r in stmt.rows]
            inferred = pa.array(values).type if any(v is not None for v in values) else pa.string()
            fields.append(pa.field(name, inferred))
        return pa.schema(fields)
    return None
