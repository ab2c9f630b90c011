"""An in-memory transport with the interface of the TCP one, for tests of controllers/replicas.

:class:`InMemoryTransport` is a tiny network: ``serve(host, port, …)`` registers a replica
endpoint, ``connect(host, port, …)`` reaches it. It keeps the TCP transport's observable rules:
a wrong or missing secret is refused (``AuthenticationFailed``, counted), another role is
refused, a newer epoch replaces the current connection and an older one is refused
(``EpochRefused``), a closed end makes the other end's ``recv`` raise ``ConnectionClosed``.
Messages are encoded and decoded by the real codec (so tests exercise the wire forms) and
checked against what each side may send.

:func:`memory_pair` gives two connected ends directly, without a server.
"""

from __future__ import annotations

import asyncio
import hmac
import itertools
import logging
import ssl
from typing import Final

from spate.codec import encode_message
from spate.errors import ProtocolError
from spate.protocol._server import Handler, ServerBase
from spate.protocol.connection import (
    MEMORY_OPTIONS,
    Connection,
    ConnectionBase,
    Side,
    TransportOptions,
    decode_incoming,
)
from spate.protocol.errors import (
    AuthenticationFailed,
    ConnectFailed,
    ConnectionClosed,
    FrameTooLarge,
)
from spate.protocol.handshake import Role
from spate.protocol.secret import secret_bytes
from spate.protocol.transport import check_bind

__all__ = ["InMemoryTransport", "MemoryConnection", "MemoryServer", "memory_pair"]

_log: Final = logging.getLogger("spate.protocol.transport")
_CLOSED: Final = object()


class MemoryConnection(ConnectionBase):
    """One end of an in-memory connection (a :class:`~spate.protocol.connection.Connection`)."""

    def __init__(
        self, *, role: Role, side: Side, epoch: int, peer: str, options: TransportOptions
    ) -> None:
        super().__init__(role=role, side=side, epoch=epoch, options=options)
        self._peer = peer
        self._inbox: asyncio.Queue[object] = asyncio.Queue()
        self._other: MemoryConnection | None = None

    @property
    def peer(self) -> str:
        return self._peer

    async def send(self, message: object) -> None:
        self._check_send(message)
        other = self._other
        if other is None or other._closed:
            raise ConnectionClosed(f"connection to {self._peer} is closed")
        body = b"".join(encode_message(message))
        if len(body) > self._options.max_frame:
            raise FrameTooLarge(len(body), self._options.max_frame, authenticated=True)
        other._inbox.put_nowait(body)
        await asyncio.sleep(0)

    async def recv(self) -> object:
        if self._closed:
            raise ConnectionClosed(f"connection to {self._peer} is closed")
        try:
            async with asyncio.timeout(self._options.read_timeout):
                item = await self._inbox.get()
        except TimeoutError:
            await self.close()
            raise ConnectionClosed(
                f"no message from {self._peer} for {self._options.read_timeout} s"
            ) from None
        if item is _CLOSED:
            self._closed = True
            raise ConnectionClosed(f"{self._peer} closed the connection")
        assert isinstance(item, bytes)
        try:
            return decode_incoming(item, self._role, self._side)
        except ProtocolError:
            await self.close()
            raise

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._inbox.put_nowait(_CLOSED)
        if self._other is not None and not self._other._closed:
            self._other._inbox.put_nowait(_CLOSED)

    async def inject(self, body: bytes) -> None:
        """Deliver raw ``body`` to this end as if the peer sent it (for fuzz tests)."""
        self._inbox.put_nowait(body)


def memory_pair(
    *,
    role: Role = "compute",
    epoch: int = 1,
    options: TransportOptions = MEMORY_OPTIONS,
) -> tuple[MemoryConnection, MemoryConnection]:
    """A connected ``(controller end, replica end)``. Must be called inside an event loop."""
    controller = MemoryConnection(
        role=role, side="controller", epoch=epoch, peer="memory:replica", options=options
    )
    replica = MemoryConnection(
        role=role, side="replica", epoch=epoch, peer="memory:controller", options=options
    )
    controller._other, replica._other = replica, controller
    return controller, replica


class MemoryServer(ServerBase[MemoryConnection]):
    """A replica endpoint of an :class:`InMemoryTransport`."""

    def __init__(
        self,
        network: InMemoryTransport,
        host: str,
        port: int,
        *,
        role: Role,
        handler: Handler,
        key: bytes | None,
        options: TransportOptions,
    ) -> None:
        super().__init__(role=role, handler=handler)
        self._network = network
        self._host, self._port = host, port
        self._key = key
        self._options = options

    async def close(self) -> None:
        self._network._servers.pop((self._host, self._port), None)
        await super().close()

    def _refuse_auth(self, why: str) -> AuthenticationFailed:
        self._auth_failed(f"memory:{self._host}:{self._port}", why)
        return AuthenticationFailed(f"memory replica {self._host}:{self._port}: {why}")

    async def _accept(
        self, *, role: Role, epoch: int, key: bytes | None, options: TransportOptions
    ) -> MemoryConnection:
        self._stats.connections += 1
        if self._key is not None and (key is None or not hmac.compare_digest(key, self._key)):
            raise self._refuse_auth("authentication failed")
        if self._key is None and key is not None:
            raise self._refuse_auth("replica did not prove knowledge of the shared secret")
        if role != self._role:
            raise self._refuse_auth(f"this is a {self._role} replica, not {role}")
        controller, replica = memory_pair(role=role, epoch=epoch, options=options)
        old = self._admit(epoch, replica, f"{self._host}:{self._port}")
        if old is not None:
            await old.close()
        self._spawn(self._run_handler(replica))
        return controller


class InMemoryTransport:
    """A :class:`~spate.protocol.transport.Transport` whose network is a dict (module docs)."""

    def __init__(self) -> None:
        self._servers: dict[tuple[str, int], MemoryServer] = {}
        self._ports = itertools.count(40_000)

    async def serve(
        self,
        host: str,
        port: int,
        *,
        role: Role,
        handler: Handler,
        secret: object = None,
        tls: ssl.SSLContext | None = None,
        options: TransportOptions = MEMORY_OPTIONS,
    ) -> MemoryServer:
        key = secret_bytes(secret)
        check_bind(host, secret=key, tls=tls)
        if port == 0:
            port = next(self._ports)
        if (host, port) in self._servers:
            raise OSError(f"address in use: {host}:{port}")
        server = MemoryServer(
            self, host, port, role=role, handler=handler, key=key, options=options
        )
        self._servers[(host, port)] = server
        return server

    async def connect(
        self,
        host: str,
        port: int,
        *,
        role: Role,
        epoch: int,
        secret: object = None,
        tls: ssl.SSLContext | None = None,
        options: TransportOptions = MEMORY_OPTIONS,
    ) -> Connection:
        key = secret_bytes(secret)
        server = self._servers.get((host, port))
        if server is None:
            raise ConnectFailed(f"cannot connect to {role} replica at {host}:{port}: refused")
        return await server._accept(role=role, epoch=epoch, key=key, options=options)
