"""Rows to wire bytes: RowDescription fields, DataRow encoding, COPY TO data.

The encoders of a result are looked up once (:class:`RowEncoder`), not per value.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any, Final

import pyarrow as pa

from spate.pgwire import codec
from spate.pgwire import types as pgt
from spate.pgwire.errors import PgError
from spate.sql.copy_statement import CopyOptions


def field_descs(schema: pa.Schema) -> list[codec.FieldDesc]:
    out = []
    for f in schema:
        t = pgt.for_field(f)
        out.append(codec.FieldDesc(f.name, t.oid, t.typlen, t.typmod))
    return out


class RowEncoder:
    __slots__ = ("_encoders",)

    def __init__(self, schema: pa.Schema, formats: Sequence[int]) -> None:
        types = [pgt.for_field(f) for f in schema]
        self._encoders = [
            t.binary if fmt else t.text for t, fmt in zip(types, formats, strict=True)
        ]

    def row(self, values: Sequence[Any]) -> bytes:
        return codec.data_row(
            [None if v is None else enc(v) for enc, v in zip(self._encoders, values, strict=True)]
        )


_TEXT_ESCAPES: Final = tuple(
    (bytes([c]), b"\\" + bytes([letter]))
    for c, letter in zip(b"\b\f\n\r\t\v", b"bfnrtv", strict=True)
)
"""The control characters PostgreSQL's text format writes as a backslash and a letter."""
_I16: Final = struct.Struct("!h")
_I32: Final = struct.Struct("!i")


class CopyEncoder:
    """COPY TO STDOUT data in PostgreSQL's text, CSV or binary format, with the COPY's
    options (delimiter, NULL string, quote, escape, FORCE_QUOTE). :meth:`start` is what goes
    before the rows (the binary header, or the header line), :meth:`end` what goes after
    them (the binary trailer); either may be empty."""

    __slots__ = (
        "_binary",
        "_csv",
        "_delim",
        "_encoders",
        "_escape",
        "_escapes",
        "_forced",
        "_names",
        "_null",
        "_opts",
        "_quote",
        "_specials",
    )

    def __init__(self, schema: pa.Schema, opts: CopyOptions) -> None:
        types = [pgt.for_field(f) for f in schema]
        self._opts = opts
        self._binary = opts.format == "binary"
        self._csv = opts.format == "csv"
        self._encoders = [t.binary if self._binary else t.text for t in types]
        self._names = list(schema.names)
        self._delim = opts.delimiter.encode()
        self._null = opts.null.encode()
        self._quote = opts.quote.encode()
        self._escape = opts.escape.encode()
        self._specials = (self._delim, self._quote, b"\n", b"\r")
        escapes = [(b"\\", b"\\\\"), *_TEXT_ESCAPES]
        if all(self._delim != raw for raw, _ in escapes):
            escapes.append((self._delim, b"\\" + self._delim))
        self._escapes = tuple(escapes)
        missing = [n for n in opts.force_quote if n not in self._names]
        if missing:
            raise PgError("42P10", f'FORCE_QUOTE column "{missing[0]}" not referenced by COPY')
        self._forced = [opts.force_quote_all or n in opts.force_quote for n in self._names]

    def start(self) -> bytes:
        if self._binary:
            return codec.COPY_SIGNATURE + _I32.pack(0) + _I32.pack(0)
        if not self._opts.header:
            return b""
        names = [n.encode() for n in self._names]
        if self._csv:
            return self._delim.join(self._csv_value(n, False) for n in names) + b"\n"
        return self._delim.join(self._text_value(n) for n in names) + b"\n"

    def end(self) -> bytes:
        return _I16.pack(-1) if self._binary else b""

    def line(self, values: Sequence[Any]) -> bytes:
        encs = self._encoders
        if self._binary:
            return codec.tuple_fields(
                [None if v is None else enc(v) for enc, v in zip(encs, values, strict=True)]
            )
        out = []
        if self._csv:
            for enc, v, forced in zip(encs, values, self._forced, strict=True):
                out.append(self._null if v is None else self._csv_value(enc(v), forced))
        else:
            for enc, v in zip(encs, values, strict=True):
                out.append(self._null if v is None else self._text_value(enc(v)))
        return self._delim.join(out) + b"\n"

    def _text_value(self, value: bytes) -> bytes:
        for raw, escaped in self._escapes:  # the backslash first
            if raw in value:
                value = value.replace(raw, escaped)
        return value

    def _csv_value(self, value: bytes, forced: bool) -> bytes:
        """A value quoted when it must be (PostgreSQL's ``CopyAttributeOutCSV``): forced, equal
        to the NULL string, or holding the delimiter, the quote, a CR or a LF."""
        if not (forced or value == self._null or any(s in value for s in self._specials)):
            return value
        q, e = self._quote, self._escape
        if q in value or e in value:
            value = bytes(b for c in value for b in ((e[0], c) if c in (q[0], e[0]) else (c,)))
        return q + value + q
