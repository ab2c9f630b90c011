"""The PostgreSQL types a table's columns were declared with in SQL: narrow integers,
``real`` and ``varchar(n)`` lengths, read back from the table's ``CREATE TABLE`` text.

spate stores ``integer`` and ``smallint`` columns as int64 (the IR has one integer kind) and
``real`` columns as float64, but PostgreSQL computes with them at 32 and 16 bits and in single
precision, and refuses values outside their range. A table created in SQL keeps its ``CREATE
TABLE`` text in the catalog; the planner reads the declared types back from it, so a column
reference is typed ``integer``, ``smallint``, ``real`` or ``timestamptz`` as in PostgreSQL
(arithmetic checked by :func:`spate.sql.checks.int_range` or rounded to single precision,
assignments range-checked or rounded). A view made in SQL keeps its columns' types
(:attr:`~spate.sql.catalog.CatalogObject.types`). Tables made through the Python API, and every
other object, have their stored types.
"""

from __future__ import annotations

import functools

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from spate.sql.catalog import CatalogObject
from spate.sql.types import FLOAT4, INT2, INT4, PG_TIMESTAMPTZ, PgType, catalog_type, from_scalar

_NARROW = {
    exp.DataType.Type.INT: INT4,
    exp.DataType.Type.SMALLINT: INT2,
    exp.DataType.Type.FLOAT: FLOAT4,
    exp.DataType.Type.TIMESTAMPTZ: PG_TIMESTAMPTZ,
}
_KEPT = {t.name: t for t in _NARROW.values()}
"""The types a view keeps for its columns beyond their stored types."""
_VARCHAR = (exp.DataType.Type.VARCHAR, exp.DataType.Type.NVARCHAR)


@functools.lru_cache(maxsize=256)
def column_defs(create_sql: str) -> tuple[exp.ColumnDef, ...]:
    """The column definitions of a ``CREATE TABLE`` text (none if it is not one). Shared,
    cached trees: copy what is kept."""
    try:
        node = sqlglot.parse_one(create_sql, read="postgres")
    except SqlglotError:
        return ()
    if not isinstance(node, exp.Create) or not isinstance(node.this, exp.Schema):
        return ()
    return tuple(c for c in node.this.expressions if isinstance(c, exp.ColumnDef))


@functools.lru_cache(maxsize=256)
def _declared(create_sql: str) -> tuple[tuple[str, PgType | None, int | None], ...]:
    """Each column of a ``CREATE TABLE`` text: its name, ``integer``/``smallint``/``real`` for
    a narrow integer or a single-precision float, and ``n`` for a ``varchar(n)`` (``None``
    where not)."""
    out: list[tuple[str, PgType | None, int | None]] = []
    for c in column_defs(create_sql):
        kind = c.args.get("kind")
        if not isinstance(kind, exp.DataType):
            continue
        limit: int | None = None
        if kind.this in _VARCHAR and kind.expressions:
            try:
                limit = int(kind.expressions[0].name)
            except ValueError:
                limit = None
        narrow = _NARROW.get(kind.this)
        if kind.this is exp.DataType.Type.DOUBLE and kind.expressions:
            # float(p): real for p <= 24, double precision above
            try:
                narrow = FLOAT4 if int(kind.expressions[0].name) <= 24 else None
            except ValueError:
                narrow = None
        out.append((c.name, narrow, limit))
    return tuple(out)


def varchar_limits(create_sql: str | None) -> dict[str, int]:
    """The declared lengths of the ``varchar(n)`` columns of a table created in SQL."""
    if not create_sql:
        return {}
    return {name: n for name, _, n in _declared(create_sql) if n is not None}


def column_types(obj: CatalogObject) -> list[PgType]:
    """The PostgreSQL type of each column of ``obj`` (which must have a desc)."""
    assert obj.desc is not None
    if obj.types and len(obj.types) == len(obj.desc.columns):
        return [
            _KEPT.get(name) or catalog_type(name) or from_scalar(c.type)
            for c, name in zip(obj.desc.columns, obj.types, strict=True)
        ]
    narrow: dict[str, PgType] = {}
    if obj.kind == "table" and obj.create_sql:
        narrow = {name: t for name, t, _ in _declared(obj.create_sql) if t is not None}
    return [narrow.get(c.name) or from_scalar(c.type) for c in obj.desc.columns]
