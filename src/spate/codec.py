"""Strict msgpack codec for registered, typed values. No pickle, anywhere.

Register a frozen dataclass with ``@wire("tag", version)``. Its fields' type annotations are the
schema: :func:`decode` checks every value against them and raises
:class:`~spate.errors.ProtocolError` naming the path of the first bad field (``Peek.timestamp:
expected int, got str``). Unknown tags, unknown versions, missing and extra fields are errors
(but a field marked added later, ``metadata={ADDED: True}`` from :mod:`spate._decoders`, may be
missing from a stored value: it decodes with its default).

Wire forms:

=================================  ==========================================================
Python type                        msgpack
=================================  ==========================================================
``None bool int float str bytes``  native (ints within ``[-2**63, 2**64)``)
``Decimal``                        ext 1: the decimal's text
``datetime.date``                  ext 2: ISO date text
``datetime.datetime`` (naive)      ext 3: int64 microseconds since 1970-01-01, big endian
``pyarrow.Table``                  ext 4: Arrow IPC stream (validated fully on decode)
``Interval``                       ext 6: ``months,days,micros`` text
``uuid.UUID``                      16 bytes
``Antichain`` / ``Frontier``       array of ints (``[]`` is the empty frontier)
ids (``GlobalId``, ``ShardId``…)   their printed form
``Enum``                           its value
``tuple[X, ...]``, ``frozenset``   array
``dict[K, V]``                     array of ``[k, v]`` pairs
registered dataclass               ``[tag, version, {field: value}]``
=================================  ==========================================================

A field typed with a registered base class (``Expr``, ``ReadPolicy``…) accepts any registered
subclass. ``Datum`` fields accept exactly the scalar datum types of :mod:`spate.repr.types`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import struct
import typing
import uuid
from decimal import Decimal, InvalidOperation
from typing import Final, TypeVar

import msgpack
import pyarrow as pa
import pyarrow.ipc as ipc

from spate._decoders import ID_TYPES, ArrowPayload, decode_registered, decoder_for
from spate._decoders import (
    MAX_DEPTH as MAX_DEPTH,
)
from spate.errors import ProtocolError
from spate.frontier.antichain import Antichain
from spate.repr.interval import Interval
from spate.wire import BY_CLS as _BY_CLS
from spate.wire import registered_tags, wire

__all__ = [
    "decode",
    "decode_any",
    "decode_message",
    "encode",
    "encode_message",
    "registered_tags",
    "wire",
]

T = TypeVar("T")

_EXT_DECIMAL: Final = 1
_EXT_DATE: Final = 2
_EXT_DATETIME: Final = 3
_EXT_ARROW: Final = 4
_EXT_ATTACHED: Final = 5  # only in transport messages: an Arrow stream after the document
_EXT_INTERVAL: Final = 6
_ALIGN: Final = 8
_EPOCH: Final = dt.datetime(1970, 1, 1)


# --- encoding --------------------------------------------------------------------------------


def _to_wire(value: object, attach: list[list[Chunk]] | None = None) -> object:
    if value is None or isinstance(value, (bool, str, bytes, float)):
        return value
    if isinstance(value, int):
        if not -(2**63) <= value < 2**64:
            raise ProtocolError(f"integer {value} does not fit in 64 bits")
        return value
    if isinstance(value, enum.Enum):
        return _to_wire(value.value, attach)
    reg = _BY_CLS.get(type(value))
    if reg is not None:
        fields = {
            f.name: _to_wire(getattr(value, f.name), attach)
            for f in dataclasses.fields(value)  # type: ignore[arg-type]
            if f.init
        }
        return [reg.tag, reg.version, fields]
    if isinstance(value, Antichain):
        return [_to_wire(e, attach) for e in value.elements]
    if isinstance(value, ID_TYPES):
        return str(value)
    if isinstance(value, Interval):
        return msgpack.ExtType(
            _EXT_INTERVAL, f"{value.months},{value.days},{value.micros}".encode()
        )
    if isinstance(value, (tuple, list, frozenset, set)):
        items = sorted(value, key=repr) if isinstance(value, (frozenset, set)) else value
        return [_to_wire(v, attach) for v in items]
    if isinstance(value, dict):
        return [[_to_wire(k, attach), _to_wire(v, attach)] for k, v in value.items()]
    if isinstance(value, Decimal):
        return msgpack.ExtType(_EXT_DECIMAL, str(value).encode())
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            raise ProtocolError(f"datetime {value} has a time zone; only naive datetimes travel")
        micros = (value - _EPOCH) // dt.timedelta(microseconds=1)
        return msgpack.ExtType(_EXT_DATETIME, struct.pack(">q", micros))
    if isinstance(value, dt.date):
        return msgpack.ExtType(_EXT_DATE, value.isoformat().encode())
    if isinstance(value, uuid.UUID):
        return value.bytes
    if isinstance(value, pa.Table):
        if attach is None:
            sink = pa.BufferOutputStream()
            with ipc.new_stream(sink, value.schema) as writer:
                writer.write_table(value)
            return msgpack.ExtType(_EXT_ARROW, sink.getvalue().to_pybytes())
        chunks = _ipc_chunks(value)
        size = sum(len(c) for c in chunks)
        if size >= 2**32:
            raise ProtocolError(f"Arrow table of {size} bytes is too large for one message")
        attach.append(chunks)
        return msgpack.ExtType(_EXT_ATTACHED, struct.pack(">I", size))
    raise ProtocolError(f"cannot encode a {type(value).__name__}: not a registered wire type")


def encode(value: object) -> bytes:
    """Encode a registered value (or any wire-typed value) to msgpack bytes."""
    packed = msgpack.packb(_to_wire(value), use_bin_type=True)
    assert isinstance(packed, bytes)
    return packed


Buffer = bytes | bytearray | memoryview
"""What :func:`decode` reads: any contiguous bytes-like object."""

Chunk = bytes | memoryview
"""A piece of an encoded message; see :func:`encode_message`."""


def encode_message(value: object) -> list[Chunk]:
    """Encode a message for a transport frame: a msgpack document, then its attachments.

    Tables are not embedded in the document: each is an ext 5 reference holding its size,
    and its Arrow IPC stream follows the document, as views of the table's own buffers (Arrow
    hands the body buffers to the sink uncopied). A 10 MB peek response is therefore never
    copied on the way out, and :func:`decode_message` reads it in place. Each attachment starts
    at a multiple of 8 bytes from the start of the message (zero padding before it), so Arrow
    buffers stay aligned. Without tables the result is exactly ``[encode(value)]``.
    """
    attachments: list[list[Chunk]] = []
    packed = msgpack.packb(_to_wire(value, attachments), use_bin_type=True)
    assert isinstance(packed, bytes)
    parts: list[Chunk] = [packed]
    size = len(packed)
    for chunks in attachments:
        pad = -size % _ALIGN
        if pad:
            parts.append(bytes(pad))
        parts.extend(chunks)
        size += pad + sum(len(c) for c in chunks)
    return parts


class _ChunkSink:
    """A write-only file for Arrow's IPC writer that keeps the buffers it is given."""

    def __init__(self) -> None:
        self.chunks: list[Chunk] = []
        self.closed = False

    def write(self, data: object) -> int:
        view = memoryview(data)  # type: ignore[arg-type]  # bytes or pa.Buffer, both buffers
        self.chunks.append(view)
        return view.nbytes

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def _ipc_chunks(table: pa.Table) -> list[Chunk]:
    sink = _ChunkSink()
    with ipc.new_stream(pa.PythonFile(sink, mode="w"), table.schema) as writer:
        writer.write_table(table)
    return sink.chunks


