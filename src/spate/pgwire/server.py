"""The listening server: accepts connections, runs a :class:`Session` for each.

One event loop (uvloop's where it is installed: :mod:`spate.pgwire.eventloop`) owns every
socket, all parsing and all encoding; engine calls run on a
bounded thread pool. CancelRequests find their session through a registry keyed by
(pid, secret). A listen address that is not loopback is refused unless a password is
configured (SCRAM-SHA-256), so the server never trusts the network.

Every connection costs the server a bounded amount: its startup (SSL, startup packet,
authentication) must end within ``startup_timeout`` seconds, and at most ``max_startups``
connections may be starting at once (beyond that the one waiting longest is closed), so
sockets that send nothing, or a byte at a time, neither pile up nor keep real clients out.
A session counts against ``max_connections`` from its startup packet on, as in PostgreSQL;
beyond it a new client gets ``53300`` and is closed.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from spate.pgwire import eventloop
from spate.pgwire.auth import AuthConfigError, ScramVerifier, is_loopback
from spate.pgwire.engine import Engine
from spate.pgwire.session import Reader, Session, SessionOptions

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 6875
    password: str | None = field(default=None, repr=False)
    ssl_context: ssl.SSLContext | None = None
    max_connections: int = 256
    max_message_bytes: int = 16 * 1024 * 1024
    workers: int = 64
    max_stream_stall: float = 300.0  # seconds a subscription may wait on a client not reading
    statement_timeout_ms: int = 0  # the sessions' default statement_timeout (0: none)
    startup_timeout: float = 60.0  # seconds from connecting to ReadyForQuery (PostgreSQL's
    # authentication_timeout)
    max_startups: int = 1024  # connections in their startup at once (beyond: the oldest closes)


def check_config(config: ServerConfig) -> None:
    """Refuse a configuration that would trust the network (raises :class:`AuthConfigError`)."""
    if config.password is None and not is_loopback(config.host):
        raise AuthConfigError(
            f"listening on {config.host} needs a password (SCRAM-SHA-256): without one "
            "only loopback addresses are allowed"
        )


class Server:
    """A PostgreSQL protocol server over ``engine``. ``start`` binds; ``close`` stops."""

    def __init__(self, engine: Engine, config: ServerConfig) -> None:
        check_config(config)
        self._engine = engine
        self._config = config
        verifier = ScramVerifier.from_password(config.password) if config.password else None
        self._options = SessionOptions(
            max_message_bytes=config.max_message_bytes,
            verifier=verifier,
            ssl_context=config.ssl_context,
            max_stream_stall=config.max_stream_stall,
            default_cluster=getattr(engine, "default_cluster", lambda: "default"),
            statement_timeout_ms=config.statement_timeout_ms,
            startup_timeout=config.startup_timeout,
            admit=self._admit,
        )
        self._executor = ThreadPoolExecutor(config.workers, thread_name_prefix="pgwire-engine")
        self._sessions: dict[tuple[int, int], Session] = {}
        self._open = 0
        self._starting: dict[asyncio.Task[None], None] = {}  # in arrival order
        self._admitted: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        assert self._server is not None
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    @property
    def sessions(self) -> int:
        return self._open

    @property
    def starting(self) -> int:
        """Connections still in their startup (not yet admitted as sessions)."""
        return len(self._starting)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()

        def protocol() -> asyncio.StreamReaderProtocol:  # asyncio.start_server's, our Reader
            return asyncio.StreamReaderProtocol(
                Reader(limit=2**20, loop=loop), self._accept, loop=loop
            )

        self._server = await loop.create_server(
            protocol,
            self._config.host,
            self._config.port,
            backlog=min(4096, self._config.max_connections + self._config.max_startups),
        )
        log.info("pgwire listening on %s:%d", self._config.host, self.port)

    async def serve_forever(self) -> None:
        assert self._server is not None
        await self._server.serve_forever()

    async def close(self) -> None:
        """Stop listening; tell every open session (57P01) and close it."""
        if self._server is not None:
            self._server.close()
        for session in list(self._sessions.values()):
            session.shutdown()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._open += 1
        self._starting[task] = None
        if len(self._starting) > self._config.max_startups:
            oldest = next(iter(self._starting))
            self._starting.pop(oldest)
            oldest.cancel()  # closes its socket (below)
        try:
            session = Session(
                reader,
                writer,
                engine=self._engine,
                executor=self._executor,
                options=self._options,
                register=self._register,
                unregister=self._unregister,
                cancel=self._cancel,
            )
            await session.run()
        except asyncio.CancelledError:
            writer.close()
        except Exception:
            log.exception("a pgwire connection failed")
            writer.close()
        finally:
            self._open -= 1
            self._tasks.discard(task)
            self._starting.pop(task, None)
            self._admitted.discard(task)

    def _admit(self) -> bool:
        """A connection's startup packet arrived: make it a session if there is room."""
        task = asyncio.current_task()
        assert task is not None
        self._starting.pop(task, None)
        if len(self._admitted) >= self._config.max_connections:
            return False
        self._admitted.add(task)
        return True

    def _register(self, s: Session) -> None:
        self._sessions[(s.pid, s.secret)] = s

    def _unregister(self, s: Session) -> None:
        self._sessions.pop((s.pid, s.secret), None)

    def _cancel(self, pid: int, secret: int) -> None:
        s = self._sessions.get((pid, secret))
        if s is not None:
            s.cancel()


class ServerThread:
    """A :class:`Server` on an event loop in a thread of its own (tests, embedding); uvloop's
    where it is installed (:mod:`spate.pgwire.eventloop`)."""

    def __init__(self, engine: Engine, config: ServerConfig) -> None:
        self._loop = eventloop.new_event_loop()
        self.server = Server(engine, config)
        self._thread = threading.Thread(target=self._loop.run_forever, name="pgwire", daemon=True)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self._loop).result(30)

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def native_id(self) -> int:
        """The operating system's id of the loop's thread (to place it on a CPU)."""
        tid = self._thread.native_id
        assert tid is not None  # started in __init__
        return tid

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.close(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
