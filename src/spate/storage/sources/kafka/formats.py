"""Decoding a record's key or value into columns (``FORMAT TEXT | BYTES | JSON | CSV | AVRO``).

A decoder turns bytes into a *document* (:meth:`Decoder.parse`) and a document into a row of its
columns (:meth:`Decoder.row`); the two steps are apart so that an envelope can take documents
out of a document (Debezium's ``before`` and ``after``). Both raise :class:`DecodeError` for
input that does not fit; the source sends such a record to its errors output.

Column names follow Materialize: ``text`` (TEXT), ``data`` (BYTES, JSON), ``column1 …
columnN`` (CSV), the record's fields (AVRO, declared JSON columns); a key in TEXT, BYTES or
JSON is the column ``key``.
"""

from __future__ import annotations

import base64
import binascii
import csv
import datetime as dt
import decimal
import io
import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from spate.protocol.kafka import KafkaFormat, KafkaSource
from spate.repr.desc import Column, RelationDesc
from spate.repr.types import (
    BOOL,
    BYTES,
    DATE,
    FLOAT64,
    INT64,
    JSONB,
    TEXT,
    TIMESTAMP,
    Datum,
    ScalarKind,
    ScalarType,
)

_EPOCH: Final = dt.datetime(1970, 1, 1)
_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1


class DecodeError(ValueError):
    """The bytes do not decode in the format (the message says why)."""


class Decoder:
    """Decodes one format into ``columns``."""

    def __init__(self, columns: Sequence[Column]) -> None:
        self.columns = tuple(columns)

    def parse(self, data: bytes) -> object:
        raise NotImplementedError

    def row(self, document: object) -> tuple[Datum, ...]:
        raise NotImplementedError

    def decode(self, data: bytes) -> tuple[Datum, ...]:
        return self.row(self.parse(data))


class TextDecoder(Decoder):
    def parse(self, data: bytes) -> object:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise DecodeError(f"not UTF-8 text: {e}") from None
        if "\x00" in text:
            raise DecodeError("text contains a NUL character")
        return text

    def row(self, document: object) -> tuple[Datum, ...]:
        assert isinstance(document, str)
        return (document,)


class BytesDecoder(Decoder):
    def parse(self, data: bytes) -> object:
        return bytes(data)

    def row(self, document: object) -> tuple[Datum, ...]:
        assert isinstance(document, bytes)
        return (document,)


class CsvDecoder(Decoder):
    """One CSV line (RFC 4180 quoting) of exactly ``len(columns)`` fields."""

    def parse(self, data: bytes) -> object:
        text = TextDecoder(()).parse(data)
        assert isinstance(text, str)
        try:
            rows = list(csv.reader(io.StringIO(text, newline=""), strict=True))
        except csv.Error as e:
            raise DecodeError(f"not CSV: {e}") from None
        if len(rows) != 1 or len(rows[0]) != len(self.columns):
            got = [len(r) for r in rows]
            raise DecodeError(f"expected one CSV line of {len(self.columns)} fields, got {got}")
        return rows[0]

    def row(self, document: object) -> tuple[Datum, ...]:
        assert isinstance(document, list)
        return tuple(document)


class JsonDecoder(Decoder):
    """A JSON document: as one ``jsonb`` column, or (``declared``) the fields of an object."""

    def __init__(self, columns: Sequence[Column], *, declared: bool) -> None:
        super().__init__(columns)
        self.declared = declared

    def parse(self, data: bytes) -> object:
        try:
            return json.loads(data, parse_constant=_no_constant)
        except (ValueError, RecursionError) as e:
            raise DecodeError(f"not JSON: {e}") from None

    def row(self, document: object) -> tuple[Datum, ...]:
        if not self.declared:
            return (_canonical_json(document),)
        if not isinstance(document, dict):
            raise DecodeError(f"expected a JSON object, got {type(document).__name__}")
        return tuple(
            _fit(c, _from_json(document.get(c.name), c.type, c.name)) for c in self.columns
        )


class AvroDecoder(Decoder):
    """Avro binary of a record schema, with or without the Confluent header (a zero byte and a
    4-byte schema id) when ``confluent``."""

    def __init__(self, schema: str, *, confluent: bool = False) -> None:
        import fastavro

        try:
            self._schema = fastavro.parse_schema(json.loads(schema))
        except (ValueError, TypeError, KeyError, fastavro.schema.SchemaParseException) as e:
            raise DecodeError(f"not an Avro schema: {e}") from None
        if not isinstance(self._schema, dict) or self._schema.get("type") != "record":
            raise DecodeError("an Avro value schema must be a record")
        self._confluent = confluent
        super().__init__(avro_columns(self._schema))

    def parse(self, data: bytes) -> object:
        import fastavro

        if self._confluent:
            if len(data) < 5 or data[0] != 0:
                raise DecodeError("no Confluent wire header (magic byte 0, schema id)")
            data = data[5:]
        buf = io.BytesIO(data)
        try:
            record = fastavro.schemaless_reader(buf, self._schema, None)
        except Exception as e:  # fastavro raises whatever the bytes provoke
            raise DecodeError(f"not Avro of the schema: {type(e).__name__}: {e}") from None
        if buf.tell() != len(data):
            raise DecodeError(f"{len(data) - buf.tell()} bytes after the Avro record")
        return record

    def row(self, document: object) -> tuple[Datum, ...]:
        if not isinstance(document, dict):
            raise DecodeError(f"expected an Avro record, got {type(document).__name__}")
        return tuple(_fit(c, _from_avro(document.get(c.name), c.type)) for c in self.columns)


