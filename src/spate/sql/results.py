"""The types a result's columns reach the user with.

spate stores ``smallint`` and ``integer`` values as int64 and ``real`` values as float64 (each
``real`` value rounded to single precision), but a query's result columns carry their
PostgreSQL types, which the planner knows (:class:`~spate.sql.types.PgType`): planned
statements keep their result columns' type names, and at the result boundary (a SELECT's
Arrow table, a wire client's row description, the catalog tables clients read) those columns
become Arrow ``int16``, ``int32`` and ``float32`` (PostgreSQL's ``int2``, ``int4`` and
``float4``). Every other column keeps the Arrow type of its stored type.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import pyarrow as pa

from spate.repr.arrow import USER_INTERVAL, data_schema
from spate.repr.desc import RelationDesc
from spate.repr.types import ScalarKind
from spate.sql.types import catalog_type

NARROW: Final[dict[str, pa.DataType]] = {
    "int2": pa.int16(),
    "int4": pa.int32(),
    "float4": pa.float32(),
}
"""The PostgreSQL types whose result columns are narrower than their stored type."""

PG_TYPE_KEY: Final = b"pg.type"
"""Field metadata naming a column's PostgreSQL type where its Arrow type does not tell it:
``timestamptz`` (spate keeps its values as UTC timestamps, Arrow ``timestamp[us]``)."""

TAGGED: Final = frozenset({"timestamptz"})
"""The PostgreSQL types a result column carries in its field's :data:`PG_TYPE_KEY` (and the
catalog types: ``oid``, ``name``, ``_text``…, :func:`~spate.sql.types.catalog_type`)."""


def result_schema(desc: RelationDesc, names: Sequence[str], types: Sequence[str]) -> pa.Schema:
    """The Arrow schema of the first ``len(names)`` columns of ``desc``, named ``names``, whose
    PostgreSQL types are ``types`` (names such as ``int4``; may be empty: the stored types),
    as a result reaches the user: intervals as ``month_day_nano_interval`` (:func:`to_user`)
    and ``timestamptz`` columns tagged (:data:`PG_TYPE_KEY`), as :func:`narrow_table` does."""
    fields = list(data_schema(desc))[: len(names)]
    out = []
    for i, (f, name) in enumerate(zip(fields, names, strict=True)):
        pg = types[i] if i < len(types) else ""
        narrow = NARROW.get(pg)
        if desc.columns[i].type.kind is ScalarKind.INTERVAL:
            narrow = USER_INTERVAL
        field = (f if narrow is None else f.with_type(narrow)).with_name(name)
        out.append(_tagged(field, pg))
    return pa.schema(out)


def _tagged(field: pa.Field, pg: str) -> pa.Field:
    if pg not in TAGGED and catalog_type(pg) is None:
        return field
    return field.with_metadata({**(field.metadata or {}), PG_TYPE_KEY: pg.encode()})


def narrow_table(table: pa.Table, types: Sequence[str]) -> pa.Table:
    """``table`` with each column whose PostgreSQL type (``types``) is narrower than its stored
    type cast to that type (integers checked to fit, floats already single-precision), and
    each ``timestamptz`` column tagged (:data:`PG_TYPE_KEY`)."""
    for i, name in enumerate(types[: table.num_columns]):
        if name in TAGGED:
            table = table.set_column(i, _tagged(table.schema.field(i), name), table.column(i))
            continue
        narrow = NARROW.get(name)
        column = table.column(i)
        if catalog_type(name) is not None:
            table = table.set_column(i, _tagged(table.schema.field(i), name), column)
        if narrow is None or column.type == narrow:
            continue
        field = table.schema.field(i).with_type(narrow)
        safe = not pa.types.is_floating(narrow)
        table = table.set_column(i, field, column.cast(narrow, safe=safe))
    return table
