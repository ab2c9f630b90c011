"""The controller's client of one replica connection, generic over command and response types.

A controller keeps one client per ``(replica, epoch)``. The client:

* **connects**, retrying forever with exponential backoff (:class:`Backoff`): the replica may
  still be starting, or refuse us for now (a wrong secret an operator may fix, a newer epoch we
  must not steal by bumping ours). Every attempt uses the client's own epoch;
* **sends** the commands the controller queued, in order. Commands queued before the connection
  is up are kept, never lost, so the replayed history always arrives first and whole;
* **reports** to its :class:`ClientListener`: ``connected()`` once, then ``response(r)`` for each
  response in arrival order, then at most one ``failed(reason)`` — the connection closed, a send
  failed, or the replica sent something that is not a response of this protocol. After
  ``failed`` it reports nothing more, and a client the controller closed reports nothing at all.

The controller rehydrates a failed replica with a new client and the next epoch; the client
never has to know whether it is still wanted.

Everything that touches the world is injected: how a connection is opened (``open``; the
authenticated transport in production, an in-memory pair in tests), how to wait (``sleep``) and
what time it is (``clock``), so the backoff and the connection's lifetime are testable without
sockets or real time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Final, Generic, Protocol, TypeVar, cast

from spate.clock import Clock, SystemClock
from spate.errors import ProtocolError
from spate.protocol.errors import AuthenticationFailed, EpochRefused
from spate.tasks import cancel_and_wait

_log: Final = logging.getLogger("spate.protocol.replica_client")

C = TypeVar("C")
C_contra = TypeVar("C_contra", contravariant=True)
R = TypeVar("R")
R_contra = TypeVar("R_contra", contravariant=True)


@dataclass(frozen=True, slots=True)
class Backoff:
    """Delays between connection attempts: ``initial_s``, doubling, capped at ``max_s``."""

    initial_s: float = 0.05
    max_s: float = 1.0

    def __post_init__(self) -> None:
        if not 0 < self.initial_s <= self.max_s:
            raise ValueError(f"backoff needs 0 < initial ({self.initial_s}) <= max ({self.max_s})")

    def delays(self) -> Iterator[float]:
        delay = self.initial_s
        while True:
            yield delay
            delay = min(delay * 2, self.max_s)


DEFAULT_BACKOFF: Final = Backoff()


class ClientConnection(Protocol[C_contra]):
    """An established, authenticated, ordered connection to a replica."""

    async def send(self, message: C_contra) -> None: ...

    async def recv(self) -> object: ...

    async def close(self) -> None: ...


class ClientListener(Protocol[R_contra]):
    """Where a client reports (module docs); called on the event loop, must not block."""

    def connected(self) -> None: ...

    def response(self, response: R_contra) -> None: ...

    def failed(self, reason: str) -> None: ...


class ReplicaClient(Generic[C, R]):
    """The client of one ``(replica, epoch)`` (module docs). Create it inside the running event
    loop; ``name`` says which replica and epoch it serves, for logs."""

    def __init__(
        self,
        *,
        name: str,
        open: Callable[[], Awaitable[ClientConnection[C]]],
        responses: tuple[type, ...],
        listener: ClientListener[R],
        backoff: Backoff = DEFAULT_BACKOFF,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Clock | None = None,
    ) -> None:
        self.name = name
        self._open = open
        self._responses = responses
        self._listener = listener
        self._backoff = backoff
        self._sleep = sleep
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._queue: asyncio.Queue[C] = asyncio.Queue()
        self._closed = False
        self.connect_attempts = 0
        self.connected_after_s: float | None = None
        """How long connecting took (``clock`` time from creation), once connected."""
        self._task = asyncio.get_running_loop().create_task(self._run(), name=name)

    def send(self, command: C) -> None:
        """Queue ``command``; never blocks, never raises (dropped once the client is closed)."""
        if not self._closed:
            self._queue.put_nowait(command)

    def close(self) -> None:
        """Stop: no more reports; the connection is closed in the background."""
        self._closed = True
        self._task.cancel()

    def done(self) -> bool:
        """Whether the client has ended (failed or closed)."""
        return self._task.done()

    async def wait_closed(self) -> None:
        # The client task is cancelled by close(); wait for it without swallowing our own
        # cancellation (spate.tasks).
        await asyncio.wait([self._task])

    async def _run(self) -> None:
        started = self._clock.monotonic()
        conn = await self._connect()
        if self._closed:
            await _close_quietly(conn)
            return
        self.connected_after_s = self._clock.monotonic() - started
        self._listener.connected()
        reason = await self._serve(conn)
        if not self._closed:
            _log.warning("replica connection lost: %s: %s", self.name, reason)
            self._listener.failed(reason)

    async def _connect(self) -> ClientConnection[C]:
        for delay in self._backoff.delays():
            self.connect_attempts += 1
            try:
                return await self._open()
            except asyncio.CancelledError:
                raise
            except (AuthenticationFailed, EpochRefused) as e:
                # Not transient, but retried: an operator may fix the secret, and a replica
                # that follows a newer controller must not be stolen by bumping our epoch.
                _log.error("replica refused us (retry in %.2fs): %s: %s", delay, self.name, e)
            except Exception as e:  # retried forever: the replica may still be starting
                _log.info(
                    "connecting to replica failed (attempt %d, retry in %.2fs): %s: %s",
                    self.connect_attempts,
                    delay,
                    self.name,
                    e,
                )
            await self._sleep(delay)
        raise AssertionError("backoff delays never end")

    async def _serve(self, conn: ClientConnection[C]) -> str:
        sender = asyncio.create_task(self._send_loop(conn))
        receiver = asyncio.create_task(self._recv_loop(conn))
        try:
            done, _ = await asyncio.wait({sender, receiver}, return_when=asyncio.FIRST_COMPLETED)
            error = next(iter(done)).exception()
            return f"{type(error).__name__}: {error}" if error is not None else "stopped"
        finally:
            await cancel_and_wait([sender, receiver])
            await _close_quietly(conn)

    async def _send_loop(self, conn: ClientConnection[C]) -> None:
        while True:
            await conn.send(await self._queue.get())

    async def _recv_loop(self, conn: ClientConnection[C]) -> None:
        while True:
            message = await conn.recv()
            if not isinstance(message, self._responses):
                raise ProtocolError(f"not a response of this protocol: {type(message).__name__}")
            if self._closed:
                return
            self._listener.response(cast(R, message))


async def _close_quietly(conn: ClientConnection[C]) -> None:
    with contextlib.suppress(Exception):
        await conn.close()
