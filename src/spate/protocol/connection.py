"""One authenticated, ordered, reliable message connection between a controller and a replica.

:class:`Connection` is the interface every transport hands out (TCP in
:mod:`spate.protocol.transport`, in-memory in :mod:`spate.protocol.memory`):

* ``await send(message)`` — encode and send one message. Only the messages of the connection's
  side and role may be sent (commands from the controller, responses from the replica);
  anything else is a ``TypeError`` and nothing is sent. Raises ``ConnectionClosed``.
* ``await recv()`` — the next message from the peer (keepalives are consumed silently). Raises
  ``ConnectionClosed`` when the peer goes away or stays silent longer than the read timeout,
  and ``ProtocolError`` for a malformed frame or a message the peer may not send; in both
  cases the connection is closed first. Only one task may call ``recv`` at a time.
* ``await close()`` — idempotent; a ``recv`` blocked in another task raises ``ConnectionClosed``.
* ``epoch``, ``peer``, ``role``, ``closed``.

The handshake (:mod:`spate.protocol.handshake`) has completed before a ``Connection`` exists:
nothing is decoded as a command before the peer is authenticated.
"""

from __future__ import annotations

import asyncio
import logging
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal, Protocol

from prometheus_client import Counter

from spate.codec import Buffer, decode_message, encode_message
from spate.errors import ProtocolError
from spate.protocol import compute, storage
from spate.protocol.errors import ConnectionClosed, FrameTooLarge
from spate.protocol.frame import MAX_FRAME_BYTES, FrameKind
from spate.protocol.handshake import HANDSHAKE_TIMEOUT_S, Role
from spate.protocol.stream import Chunk, FrameStream

_log: Final = logging.getLogger("spate.protocol.transport")

Side = Literal["controller", "replica"]

KEEPALIVE_INTERVAL_S: Final = 2.0
READ_TIMEOUT_S: Final = 30.0

COMMANDS: Final[dict[str, tuple[type, ...]]] = {
    "compute": typing.get_args(compute.ComputeCommand),
    "storage": typing.get_args(storage.StorageCommand),
}
RESPONSES: Final[dict[str, tuple[type, ...]]] = {
    "compute": typing.get_args(compute.ComputeResponse),
    "storage": typing.get_args(storage.StorageResponse),
}


def outgoing_types(role: Role, side: Side) -> tuple[type, ...]:
    """What ``side`` may send on a ``role`` connection."""
    return COMMANDS[role] if side == "controller" else RESPONSES[role]


def incoming_types(role: Role, side: Side) -> tuple[type, ...]:
    """What ``side`` may receive on a ``role`` connection."""
    return RESPONSES[role] if side == "controller" else COMMANDS[role]


@dataclass(frozen=True, slots=True)
class TransportOptions:
    """Limits and timeouts of a connection.

    ``keepalive_interval``: an idle side sends an empty keepalive frame this often.
    ``read_timeout``: a peer silent for this long (no message, no keepalive) is considered gone
    (``None``: wait forever). ``max_frame``: largest frame body accepted after authentication.
    ``max_unauthenticated``: connections a server lets handshake at once; more are closed at
    once (each still has ``handshake_timeout`` to authenticate), so unauthenticated peers cannot
    exhaust a replica's memory or file descriptors.
    """

    connect_timeout: float = 5.0
    handshake_timeout: float = HANDSHAKE_TIMEOUT_S
    keepalive_interval: float = KEEPALIVE_INTERVAL_S
    read_timeout: float | None = READ_TIMEOUT_S
    max_frame: int = MAX_FRAME_BYTES
    max_unauthenticated: int = 64

    def __post_init__(self) -> None:
        if self.read_timeout is not None and self.read_timeout <= self.keepalive_interval:
            raise ValueError(
                f"read_timeout {self.read_timeout} s must exceed keepalive_interval "
                f"{self.keepalive_interval} s, or a quiet peer would be dropped"
            )
        if self.max_unauthenticated < 1:
            raise ValueError(
                f"max_unauthenticated must be at least 1, got {self.max_unauthenticated}"
            )


AUTH_FAILURES: Final = Counter(
    "spate_transport_auth_failures", "Connections that failed the handshake", ["role"]
)
PROTOCOL_ERRORS: Final = Counter(
    "spate_transport_protocol_errors", "Connections closed for a protocol violation", ["role"]
)


@dataclass
class TransportStats:
    """Counters of one server (also exported as Prometheus metrics)."""

    connections: int = 0
    authenticated: int = 0
    auth_failures: int = 0
    epochs_refused: int = 0
    replaced: int = 0
    protocol_errors: int = 0
    shed: int = 0
    """Connections closed unauthenticated because ``max_unauthenticated`` were handshaking."""


