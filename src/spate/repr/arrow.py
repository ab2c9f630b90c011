"""The physical format of a collection in Arrow (and so in Parquet).

A collection's updates are an Arrow table with the data columns of its ``RelationDesc``, then
``_time`` (int64, milliseconds) and ``_diff`` (int64). Unsigned types are never used (Spark reads
``uint64`` as a decimal). Each data field carries its spate type in the field metadata
(``spate.type``), so a schema read back from a Parquet file gives the same ``RelationDesc``.

An ``interval`` is stored as the text ``months,days,micros`` (:func:`spate.repr.interval.encode`):
neither Parquet nor Spark has Arrow's ``month_day_nano_interval``, and pyarrow cannot group or
join on a struct of the three fields, which every consolidation does. Tables handed to users
(``Environment.select``, ``Environment.sql``) carry ``month_day_nano_interval``
(:func:`to_user`); tables users hand in may too (:func:`validate_table` converts them).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

from spate.errors import EvaluationFailed, SchemaMismatch
from spate.repr.desc import DIFF_COLUMN, RESERVED_COLUMNS, TIME_COLUMN, Column, RelationDesc
from spate.repr.identity import canonical_floats, normalize_float_array
from spate.repr.interval import Interval, decode, encode
from spate.repr.types import Datum, Row, ScalarKind, ScalarType

_META_KEY: Final = b"spate.type"

_SIMPLE: Final[dict[ScalarKind, pa.DataType]] = {
    ScalarKind.BOOL: pa.bool_(),
    ScalarKind.INT64: pa.int64(),
    ScalarKind.FLOAT64: pa.float64(),
    ScalarKind.TEXT: pa.string(),
    ScalarKind.BYTES: pa.binary(),
    ScalarKind.DATE: pa.date32(),
    ScalarKind.TIMESTAMP: pa.timestamp("us"),
    ScalarKind.JSONB: pa.string(),
    ScalarKind.INTERVAL: pa.string(),
}
USER_INTERVAL: Final = pa.month_day_nano_interval()
"""Arrow's interval type, as users see intervals."""


def arrow_type(t: ScalarType) -> pa.DataType:
    if t.kind is ScalarKind.NUMERIC:
        assert t.precision is not None and t.scale is not None
        return pa.decimal128(t.precision, t.scale)
    return _SIMPLE[t.kind]


def arrow_field(c: Column) -> pa.Field:
    return pa.field(
        c.name, arrow_type(c.type), nullable=c.nullable, metadata={_META_KEY: str(c.type)}
    )


def data_schema(desc: RelationDesc) -> pa.Schema:
    """The data columns only (peek results, arrangements' values)."""
    return pa.schema([arrow_field(c) for c in desc.columns])


def updates_schema(desc: RelationDesc) -> pa.Schema:
    """Data columns plus ``_time`` and ``_diff``: the format of batches and deltas."""
    return pa.schema(
        [arrow_field(c) for c in desc.columns]
        + [
            pa.field(TIME_COLUMN, pa.int64(), nullable=False),
            pa.field(DIFF_COLUMN, pa.int64(), nullable=False),
        ]
    )


def desc_from_schema(schema: pa.Schema) -> RelationDesc:
    """Recover the ``RelationDesc`` of a schema written by :func:`updates_schema`."""
    cols = []
    for f in schema:
        if f.name in RESERVED_COLUMNS:
            continue
        meta = f.metadata or {}
        if _META_KEY in meta:
            t = ScalarType.parse(meta[_META_KEY].decode())
        else:
            t = _infer(f.type, f.name)
        cols.append(Column(f.name, t, f.nullable))
    return RelationDesc(cols)


def _infer(t: pa.DataType, name: str) -> ScalarType:
    for kind, at in _SIMPLE.items():
        if t == at and kind not in (ScalarKind.JSONB, ScalarKind.INTERVAL):
            return ScalarType(kind)
    if pa.types.is_decimal(t):
        return ScalarType(ScalarKind.NUMERIC, t.precision, t.scale)
    if pa.types.is_large_string(t):
        return ScalarType(ScalarKind.TEXT)
    if pa.types.is_integer(t) and not pa.types.is_unsigned_integer(t):
        return ScalarType(ScalarKind.INT64)
    if pa.types.is_timestamp(t):
        return ScalarType(ScalarKind.TIMESTAMP)
    if t == USER_INTERVAL:
        return ScalarType(ScalarKind.INTERVAL)
    raise SchemaMismatch("<arrow schema>", None, name, "a spate scalar type", str(t))


def _column_values(t: ScalarType, values: Sequence[Datum]) -> list[Datum]:
    if t.kind is ScalarKind.NUMERIC:
        return [Decimal(v) if isinstance(v, int) else v for v in values]
    if t.kind is ScalarKind.FLOAT64:
        return canonical_floats(values)  # type: ignore[return-value]
    if t.kind is ScalarKind.INTERVAL:
        return [arrow_interval(v) for v in values]  # type: ignore[misc]
    return list(values)


