"""A decoder of PostgreSQL's ``pgoutput`` logical replication messages, protocol version 1.

Pure: bytes in, frozen values out. The messages (PostgreSQL docs, "Logical Replication Message
Formats"), all integers big-endian:

========  ============================================================================
``B``     Begin: final LSN (int64), commit timestamp (int64 µs since 2000-01-01), xid (int32)
``C``     Commit: flags (int8), commit LSN, end LSN, commit timestamp
``O``     Origin: commit LSN, name (string)
``R``     Relation: oid (int32), namespace, name, replica identity (int8), columns (int16)
          then per column: flags (int8, 1 = part of the key), name, type oid, type modifier
``Y``     Type: oid, namespace, name
``I``     Insert: oid, ``N``, new tuple
``U``     Update: oid, optional ``K`` (old key) or ``O`` (old row) tuple, ``N``, new tuple
``D``     Delete: oid, ``K`` or ``O``, old tuple
``T``     Truncate: number of relations (int32), options (int8), oids
``M``     Message: flags, LSN, prefix, content
========  ============================================================================

A tuple is a column count (int16) and per column ``n`` (NULL), ``u`` (unchanged TOASTed value,
not sent), ``t`` + length (int32) + text, or ``b`` + length + binary. Strings are
NUL-terminated. Anything malformed raises :class:`PgOutputError` naming the offset.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final, Literal

from spate.errors import ProtocolError

UNCHANGED_TOAST: Final = object()
"""The datum of a column whose unchanged TOASTed value was not sent (``u``)."""

TupleValue = bytes | None | object
"""``bytes`` (text form), ``None`` (NULL) or :data:`UNCHANGED_TOAST`."""


class PgOutputError(ProtocolError):
    """A pgoutput message that does not decode."""


@dataclass(frozen=True, slots=True)
class RelationColumn:
    name: str
    type_oid: int
    type_modifier: int
    is_key: bool


@dataclass(frozen=True, slots=True)
class Begin:
    final_lsn: int
    commit_time_us: int
    xid: int


@dataclass(frozen=True, slots=True)
class Commit:
    flags: int
    commit_lsn: int
    end_lsn: int
    commit_time_us: int


@dataclass(frozen=True, slots=True)
class Origin:
    commit_lsn: int
    name: str


@dataclass(frozen=True, slots=True)
class Relation:
    oid: int
    namespace: str
    name: str
    replica_identity: str
    columns: tuple[RelationColumn, ...]


@dataclass(frozen=True, slots=True)
class TypeMessage:
    oid: int
    namespace: str
    name: str


@dataclass(frozen=True, slots=True)
class Insert:
    oid: int
    new: tuple[TupleValue, ...]


@dataclass(frozen=True, slots=True)
class Update:
    oid: int
    old_kind: Literal["K", "O"] | None
    old: tuple[TupleValue, ...] | None
    new: tuple[TupleValue, ...]


@dataclass(frozen=True, slots=True)
class Delete:
    oid: int
    old_kind: Literal["K", "O"]
    old: tuple[TupleValue, ...]


@dataclass(frozen=True, slots=True)
class Truncate:
    options: int
    oids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class LogicalMessage:
    transactional: bool
    lsn: int
    prefix: str
    content: bytes


Message = (
    Begin
    | Commit
    | Origin
    | Relation
    | TypeMessage
    | Insert
    | Update
    | Delete
    | Truncate
    | LogicalMessage
)


_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")
_U32: Final = struct.Struct(">I")


def parse_tuple(data: bytes, pos: int) -> tuple[tuple[TupleValue, ...], int]:
    """The tuple starting at ``pos`` and the offset after it (the hot path of decoding)."""
    size = len(data)
    if pos + 2 > size:
        raise PgOutputError(f"pgoutput message truncated at offset {pos}: no column count")
    (n,) = _I16.unpack_from(data, pos)
    pos += 2
    if n < 0:
        raise PgOutputError(f"pgoutput tuple with {n} columns at offset {pos - 2}")
    out: list[TupleValue] = []
    append = out.append
    unpack = _I32.unpack_from
    for _ in range(n):
        if pos >= size:
            raise PgOutputError(f"pgoutput message truncated at offset {pos}: no value kind")
        kind = data[pos]
        pos += 1
        if kind == 0x74 or kind == 0x62:  # "t", "b"
            if pos + 4 > size:
                raise PgOutputError(f"pgoutput message truncated at offset {pos}: no length")
            (length,) = unpack(data, pos)
            pos += 4
            end = pos + length
            if length < 0 or end > size:
                raise PgOutputError(
                    f"pgoutput value of length {length} at offset {pos - 4} does not fit the "
                    "message (truncated)"
                )
            append(data[pos:end])
            pos = end
        elif kind == 0x6E:  # "n"
            append(None)
        elif kind == 0x75:  # "u"
            append(UNCHANGED_TOAST)
        else:
            raise PgOutputError(f"pgoutput tuple value kind {bytes([kind])!r} at offset {pos - 1}")
    return tuple(out), pos


def decode_change(data: bytes) -> Insert | Update | Delete | None:
    """A fast path for the frequent messages: Insert, Update or Delete (else ``None``).

    Equivalent to :func:`decode` for those three tags.
    """
    size = len(data)
    if size < 6:
        return None
    tag = data[0]
    if tag == 0x49:  # "I"
        (oid,) = _U32.unpack_from(data, 1)
        if data[5] != 0x4E:
            raise PgOutputError("pgoutput Insert without a new tuple (N)")
        new, pos = parse_tuple(data, 6)
        if pos != size:
            raise PgOutputError(f"pgoutput I message has {size - pos} trailing bytes")
        return Insert(oid, new)
    if tag == 0x55 or tag == 0x44:  # "U", "D"
        (oid,) = _U32.unpack_from(data, 1)
        kind = data[5]
        old = None
        old_kind: Literal["K", "O"] | None = None
        pos = 6
        if kind == 0x4B or kind == 0x4F:  # "K", "O"
            old_kind = "K" if kind == 0x4B else "O"
            old, pos = parse_tuple(data, 6)
            if tag == 0x44:
                if pos != size:
                    raise PgOutputError(f"pgoutput D message has {size - pos} trailing bytes")
                return Delete(oid, old_kind, old)
            if pos >= size:
                raise PgOutputError("pgoutput Update: expected a new tuple (N), got nothing")
            kind = data[pos]
            pos += 1
        elif tag == 0x44:
            raise PgOutputError(f"pgoutput Delete: expected K or O, got {chr(kind)!r}")
        else:
            pos = 6
        if kind != 0x4E:
            raise PgOutputError(f"pgoutput Update: expected a new tuple (N), got {chr(kind)!r}")
        new, pos = parse_tuple(data, pos)
        if pos != size:
            raise PgOutputError(f"pgoutput U message has {size - pos} trailing bytes")
        return Update(oid, old_kind, old, new)
    return None


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, n: int) -> bytes:
        end = self.pos + n
        if end > len(self.data):
            raise PgOutputError(
                f"pgoutput message truncated at offset {self.pos}: needs {n} more bytes, "
                f"{len(self.data) - self.pos} left"
            )
        out = self.data[self.pos : end]
        self.pos = end
        return out

    def u8(self) -> int:
        return self._take(1)[0]

    def i16(self) -> int:
        return int(struct.unpack(">h", self._take(2))[0])

    def i32(self) -> int:
        return int(struct.unpack(">i", self._take(4))[0])

    def u32(self) -> int:
        return int(struct.unpack(">I", self._take(4))[0])

    def i64(self) -> int:
        return int(struct.unpack(">q", self._take(8))[0])

    def u64(self) -> int:
        return int(struct.unpack(">Q", self._take(8))[0])

    def string(self) -> str:
        end = self.data.find(b"\x00", self.pos)
        if end < 0:
            raise PgOutputError(f"pgoutput string at offset {self.pos} is not NUL-terminated")
        raw = self.data[self.pos : end]
        self.pos = end + 1
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise PgOutputError(f"pgoutput string at offset {self.pos} is not UTF-8: {e}") from None

    def tuple_data(self) -> tuple[TupleValue, ...]:
        values, self.pos = parse_tuple(self.data, self.pos)
        return values

    def done(self, what: str) -> None:
        if self.pos != len(self.data):
            raise PgOutputError(
                f"pgoutput {what} message has {len(self.data) - self.pos} trailing bytes"
            )


def decode(data: bytes) -> Message:
    """Decode one pgoutput message."""
    if not data:
        raise PgOutputError("empty pgoutput message")
    r = _Reader(data)
    tag = chr(r.u8())
    msg: Message
    if tag == "B":
        msg = Begin(r.u64(), r.i64(), r.u32())
    elif tag == "C":
        msg = Commit(r.u8(), r.u64(), r.u64(), r.i64())
    elif tag == "O":
        msg = Origin(r.u64(), r.string())
    elif tag == "R":
        oid = r.u32()
        namespace = r.string()
        name = r.string()
        identity = chr(r.u8())
        ncols = r.i16()
        cols = []
        for _ in range(ncols):
            flags = r.u8()
            cols.append(RelationColumn(r.string(), r.u32(), r.i32(), bool(flags & 1)))
        msg = Relation(oid, namespace, name, identity, tuple(cols))
    elif tag == "Y":
        msg = TypeMessage(r.u32(), r.string(), r.string())
    elif tag == "I":
        oid = r.u32()
        if r.u8() != ord("N"):
            raise PgOutputError("pgoutput Insert without a new tuple (N)")
        msg = Insert(oid, r.tuple_data())
    elif tag == "U":
        oid = r.u32()
        kind = chr(r.u8())
        old_kind: Literal["K", "O"] | None = None
        old = None
        if kind in ("K", "O"):
            old_kind = "K" if kind == "K" else "O"
            old = r.tuple_data()
            kind = chr(r.u8())
        if kind != "N":
            raise PgOutputError(f"pgoutput Update: expected a new tuple (N), got {kind!r}")
        msg = Update(oid, old_kind, old, r.tuple_data())
    elif tag == "D":
        oid = r.u32()
        kind = chr(r.u8())
        if kind not in ("K", "O"):
            raise PgOutputError(f"pgoutput Delete: expected K or O, got {kind!r}")
        msg = Delete(oid, "K" if kind == "K" else "O", r.tuple_data())
    elif tag == "T":
        n = r.i32()
        options = r.u8()
        msg = Truncate(options, tuple(r.u32() for _ in range(n)))
    elif tag == "M":
        flags = r.u8()
        lsn = r.u64()
        prefix = r.string()
        length = r.i32()
        msg = LogicalMessage(bool(flags & 1), lsn, prefix, r._take(length))
    else:
        raise PgOutputError(f"unknown pgoutput message tag {tag!r}")
    r.done(tag)
    return msg


def format_lsn(lsn: int) -> str:
    """``0/16B3748``: PostgreSQL's printed form of an LSN."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def parse_lsn(text: str) -> int:
    hi, sep, lo = text.partition("/")
    if not sep:
        raise ValueError(f"not an LSN: {text!r}")
    return (int(hi, 16) << 32) | int(lo, 16)