# --- decoding --------------------------------------------------------------------------------


def _ext_hook(code: int, data: bytes) -> object:
    try:
        if code == _EXT_DECIMAL:
            d = Decimal(data.decode("ascii"))
            return d
        if code == _EXT_DATE:
            return dt.date.fromisoformat(data.decode("ascii"))
        if code == _EXT_DATETIME:
            if len(data) != 8:
                raise ProtocolError(f"datetime ext must be 8 bytes, got {len(data)}")
            (micros,) = struct.unpack(">q", data)
            return _EPOCH + dt.timedelta(microseconds=micros)
        if code == _EXT_ARROW:
            return ArrowPayload(data)
        if code == _EXT_INTERVAL:
            months, days, micros = (int(x) for x in data.decode("ascii").split(","))
            return Interval(months, days, micros)
    except (ValueError, UnicodeDecodeError, InvalidOperation, OverflowError) as e:
        raise ProtocolError(f"malformed ext type {code}: {e}") from None
    raise ProtocolError(f"unknown msgpack ext type {code}")


def _unpack(data: Buffer) -> object:
    try:
        return msgpack.unpackb(
            data, raw=False, strict_map_key=True, ext_hook=_ext_hook, use_list=True
        )
    except ProtocolError:
        raise
    except (ValueError, TypeError, msgpack.UnpackException, msgpack.ExtraData) as e:
        raise ProtocolError(f"invalid msgpack: {e}") from None
    except RecursionError:
        raise ProtocolError("invalid msgpack: nested too deeply") from None


