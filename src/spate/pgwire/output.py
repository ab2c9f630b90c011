"""Rows to wire bytes: RowDescription fields, DataRow encoding, COPY text and CSV lines.

The encoders of a result are looked up once (:class:`RowEncoder`), not per value.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from spate.pgwire import codec
from spate.pgwire import types as pgt


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


def _copy_text(value: bytes) -> bytes:
    return (
        value.replace(b"\\", b"\\\\")
        .replace(b"\t", b"\\t")
        .replace(b"\n", b"\\n")
        .replace(b"\r", b"\\r")
    )


def _copy_csv(value: bytes) -> bytes:
    if any(c in value for c in (b",", b'"', b"\n", b"\r")) or value == b"":
        return b'"' + value.replace(b'"', b'""') + b'"'
    return value


class CopyEncoder:
    """COPY TO STDOUT lines, in PostgreSQL's text or CSV format."""

    __slots__ = ("_csv", "_encoders")

    def __init__(self, schema: pa.Schema, fmt: str) -> None:
        self._encoders = [pgt.for_field(f).text for f in schema]
        self._csv = fmt == "csv"

    def line(self, values: Sequence[Any]) -> bytes:
        return copy_line(self._encoders, values, csv=self._csv)


def copy_line(encoders: Sequence[pgt.Encoder], values: Sequence[Any], *, csv: bool) -> bytes:
    parts = []
    for enc, v in zip(encoders, values, strict=True):
        if v is None:
            parts.append(b"" if csv else b"\\N")
        else:
            parts.append(_copy_csv(enc(v)) if csv else _copy_text(enc(v)))
    return (b"," if csv else b"\t").join(parts) + b"\n"