def arrow_interval(v: Datum) -> object:
    """An :class:`~spate.repr.interval.Interval` as it is stored (:func:`encode`)."""
    if isinstance(v, Interval):
        return encode(v)
    return v


def user_interval(v: object) -> object:
    """An :class:`~spate.repr.interval.Interval` as Arrow's ``month_day_nano_interval`` takes
    it (nanoseconds; a plain tuple of the fields would be read as nanoseconds as they are)."""
    if isinstance(v, Interval):
        nanos = v.micros * 1000
        if not -(2**63) <= nanos < 2**63:
            text = (
                f"interval '{v}' does not fit Arrow's month_day_nano_interval (at most about "
                "2,562,047 hours in its time part)"
            )
            raise EvaluationFailed(f"{text} [SQLSTATE 22008]", "22008", text)
        return pa.MonthDayNano([v.months, v.days, nanos])
    return v


def integers_under(values: pa.Array) -> pa.Array:
    """The integers a date or timestamp array is stored as (``int32`` days, ``int64``
    units), viewed without a copy; any other array as it is."""
    t = values.type
    if pa.types.is_date32(t):
        return values.view(pa.int32())
    if pa.types.is_date64(t) or pa.types.is_timestamp(t):
        return values.view(pa.int64())
    return values


def stored_intervals(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    """A ``month_day_nano_interval`` column as stored (:func:`encode` of each value)."""
    values = [
        None if v is None else encode(Interval(v.months, v.days, v.nanoseconds // 1000))
        for v in column.to_pylist()
    ]
    return pa.array(values, pa.string())


def user_intervals(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    """A stored interval column (:func:`encode`) as ``month_day_nano_interval``."""
    values = [None if v is None else user_interval(decode(v)) for v in column.to_pylist()]
    return pa.array(values, USER_INTERVAL)


def to_user(table: pa.Table, desc: RelationDesc) -> pa.Table:
    """``table`` (data columns of ``desc`` by position, maybe ``_time``/``_diff`` after them)
    with its interval columns as ``month_day_nano_interval``, as users get them."""
    positions = [
        i
        for i, c in enumerate(desc.columns)
        if c.type.kind is ScalarKind.INTERVAL and i < table.num_columns
    ]
    for i in positions:
        column = table.column(i)
        if column.type == USER_INTERVAL:
            continue
        field = table.schema.field(i).with_type(USER_INTERVAL)
        table = table.set_column(i, field, user_intervals(column))
    return table


def decode_rows(desc: RelationDesc, rows: list[Row]) -> list[Row]:
    """Rows read from a stored table (intervals as :func:`encode` gives them, or as Arrow's
    ``MonthDayNano``) with :class:`~spate.repr.interval.Interval` values."""
    positions = [i for i, c in enumerate(desc.columns) if c.type.kind is ScalarKind.INTERVAL]
    if not positions:
        return rows
    out = []
    for r in rows:
        values = list(r)
        for i in positions:
            values[i] = interval_of(values[i])
        out.append(tuple(values))
    return out


def interval_of(v: object) -> Datum:
    """A stored interval (text, Arrow's ``MonthDayNano``, an ``Interval``) as an ``Interval``."""
    if isinstance(v, str):
        return decode(v)
    if isinstance(v, pa.MonthDayNano):
        return Interval(v.months, v.days, v.nanoseconds // 1000)
    return v  # type: ignore[return-value]


def interval_datum(v: object) -> object:
    """Arrow's ``MonthDayNano`` (``to_pylist`` of a ``month_day_nano_interval``) as an
    :class:`~spate.repr.interval.Interval`; anything else as it is."""
    if isinstance(v, pa.MonthDayNano):
        return Interval(v.months, v.days, v.nanoseconds // 1000)
    return v


def arrow_rows(desc: RelationDesc, rows: Iterable[Row]) -> list[dict[str, object]]:
    """``rows`` as ``pa.Table.from_pylist`` takes them for :func:`data_schema` of ``desc``."""
    names = desc.names
    intervals = [i for i, c in enumerate(desc.columns) if c.type.kind is ScalarKind.INTERVAL]
    if not intervals:
        return [dict(zip(names, r, strict=True)) for r in rows]
    out = []
    for r in rows:
        values: list[object] = list(r)
        for i in intervals:
            values[i] = arrow_interval(r[i])
        out.append(dict(zip(names, values, strict=True)))
    return out


def rows_to_table(
    desc: RelationDesc,
    rows: Sequence[Row],
    *,
    times: Sequence[int] | None = None,
    diffs: Sequence[int] | None = None,
) -> pa.Table:
    """Build a table from rows that already passed validation.

    With ``times`` and ``diffs`` the result has the updates schema; without, the data schema.
    """
    if (times is None) != (diffs is None):
        raise ValueError("rows_to_table: pass both times and diffs, or neither")
    columns: list[pa.Array] = []
    for i, c in enumerate(desc.columns):
        vals = _column_values(c.type, [r[i] for r in rows])
        columns.append(pa.array(vals, type=arrow_type(c.type)))
    if times is None or diffs is None:
        return pa.Table.from_arrays(columns, schema=data_schema(desc))
    if len(times) != len(rows) or len(diffs) != len(rows):
        raise ValueError("rows_to_table: rows, times and diffs differ in length")
    columns.append(pa.array(times, type=pa.int64()))
    columns.append(pa.array(diffs, type=pa.int64()))
    return pa.Table.from_arrays(columns, schema=updates_schema(desc))


def updates_to_table(desc: RelationDesc, updates: Iterable[tuple[Row, int, int]]) -> pa.Table:
    """``(row, time, diff)`` triples to a table with the updates schema."""
    ups = list(updates)
    return rows_to_table(
        desc, [u[0] for u in ups], times=[u[1] for u in ups], diffs=[u[2] for u in ups]
    )


def table_to_rows(table: pa.Table, columns: Sequence[str] | None = None) -> list[Row]:
    """The rows of ``table`` (only ``columns`` if given), as tuples of datums."""
    names = (
        list(columns)
        if columns is not None
        else [n for n in table.column_names if n not in RESERVED_COLUMNS]
    )
    cols = [_pylist(table.column(n)) for n in names]
    for i, n in enumerate(names):
        meta = table.schema.field(n).metadata or {}
        if meta.get(_META_KEY) == b"interval":
            cols[i] = [interval_of(v) for v in cols[i]]
    if not cols:
        return [() for _ in range(table.num_rows)]
    return list(zip(*cols, strict=True))


def _pylist(column: pa.ChunkedArray) -> list[Datum]:
    values: list[Datum] = column.to_pylist()
    if pa.types.is_floating(column.type):
        return canonical_floats(values)  # type: ignore[return-value]
    return values


def table_to_updates(table: pa.Table) -> list[tuple[Row, int, int]]:
    """The ``(row, time, diff)`` triples of a table with the updates schema."""
    rows = table_to_rows(table)
    times = table.column(TIME_COLUMN).to_pylist()
    diffs = table.column(DIFF_COLUMN).to_pylist()
    return list(zip(rows, times, diffs, strict=True))


def validate_table(desc: RelationDesc, table: pa.Table, *, collection: str) -> pa.Table:
    """Check an Arrow table against ``desc`` (vectorised) and return it cast to the exact schema.

    Checks column names and order, types (safe casts only: no truncation, no overflow) and NULLs
    in non-null columns. ``_time``/``_diff`` are checked when present.
    """
    expected = [c.name for c in desc.columns]
    got = [n for n in table.column_names if n not in RESERVED_COLUMNS]
    if got != expected:
        raise SchemaMismatch(
            collection,
            None,
            None,
            f"columns ({', '.join(expected)})",
            f"columns ({', '.join(got)})",
        )
    arrays: list[pa.ChunkedArray] = []
    fields: list[pa.Field] = []
    for c in desc.columns:
        col = table.column(c.name)
        target = arrow_type(c.type)
        if c.type.kind is ScalarKind.INTERVAL and col.type == USER_INTERVAL:
            col = pa.chunked_array([stored_intervals(col)], pa.string())
        if col.type != target:
            try:
                col = col.cast(target, safe=True)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise SchemaMismatch(
                    collection,
                    None,
                    c.name,
                    str(c.type),
                    f"arrow {table.column(c.name).type} ({e})",
                ) from None
        if not c.nullable and col.null_count:
            first = pc.index(pc.is_null(col), True).as_py()
            raise SchemaMismatch(collection, first, c.name, f"non-null {c.type}", "NULL")
        if c.type.kind is ScalarKind.FLOAT64:
            col = normalize_float_array(col)
        arrays.append(col)
        fields.append(arrow_field(c))
    for name in (TIME_COLUMN, DIFF_COLUMN):
        if name in table.column_names:
            col = table.column(name)
            if col.type != pa.int64():
                try:
                    col = col.cast(pa.int64(), safe=True)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    raise SchemaMismatch(
                        collection, None, name, "int64", f"arrow {col.type}"
                    ) from None
            if col.null_count:
                first = pc.index(pc.is_null(col), True).as_py()
                raise SchemaMismatch(collection, first, name, "non-null int64", "NULL")
            arrays.append(col)
            fields.append(pa.field(name, pa.int64(), nullable=False))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))