def decode(data: Buffer, expected: type[T]) -> T:
    """Decode ``data`` as a value of type ``expected`` (a registered class or base class)."""
    raw = _unpack(data)
    return typing.cast(T, decoder_for(expected)(raw, expected.__name__, 0))


def decode_any(data: Buffer) -> object:
    """Decode a registered value of any registered tag."""
    raw = _unpack(data)
    return decode_registered(raw, "<frame>", 0, None)


class _ViewReader:
    """A file-like reader over a buffer, so msgpack reads only the document it needs."""

    __slots__ = ("_pos", "_view")

    def __init__(self, view: memoryview) -> None:
        self._view = view
        self._pos = 0

    def read(self, n: int = -1) -> bytes:
        end = len(self._view) if n < 0 else min(self._pos + n, len(self._view))
        out = self._view[self._pos : end].tobytes()
        self._pos = end
        return out


def decode_message(data: Buffer) -> object:
    """Decode a transport message (:func:`encode_message`): a msgpack document followed by
    exactly the attachments it references. Tables are read in place (no copy)."""
    view = memoryview(data).cast("B")
    refs: list[tuple[ArrowPayload, int]] = []

    def hook(code: int, payload: bytes) -> object:
        if code != _EXT_ATTACHED:
            return _ext_hook(code, payload)
        if len(payload) != 4:
            raise ProtocolError(f"attachment reference must be 4 bytes, got {len(payload)}")
        ref = ArrowPayload(b"")
        refs.append((ref, struct.unpack(">I", payload)[0]))
        return ref

    unpacker = msgpack.Unpacker(
        _ViewReader(view),
        raw=False,
        strict_map_key=True,
        ext_hook=hook,
        use_list=True,
        max_buffer_size=max(len(view), 1),
    )
    try:
        raw = unpacker.unpack()
    except ProtocolError:
        raise
    except msgpack.OutOfData:
        raise ProtocolError("invalid msgpack: truncated document") from None
    except (ValueError, TypeError, msgpack.UnpackException, msgpack.ExtraData) as e:
        raise ProtocolError(f"invalid msgpack: {e}") from None
    except RecursionError:
        raise ProtocolError("invalid msgpack: nested too deeply") from None
    pos = unpacker.tell()
    for ref, size in refs:
        pad = -pos % _ALIGN
        if pos + pad + size > len(view):
            raise ProtocolError(
                f"attachment of {size} bytes at offset {pos + pad} runs past the end ({len(view)})"
            )
        if view[pos : pos + pad] != bytes(pad):
            raise ProtocolError(f"bad padding before the attachment at offset {pos}")
        pos += pad
        ref.data = view[pos : pos + size]
        pos += size
    if pos != len(view):
        raise ProtocolError(f"{len(view) - pos} unexpected bytes after the message at {pos}")
    return decode_registered(raw, "<frame>", 0, None)