def avro_columns(schema: Mapping[str, Any]) -> list[Column]:
    """The columns of an Avro record schema: one per field."""
    out = []
    for f in schema["fields"]:
        t, nullable = _avro_type(f["type"])
        out.append(Column(str(f["name"]), t, nullable))
    return out


def _avro_type(t: Any) -> tuple[ScalarType, bool]:
    if isinstance(t, list):
        others = [x for x in t if x != "null"]
        if len(others) == 1:
            return _avro_type(others[0])[0], True
        return JSONB, True
    if isinstance(t, dict):
        logical = t.get("logicalType")
        if logical in ("timestamp-millis", "timestamp-micros"):
            return TIMESTAMP, False
        if logical == "date":
            return DATE, False
        t = t.get("type")
        if isinstance(t, (dict, list)):
            return JSONB, False
    simple = {
        "boolean": BOOL,
        "int": INT64,
        "long": INT64,
        "float": FLOAT64,
        "double": FLOAT64,
        "string": TEXT,
        "bytes": BYTES,
        "enum": TEXT,
        "fixed": BYTES,
    }
    return simple.get(str(t), JSONB), False


def _from_avro(value: object, t: ScalarType) -> Datum:
    if value is None:
        return None
    if t.kind is ScalarKind.TIMESTAMP and isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return value
    if t.kind is ScalarKind.JSONB:
        return _canonical_json(value)
    if t.kind is ScalarKind.FLOAT64 and isinstance(value, int):
        return float(value)
    return value  # type: ignore[return-value]


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _canonical_json(document: object) -> str:
    text = json.dumps(document, separators=(",", ":"), ensure_ascii=False, default=_json_default)
    if "\\u0000" in text:
        raise DecodeError("JSON contains a NUL character, which jsonb cannot hold")
    return text


def _json_default(value: object) -> object:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, (dt.date, dt.datetime, decimal.Decimal)):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


def _from_json(value: object, t: ScalarType, name: str) -> Datum:
    """A JSON field's value as a datum of ``t`` (strings for dates, timestamps, base64 bytes)."""
    if value is None:
        return None
    k = t.kind
    try:
        if k is ScalarKind.JSONB:
            return _canonical_json(value)
        if k is ScalarKind.FLOAT64 and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        if k is ScalarKind.NUMERIC and isinstance(value, (int, float, str)):
            return decimal.Decimal(str(value))
        if k is ScalarKind.DATE and isinstance(value, str):
            return dt.date.fromisoformat(value)
        if k is ScalarKind.TIMESTAMP and isinstance(value, str):
            ts = dt.datetime.fromisoformat(value)
            if ts.tzinfo is not None:
                ts = ts.astimezone(dt.UTC).replace(tzinfo=None)
            return ts
        if k is ScalarKind.BYTES and isinstance(value, str):
            return base64.b64decode(value, validate=True)
    except (ValueError, decimal.InvalidOperation, binascii.Error) as e:
        raise DecodeError(f"field {name!r}: {e}") from None
    return value  # type: ignore[return-value]


def _fit(c: Column, value: Datum) -> Datum:
    kind = c.type.kind
    if (kind is ScalarKind.INT64 and type(value) is int and _INT64_MIN <= value <= _INT64_MAX) or (
        kind is ScalarKind.FLOAT64 and type(value) is float
    ):
        return value  # the common cases, without the general check
    if value is None:
        if not c.nullable:
            raise DecodeError(f"field {c.name!r} is missing or null; the column is NOT NULL")
        return None
    problem = c.type.problem(value)
    if problem is not None:
        raise DecodeError(f"field {c.name!r}: {problem} does not fit {c.type}")
    return value


def value_decoder(source: KafkaSource) -> Decoder:
    """The decoder of ``source``'s record values."""
    fmt = source.value_format
    if fmt is KafkaFormat.TEXT:
        return TextDecoder([Column("text", TEXT)])
    if fmt is KafkaFormat.BYTES:
        return BytesDecoder([Column("data", BYTES)])
    if fmt is KafkaFormat.CSV:
        assert source.value_csv_columns is not None
        n = source.value_csv_columns
        return CsvDecoder([Column(f"column{i + 1}", TEXT) for i in range(n)])
    if fmt is KafkaFormat.AVRO:
        assert source.value_avro_schema is not None
        return AvroDecoder(source.value_avro_schema)
    if source.value_desc is not None:
        return JsonDecoder(source.value_desc.columns, declared=True)
    return JsonDecoder([Column("data", JSONB)], declared=False)


def key_decoder(source: KafkaSource) -> Decoder | None:
    """The decoder of ``source``'s record keys (``None``: keys are not decoded)."""
    fmt = source.key_format
    if fmt is None:
        return None
    if fmt is KafkaFormat.TEXT:
        return TextDecoder([Column("key", TEXT)])
    if fmt is KafkaFormat.BYTES:
        return BytesDecoder([Column("key", BYTES)])
    return JsonDecoder([Column("key", JSONB)], declared=False)


def epoch_millis(millis: int) -> dt.datetime:
    """A Kafka record timestamp (ms since the epoch, UTC) as a naive timestamp."""
    return _EPOCH + dt.timedelta(milliseconds=millis)


__all__ = [
    "AvroDecoder",
    "DecodeError",
    "Decoder",
    "RelationDesc",
    "epoch_millis",
    "key_decoder",
    "value_decoder",
]