DEFAULT_OPTIONS: Final = TransportOptions()
MEMORY_OPTIONS: Final = TransportOptions(read_timeout=None)
"""In-memory connections never time out by default (tests step them by hand)."""


class Connection(Protocol):
    """An authenticated message connection (module docs)."""

    @property
    def epoch(self) -> int: ...

    @property
    def peer(self) -> str: ...

    @property
    def role(self) -> Role: ...

    @property
    def closed(self) -> bool: ...

    async def send(self, message: object) -> None: ...

    async def recv(self) -> object: ...

    async def close(self) -> None: ...


def check_outgoing(message: object, role: Role, side: Side) -> None:
    allowed = outgoing_types(role, side)
    if not isinstance(message, allowed):
        raise TypeError(
            f"a {role} {side} cannot send {type(message).__name__}; it sends "
            + ", ".join(t.__name__ for t in allowed)
        )


def decode_incoming(body: Buffer, role: Role, side: Side) -> object:
    """Decode a message body that ``side`` received, refusing anything it may not receive."""
    message = decode_message(body)
    if not isinstance(message, incoming_types(role, side)):
        peer = "replica" if side == "controller" else "controller"
        raise ProtocolError(f"a {role} {peer} may not send {type(message).__name__}")
    return message


class ConnectionBase:
    """The facts every connection keeps: role, side, epoch, options, closed."""

    def __init__(self, *, role: Role, side: Side, epoch: int, options: TransportOptions) -> None:
        self._role: Role = role
        self._side: Side = side
        self._epoch = epoch
        self._options = options
        self._closed = False

    @property
    def epoch(self) -> int:
        return self._epoch

    @property
    def peer(self) -> str:
        raise NotImplementedError

    @property
    def role(self) -> Role:
        return self._role

    @property
    def closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self._role} {self._side}, peer={self.peer}, "
            f"epoch={self._epoch}, closed={self._closed})"
        )

    def _check_send(self, message: object) -> None:
        check_outgoing(message, self._role, self._side)
        if self._closed:
            raise ConnectionClosed(f"connection to {self.peer} is closed")


class StreamConnection(ConnectionBase):
    """A :class:`Connection` over a :class:`~spate.protocol.stream.FrameStream` (TCP/TLS)."""

    def __init__(
        self,
        stream: FrameStream,
        *,
        role: Role,
        side: Side,
        epoch: int,
        options: TransportOptions,
    ) -> None:
        super().__init__(role=role, side=side, epoch=epoch, options=options)
        self._stream = stream
        self._lock = asyncio.Lock()
        self._loop = asyncio.get_running_loop()
        self._last_send = self._loop.time()
        stream.set_limit(max_body=options.max_frame, authenticated=True)
        self._keepalive = self._loop.create_task(self._keep_alive())

    @property
    def peer(self) -> str:
        return self._stream.peer

    async def send(self, message: object) -> None:
        self._check_send(message)
        parts = encode_message(message)
        size = sum(len(p) for p in parts)
        if size > self._options.max_frame:
            raise FrameTooLarge(size, self._options.max_frame, authenticated=True)
        async with self._lock:
            await self._write(parts, FrameKind.MESSAGE)

    async def _write(self, parts: Sequence[Chunk], kind: FrameKind) -> None:
        if self._closed:
            raise ConnectionClosed(f"connection to {self.peer} is closed")
        try:
            self._stream.write_frame(parts, kind)
            self._last_send = self._loop.time()
            await self._stream.drain()
        except (ConnectionError, OSError, RuntimeError) as e:
            await self.close()
            if isinstance(e, ConnectionClosed):
                raise
            raise ConnectionClosed(f"sending to {self.peer} failed: {e}") from None

    async def recv(self) -> object:
        while True:
            if self._closed:
                raise ConnectionClosed(f"connection to {self.peer} is closed")
            try:
                async with asyncio.timeout(self._options.read_timeout):
                    frame = await self._stream.read_frame()
                if frame.kind == FrameKind.KEEPALIVE:
                    continue
                return decode_incoming(frame.body, self._role, self._side)
            except TimeoutError:
                await self.close()
                raise ConnectionClosed(
                    f"no frame from {self.peer} for {self._options.read_timeout} s"
                ) from None
            except (ConnectionError, ProtocolError):
                await self.close()
                raise

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._keepalive is not asyncio.current_task():
            self._keepalive.cancel()
        self._stream.close()
        await self._stream.wait_closed()

    async def _keep_alive(self) -> None:
        interval = self._options.keepalive_interval
        try:
            while not self._closed:
                idle = self._loop.time() - self._last_send
                await asyncio.sleep(max(interval - idle, interval / 10))
                if self._loop.time() - self._last_send >= interval and not self._lock.locked():
                    async with self._lock:
                        await self._write([], FrameKind.KEEPALIVE)
        except ConnectionClosed:
            return
