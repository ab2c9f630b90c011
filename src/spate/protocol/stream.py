"""A framed byte stream over an asyncio transport (TCP or TLS), built for large frames.

:class:`FrameStream` is an ``asyncio.BufferedProtocol``: the event loop reads straight into its
buffers. Small frames are parsed out of a 256 KiB scratch buffer; a frame larger than that gets
a buffer of exactly its size, allocated only after its length passed the maximum check, and
filled by the socket directly (no intermediate copy).

Writing sends the header and then the chunks of the body (see :func:`~spate.codec.
encode_parts`: Arrow buffers go to the socket without being copied into the message).

Flow control: reading pauses while more than 64 frames wait for :meth:`read_frame`; writers
``await drain()`` while the transport's buffer is full.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ssl
from collections.abc import Callable, Sequence
from typing import Final

from spate.errors import ProtocolError
from spate.protocol.errors import ConnectionClosed, TruncatedFrame
from spate.protocol.frame import (
    HEADER_SIZE,
    MAX_PRE_AUTH_FRAME_BYTES,
    Frame,
    FrameHeader,
    FrameKind,
    encode_header,
    parse_header,
)

_SCRATCH: Final = 256 * 1024
_PRE_AUTH_SCRATCH: Final = 8 * 1024
"""Before authentication a stream's buffer holds one header and one pre-auth frame: an
unauthenticated connection costs a few KiB, not the 256 KiB of an authenticated one."""
_MAX_QUEUED: Final = 64

Chunk = bytes | bytearray | memoryview


class FrameStream(asyncio.BufferedProtocol):
    """Frames in, frames out, over one asyncio transport (module docs)."""

    def __init__(
        self,
        *,
        max_body: int = MAX_PRE_AUTH_FRAME_BYTES,
        authenticated: bool = False,
        on_connect: Callable[[FrameStream], None] | None = None,
    ) -> None:
        self.max_body = max_body
        self.authenticated = authenticated
        self._on_connect = on_connect
        self._transport: asyncio.BaseTransport | None = None
        self._peer = "?"
        self._scratch = bytearray(_SCRATCH if authenticated else _PRE_AUTH_SCRATCH)
        self._scratch_len = 0
        self._big: bytearray | None = None  # buffer of the current large frame
        self._big_header: FrameHeader | None = None
        self._big_got = 0
        self._offset = 0  # stream offset of the next frame, for error messages
        self._frames: collections.deque[Frame | BaseException] = collections.deque()
        self._read_waiter: asyncio.Future[None] | None = None
        self._reading_paused = False
        self._write_paused = False
        self._drain_waiters: list[asyncio.Future[None]] = []
        self._lost = False
        self._closed = asyncio.Event()

    # -- asyncio protocol -----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport
        name = transport.get_extra_info("peername")
        if isinstance(name, tuple) and len(name) >= 2:
            self._peer = f"{name[0]}:{name[1]}"
        if self._on_connect is not None:
            self._on_connect(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._big is not None:
            return memoryview(self._big)[self._big_got :]
        return memoryview(self._scratch)[self._scratch_len :]

    def buffer_updated(self, nbytes: int) -> None:
        try:
            if self._big is not None:
                self._big_received(nbytes)
            else:
                self._scratch_len += nbytes
                self._parse_scratch()
        except ProtocolError as e:
            self._fail(e)
        if len(self._frames) > _MAX_QUEUED and not self._reading_paused:
            self._reading_paused = True
            self._pause_reading()
        self._wake_reader()

    def eof_received(self) -> bool:
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        if self._big is not None or self._scratch_len:
            self._frames.append(
                TruncatedFrame(f"frame at offset {self._offset}: the stream ended inside it")
            )
        elif exc is not None:
            self._frames.append(ConnectionClosed(f"connection to {self._peer} lost: {exc!r}"))
        else:
            self._frames.append(ConnectionClosed(f"{self._peer} closed the connection"))
        self._wake_reader()
        for w in self._drain_waiters:
            if not w.done():
                w.set_exception(ConnectionClosed(f"connection to {self._peer} lost"))
        self._drain_waiters.clear()
        self._closed.set()

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        for w in self._drain_waiters:
            if not w.done():
                w.set_result(None)
        self._drain_waiters.clear()

    # -- parsing --------------------------------------------------------------------------------

    def _parse_scratch(self) -> None:
        buf, end, pos = self._scratch, self._scratch_len, 0
        while end - pos >= HEADER_SIZE:
            header = parse_header(
                bytes(buf[pos : pos + HEADER_SIZE]),
                max_body=self.max_body,
                authenticated=self.authenticated,
                offset=self._offset,
            )
            need = HEADER_SIZE + header.length
            if end - pos >= need:
                body = bytes(buf[pos + HEADER_SIZE : pos + need])
                self._deliver(header, body)
                pos += need
                continue
            if need > len(buf):
                # A large frame: give it its own buffer, filled by the socket directly.
                big = bytearray(header.length)
                have = end - pos - HEADER_SIZE
                big[:have] = buf[pos + HEADER_SIZE : end]
                self._big, self._big_header, self._big_got = big, header, have
                pos = end
            break
        if pos:
            remaining = end - pos
            buf[:remaining] = buf[pos:end]
            self._scratch_len = remaining

    def _big_received(self, nbytes: int) -> None:
        big, header = self._big, self._big_header
        assert big is not None and header is not None
        self._big_got += nbytes
        if self._big_got < len(big):
            return
        self._big, self._big_header = None, None
        self._deliver(header, memoryview(big))

    def _deliver(self, header: FrameHeader, body: bytes | memoryview) -> None:
        self._offset += HEADER_SIZE + header.length
        self._frames.append(Frame(header.kind, body))

    def _fail(self, error: ProtocolError) -> None:
        self._frames.append(error)
        self._big = None
        self._scratch_len = 0
        if isinstance(self._transport, (asyncio.Transport, asyncio.WriteTransport)):
            self._transport.abort()

    def _wake_reader(self) -> None:
        w = self._read_waiter
        if w is not None and not w.done():
            w.set_result(None)

    def _pause_reading(self) -> None:
        t = self._transport
        if isinstance(t, asyncio.ReadTransport):
            with contextlib.suppress(RuntimeError):
                t.pause_reading()

    def _resume_reading(self) -> None:
        t = self._transport
        if isinstance(t, asyncio.ReadTransport):
            with contextlib.suppress(RuntimeError):
                t.resume_reading()

    # -- the stream API -------------------------------------------------------------------------

    @property
    def peer(self) -> str:
        return self._peer

    @property
    def offset(self) -> int:
        return self._offset

    def set_limit(self, *, max_body: int, authenticated: bool) -> None:
        """Change the maximum frame body (after authentication)."""
        self.max_body = max_body
        self.authenticated = authenticated
        if authenticated and len(self._scratch) < _SCRATCH:
            grown = bytearray(_SCRATCH)
            grown[: self._scratch_len] = self._scratch[: self._scratch_len]
            self._scratch = grown

    async def read_frame(self) -> Frame:
        """The next frame. Raises ``ConnectionClosed`` (``TruncatedFrame`` inside a frame) at
        the end of the stream and ``ProtocolError`` for a malformed frame; once raised, every
        later call raises it again."""
        while not self._frames:
            self._read_waiter = asyncio.get_running_loop().create_future()
            try:
                await self._read_waiter
            finally:
                self._read_waiter = None
        item = self._frames[0]
        if isinstance(item, BaseException):
            raise item  # left in place: the stream is finished
        self._frames.popleft()
        if self._reading_paused and len(self._frames) <= _MAX_QUEUED // 2:
            self._reading_paused = False
            self._resume_reading()
        return item

    def write_frame(self, parts: Sequence[Chunk], kind: FrameKind = FrameKind.MESSAGE) -> None:
        """Queue one frame on the transport (call :meth:`drain` afterwards)."""
        if self._lost or self._transport is None:
            raise ConnectionClosed(f"connection to {self._peer} is closed")
        transport = self._transport
        assert isinstance(transport, asyncio.WriteTransport)
        transport.write(encode_header(sum(len(p) for p in parts), kind))
        for p in parts:
            if len(p):
                transport.write(p)

    async def drain(self) -> None:
        if self._lost:
            raise ConnectionClosed(f"connection to {self._peer} is closed")
        if self._write_paused:
            w = asyncio.get_running_loop().create_future()
            self._drain_waiters.append(w)
            await w

    def pause_reading_for_tls(self) -> None:
        """Read nothing until :meth:`start_tls` takes over the transport."""
        self._pause_reading()

    async def start_tls(self, context: ssl.SSLContext, *, timeout: float) -> None:
        """Upgrade the server side of this connection to TLS (before any frame)."""
        transport = self._transport
        assert transport is not None
        new = await asyncio.get_running_loop().start_tls(
            transport,  # type: ignore[arg-type]
            self,
            context,
            server_side=True,
            ssl_handshake_timeout=timeout,
        )
        if new is None:
            raise ConnectionClosed(f"TLS with {self._peer} did not start")
        self._transport = new

    def write_raw(self, data: bytes) -> None:
        """Send ``data`` as it is, unframed (for fuzzers and protocol tests)."""
        transport = self._transport
        assert isinstance(transport, asyncio.WriteTransport)
        transport.write(data)

    def write_eof(self) -> None:
        transport = self._transport
        if isinstance(transport, asyncio.WriteTransport) and transport.can_write_eof():
            transport.write_eof()

    def feed(self, data: bytes) -> None:
        """Deliver ``data`` as if the socket had read it (sans-I/O use by tests and fuzzers)."""
        view = memoryview(data)
        while len(view):
            buf = self.get_buffer(len(view))
            n = min(len(buf), len(view))
            buf[:n] = view[:n]
            self.buffer_updated(n)
            view = view[n:]

    def frames_ready(self) -> list[Frame | BaseException]:
        """Frames (and at most one error) parsed so far and not yet read, without waiting."""
        out = list(self._frames)
        self._frames.clear()
        return out

    def close(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()

    def abort(self) -> None:
        if isinstance(self._transport, (asyncio.Transport, asyncio.WriteTransport)):
            self._transport.abort()

    async def wait_closed(self, timeout: float = 1.0) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._closed.wait(), timeout)

    def tune_socket(self) -> None:
        """TCP_NODELAY and TCP keepalive on the underlying socket, where possible."""
        import socket

        if self._transport is None:
            return
        sock = self._transport.get_extra_info("socket")
        if sock is None:
            return
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            if hasattr(socket, "TCP_KEEPIDLE"):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 10)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 5)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 3)
