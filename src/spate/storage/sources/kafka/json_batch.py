"""Decoding a chunk of JSON values at once (pyarrow's JSON reader), for ``ENVELOPE NONE``.

A source whose values are JSON objects with declared columns of simple types (``bigint``,
``double precision``, ``text``, ``boolean``), without a key column or headers, is the common
case and the one that needs speed. :class:`JsonBatch` decodes such a chunk's values in one call
to ``pyarrow.json.read_json`` (newline-delimited), building the Arrow columns directly instead
of a Python row per record.

Guarantee: :meth:`JsonBatch.decode` returns either ``None`` or exactly the table that decoding
each record with :class:`~spate.storage.sources.kafka.formats.JsonDecoder` and building the
rows' table would give. It returns ``None`` (the caller decodes record by record, which also
finds the records that go to the errors output) whenever the batch reader and the per-record
decoder could disagree:

* any value that is empty, holds a line break or a byte order mark, spells ``NaN`` or
  ``Infinity`` (Python's JSON rejects those constants; the batch reader accepts them), holds a
  ``\\u0000`` escape (text cannot hold NUL), or might nest deeper than Python's parser goes;
* the reader fails (not JSON, not an object, a field of another JSON type than its column, an
  integer out of range, a duplicate field …) or finds another number of objects than values;
* a NOT NULL column holds a NULL (a missing or null field).

The order of rows is the order of the values; ``-0.0`` becomes ``0.0`` as in every float column.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from spate.protocol.kafka import KafkaEnvelope, KafkaFormat, KafkaSource
from spate.repr.arrow import arrow_type, updates_schema
from spate.repr.desc import DIFF_COLUMN, RelationDesc
from spate.repr.types import ScalarKind

_KINDS: Final = frozenset({ScalarKind.INT64, ScalarKind.FLOAT64, ScalarKind.TEXT, ScalarKind.BOOL})
_METADATA: Final = frozenset({"partition", "offset"})
_DOUBTFUL: Final = (b"\r", b"NaN", b"Infinity", b"\\u0000", b"\xef\xbb\xbf")
_NESTING: Final = 500
"""Python's JSON parser gives up near the recursion limit; pyarrow's does not: a value with
this many brackets or more is left to the per-record decoder."""


class JsonBatch:
    """The batch decoder of one source's values (see the module docs)."""

    def __init__(self, value_desc: RelationDesc, data_desc: RelationDesc) -> None:
        self._value_desc = value_desc
        self._data_desc = data_desc
        self._parse = pj.ParseOptions(
            explicit_schema=pa.schema(
                [pa.field(c.name, arrow_type(c.type)) for c in value_desc.columns]
            ),
            unexpected_field_behavior="ignore",
        )
        self._read = pj.ReadOptions(use_threads=False, block_size=1 << 24)
        schema = updates_schema(data_desc)
        self._schema = pa.schema([f for f in schema if f.name != "_time"])

    @staticmethod
    def for_source(source: KafkaSource, data_desc: RelationDesc) -> JsonBatch | None:
        """The batch decoder of ``source``, or ``None`` when its records need the general path."""
        desc = source.value_desc
        if (
            source.envelope is not KafkaEnvelope.NONE
            or source.value_format is not KafkaFormat.JSON
            or desc is None
            or "key" in source.include
            or not set(source.include) <= _METADATA
            or not all(c.type.kind in _KINDS for c in desc.columns)
            or len(set(desc.names)) != len(desc.names)
        ):
            return None
        return JsonBatch(desc, data_desc)

    def decode(
        self, values: Sequence[bytes | None], metadata: Callable[[str], Sequence[int]]
    ) -> pa.Table | None:
        """The ``data`` updates (each with diff +1) of records with these values, or ``None``
        (see above). ``metadata(name)``: the records' ``partition`` or ``offset`` column, asked
        for only when the source includes it."""
        if not values:
            return None
        try:
            data = b"\n".join(values)  # type: ignore[arg-type]
        except TypeError:  # a NULL value
            return None
        # An empty or blank value is a blank line, which the reader skips: the row count tells.
        if any(d in data for d in _DOUBTFUL) or data.count(b"\n") != len(values) - 1:
            return None
        # Nesting _NESTING deep takes 2 * _NESTING bytes: only long values need counting.
        if max(map(len, values)) >= 2 * _NESTING and any(  # type: ignore[arg-type]
            v.count(b"{") + v.count(b"[") >= _NESTING  # type: ignore[union-attr]
            for v in values
            if len(v) >= 2 * _NESTING  # type: ignore[arg-type]
        ):
            return None
        try:
            read = pj.read_json(
                io.BytesIO(data), read_options=self._read, parse_options=self._parse
            )
        except (pa.ArrowInvalid, UnicodeDecodeError):
            return None
        if read.num_rows != len(values):
            return None
        columns: list[pa.Array | pa.ChunkedArray] = []
        for c in self._value_desc.columns:
            column = read.column(c.name)
            if not c.nullable and column.null_count:
                return None
            if c.type.kind is ScalarKind.FLOAT64:
                column = pc.if_else(pc.equal(column, 0.0), 0.0, column)  # -0.0 is 0.0
            columns.append(column)
        for name in self._data_desc.names[len(columns) :]:
            columns.append(pa.array(metadata(name), pa.int64()))
        columns.append(pa.repeat(pa.scalar(1, pa.int64()), len(values)))
        table = pa.Table.from_arrays(columns, schema=self._schema)
        assert table.column_names[-1] == DIFF_COLUMN
        return table
