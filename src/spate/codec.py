"""Strict msgpack codec for registered, typed values. No pickle, anywhere.

Register a frozen dataclass with ``@wire("tag", version)``. Its fields' type annotations are the
schema: :func:`decode` checks every value against them and raises
:class:`~spate.errors.ProtocolError` naming the path of the first bad field (``Peek.timestamp:
expected int, got str``). Unknown tags, unknown versions, missing and extra fields are errors.

Wire forms:

=================================  ==========================================================
Python type                        msgpack
=================================  ==========================================================
``None bool int float str bytes``  native (ints within ``[-2**63, 2**64)``)
``Decimal``                        ext 1: the decimal's text
``datetime.date``                  ext 2: ISO date text
``datetime.datetime`` (naive)      ext 3: int64 microseconds since 1970-01-01, big endian
``pyarrow.Table``                  ext 4: Arrow IPC stream (validated fully on decode)
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
import types
import typing
import uuid
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any, Final, TypeVar

import msgpack
import pyarrow as pa
import pyarrow.ipc as ipc

from spate.errors import ProtocolError, SpateError
from spate.frontier.antichain import Antichain
from spate.ids import (
    CriticalReaderId,
    GlobalId,
    InstanceId,
    PeekId,
    ReaderId,
    ReplicaId,
    ShardId,
    WriterId,
)
from spate.wire import BY_CLS as _BY_CLS
from spate.wire import BY_TAG as _BY_TAG
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

MAX_DEPTH: Final = 256
"""Deepest nesting a decoded value may have (plan trees are far shallower)."""

_EXT_DECIMAL: Final = 1
_EXT_DATE: Final = 2
_EXT_DATETIME: Final = 3
_EXT_ARROW: Final = 4
_EXT_ATTACHED: Final = 5  # only in transport messages: an Arrow stream after the document
_ALIGN: Final = 8
_EPOCH: Final = dt.datetime(1970, 1, 1)

_ID_TYPES: Final[tuple[type, ...]] = (
    GlobalId,
    InstanceId,
    ReplicaId,
    ShardId,
    WriterId,
    ReaderId,
    CriticalReaderId,
    PeekId,
)


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
    if isinstance(value, _ID_TYPES):
        return str(value)
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


class _Arrow:
    """An undecoded Arrow ext payload; turned into a table only where a Table is expected."""

    __slots__ = ("data",)

    def __init__(self, data: bytes | memoryview) -> None:
        self.data = data


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
            return _Arrow(data)
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
    return typing.cast(T, _decoder(expected)(raw, expected.__name__, 0))


def decode_any(data: Buffer) -> object:
    """Decode a registered value of any registered tag."""
    raw = _unpack(data)
    return _decode_registered(raw, "<frame>", 0, None)


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
    refs: list[tuple[_Arrow, int]] = []

    def hook(code: int, payload: bytes) -> object:
        if code != _EXT_ATTACHED:
            return _ext_hook(code, payload)
        if len(payload) != 4:
            raise ProtocolError(f"attachment reference must be 4 bytes, got {len(payload)}")
        ref = _Arrow(b"")
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
    return _decode_registered(raw, "<frame>", 0, None)


_Decoder = Callable[[object, str, int], object]
_DECODERS: dict[object, _Decoder] = {}


def _fail(path: str, expected: str, got: object) -> ProtocolError:
    shown = repr(got)
    if len(shown) > 40:
        shown = shown[:37] + "..."
    return ProtocolError(f"{path}: expected {expected}, got {type(got).__name__} {shown}")


def _decoder(tp: object) -> _Decoder:
    found = _DECODERS.get(tp)
    if found is None:
        found = _build_decoder(tp)
        _DECODERS[tp] = found
    return found


def _scalar(kind: type, name: str) -> _Decoder:
    def dec(raw: object, path: str, depth: int) -> object:
        if kind is int and isinstance(raw, bool):
            raise _fail(path, name, raw)
        if not isinstance(raw, kind):
            raise _fail(path, name, raw)
        return raw

    return dec


def _is_datum(raw: object) -> bool:
    return raw is None or isinstance(raw, (bool, int, float, str, bytes, Decimal, dt.date))


def _datum(raw: object, path: str, depth: int) -> object:
    if not _is_datum(raw):
        raise _fail(path, "a scalar datum", raw)
    return raw


def _build_decoder(tp: object) -> _Decoder:
    from spate.repr import types as repr_types

    if tp is repr_types.Datum:
        return _datum
    if tp is type(None):
        return _scalar(type(None), "None")
    if tp in (bool, int, float, str, bytes):
        assert isinstance(tp, type)
        return _scalar(tp, tp.__name__)
    if tp is Decimal:
        return _scalar(Decimal, "Decimal")
    if tp is dt.datetime:
        return _scalar(dt.datetime, "datetime")
    if tp is dt.date:

        def dec_date(raw: object, path: str, depth: int) -> object:
            if isinstance(raw, dt.datetime) or not isinstance(raw, dt.date):
                raise _fail(path, "date", raw)
            return raw

        return dec_date
    if tp is uuid.UUID:

        def dec_uuid(raw: object, path: str, depth: int) -> object:
            if not isinstance(raw, bytes) or len(raw) != 16:
                raise _fail(path, "16-byte uuid", raw)
            return uuid.UUID(bytes=raw)

        return dec_uuid
    if tp is pa.Table:
        return _dec_arrow
    if isinstance(tp, type) and issubclass(tp, _ID_TYPES):
        id_type: Any = tp

        def dec_id(raw: object, path: str, depth: int) -> object:
            if not isinstance(raw, str):
                raise _fail(path, id_type.__name__, raw)
            try:
                return id_type.parse(raw)
            except SpateError as e:
                raise ProtocolError(f"{path}: {e}") from None

        return dec_id
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        enum_type = tp

        def dec_enum(raw: object, path: str, depth: int) -> object:
            try:
                return enum_type(raw)
            except (ValueError, TypeError):
                raise _fail(path, f"one of {[m.value for m in enum_type]}", raw) from None

        return dec_enum
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Antichain or origin is Antichain:
        return _dec_antichain
    if origin is typing.Literal:
        allowed = args

        def dec_literal(raw: object, path: str, depth: int) -> object:
            if raw not in allowed or isinstance(raw, bool) != any(
                isinstance(a, bool) for a in allowed
            ):
                raise _fail(path, f"one of {list(allowed)}", raw)
            return raw

        return dec_literal
    if origin in (typing.Union, types.UnionType):
        return _union_decoder(args)
    if origin is tuple or origin is frozenset:
        return _sequence_decoder(origin, args)
    if origin is dict:
        return _dict_decoder(args)
    if isinstance(tp, type) and (tp in _BY_CLS or any(issubclass(c, tp) for c in _BY_CLS)):
        base = tp

        def dec_obj(raw: object, path: str, depth: int) -> object:
            return _decode_registered(raw, path, depth, base)

        return dec_obj
    raise TypeError(f"codec: no wire form for type {tp!r}")


def _dec_arrow(raw: object, path: str, depth: int) -> object:
    if not isinstance(raw, _Arrow):
        raise _fail(path, "Arrow IPC stream", raw)
    try:
        reader = ipc.open_stream(pa.BufferReader(raw.data))
        table = reader.read_all()
        table.validate(full=True)
    except (pa.ArrowException, ValueError, OSError) as e:
        raise ProtocolError(f"{path}: malformed Arrow IPC stream: {e}") from None
    return table


def _dec_antichain(raw: object, path: str, depth: int) -> object:
    if not isinstance(raw, list):
        raise _fail(path, "frontier (array of times)", raw)
    if len(raw) > 1:
        raise _fail(path, "frontier of at most one time", raw)
    for e in raw:
        if isinstance(e, bool) or not isinstance(e, int) or e < 0:
            raise _fail(path, "non-negative int time", e)
    return Antichain(raw)


def _union_decoder(args: tuple[object, ...]) -> _Decoder:
    optional = type(None) in args
    rest = [a for a in args if a is not type(None)]
    if len(rest) == 1:
        inner = _decoder(rest[0])

        def dec_opt(raw: object, path: str, depth: int) -> object:
            if raw is None and optional:
                return None
            return inner(raw, path, depth)

        return dec_opt
    # A union of several types: try each, in declaration order; registered classes by tag.
    decoders = [_decoder(a) for a in rest]
    names = " | ".join(getattr(a, "__name__", str(a)) for a in args)

    def dec_union(raw: object, path: str, depth: int) -> object:
        if raw is None and optional:
            return None
        for d in decoders:
            try:
                return d(raw, path, depth)
            except ProtocolError:
                continue
        raise _fail(path, names, raw)

    return dec_union


def _sequence_decoder(origin: object, args: tuple[object, ...]) -> _Decoder:
    homogeneous = origin is frozenset or (len(args) == 2 and args[1] is Ellipsis) or not args
    if homogeneous:
        item = _decoder(args[0]) if args else _datum

        def dec_seq(raw: object, path: str, depth: int) -> object:
            if not isinstance(raw, list):
                raise _fail(path, "array", raw)
            if depth > MAX_DEPTH:
                raise ProtocolError(f"{path}: nested deeper than {MAX_DEPTH}")
            items = [item(v, f"{path}[{i}]", depth + 1) for i, v in enumerate(raw)]
            if origin is frozenset:
                try:
                    return frozenset(items)
                except TypeError:
                    raise ProtocolError(f"{path}: unhashable set members") from None
            return tuple(items)

        return dec_seq
    fixed = [_decoder(a) for a in args]

    def dec_fixed(raw: object, path: str, depth: int) -> object:
        if not isinstance(raw, list) or len(raw) != len(fixed):
            raise _fail(path, f"array of {len(fixed)}", raw)
        return tuple(
            d(v, f"{path}[{i}]", depth + 1) for i, (d, v) in enumerate(zip(fixed, raw, strict=True))
        )

    return dec_fixed


def _dict_decoder(args: tuple[object, ...]) -> _Decoder:
    kdec, vdec = _decoder(args[0]), _decoder(args[1])

    def dec_dict(raw: object, path: str, depth: int) -> object:
        if not isinstance(raw, list):
            raise _fail(path, "array of [key, value] pairs", raw)
        out: dict[object, object] = {}
        for i, pair in enumerate(raw):
            if not isinstance(pair, list) or len(pair) != 2:
                raise _fail(f"{path}[{i}]", "[key, value]", pair)
            k = kdec(pair[0], f"{path}[{i}].key", depth + 1)
            try:
                if k in out:
                    raise ProtocolError(f"{path}: duplicate key {k!r}")
            except TypeError:
                raise ProtocolError(f"{path}[{i}]: unhashable key") from None
            out[k] = vdec(pair[1], f"{path}[{k}]", depth + 1)
        return out

    return dec_dict


_FIELDS: dict[type, list[tuple[str, _Decoder]]] = {}


def _fields_of(cls: type) -> list[tuple[str, _Decoder]]:
    found = _FIELDS.get(cls)
    if found is None:
        hints = typing.get_type_hints(cls)
        found = [(f.name, _decoder(hints[f.name])) for f in dataclasses.fields(cls) if f.init]
        _FIELDS[cls] = found
    return found


def _decode_registered(raw: object, path: str, depth: int, base: type | None) -> object:
    if depth > MAX_DEPTH:
        raise ProtocolError(f"{path}: nested deeper than {MAX_DEPTH}")
    if not isinstance(raw, list) or len(raw) != 3:
        raise _fail(path, "[tag, version, fields]", raw)
    tag, version, fields = raw
    if not isinstance(tag, str):
        raise _fail(path + ".tag", "str", tag)
    reg = _BY_TAG.get(tag)
    if reg is None:
        raise ProtocolError(f"{path}: unknown message tag {tag!r}")
    if base is not None and not issubclass(reg.cls, base):
        raise ProtocolError(f"{path}: expected {base.__name__}, got {reg.cls.__name__}")
    if isinstance(version, bool) or version != reg.version:
        raise ProtocolError(f"{path}: {tag} version {version!r} not supported (want {reg.version})")
    if not isinstance(fields, dict):
        raise _fail(path, "field map", fields)
    name = reg.cls.__name__
    spec = _fields_of(reg.cls)
    known = {n for n, _ in spec}
    extra = sorted(str(k) for k in fields if k not in known)
    if extra:
        raise ProtocolError(f"{name}: unexpected field {extra[0]!r}")
    kwargs: dict[str, object] = {}
    for fname, dec in spec:
        if fname not in fields:
            raise ProtocolError(f"{name}: missing field {fname!r}")
        kwargs[fname] = dec(fields[fname], f"{name}.{fname}", depth + 1)
    try:
        return reg.cls(**kwargs)
    except ProtocolError:
        raise
    except (SpateError, ValueError, TypeError) as e:
        raise ProtocolError(f"{name}: invalid value: {e}") from None
