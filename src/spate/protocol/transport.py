"""The asyncio TCP transport: authenticated connections between a controller and replicas.

Client (controller) side::

    conn = await connect("127.0.0.1", port, role="compute", epoch=3, secret=secret)
    conn = await connect_retrying(host, port, role=..., epoch=..., secret=...)  # backoff <= 1 s

Server (replica) side::

    server = await serve("127.0.0.1", 0, role="compute", secret=secret, handler=handle)
    ...  # server.port; `await handle(conn)` runs once per authenticated connection
    await server.close()

Guarantees:

* **Authentication before anything.** ``serve`` runs TLS (when ``tls`` is given, with client
  certificates if the context requires them) and the mutual HMAC-SHA256 handshake of
  :mod:`spate.protocol.handshake` within ``handshake_timeout`` before the handler ever sees
  the connection; until then frames are capped at 4 KiB, only handshake messages decode, and
  at most ``max_unauthenticated`` connections handshake at once (more are closed at once and
  counted in ``stats.shed``). A failed handshake closes the connection and counts in
  ``stats.auth_failures``.
* **One controller per replica.** A connection with a newer epoch replaces the current one
  (which is closed: its handler's ``recv`` raises ``ConnectionClosed``); an epoch that is not
  newer is refused (the client gets ``EpochRefused``).
* **Safe defaults.** Servers bind where told (use :data:`DEFAULT_HOST`); a non-loopback bind
  without a secret or TLS raises ``InsecureBind``. Secrets never reach logs or reprs.
* **Liveness.** Idle connections exchange keepalive frames; a peer silent for longer than the
  read timeout is dropped (``ConnectionClosed``). TCP keepalive and ``TCP_NODELAY`` are on.
* A handler's ``ProtocolError`` closes its connection; the server keeps serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import random
import secrets
import ssl
from typing import Final, Protocol

from spate._version import __version__
from spate.codec import decode, encode
from spate.errors import ProtocolError
from spate.protocol._server import Handler, ServerBase
from spate.protocol.common import PROTOCOL_VERSION
from spate.protocol.connection import (
    DEFAULT_OPTIONS,
    Connection,
    StreamConnection,
    TransportOptions,
    TransportStats,
)
from spate.protocol.errors import (
    AuthenticationFailed,
    ConnectFailed,
    ConnectionClosed,
    EpochRefused,
    InsecureBind,
)
from spate.protocol.frame import FrameKind
from spate.protocol.handshake import (
    NONCE_BYTES,
    ClientHello,
    ClientProof,
    Role,
    ServerHello,
    ServerVerdict,
    VerdictCode,
    client_mac,
    mac_ok,
    signed_verdict,
    transcript,
    verdict_ok,
)
from spate.protocol.secret import secret_bytes
from spate.protocol.stream import FrameStream

__all__ = [
    "DEFAULT_HOST",
    "Handler",
    "Server",
    "TcpServer",
    "TcpTransport",
    "Transport",
    "connect",
    "connect_retrying",
    "serve",
]

_log: Final = logging.getLogger("spate.protocol.transport")

DEFAULT_HOST: Final = "127.0.0.1"
MAX_BACKOFF_S: Final = 1.0


class Server(Protocol):
    """A listening replica endpoint."""

    @property
    def host(self) -> str: ...

    @property
    def port(self) -> int: ...

    @property
    def stats(self) -> TransportStats: ...

    @property
    def epoch(self) -> int | None: ...

    async def close(self) -> None: ...


class Transport(Protocol):
    """How controllers reach replicas: TCP (:class:`TcpTransport`) or in-memory for tests."""

    async def connect(
        self,
        host: str,
        port: int,
        *,
        role: Role,
        epoch: int,
        secret: object = None,
        tls: ssl.SSLContext | None = None,
        options: TransportOptions = ...,
    ) -> Connection: ...

    async def serve(
        self,
        host: str,
        port: int,
        *,
        role: Role,
        handler: Handler,
        secret: object = None,
        tls: ssl.SSLContext | None = None,
        options: TransportOptions = ...,
    ) -> Server: ...


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, *, secret: bytes | None, tls: ssl.SSLContext | None) -> None:
    """Refuse a non-loopback bind that has neither a secret nor TLS."""
    if secret is None and tls is None and not is_loopback(host):
        raise InsecureBind(
            f"refusing to listen on {host!r} without a secret or TLS; bind {DEFAULT_HOST} or "
            "configure a transport secret"
        )


async def _send(stream: FrameStream, message: object) -> None:
    stream.write_frame([encode(message)])
    await stream.drain()


async def _send_raw(stream: FrameStream, body: bytes) -> None:
    stream.write_frame([body])
    await stream.drain()


async def _read_handshake_body(stream: FrameStream) -> bytes | memoryview:
    frame = await stream.read_frame()
    if frame.kind != FrameKind.MESSAGE:
        raise AuthenticationFailed("keepalive frame during the handshake")
    return frame.body


# --- client ----------------------------------------------------------------------------------


async def connect(
    host: str,
    port: int,
    *,
    role: Role,
    epoch: int,
    secret: object = None,
    tls: ssl.SSLContext | None = None,
    server_hostname: str | None = None,
    options: TransportOptions = DEFAULT_OPTIONS,
) -> Connection:
    """Connect to the replica at ``host:port`` and authenticate as controller ``epoch``.

    Raises ``ConnectFailed`` (nothing reached the replica; retry), ``ConnectionClosed`` (the
    replica went away during the handshake; retry), ``AuthenticationFailed`` (wrong secret,
    TLS failure, other protocol version or role; do not retry) or ``EpochRefused`` (the
    replica follows a newer controller epoch; do not retry with this epoch).
    """
    key = secret_bytes(secret)
    peer = f"{host}:{port}"
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout(options.connect_timeout):
            _, stream = await loop.create_connection(
                FrameStream,
                host,
                port,
                ssl=tls,
                server_hostname=server_hostname if tls is not None else None,
            )
    except ssl.SSLError as e:
        raise AuthenticationFailed(f"TLS handshake with {peer} failed: {e.reason}") from None
    except (OSError, TimeoutError) as e:
        raise ConnectFailed(f"cannot connect to {role} replica at {peer}: {e!r}") from None
    stream.tune_socket()
    try:
        async with asyncio.timeout(options.handshake_timeout):
            await client_handshake(stream, role=role, epoch=epoch, key=key, peer=peer)
    except BaseException as e:
        stream.abort()
        if isinstance(e, TimeoutError):
            raise AuthenticationFailed(f"handshake with {peer} timed out") from None
        if isinstance(e, ssl.SSLError):
            raise AuthenticationFailed(f"TLS with {peer} failed: {e.reason}") from None
        if isinstance(e, (ConnectionError, OSError)) and not isinstance(e, ConnectionClosed):
            raise ConnectionClosed(f"{peer} went away during the handshake: {e!r}") from None
        raise
    return StreamConnection(stream, role=role, side="controller", epoch=epoch, options=options)


async def client_handshake(
    stream: FrameStream,
    *,
    role: Role,
    epoch: int,
    key: bytes | None,
    peer: str,
) -> None:
    hello = encode(
        ClientHello(PROTOCOL_VERSION, __version__, role, epoch, secrets.token_bytes(NONCE_BYTES))
    )
    await _send_raw(stream, hello)
    server_hello_body = await _read_handshake_body(stream)
    try:
        server_hello = decode(server_hello_body, ServerHello)
    except ProtocolError as e:
        raise AuthenticationFailed(f"{peer} sent a bad server hello: {e}") from None
    if server_hello.version != PROTOCOL_VERSION:
        raise AuthenticationFailed(
            f"{peer} speaks protocol version {server_hello.version}; we speak {PROTOCOL_VERSION}"
        )
    if len(server_hello.nonce) != NONCE_BYTES:
        raise AuthenticationFailed(f"{peer} sent a {len(server_hello.nonce)}-byte nonce")
    digest = transcript(hello, server_hello_body)
    await _send(stream, ClientProof(client_mac(key, digest)))
    try:
        verdict = decode(await _read_handshake_body(stream), ServerVerdict)
    except ProtocolError as e:
        raise AuthenticationFailed(f"{peer} sent a bad verdict: {e}") from None
    if verdict.code == "auth":
        raise AuthenticationFailed(f"{peer} refused our credentials: {verdict.reason}")
    if not verdict_ok(verdict, secret=key, digest=digest):
        raise AuthenticationFailed(f"{peer} did not prove knowledge of the shared secret")
    if verdict.code == "epoch":
        raise EpochRefused(epoch, verdict.current_epoch, peer)
    if not verdict.accepted:
        raise AuthenticationFailed(f"{peer} refused the connection: {verdict.reason}")


async def connect_retrying(
    host: str,
    port: int,
    *,
    role: Role,
    epoch: int,
    secret: object = None,
    tls: ssl.SSLContext | None = None,
    server_hostname: str | None = None,
    options: TransportOptions = DEFAULT_OPTIONS,
    give_up_after: float | None = None,
    max_backoff: float = MAX_BACKOFF_S,
    rng: random.Random | None = None,
    transport: Transport | None = None,
) -> Connection:
    """:func:`connect` until it succeeds, backing off from 50 ms up to ``max_backoff`` (≤ 1 s).

    Retries ``ConnectFailed`` and ``ConnectionClosed`` (the replica is starting or
    restarting); raises ``AuthenticationFailed`` and ``EpochRefused`` at once, and the last
    error once ``give_up_after`` seconds have passed. ``transport`` defaults to TCP.
    """
    loop = asyncio.get_running_loop()
    deadline = None if give_up_after is None else loop.time() + give_up_after
    rng = rng or random.Random()
    delay = 0.05
    attempt = 0
    while True:
        attempt += 1
        try:
            if transport is not None:
                return await transport.connect(
                    host, port, role=role, epoch=epoch, secret=secret, tls=tls, options=options
                )
            return await connect(
                host,
                port,
                role=role,
                epoch=epoch,
                secret=secret,
                tls=tls,
                server_hostname=server_hostname,
                options=options,
            )
        except (ConnectFailed, ConnectionClosed) as e:
            if deadline is not None and loop.time() + delay > deadline:
                raise
            _log.debug("connect attempt %d to %s:%s failed (%s); retrying", attempt, host, port, e)
        await asyncio.sleep(delay * (0.5 + rng.random() / 2))
        delay = min(delay * 2, max_backoff)


# --- server ----------------------------------------------------------------------------------


class TcpServer(ServerBase[StreamConnection]):
    """A listening replica endpoint over TCP (see :func:`serve`)."""

    def __init__(
        self,
        *,
        role: Role,
        handler: Handler,
        key: bytes | None,
        tls: ssl.SSLContext | None,
        options: TransportOptions,
    ) -> None:
        super().__init__(role=role, handler=handler)
        self._key = key
        self._tls = tls
        self._options = options
        self._server: asyncio.Server | None = None
        self._handshaking = 0

    async def _start(self, host: str, port: int) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: FrameStream(on_connect=self._on_connect), host, port
        )
        sockname = self._server.sockets[0].getsockname()
        self._host, self._port = str(sockname[0]), int(sockname[1])
        _log.info("%s replica listening on %s:%d", self._role, self._host, self._port)

    async def close(self) -> None:
        """Stop listening, close every connection and wait for their handlers."""
        if self._server is not None:
            self._server.close()
        await super().close()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    def _on_connect(self, stream: FrameStream) -> None:
        self._stats.connections += 1
        if self._handshaking >= self._options.max_unauthenticated:
            self._stats.shed += 1
            if self._stats.shed % 1000 == 1:
                _log.warning(
                    "%s replica: %d connections are already handshaking; closing %s "
                    "(%d shed so far)",
                    self._role,
                    self._handshaking,
                    stream.peer,
                    self._stats.shed,
                )
            stream.abort()
            return
        self._handshaking += 1
        if self._tls is not None:
            stream.pause_reading_for_tls()
        self._spawn(self._serve_client(stream))

    async def _serve_client(self, stream: FrameStream) -> None:
        try:
            conn = await self._authenticate(stream)
        finally:
            self._handshaking -= 1
        if conn is not None:
            await self._run_handler(conn)

    async def _authenticate(self, stream: FrameStream) -> StreamConnection | None:
        peer = stream.peer
        stream.tune_socket()
        try:
            async with asyncio.timeout(self._options.handshake_timeout):
                if self._tls is not None:
                    await stream.start_tls(self._tls, timeout=self._options.handshake_timeout)
                return await self._server_handshake(stream, peer)
        except EpochRefused as e:
            _log.warning("%s replica: %s", self._role, e)
            stream.close()
        except TimeoutError:
            self._auth_failed(
                peer, f"no complete handshake within {self._options.handshake_timeout} s"
            )
            stream.abort()
        except ssl.SSLError as e:
            self._auth_failed(peer, f"TLS: {e.reason}")
            stream.abort()
        except (ProtocolError, ConnectionError, OSError) as e:
            self._auth_failed(peer, e)
            stream.close()
        return None

    async def _server_handshake(self, stream: FrameStream, peer: str) -> StreamConnection:
        hello_body = await _read_handshake_body(stream)
        hello = decode(hello_body, ClientHello)
        server_hello = encode(
            ServerHello(PROTOCOL_VERSION, __version__, secrets.token_bytes(NONCE_BYTES))
        )
        await _send_raw(stream, server_hello)
        proof = decode(await _read_handshake_body(stream), ClientProof)
        digest = transcript(hello_body, server_hello)
        if len(hello.nonce) != NONCE_BYTES or not mac_ok(
            self._key, client_mac(self._key, digest), proof.mac
        ):
            await _send(stream, ServerVerdict("auth", "authentication failed", 0, b""))
            raise AuthenticationFailed(f"{peer} did not prove knowledge of the shared secret")

        async def refuse(code: VerdictCode, reason: str, current: int) -> None:
            await _send(
                stream, signed_verdict(code, reason, current, secret=self._key, digest=digest)
            )

        if hello.version != PROTOCOL_VERSION:
            await refuse("version", f"replica speaks protocol version {PROTOCOL_VERSION}", 0)
            raise AuthenticationFailed(f"{peer} speaks protocol version {hello.version}")
        if hello.role != self._role:
            await refuse("role", f"this is a {self._role} replica, not {hello.role}", 0)
            raise AuthenticationFailed(f"{peer} wants a {hello.role} replica")
        try:
            self._check_epoch(hello.epoch, peer)
        except EpochRefused as e:
            await refuse("epoch", str(e), e.current)
            raise
        conn = StreamConnection(
            stream, role=self._role, side="replica", epoch=hello.epoch, options=self._options
        )
        old = self._admit(hello.epoch, conn, peer)  # no await since the check
        await _send(stream, signed_verdict("ok", "", hello.epoch, secret=self._key, digest=digest))
        if old is not None:
            await old.close()
        return conn


async def serve(
    host: str,
    port: int,
    *,
    role: Role,
    handler: Handler,
    secret: object = None,
    tls: ssl.SSLContext | None = None,
    options: TransportOptions = DEFAULT_OPTIONS,
) -> TcpServer:
    """Listen on ``host:port`` (port 0: any free port) as a ``role`` replica.

    ``handler(connection)`` is awaited once per authenticated connection (module docs).
    Raises ``InsecureBind`` for a non-loopback ``host`` without ``secret`` or ``tls``, and
    ``ValueError`` for a secret shorter than 32 bytes.
    """
    key = secret_bytes(secret)
    check_bind(host, secret=key, tls=tls)
    if key is None and tls is None:
        _log.warning("%s replica on %s: no transport secret; loopback only", role, host)
    server = TcpServer(role=role, handler=handler, key=key, tls=tls, options=options)
    await server._start(host, port)
    return server


class TcpTransport:
    """The TCP :class:`Transport`."""

    async def connect(
        self,
        host: str,
        port: int,
        *,
        role: Role,
        epoch: int,
        secret: object = None,
        tls: ssl.SSLContext | None = None,
        options: TransportOptions = DEFAULT_OPTIONS,
    ) -> Connection:
        return await connect(
            host, port, role=role, epoch=epoch, secret=secret, tls=tls, options=options
        )

    async def serve(
        self,
        host: str,
        port: int,
        *,
        role: Role,
        handler: Handler,
        secret: object = None,
        tls: ssl.SSLContext | None = None,
        options: TransportOptions = DEFAULT_OPTIONS,
    ) -> Server:
        return await serve(
            host, port, role=role, handler=handler, secret=secret, tls=tls, options=options
        )
