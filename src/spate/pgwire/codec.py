"""PostgreSQL protocol v3 messages: framing, frontend parsers and backend builders (no I/O).

A frontend message is ``type (1 byte) | length (int32, counts itself) | body``; the startup
packet, SSLRequest, GSSENCRequest and CancelRequest have no type byte. Every length is checked
against the session's limit *before* the body is read (:func:`check_length`), so a peer cannot
make the server allocate more than the limit. Parsers raise :class:`MalformedMessage` on any
body that does not decode exactly; the session answers it with ``08P01`` and closes.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from spate.errors import ProtocolError

PROTOCOL_3: Final = 196608  # 3.0
SSL_REQUEST: Final = 80877103
GSSENC_REQUEST: Final = 80877104
CANCEL_REQUEST: Final = 80877102

FRONTEND_TYPES: Final = frozenset(bytes([c]) for c in b"QPBDECSHXFdcfp")

_I16: Final = struct.Struct("!h")
_U16: Final = struct.Struct("!H")
_I32: Final = struct.Struct("!i")
_U32: Final = struct.Struct("!I")
_HEAD: Final = struct.Struct("!ci")
_FIELD: Final = struct.Struct("!IhIhih")


class MalformedMessage(ProtocolError):
    """A frontend message whose framing or body does not decode."""


class MessageTooLarge(ProtocolError):
    """A frontend message longer than the configured limit (refused before reading it)."""


def check_length(length: int, *, limit: int, what: str) -> int:
    """The body size of a message whose length field is ``length``; refuse before reading."""
    if length < 4:
        raise MalformedMessage(f"{what}: length {length} is shorter than its own field")
    if length - 4 > limit:
        raise MessageTooLarge(f"{what}: {length - 4} bytes exceeds the limit of {limit} bytes")
    return length - 4


class Reader:
    """Decode a message body field by field; any overrun is a :class:`MalformedMessage`."""

    __slots__ = ("_buf", "_pos", "_what")

    def __init__(self, buf: bytes, what: str) -> None:
        self._buf = buf
        self._pos = 0
        self._what = what

    def _fail(self, why: str) -> MalformedMessage:
        return MalformedMessage(f"{self._what}: {why} at byte {self._pos}")

    def int16(self) -> int:
        if self._pos + 2 > len(self._buf):
            raise self._fail("truncated int16")
        (v,) = _I16.unpack_from(self._buf, self._pos)
        self._pos += 2
        return int(v)

    def int32(self) -> int:
        if self._pos + 4 > len(self._buf):
            raise self._fail("truncated int32")
        (v,) = _I32.unpack_from(self._buf, self._pos)
        self._pos += 4
        return int(v)

    def uint32(self) -> int:
        if self._pos + 4 > len(self._buf):
            raise self._fail("truncated uint32")
        (v,) = _U32.unpack_from(self._buf, self._pos)
        self._pos += 4
        return int(v)

    def cstr(self) -> str:
        end = self._buf.find(b"\0", self._pos)
        if end < 0:
            raise self._fail("unterminated string")
        raw = self._buf[self._pos : end]
        self._pos = end + 1
        try:
            return raw.decode()
        except UnicodeDecodeError:
            raise self._fail("string is not UTF-8") from None

    def bytes_(self, n: int) -> bytes:
        if n < 0 or self._pos + n > len(self._buf):
            raise self._fail(f"truncated field of {n} bytes")
        v = self._buf[self._pos : self._pos + n]
        self._pos += n
        return v

    def byte(self) -> str:
        return self.bytes_(1).decode("latin-1")

    def count(self) -> int:
        """A count of fields (parameters, formats, values): unsigned 16-bit, up to 65,535, as
        PostgreSQL reads it (a signed read made 32,768 and more a "negative count")."""
        if self._pos + 2 > len(self._buf):
            raise self._fail("truncated count")
        (n,) = _U16.unpack_from(self._buf, self._pos)
        self._pos += 2
        return int(n)

    def counted(self, least: int) -> int:
        """:meth:`count` of items of ``least`` bytes or more each: a count the rest of the
        message could not hold is refused here, before anything is allocated for it."""
        n = self.count()
        if n * least > len(self._buf) - self._pos:
            raise self._fail(f"count {n} exceeds the message")
        return n

    def end(self) -> None:
        if self._pos != len(self._buf):
            raise self._fail(f"{len(self._buf) - self._pos} trailing bytes")


# --- frontend messages -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Startup:
    version: int
    params: dict[str, str]


@dataclass(frozen=True, slots=True)
class CancelKey:
    pid: int
    secret: int


@dataclass(frozen=True, slots=True)
class SslRequest:
    gss: bool = False


def parse_startup(body: bytes) -> Startup | CancelKey | SslRequest:
    r = Reader(body, "startup packet")
    code = r.int32()
    if code == SSL_REQUEST:
        r.end()
        return SslRequest()
    if code == GSSENC_REQUEST:
        r.end()
        return SslRequest(gss=True)
    if code == CANCEL_REQUEST:
        key = CancelKey(r.int32(), r.int32())
        r.end()
        return key
    if code >> 16 != 3:
        raise MalformedMessage(f"startup packet: unsupported protocol {code >> 16}.{code & 0xFFFF}")
    params: dict[str, str] = {}
    while True:
        name = r.cstr()
        if not name:
            break
        params[name] = r.cstr()
    r.end()
    return Startup(code, params)


@dataclass(frozen=True, slots=True)
class Parse:
    name: str
    query: str
    param_oids: tuple[int, ...]


def parse_parse(body: bytes) -> Parse:
    r = Reader(body, "Parse")
    name, query = r.cstr(), r.cstr()
    oids = tuple(r.uint32() for _ in range(r.counted(4)))
    r.end()
    return Parse(name, query, oids)


@dataclass(frozen=True, slots=True)
class Bind:
    portal: str
    statement: str
    param_formats: tuple[int, ...]
    params: tuple[bytes | None, ...]
    result_formats: tuple[int, ...]


_COUNT: Final = struct.Struct("!H")
_VALUE_LEN: Final = struct.Struct("!i")
_FORMATS: Final = {n: struct.Struct(f"!{n}h") for n in range(1, 9)}
"""Precompiled formats of up to 8 format codes (a Bind's usual count)."""


def _format_codes(body: bytes, at: int) -> tuple[tuple[int, ...], int]:
    """A Bind's count of format codes at ``at``, then the codes; and where they end (more than
    8 codes: ``KeyError``, for the field-by-field reader)."""
    (n,) = _COUNT.unpack_from(body, at)
    at += 2
    if not n:
        return (), at
    return _FORMATS[n].unpack_from(body, at), at + 2 * n


def parse_bind(body: bytes) -> Bind:
    """The Bind in ``body``; exact :class:`MalformedMessage` errors for any that does not
    decode. The usual Bind (at most 8 format codes of 0 or 1 each, every field in place) is
    decoded in one pass with precompiled formats; anything else, the field-by-field
    :class:`Reader`, which finds what is wrong."""
    try:
        return _bind_fast(body)
    except (ValueError, IndexError, struct.error, UnicodeDecodeError, KeyError):
        return _bind_checked(body)


def _bind_fast(body: bytes) -> Bind:
    """Decode a well-formed Bind; raise a built-in error (never a wrong Bind) otherwise."""
    end = body.index(0)
    portal = body[:end].decode() if end else ""
    at = end + 1
    end = body.index(0, at)
    stmt = body[at:end].decode() if end > at else ""
    at = end + 1
    pformats, at = _format_codes(body, at)
    (n,) = _COUNT.unpack_from(body, at)
    at += 2
    values: list[bytes | None] = []
    size = len(body)
    for _ in range(n):
        (k,) = _VALUE_LEN.unpack_from(body, at)
        at += 4
        if k == -1:
            values.append(None)
            continue
        if k < 0 or at + k > size:
            raise ValueError("value")
        values.append(body[at : at + k])
        at += k
    rformats, at = _format_codes(body, at)
    if at != size:
        raise ValueError("trailing bytes")
    for f in pformats:
        if f != 0 and f != 1:
            raise ValueError("format")
    for f in rformats:
        if f != 0 and f != 1:
            raise ValueError("format")
    return Bind(portal, stmt, pformats, tuple(values), rformats)


def _bind_checked(body: bytes) -> Bind:
    r = Reader(body, "Bind")
    portal, stmt = r.cstr(), r.cstr()
    pformats = tuple(r.int16() for _ in range(r.counted(2)))
    values: list[bytes | None] = []
    for _ in range(r.counted(4)):
        n = r.int32()
        values.append(None if n == -1 else r.bytes_(n))
    rformats = tuple(r.int16() for _ in range(r.counted(2)))
    r.end()
    for f in pformats + rformats:
        if f not in (0, 1):
            raise MalformedMessage(f"Bind: format code {f} is neither text (0) nor binary (1)")
    return Bind(portal, stmt, pformats, tuple(values), rformats)


@dataclass(frozen=True, slots=True)
class Target:
    """Describe or Close of a statement (``S``) or a portal (``P``)."""

    kind: str
    name: str


_TARGETS: Final = {
    b"P\0": Target("P", ""),
    b"S\0": Target("S", ""),
}
"""The unnamed portal's and statement's targets, decoded once."""


def parse_target(body: bytes, what: str) -> Target:
    found = _TARGETS.get(body)
    if found is not None:
        return found
    r = Reader(body, what)
    kind, name = r.byte(), r.cstr()
    r.end()
    if kind not in ("S", "P"):
        raise MalformedMessage(f"{what}: target kind {kind!r} is neither 'S' nor 'P'")
    return Target(kind, name)


@dataclass(frozen=True, slots=True)
class Execute:
    portal: str
    max_rows: int


_EXECUTE_UNNAMED: Final = Execute("", 0)


def parse_execute(body: bytes) -> Execute:
    if body == b"\0\0\0\0\0":  # the unnamed portal, every row: psycopg's and most drivers'
        return _EXECUTE_UNNAMED
    r = Reader(body, "Execute")
    portal, max_rows = r.cstr(), r.int32()
    r.end()
    return Execute(portal, max_rows)


def parse_query(body: bytes) -> str:
    r = Reader(body, "Query")
    q = r.cstr()
    r.end()
    return q


def parse_sasl_initial(body: bytes) -> tuple[str, bytes]:
    r = Reader(body, "SASLInitialResponse")
    mech = r.cstr()
    n = r.int32()
    data = b"" if n == -1 else r.bytes_(n)
    r.end()
    return mech, data


# --- backend messages --------------------------------------------------------------------------


def msg(kind: bytes, body: bytes = b"") -> bytes:
    return _HEAD.pack(kind, len(body) + 4) + body


def cstr(s: str) -> bytes:
    return s.encode() + b"\0"


def auth_request(code: int, data: bytes = b"") -> bytes:
    return msg(b"R", _I32.pack(code) + data)


AUTH_OK: Final = auth_request(0)


def parameter_status(name: str, value: str) -> bytes:
    return msg(b"S", cstr(name) + cstr(value))


def backend_key(pid: int, secret: int) -> bytes:
    return msg(b"K", _I32.pack(pid) + _I32.pack(secret))


def ready(status: str) -> bytes:
    return msg(b"Z", status.encode())


def negotiate_version(minor: int, unknown: Sequence[str]) -> bytes:
    body = _I32.pack(minor) + _I32.pack(len(unknown)) + b"".join(cstr(u) for u in unknown)
    return msg(b"v", body)


@dataclass(frozen=True, slots=True)
class FieldDesc:
    """One column of a RowDescription."""

    name: str
    type_oid: int
    type_len: int
    type_mod: int = -1
    table_oid: int = 0
    column: int = 0


def row_description(fields: Sequence[FieldDesc], formats: Sequence[int]) -> bytes:
    parts = [_U16.pack(len(fields))]
    for f, fmt in zip(fields, formats, strict=True):
        parts.append(cstr(f.name))
        parts.append(_FIELD.pack(f.table_oid, f.column, f.type_oid, f.type_len, f.type_mod, fmt))
    return msg(b"T", b"".join(parts))


def parameter_description(oids: Sequence[int]) -> bytes:
    return msg(b"t", _U16.pack(len(oids)) + b"".join(_U32.pack(o) for o in oids))


def tuple_fields(values: Sequence[bytes | None]) -> bytes:
    """The field count, then each value with its length before it (-1: NULL): a DataRow's
    body, and a tuple of the binary COPY format."""
    parts = [_U16.pack(len(values))]
    for v in values:
        if v is None:
            parts.append(b"\xff\xff\xff\xff")
        else:
            parts.append(_I32.pack(len(v)))
            parts.append(v)
    return b"".join(parts)


def data_row(values: Sequence[bytes | None]) -> bytes:
    return msg(b"D", tuple_fields(values))


def command_complete(tag: str) -> bytes:
    return msg(b"C", cstr(tag))


def copy_out_response(ncols: int, fmt: int = 0) -> bytes:
    return msg(b"H", _copy_formats(ncols, fmt))


def copy_in_response(ncols: int, fmt: int = 0) -> bytes:
    return msg(b"G", _copy_formats(ncols, fmt))


def _copy_formats(ncols: int, fmt: int) -> bytes:
    """The overall format (0 text, 1 binary), the column count and each column's format."""
    return bytes([fmt]) + _U16.pack(ncols) + _I16.pack(fmt) * ncols


COPY_SIGNATURE: Final = b"PGCOPY\n\xff\r\n\x00"
"""The first 11 bytes of the binary COPY format's header."""


def copy_data(data: bytes) -> bytes:
    return msg(b"d", data)


COPY_DONE: Final = msg(b"c")
PARSE_COMPLETE: Final = msg(b"1")
BIND_COMPLETE: Final = msg(b"2")
CLOSE_COMPLETE: Final = msg(b"3")
NO_DATA: Final = msg(b"n")
EMPTY_QUERY: Final = msg(b"I")
PORTAL_SUSPENDED: Final = msg(b"s")


def notice_fields(fields: Sequence[tuple[str, str]]) -> bytes:
    return b"".join(code.encode() + cstr(value) for code, value in fields) + b"\0"


def error_response(
    severity: str,
    sqlstate: str,
    message: str,
    *,
    detail: str | None = None,
    hint: str | None = None,
    position: int | None = None,
) -> bytes:
    fields = [("S", severity), ("V", severity), ("C", sqlstate), ("M", message)]
    if detail:
        fields.append(("D", detail))
    if hint:
        fields.append(("H", hint))
    if position is not None:
        fields.append(("P", str(position)))
    return msg(b"E", notice_fields(fields))


def notice_response(message: str, *, sqlstate: str = "00000", severity: str = "NOTICE") -> bytes:
    return msg(
        b"N",
        notice_fields([("S", severity), ("V", severity), ("C", sqlstate), ("M", message)]),
    )
