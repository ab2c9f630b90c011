"""Frames: an 8-byte header, then the body. The length is checked before the body is read.

Layout (big endian)::

    offset 0  2 bytes  magic  b"SP"
    offset 2  1 byte   frame format version (1)
    offset 3  1 byte   kind: 0 = message (a codec body), 1 = keepalive (empty body)
    offset 4  4 bytes  body length n (unsigned)
    offset 8  n bytes  body

A reader MUST check the length against its maximum *before* reading (or allocating) the body:
4 KiB before authentication (the handshake's frames are a few hundred bytes), 64 MiB by
default after. A header mismatch is a
:class:`~spate.errors.ProtocolError` naming the stream offset, and the connection is closed;
a stream that ends inside a frame raises :class:`~spate.protocol.errors.TruncatedFrame`.

Frames carry no checksum of their own. Integrity in transit is TCP's and, across untrusted
networks, TLS's (authenticated encryption); a corrupted body almost always fails the strict
codec anyway, and data at rest (persist batches) carries its own digest. Measured, a CRC-32
over a 7.6 MB peek response cost as much CPU as sending it (``bench/protocol.py``).
:mod:`spate.protocol.stream` does the reading and writing.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass
from typing import Final

from spate.errors import ProtocolError
from spate.protocol.errors import FrameTooLarge

MAGIC: Final = b"SP"
FRAME_VERSION: Final = 1
HEADER: Final = struct.Struct(">2sBBI")
HEADER_SIZE: Final = HEADER.size  # 8

MAX_FRAME_BYTES: Final = 64 * 1024 * 1024
"""Default largest frame body after authentication."""
MAX_PRE_AUTH_FRAME_BYTES: Final = 4 * 1024
"""Largest frame body before the handshake has authenticated the peer: enough for the
handshake's messages, so an unauthenticated peer cannot make a replica allocate more."""


class FrameKind(enum.IntEnum):
    MESSAGE = 0
    KEEPALIVE = 1


@dataclass(frozen=True, slots=True)
class FrameHeader:
    kind: FrameKind
    length: int


@dataclass(frozen=True, slots=True)
class Frame:
    """A received frame. ``body`` is ``bytes``, or for large frames a view of the buffer the
    socket filled (no copy)."""

    kind: FrameKind
    body: bytes | memoryview


def encode_header(length: int, kind: FrameKind = FrameKind.MESSAGE) -> bytes:
    """The header of a frame whose body is ``length`` bytes."""
    if not 0 <= length < 2**32:
        raise ProtocolError(f"frame body of {length} bytes cannot be framed (max 4 GiB)")
    return HEADER.pack(MAGIC, FRAME_VERSION, kind, length)


def encode_frame(body: bytes, kind: FrameKind = FrameKind.MESSAGE) -> bytes:
    """Header and body as one byte string."""
    return encode_header(len(body), kind) + body


KEEPALIVE_FRAME: Final = encode_frame(b"", FrameKind.KEEPALIVE)


def parse_header(
    header: bytes, *, max_body: int, authenticated: bool, offset: int = 0
) -> FrameHeader:
    """Validate an 8-byte header; raise ``ProtocolError`` (``FrameTooLarge``) if it is bad."""
    if len(header) != HEADER_SIZE:
        raise ProtocolError(f"frame at offset {offset}: truncated header ({len(header)} bytes)")
    magic, version, kind, length = HEADER.unpack(header)
    if magic != MAGIC:
        raise ProtocolError(f"frame at offset {offset}: bad magic {magic!r} (want {MAGIC!r})")
    if version != FRAME_VERSION:
        raise ProtocolError(
            f"frame at offset {offset}: unknown frame version {version} (want {FRAME_VERSION})"
        )
    if kind not in (FrameKind.MESSAGE, FrameKind.KEEPALIVE):
        raise ProtocolError(f"frame at offset {offset}: unknown frame kind {kind}")
    if length > max_body:
        raise FrameTooLarge(length, max_body, authenticated=authenticated)
    if kind == FrameKind.KEEPALIVE and length != 0:
        raise ProtocolError(f"frame at offset {offset}: keepalive with a {length}-byte body")
    return FrameHeader(FrameKind(kind), length)
