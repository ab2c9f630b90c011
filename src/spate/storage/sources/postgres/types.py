"""PostgreSQL column types as spate scalar types, and PostgreSQL text values as Arrow columns.

Both the initial snapshot (``COPY … TO STDOUT (FORMAT csv)``, read as text columns) and the
change stream (pgoutput sends every value in its text form) are turned into Arrow by one
function, :func:`text_to_table` (vectorised casts), so a row reads the same whichever way it
arrived. The session that produces
the text MUST use :data:`SESSION_SETTINGS` (ISO dates, UTC, exact floats).

=====================================  ===============  ===========================================
PostgreSQL                             spate            notes
=====================================  ===============  ===========================================
``boolean``                            ``bool``
``smallint`` ``integer`` ``bigint``    ``int64``
``real`` ``double precision``          ``float64``
``numeric(p,s)``                       ``numeric(p,s)``  ``p <= 38``; unconstrained numeric refused
``text`` ``varchar`` ``char`` ``name``  ``text``
``uuid``                               ``text``
``bytea``                              ``bytes``
``date``                               ``date``         ``infinity`` and BC dates are errors
``timestamp``                          ``timestamp``
``timestamptz``                        ``timestamp``    as UTC wall-clock time
``json`` ``jsonb``                     ``jsonb``
=====================================  ===============  ===========================================
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from spate.repr.arrow import arrow_type
from spate.repr.desc import RelationDesc
from spate.repr.types import (
    BOOL,
    BYTES,
    DATE,
    FLOAT64,
    INT64,
    JSONB,
    TEXT,
    TIMESTAMP,
    ScalarKind,
    ScalarType,
    numeric,
)
from spate.storage.sources.source import SourceError, diff_schema

SESSION_SETTINGS: Final = (
    "set datestyle = 'ISO, YMD'",
    "set timezone = 'UTC'",
    "set extra_float_digits = 3",
    "set bytea_output = 'hex'",
    "set intervalstyle = 'postgres'",
)

BOOL_OID, BYTEA_OID, NAME_OID, INT8_OID, INT2_OID, INT4_OID, TEXT_OID = 16, 17, 19, 20, 21, 23, 25
JSON_OID, FLOAT4_OID, FLOAT8_OID, BPCHAR_OID, VARCHAR_OID = 114, 700, 701, 1042, 1043
DATE_OID, TIMESTAMP_OID, TIMESTAMPTZ_OID, NUMERIC_OID, UUID_OID, JSONB_OID = (
    1082, 1114, 1184, 1700, 2950, 3802,
)  # fmt: skip

_SIMPLE: Final[dict[int, ScalarType]] = {
    BOOL_OID: BOOL,
    INT2_OID: INT64,
    INT4_OID: INT64,
    INT8_OID: INT64,
    FLOAT4_OID: FLOAT64,
    FLOAT8_OID: FLOAT64,
    TEXT_OID: TEXT,
    VARCHAR_OID: TEXT,
    BPCHAR_OID: TEXT,
    NAME_OID: TEXT,
    UUID_OID: TEXT,
    BYTEA_OID: BYTES,
    DATE_OID: DATE,
    TIMESTAMP_OID: TIMESTAMP,
    TIMESTAMPTZ_OID: TIMESTAMP,
    JSON_OID: JSONB,
    JSONB_OID: JSONB,
}


def scalar_type(
    type_oid: int, type_modifier: int, type_name: str, *, table: str, column: str
) -> ScalarType:
    """The spate type of a PostgreSQL column, or a ``SourceError`` naming the column."""
    if type_oid in _SIMPLE:
        return _SIMPLE[type_oid]
    if type_oid == NUMERIC_OID:
        if type_modifier < 4:
            raise SourceError(
                f"table {table}, column {column!r}: numeric without precision and scale is not "
                "supported; declare it numeric(p,s) with p <= 38"
            )
        precision = ((type_modifier - 4) >> 16) & 0xFFFF
        scale = (type_modifier - 4) & 0xFFFF
        if precision > 38 or scale > precision:
            raise SourceError(
                f"table {table}, column {column!r}: numeric({precision},{scale}) is not "
                "supported; precision must be <= 38 and scale within 0..precision"
            )
        return numeric(precision, scale)
    raise SourceError(
        f"table {table}, column {column!r}: PostgreSQL type {type_name} (oid {type_oid}) is not "
        "supported; supported: boolean, smallint, integer, bigint, real, double precision, "
        "numeric(p,s), text, varchar, char, name, uuid, bytea, date, timestamp, timestamptz, "
        "json, jsonb"
    )


def _convert(
    col: pa.Array | pa.ChunkedArray, t: ScalarType, oid: int, *, table: str, column: str
) -> pa.Array | pa.ChunkedArray:
    """A column of PostgreSQL text values (``string``) as the column's Arrow type."""
    try:
        if oid == BYTEA_OID:
            return pa.array(
                [None if v is None else bytes.fromhex(v[2:]) for v in col.to_pylist()],
                pa.binary(),
            )
        if oid == TIMESTAMPTZ_OID:
            return pc.cast(pc.replace_substring_regex(col, r"\+00$", ""), pa.timestamp("us"))
        if t.kind is ScalarKind.BOOL:
            # boolout prints t/f (pgoutput); a bool::text cast prints true/false (snapshots).
            known = pa.array(["t", "f", "true", "false"])
            bad = pc.and_(pc.invert(pc.is_in(col, known)), pc.is_valid(col))
            if pc.any(bad).as_py():
                raise SourceError(f"table {table}, column {column!r}: not a boolean text value")
            truth = pc.is_in(col, pa.array(["t", "true"]))
            return pc.if_else(pc.is_valid(col), truth, pa.scalar(None, pa.bool_()))
        if t.kind in (ScalarKind.TEXT, ScalarKind.JSONB):
            return col
        return pc.cast(col, arrow_type(t))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as e:
        raise SourceError(
            f"table {table}, column {column!r}: a value does not convert: {e}"
        ) from None


