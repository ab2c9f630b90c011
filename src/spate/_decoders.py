"""Type-directed decoding: a checking decoder for every type annotation the codec meets.

:mod:`spate.codec` unpacks msgpack, then hands the raw value and the expected type to
:func:`checked`, which walks both together and raises :class:`~spate.errors.ProtocolError`
naming the path of the first value that does not fit (``Peek.timestamp: expected int, got
str``). Decoders are built once per type and cached.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import types
import typing
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any, Final

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
from spate.repr.interval import Interval
from spate.wire import BY_CLS as _BY_CLS
from spate.wire import BY_TAG as _BY_TAG

MAX_DEPTH: Final = 256
"""Deepest nesting a decoded value may have (plan trees are far shallower)."""

ID_TYPES: Final[tuple[type, ...]] = (
    GlobalId,
    InstanceId,
    ReplicaId,
    ShardId,
    WriterId,
    ReaderId,
    CriticalReaderId,
    PeekId,
)


class ArrowPayload:
    """An undecoded Arrow ext payload; turned into a table only where a Table is expected."""

    __slots__ = ("data",)

    def __init__(self, data: bytes | memoryview) -> None:
        self.data = data


_Decoder = Callable[[object, str, int], object]
_DECODERS: dict[object, _Decoder] = {}


def _fail(path: str, expected: str, got: object) -> ProtocolError:
    shown = repr(got)
    if len(shown) > 40:
        shown = shown[:37] + "..."
    return ProtocolError(f"{path}: expected {expected}, got {type(got).__name__} {shown}")


def decoder_for(tp: object) -> _Decoder:
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
    return raw is None or isinstance(
        raw, (bool, int, float, str, bytes, Decimal, dt.date, Interval)
    )


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
    if isinstance(tp, type) and issubclass(tp, ID_TYPES):
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
            return decode_registered(raw, path, depth, base)

        return dec_obj
    raise TypeError(f"codec: no wire form for type {tp!r}")


def _dec_arrow(raw: object, path: str, depth: int) -> object:
    if not isinstance(raw, ArrowPayload):
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
        inner = decoder_for(rest[0])

        def dec_opt(raw: object, path: str, depth: int) -> object:
            if raw is None and optional:
                return None
            return inner(raw, path, depth)

        return dec_opt
    # A union of several types: try each, in declaration order; registered classes by tag.
    decoders = [decoder_for(a) for a in rest]
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
        item = decoder_for(args[0]) if args else _datum

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
    fixed = [decoder_for(a) for a in args]

    def dec_fixed(raw: object, path: str, depth: int) -> object:
        if not isinstance(raw, list) or len(raw) != len(fixed):
            raise _fail(path, f"array of {len(fixed)}", raw)
        return tuple(
            d(v, f"{path}[{i}]", depth + 1) for i, (d, v) in enumerate(zip(fixed, raw, strict=True))
        )

    return dec_fixed


def _dict_decoder(args: tuple[object, ...]) -> _Decoder:
    kdec, vdec = decoder_for(args[0]), decoder_for(args[1])

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
_ADDED: dict[type, frozenset[str]] = {}

ADDED: Final = "wire_added"
"""Field metadata key (``field(default=…, metadata={ADDED: True})``): a field added to a
durable record after it was first written; a stored value without it decodes with the
default. Every other field missing is an error."""


def _fields_of(cls: type) -> list[tuple[str, _Decoder]]:
    found = _FIELDS.get(cls)
    if found is None:
        hints = typing.get_type_hints(cls)
        fields = [f for f in dataclasses.fields(cls) if f.init]
        found = [(f.name, decoder_for(hints[f.name])) for f in fields]
        _ADDED[cls] = frozenset(f.name for f in fields if f.metadata.get(ADDED))
        _FIELDS[cls] = found
    return found


def decode_registered(raw: object, path: str, depth: int, base: type | None) -> object:
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
            if fname in _ADDED[reg.cls]:
                continue  # a field added later: its default
            raise ProtocolError(f"{name}: missing field {fname!r}")
        kwargs[fname] = dec(fields[fname], f"{name}.{fname}", depth + 1)
    try:
        return reg.cls(**kwargs)
    except ProtocolError:
        raise
    except (SpateError, ValueError, TypeError) as e:
        raise ProtocolError(f"{name}: invalid value: {e}") from None
