"""MariaDB column types as spate scalar types, and MariaDB values as Arrow columns.

A column's type is derived twice, by the same rules: from ``information_schema.columns`` when
the source is created (:func:`column_type`), and from the binlog's table map before every row
event (:func:`binlog_column_type`), so that a table altered upstream in a way that changes what
spate would store (a column added, dropped, renamed or retyped) is noticed at the first change
after the alteration. Values arrive as Python values (PyMySQL decodes the snapshot, the binlog
reader the row events) and become Arrow by one function, :func:`rows_to_table`, so a row reads
the same whichever way it arrived.

=========================================================  ===============  ==================
MariaDB                                                    spate            notes
=========================================================  ===============  ==================
``tinyint`` ``smallint`` ``mediumint`` ``int`` ``bigint``  ``int64``        signed or unsigned
``bigint unsigned``                                        ``numeric(20,0)``
``year``                                                   ``int64``
``decimal(p,s)``                                           ``numeric(p,s)``  ``p <= 38``
``float`` ``double``                                       ``float64``
``char`` ``varchar`` ``*text`` ``enum`` ``set`` ``json``   ``text``         JSON as its text
``varbinary`` ``*blob``                                    ``bytes``
``date``                                                   ``date``
``datetime`` ``timestamp``                                 ``timestamp``    timestamps in UTC
=========================================================  ===============  ==================
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from decimal import Decimal
from typing import Any, Final

import numpy as np
import pyarrow as pa

from spate.repr.arrow import arrow_type
from spate.repr.desc import RelationDesc
from spate.repr.types import (
    BYTES,
    DATE,
    FLOAT64,
    INT64,
    TEXT,
    TIMESTAMP,
    ScalarKind,
    ScalarType,
    numeric,
)
from spate.storage.sources.source import SourceError, diff_schema

SUPPORTED: Final = (
    "tinyint, smallint, mediumint, int, bigint, year, decimal(p,s) with p <= 38, float, double, "
    "char, varchar, text, enum, set, json, varbinary, blob, date, datetime, timestamp"
)

_INTS: Final = {"tinyint", "smallint", "mediumint", "int", "integer", "year"}
_TEXTS: Final = {
    "char",
    "varchar",
    "tinytext",
    "text",
    "mediumtext",
    "longtext",
    "enum",
    "set",
    "json",
}
_BYTES: Final = {"varbinary", "tinyblob", "blob", "mediumblob", "longblob"}
UNSIGNED_BIGINT: Final = numeric(20, 0)


def _refuse(table: str, column: str, what: str) -> SourceError:
    return SourceError(
        f"table {table}, column {column!r}: MariaDB type {what} is not supported; "
        f"supported: {SUPPORTED}"
    )


def column_type(
    data_type: str,
    column_type_text: str,
    precision: int | None,
    scale: int | None,
    *,
    table: str,
    column: str,
) -> ScalarType:
    """The spate type of a column as ``information_schema.columns`` describes it."""
    dt = data_type.lower()
    unsigned = "unsigned" in column_type_text.lower()
    if dt in _INTS:
        return INT64
    if dt == "bigint":
        return UNSIGNED_BIGINT if unsigned else INT64
    if dt == "decimal":
        return _decimal(precision or 10, scale or 0, table=table, column=column)
    if dt in ("float", "double", "real"):
        return FLOAT64
    if dt in _TEXTS:
        return TEXT
    if dt in _BYTES:
        return BYTES
    if dt == "date":
        return DATE
    if dt in ("datetime", "timestamp"):
        return TIMESTAMP
    return _refuse_raise(table, column, column_type_text)


def _refuse_raise(table: str, column: str, what: str) -> ScalarType:
    raise _refuse(table, column, what)


def _decimal(precision: int, scale: int, *, table: str, column: str) -> ScalarType:
    if precision > 38 or scale > precision:
        raise SourceError(
            f"table {table}, column {column!r}: decimal({precision},{scale}) is not supported; "
            "precision must be <= 38"
        )
    return numeric(precision, scale)


# The binlog's column type codes (MariaDB's enum_field_types).
_T_TINY, _T_SHORT, _T_LONG, _T_FLOAT, _T_DOUBLE, _T_TIMESTAMP, _T_LONGLONG, _T_INT24 = (
    1, 2, 3, 4, 5, 7, 8, 9,
)  # fmt: skip
_T_DATE, _T_DATETIME, _T_YEAR, _T_NEWDATE, _T_VARCHAR = 10, 12, 13, 14, 15
_T_TIMESTAMP2, _T_DATETIME2, _T_JSON, _T_NEWDECIMAL, _T_ENUM, _T_SET = 17, 18, 245, 246, 247, 248
_T_BLOBS: Final = {249, 250, 251, 252}
_T_STRINGS: Final = {_T_VARCHAR, 253, 254}


def binlog_column_type(column: Any, *, table: str) -> ScalarType:
    """The spate type of a column as a binlog table map describes it (a column of
    ``pymysqlreplication``; the server runs with ``binlog_row_metadata = FULL``)."""
    t = int(column.type)
    name = str(column.name)
    binary = (getattr(column, "character_set_name", None) or "binary") == "binary"
    if t in (_T_TINY, _T_SHORT, _T_LONG, _T_INT24, _T_YEAR):
        return INT64
    if t == _T_LONGLONG:
        return UNSIGNED_BIGINT if column.unsigned else INT64
    if t == _T_NEWDECIMAL:
        return _decimal(int(column.precision), int(column.decimals), table=table, column=name)
    if t in (_T_FLOAT, _T_DOUBLE):
        return FLOAT64
    if t in (_T_ENUM, _T_SET, _T_JSON):
        return TEXT
    if t in _T_STRINGS or t in _T_BLOBS:
        return BYTES if binary else TEXT
    if t in (_T_DATE, _T_NEWDATE):
        return DATE
    if t in (_T_DATETIME, _T_DATETIME2, _T_TIMESTAMP, _T_TIMESTAMP2):
        return TIMESTAMP
    return _refuse_raise(table, name, f"(binlog type code {t})")


def _text(v: Any) -> Any:
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("utf-8")
    if isinstance(v, (dict, list)):  # a JSON value decoded by the binlog reader
        import json

        return json.dumps(v, separators=(",", ":"))
    if isinstance(v, (set, frozenset)):  # a SET value
        return ",".join(sorted(str(x) for x in v))
    return v


def _bytes(v: Any) -> Any:
    return v.encode("utf-8") if isinstance(v, str) else v


def _timestamp(v: Any) -> Any:
    if isinstance(v, datetime.datetime) and v.tzinfo is not None:
        return v.astimezone(datetime.UTC).replace(tzinfo=None)
    return v


def _convert(values: list[Any], t: ScalarType) -> list[Any]:
    if t.kind is ScalarKind.TEXT:
        return [None if v is None else _text(v) for v in values]
    if t.kind is ScalarKind.BYTES:
        return [None if v is None else _bytes(v) for v in values]
    if t.kind is ScalarKind.TIMESTAMP:
        return [None if v is None else _timestamp(v) for v in values]
    if t.kind is ScalarKind.NUMERIC:
        return [None if v is None else Decimal(v) for v in values]
    return values


def rows_to_table(
    desc: RelationDesc,
    rows: Sequence[Sequence[Any]],
    *,
    table: str,
    diffs: Sequence[int] | None = None,
) -> pa.Table:
    """Rows of Python values (in the columns' order) as an update table (``diffs`` default to
    +1). A value that does not convert, or a NULL in a NOT NULL column, raises ``SourceError``
    naming the table and column."""
    n = len(rows)
    columns: list[pa.Array] = []
    values_by_column: list[list[Any]] = (
        [list(c) for c in zip(*rows, strict=True)] if n else [[] for _ in desc.columns]
    )
    for c, values in zip(desc.columns, values_by_column, strict=True):
        try:
            arr = pa.array(_convert(values, c.type), arrow_type(c.type))
        except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeDecodeError, ValueError) as e:
            raise SourceError(
                f"table {table}, column {c.name!r}: a value does not convert: {e}"
            ) from None
        if not c.nullable and arr.null_count:
            raise SourceError(f"table {table}, column {c.name!r}: NULL in a NOT NULL column")
        columns.append(arr)
    d = pa.array(np.ones(n, np.int64) if diffs is None else list(diffs), pa.int64())
    return pa.Table.from_arrays([*columns, d], schema=diff_schema(desc))