def text_to_table(
    desc: RelationDesc,
    type_oids: Sequence[int],
    columns: Sequence[pa.Array | pa.ChunkedArray],
    *,
    table: str,
    diffs: pa.Array | None = None,
) -> pa.Table:
    """Columns of PostgreSQL text values (``string``, NULL as null) as an update table.

    ``diffs`` defaults to +1. Values that do not convert raise ``SourceError`` naming the
    table and column, as does a NULL in a NOT NULL column.
    """
    n = len(columns[0]) if columns else 0
    converted = [
        _convert(col, c.type, oid, table=table, column=c.name)
        for col, c, oid in zip(columns, desc.columns, type_oids, strict=True)
    ]
    if diffs is None:
        diffs = pa.array(np.ones(n, dtype=np.int64))
    if len(diffs) != n:
        raise SourceError(f"table {table}: {n} rows, {len(diffs)} diffs")
    for c, col in zip(desc.columns, converted, strict=True):
        if not c.nullable and col.null_count:
            raise SourceError(f"table {table}, column {c.name!r}: NULL in a NOT NULL column")
    return pa.Table.from_arrays([*converted, diffs], schema=diff_schema(desc))


def csv_to_table(
    desc: RelationDesc,
    type_oids: Sequence[int],
    data: bytes,
    *,
    table: str,
    diffs: pa.Array | None = None,
) -> pa.Table:
    """Parse PostgreSQL CSV text (``COPY … (FORMAT csv)``, no header) into an update table.

    NULL is an unquoted empty field, the empty string a quoted one. Every field is read as text
    and converted like the change stream's values (:func:`text_to_table`).
    """
    if not data:
        return empty_table(desc)
    names = list(desc.names)
    try:
        parsed = pacsv.read_csv(
            io.BytesIO(data),
            read_options=pacsv.ReadOptions(column_names=names, block_size=1 << 24),
            parse_options=pacsv.ParseOptions(newlines_in_values=True, ignore_empty_lines=False),
            convert_options=pacsv.ConvertOptions(
                column_types={n: pa.string() for n in names},
                null_values=[""],
                strings_can_be_null=True,
                quoted_strings_can_be_null=False,
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise SourceError(f"table {table}: the snapshot does not parse: {e}") from None
    return text_to_table(
        desc, type_oids, [parsed.column(n) for n in names], table=table, diffs=diffs
    )


def values_to_columns(
    rows: Sequence[Sequence[bytes | None]] | Sequence[Sequence[str | None]], arity: int
) -> list[pa.Array]:
    """Rows of text values (``bytes`` or ``str``; ``None`` = NULL) as ``string`` columns
    (bytes are checked to be UTF-8)."""
    if not rows:
        return [pa.array([], pa.string()) for _ in range(arity)]
    out = []
    try:
        for col in zip(*rows, strict=True):
            first = next((v for v in col if v is not None), None)
            if isinstance(first, bytes):
                out.append(pa.array(col, pa.binary()).cast(pa.string()))
            else:
                out.append(pa.array(col, pa.string()))
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise SourceError(f"a text value is not UTF-8 text: {e}") from None
    return out


def empty_table(desc: RelationDesc) -> pa.Table:
    return diff_schema(desc).empty_table()


__all__ = ["SESSION_SETTINGS", "csv_to_table", "scalar_type", "text_to_table", "values_to_columns"]
