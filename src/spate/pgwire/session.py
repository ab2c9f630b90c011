"""One client connection: startup, authentication, then the simple and extended query protocol.

The session owns its socket, its variables, its transaction status (``I`` idle, ``T`` in a
block, ``E`` failed block), its prepared statements and portals. Statements that belong to the
session (:mod:`spate.pgwire.statements`) never reach the engine; the rest (catalog queries
too: ``pg_catalog`` is the engine's) runs on the engine in a worker thread, so the event loop
keeps serving every other session. Output is buffered and written at ReadyForQuery, Flush, a
full buffer, and every streamed batch.

A prepared lookup's Bind, Describe, Execute and Sync, sent together, are answered together
when the engine has the result at once (``lookup_at_once``: its rows in memory): as the
bytes arrive, on the event loop, without waking the session's task (:class:`Reader`), every
answer in one write (:meth:`Session._answer_lookup`). Anything else about them (another
portal, a NULL, a value that does not decode, a transaction block, a read that must wait)
and they are handled one message at a time, as every other message is.

A CancelRequest (from another connection, carrying this session's key) ends the statement in
progress with ``57014``; so does ``statement_timeout`` (per engine call; 0: none); and a client
that closes its connection while a statement runs ends it too. Each time the engine is told
(:attr:`Context.canceled`), so that a read stops its work (its one-off dataflow is dropped on
the replicas); the session stays usable. A malformed message, an oversized one, or
an unknown message type is answered with a FATAL error and the connection is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import ssl
import struct
import threading
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, SupportsIndex, TypeVar

from sqlglot.tokenizer_core import TokenType

from spate.errors import EvaluationFailed
from spate.pgwire import codec, guc, statements
from spate.pgwire.binding import (
    BindShape,
    Prepared,
    bind,
    bind_values,
    binds_every_parameter,
    needs_description,
    param_types,
    value_decoders,
)
from spate.pgwire.commands import run_session_statement
from spate.pgwire.engine import Bound, Context, Described, Engine, Rows, Stream, Values
from spate.pgwire.errors import PgError, sqlstate_of
from spate.pgwire.host import SessionOptions as SessionOptions
from spate.pgwire.output import RowEncoder, field_descs
from spate.pgwire.portal import Portal, StreamPump, table_rows
from spate.pgwire.split import split_statements
from spate.pgwire.startup import DISPLAY, default_vars, handshake
from spate.sql import Parsed
from spate.sql.parameters import highest_parameter

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)
T = TypeVar("T")

FLUSH_BYTES: Final = 64 * 1024
WATCH_BYTES: Final = 1 << 20
"""How much a client may send while a statement runs and the session watches its connection
(it is kept for after the statement); beyond it, the session stops watching."""

READ_BYTES: Final = 64 * 1024
"""Read at most this much at a time from the client, beyond what a message needs."""

INLINE_CELLS: Final = 4096
"""A result of at most this many values is turned into rows on the event loop (a worker
thread's round trip costs more); a larger one on a worker thread."""

KEEP_ROWS: Final = 4096
"""A whole result of at most this many rows is encoded in one piece, and its encoding kept
for the next result that is the same list of rows (an answer kept by the engine)."""

ENCODED_BYTES: Final = 64 * 1024
"""Encodings of whole results kept per session (beyond it, all but the newest go): an
answer kept by the engine per key (a lookup's) is encoded once per session."""

OFF_LOOP_CHARS: Final = 8 * 1024
"""Statement text longer than this is split, classified and bound on a worker thread, so that
one client's huge statement never stalls the event loop (every other session)."""


_KINDS: Final = {c: bytes([c]) for c in b"".join(codec.FRONTEND_TYPES)}
"""Each frontend message type's byte, by its value (the message's first byte)."""

_LENGTH: Final = struct.Struct("!i")

_READY: Final = {status: codec.ready(status) for status in "ITE"}
"""ReadyForQuery for each transaction status, made once."""

_COMPLETE: Final = {f"SELECT {n}": codec.command_complete(f"SELECT {n}") for n in range(16)}
"""CommandComplete of the usual small SELECTs (a lookup's), made once."""

_EXECUTE_SYNC: Final = codec.msg(b"E", b"\0\0\0\0\0") + codec.msg(b"S")
"""Execute of every row of the unnamed portal, then Sync: what follows a lookup's Bind."""
_DESCRIBE_EXECUTE_SYNC: Final = codec.msg(b"D", b"P\0") + _EXECUTE_SYNC
"""Describe of the unnamed portal, Execute of every row of it, Sync (psycopg's, JDBC's)."""


_LookupAtOnce = Callable[[dict[str, object], tuple[object, ...], Context], Values | None]
"""An engine's ``lookup_at_once`` (:class:`~spate.pgwire.engine.Engine`)."""


@dataclass(frozen=True, slots=True)
class _Encoding:
    """A result's RowDescription message and its rows' encoder."""

    description: bytes
    encoder: RowEncoder


class Closed(Exception):
    """The connection ended (client went away, Terminate, or a fatal error)."""


class Reader(asyncio.StreamReader):
    """asyncio's stream reader, which first offers what arrives to :attr:`on_data` while
    that is set and nothing is buffered (a session waiting for its next message): the bytes
    it takes (answered already) are not buffered; the rest is, as usual."""

    on_data: Callable[[bytes], int] | None = None

    def feed_data(self, data: Iterable[SupportsIndex]) -> None:
        take = self.on_data
        if take is not None and isinstance(data, bytes) and data and not self._buffer:  # type: ignore[attr-defined]
            taken = take(data)
            if taken >= len(data):
                return
            if taken:
                data = data[taken:]
        super().feed_data(data)


class Session:
    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        engine: Engine,
        executor: Executor,
        options: SessionOptions,
        register: Callable[[Session], None],
        unregister: Callable[[Session], None],
        cancel: Callable[[int, int], None],
    ) -> None:
        self.reader, self.writer = reader, writer
        self._engine, self._executor = engine, executor
        self.options = options
        self._register, self._unregister, self.cancel_other = register, unregister, cancel
        self.pid = secrets.randbelow(2**31 - 1) + 1
        self.secret = secrets.randbits(31)
        self._out: list[bytes] = []
        self._out_len = 0
        self.vars: dict[str, str] = {}
        self._status = "I"
        self._statements: dict[str, Prepared] = {}
        self._portals: dict[str, Portal] = {}
        self._skip_to_sync = False
        self._ctx = Context(self.vars)
        self._running: asyncio.Future[Any] | None = None
        self._cancel_held = False  # a stream holds the last call's cancel event
        self._canceled = False
        self._unread = bytearray()  # what the client sent and the session has not read yet
        self._encoding: tuple[pa.Schema, tuple[int, ...], _Encoding] | None = None
        """The last result's columns, the format codes it was asked in, and its encoding."""
        self._encoded_rows: dict[int, tuple[list[Any], RowEncoder, bytes]] = {}
        """The DataRows of whole small results sent, by their rows' id: the rows (the same
        list is the same result: a kept answer given again) and their encoder. A cache of at
        most :data:`ENCODED_BYTES` of DataRows (``_encoded_bytes``)."""
        self._encoded_bytes = 0
        self._shape: BindShape | None = None
        """The shape of the last lookup's Bind of one value answered at once."""
        self._lookup: _LookupAtOnce | None = getattr(engine, "lookup_at_once", None)
        """The engine's ``lookup_at_once`` (``None``: it has none)."""
        peer = writer.get_extra_info("peername")
        self.peer = str(peer[0]) if isinstance(peer, tuple) else ""

    # -- I/O ---------------------------------------------------------------------------------------

    def send(self, data: bytes) -> None:
        self._out.append(data)
        self._out_len += len(data)

    async def flush(self) -> None:
        """Write what is buffered, in one write; wait for the client to take it only when the
        transport holds more than :data:`FLUSH_BYTES` not yet sent (or is closing: waiting
        then says the connection is lost), so an answer that fits in the socket costs no
        wait at all."""
        transport = self.writer.transport  # read each time: start_tls replaces it
        out = self._out
        if out:
            transport.write(out[0] if len(out) == 1 else b"".join(out))
            out.clear()
            self._out_len = 0
        if transport.get_write_buffer_size() > FLUSH_BYTES or transport.is_closing():
            await self.writer.drain()

    async def _maybe_flush(self) -> None:
        if self._out_len >= FLUSH_BYTES:
            await self.flush()

    async def read_exact(self, n: int) -> bytes:
        head = b""
        if self._unread:
            head = bytes(self._unread[:n])
            del self._unread[:n]
            if len(head) == n:
                return head
        try:
            return head + await self.reader.readexactly(n - len(head))
        except (asyncio.IncompleteReadError, ConnectionError) as e:
            raise Closed() from e

    def buffered(self) -> int:
        """How many bytes the client sent that nothing has read yet (asyncio's reader keeps
        its buffer private; there is no public way to ask it)."""
        pending: bytearray = getattr(self.reader, "_buffer", bytearray())
        return len(self._unread) + len(pending)

    async def read_message(self) -> tuple[bytes, bytes]:
        """The next message: its type and body. What the client has sent is read as it comes,
        many messages at a time (a Bind, Describe, Execute and Sync arrive together), and
        parsed from that buffer."""
        buf = self._unread
        if not buf:
            await self._fill(1)
        kind = _KINDS.get(buf[0])
        if kind is None:  # checked before the length, as PostgreSQL does
            raise codec.MalformedMessage(f"invalid frontend message type {bytes(buf[:1])!r}")
        if len(buf) < 5:
            await self._fill(5)
        (length,) = _LENGTH.unpack_from(buf, 1)
        size = length - 4
        if size < 0 or size > self.options.max_message_bytes:
            size = codec.check_length(
                length, limit=self.options.max_message_bytes, what=f"message {kind!r}"
            )
        end = 5 + size
        if len(buf) < end:
            await self._fill(end)
        body = bytes(buf[5:end])
        del buf[:end]
        return kind, body

    async def _fill(self, n: int) -> None:
        """Read until :attr:`_unread` holds ``n`` bytes, taking whatever else has arrived."""
        while len(self._unread) < n:
            try:
                data = await self.reader.read(max(READ_BYTES, n - len(self._unread)))
            except ConnectionError as e:
                raise Closed() from e
            if not data:
                raise Closed()
            self._unread += data

    async def fatal(self, sqlstate: str, message: str) -> None:
        self.send(codec.error_response("FATAL", sqlstate, message))
        with contextlib.suppress(ConnectionError):
            await self.flush()

    # -- lifecycle ---------------------------------------------------------------------------------

    async def run(self) -> None:
        try:
            if not await handshake(self):
                return
            self._register(self)
            await self._loop()
        except Closed:
            pass
        except codec.MessageTooLarge as e:
            await self.fatal("54000", str(e))
        except codec.MalformedMessage as e:
            await self.fatal("08P01", str(e))
        except PgError as e:
            await self.fatal(e.sqlstate, str(e))
        except (ConnectionError, ssl.SSLError):
            pass
        finally:
            self._unregister(self)
            for portal in self._portals.values():
                portal.close()
            self._portals.clear()
            self.writer.close()

    def shutdown(self) -> None:
        """The server is stopping: a FATAL 57P01 goes out before the connection closes."""
        with contextlib.suppress(ConnectionError, RuntimeError):
            self.writer.write(
                codec.error_response(
                    "FATAL", "57P01", "terminating connection due to administrator command"
                )
            )

    def cancel(self) -> None:
        """Cancel the statement in progress (a CancelRequest for this session's key); with
        nothing in progress it does nothing, as in PostgreSQL."""
        if self._running is not None and not self._running.done():
            self._canceled = True
            self._ctx.canceled.set()
            self._running.cancel()

    # -- the message loop ------------------------------------------------------------------------

    async def _loop(self) -> None:
        reader = self.reader
        hook = isinstance(reader, Reader) and self._lookup is not None
        take = self._take_lookups
        while True:
            if hook and not self._unread:  # waiting: lookups answered as they come
                assert isinstance(reader, Reader)
                reader.on_data = take
                try:
                    kind, body = await self.read_message()
                finally:
                    reader.on_data = None
            else:
                kind, body = await self.read_message()
            if kind == b"X":
                raise Closed()
            if kind == b"S":
                self._skip_to_sync = False
                self.send(_READY[self._status])
                await self.flush()
                continue
            if kind == b"Q":
                self._skip_to_sync = False
                await self._simple(codec.parse_query(body))
                self.send(_READY[self._status])
                await self.flush()
                continue
            if kind == b"H":
                await self.flush()
                continue
            if kind == b"B" and self._status == "I" and not self._skip_to_sync:
                taken = self._answer_lookup(body, self._unread, 0)
                if taken:
                    del self._unread[:taken]
                    await self.flush()
                    continue
            handler = self._extended.get(kind)
            if handler is None:
                if kind in (b"d", b"c", b"f"):  # stray COPY IN data: ignore, as PostgreSQL does
                    continue
                raise codec.MalformedMessage(f"unknown message type {kind!r}")
            if self._skip_to_sync:
                continue
            try:
                await handler(self, body)
            except codec.MalformedMessage:
                raise
            except Exception as e:
                self._error(e)
                self._skip_to_sync = True
            if self._out_len >= FLUSH_BYTES:  # inline: no coroutine per message
                await self.flush()

    def _error(self, e: BaseException, *, offset: int | None = None) -> None:
        """Answer ``e``; ``offset`` is where the failed statement starts in the query text,
        so that an error pointing into the statement gets PostgreSQL's position field."""
        position = hint = None
        if isinstance(e, (asyncio.CancelledError, TimeoutError)) and self._canceled:
            code, message = "57014", "canceling statement due to user request"
        else:
            code, message = sqlstate_of(e), str(e) or type(e).__name__
            if isinstance(e, EvaluationFailed):  # PostgreSQL's text (a subscribe's, a FETCH's)
                message = e.pg_message
            where, bare = getattr(e, "position", None), getattr(e, "message", None)
            if offset is not None and isinstance(where, int) and isinstance(bare, str):
                message, position = bare, offset + where
                found = getattr(e, "hint", None)
                hint = found if isinstance(found, str) else None
        if code == "XX000":
            log.error("internal error in session %d", self.pid, exc_info=e)
        self._canceled = False
        if self._status == "T":
            self._status = "E"
        detail = getattr(e, "detail", None)  # a constraint violation's Key (k)=(1) …
        self.send(
            codec.error_response(
                "ERROR",
                code,
                message,
                position=position,
                hint=hint,
                detail=detail if isinstance(detail, str) else None,
            )
        )

    async def _text(self, fn: Callable[[], T], size: int) -> T:
        """``fn``, work on statement text of ``size`` characters: off the loop if it is long."""
        if size <= OFF_LOOP_CHARS:
            return fn()
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn)

    async def _call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on a worker thread; a CancelRequest or the statement timeout ends the wait
        with 57014, the client closing its connection with 08006; each sets ``ctx.canceled``,
        so that the engine stops too."""
        self._fresh_cancel()
        return await self._wait(asyncio.get_running_loop().run_in_executor(self._executor, fn))

    def _fresh_cancel(self) -> None:
        """Give the next engine call a cancel event of its own (set stays set: see Context).
        The last call's is kept when it was never set and no stream it started holds it:
        that call is over (a call the session stops waiting for has its event set), so
        nothing else looks at it."""
        if self._ctx.canceled.is_set() or self._cancel_held:
            self._ctx.canceled = threading.Event()
            self._cancel_held = False

    async def _wait(self, fut: Awaitable[T]) -> T:
        """Await an engine call's ``fut`` (started with this call's ``ctx.canceled``) as
        :meth:`_call` does: a CancelRequest, the statement timeout or the client closing its
        connection set ``ctx.canceled`` and cancel ``fut``."""
        timeout = guc.timeout_seconds("statement_timeout", self.vars.get("statement_timeout", "0"))
        running: asyncio.Future[T] = asyncio.ensure_future(fut)
        self._running = running
        gone = asyncio.ensure_future(self._client_gone())
        waiting: set[asyncio.Future[Any]] = {running, gone}
        try:
            await asyncio.wait(waiting, timeout=timeout, return_when="FIRST_COMPLETED")
            if running.done():
                return running.result()
            self._ctx.canceled.set()
            running.cancel()
            if gone.done() and gone.result():
                # as PostgreSQL's client_connection_check_interval says it; nobody reads it,
                # and the session ends at its next read
                raise PgError("08006", "connection to client lost", fatal=True)
            raise PgError("57014", "canceling statement due to statement timeout")
        except asyncio.CancelledError:
            if self._canceled:
                raise PgError("57014", "canceling statement due to user request") from None
            raise
        finally:
            self._running = None
            self._send_notices()
            gone.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await gone

    def _send_notices(self) -> None:
        """The notices the engine raised (before the call's result or error, as PostgreSQL's
        come before them)."""
        for sqlstate, message in self._ctx.notices:
            self.send(codec.notice_response(message, sqlstate=sqlstate))
        self._ctx.notices.clear()

    async def _client_gone(self) -> bool:
        """Keep what the client sends (for :meth:`read_exact`) until it closes its connection
        (``True``) or has sent :data:`WATCH_BYTES` (``False``: no longer watched)."""
        while len(self._unread) < WATCH_BYTES:
            try:
                data = await self.reader.read(WATCH_BYTES)
            except ConnectionError:
                data = b""
            if not data:
                return True
            self._unread += data
        await asyncio.Future()  # watched no more: wait to be cancelled
        return False

    # -- simple query ------------------------------------------------------------------------------

    async def _simple(self, text: str) -> None:
        try:
            parts = await self._text(lambda: split_statements(text), len(text))
        except Exception as e:
            self._error(e, offset=0)
            return
        if not parts:
            self.send(codec.EMPTY_QUERY)
            return
        for start, parsed in parts:
            portal = Portal(parsed.sql, (), parsed=parsed)
            try:
                await self._run(portal, max_rows=0, describe=True)
            except Exception as e:
                self._error(e, offset=start)
                return
            finally:
                portal.close()
            await self._maybe_flush()

    # -- extended query ----------------------------------------------------------------------------

    async def _parse(self, body: bytes) -> None:
        m = codec.parse_parse(body)
        if m.name and m.name in self._statements:
            raise PgError("42P05", f'prepared statement "{m.name}" already exists')
        parts = await self._text(lambda: split_statements(m.query), len(m.query))
        if len(parts) > 1:
            raise PgError("42601", "cannot insert multiple commands into a prepared statement")
        parsed = parts[0][1] if parts else None
        prepared = Prepared(parsed.sql if parsed else "", m.param_oids, parsed=parsed)
        prepared.plain = _plain(parsed)
        self._statements[m.name] = prepared
        self.send(codec.PARSE_COMPLETE)

    def _statement(self, name: str) -> Prepared:
        try:
            return self._statements[name]
        except KeyError:
            raise PgError("26000", f'prepared statement "{name}" does not exist') from None

    def _portal(self, name: str) -> Portal:
        try:
            return self._portals[name]
        except KeyError:
            raise PgError("34000", f'portal "{name}" does not exist') from None

    async def _bind(self, body: bytes) -> None:
        m = codec.parse_bind(body)
        stmt = self._statement(m.statement)
        if needs_description(stmt, m):
            stmt.described = await self._describe_sql(stmt)
        size = len(stmt.sql) + 16 * len(m.params)
        text: str | Callable[[], str]
        if stmt.plain and m.params and size <= OFF_LOOP_CHARS and binds_every_parameter(stmt, m):
            # a prepared SELECT: its text with the values bound is made only if needed (the
            # engine's kept plan takes the values); the portal runs the Bound, not its text
            values, text = bind_values(stmt, m)
            sql = stmt.sql
        else:
            sql, values = await self._text(lambda: bind(stmt, m), size)
            text = sql
        if m.portal in self._portals:
            if m.portal:
                raise PgError("42P03", f'portal "{m.portal}" already exists')
            self._portals.pop("").close()
        parsed = stmt.parsed if not m.params else None  # bound values make a new text
        bound = None
        if m.params and stmt.parsed is not None:
            bound = Bound(stmt.parsed, values, text, stmt.plans)
        portal = Portal(sql, m.result_formats, parsed=parsed, bound=bound, plain=bool(stmt.plain))
        self._portals[m.portal] = portal
        self.send(codec.BIND_COMPLETE)

    def _take_lookups(self, data: bytes) -> int:
        """What arrives while the session waits for its next message with nothing unread
        (:class:`Reader`): the lookups at its start (each a Bind, a Describe or none, an
        Execute and a Sync) that the engine answers at once (:meth:`_answer_lookup`),
        answered and written now, without waking the session's task; how many bytes of
        ``data`` they took (the rest is read as usual)."""
        if self._status != "I" or self._skip_to_sync or self._unread:
            return 0
        transport = self.writer.transport
        if transport.is_closing() or transport.get_write_buffer_size() > FLUSH_BYTES:
            return 0  # the session's task waits for the client to take its answers
        limit = self.options.max_message_bytes
        at, n = 0, len(data)
        try:
            while n - at > 5 and data[at] == 0x42:  # a Bind
                (length,) = _LENGTH.unpack_from(data, at + 1)
                end = at + 1 + length
                if length < 4 or length - 4 > limit or end > n:
                    break
                taken = self._answer_lookup(data[at + 5 : end], data, end)
                if not taken:
                    break
                at = end + taken
        except Exception:  # read again by the session's task, which answers it as usual
            log.debug("a lookup is left to the session's task", exc_info=True)
        if at:
            out = self._out
            transport.write(b"".join(out))
            out.clear()
            self._out_len = 0
        return at

    def _answer_lookup(self, body: bytes, after: bytes | bytearray, at: int) -> int:
        """Answer a Bind (``body``) of the unnamed portal to a prepared ``SELECT``, with the
        Describe of that portal (or none), Execute of all its rows and Sync that follow it
        in what the client sent already (``after``, from ``at``), here and now, when the
        engine has the result at once (``lookup_at_once``: a kept lookup whose rows are in
        memory): their answers, ReadyForQuery last, added to the output, and the unnamed
        portal left as those messages leave it. Gives how many bytes of ``after`` those
        messages took; ``0``, having done nothing, when anything is otherwise (the messages
        are then handled one by one, as usual, which answers every error)."""
        if after.startswith(_DESCRIBE_EXECUTE_SYNC, at):
            describe, size = True, len(_DESCRIBE_EXECUTE_SYNC)
        elif after.startswith(_EXECUTE_SYNC, at):
            describe, size = False, len(_EXECUTE_SYNC)
        else:
            return 0
        if body[:1] != b"\0" or self._lookup is None:  # a named portal
            return 0
        shape = self._shape
        stmt: Prepared | None
        try:
            if shape is not None and shape.fits(body, self._statements):
                stmt, result_formats = shape.stmt, shape.result_formats
                values: tuple[object, ...] = (shape.decode(body[shape.value_at : -shape.tail]),)
            else:
                stmt, result_formats, values = self._bound_lookup(body)
        except Exception:  # a malformed Bind, a value that does not decode: answered as usual
            return 0
        if stmt is None:
            return 0
        self._fresh_cancel()
        answered = self._lookup(stmt.plans, values, self._ctx)
        if answered is None:
            return 0
        rows = answered.rows
        try:
            encoding = self._encoding_of(answered.schema, result_formats)
            data = self._whole(rows, encoding.encoder)
        except Exception:  # a value the encoder refuses: the Execute answers the error
            return 0
        old = self._portals.pop("", None)
        if old is not None:
            old.close()
        self._portals[""] = Portal(
            stmt.sql,
            result_formats,
            schema=answered.schema,
            tag=answered.tag,
            offset=len(rows),
            done=True,
            ran=True,
            plain=True,
        )
        out = self._out
        out.append(codec.BIND_COMPLETE)
        if describe:
            out.append(encoding.description)
        out.append(data)
        tag = f"SELECT {len(rows)}"
        out.append(_COMPLETE.get(tag) or codec.command_complete(tag))
        out.append(_READY[self._status])
        return size

    def _bound_lookup(
        self, body: bytes
    ) -> tuple[Prepared | None, tuple[int, ...], tuple[object, ...]]:
        """The prepared statement a lookup's Bind (``body``) binds, its result formats and its
        values decoded, when the Bind is one :meth:`_answer_lookup` may answer (else the
        statement is ``None``); a Bind of one value is kept as the session's
        :class:`~spate.pgwire.binding.BindShape`, so that the next one of that shape is read
        without parsing it.
        Raises for a malformed Bind or a value that does not decode."""
        m = codec.parse_bind(body)
        stmt = self._statements.get(m.statement)
        if (
            stmt is None
            or not stmt.plain
            or stmt.parsed is None
            or not m.params
            or None in m.params  # NULL: planned as usual
            or len(m.result_formats) > 1
            or len(stmt.sql) + 16 * len(m.params) > OFF_LOOP_CHARS
        ):
            return None, (), ()
        decoders = value_decoders(stmt, m)
        if decoders is None:
            return None, (), ()
        values = tuple([d(v) for d, v in zip(decoders, m.params, strict=True)])  # type: ignore[arg-type]
        if len(values) == 1:
            self._shape = BindShape.of(body, m, stmt, decoders[0])
        return stmt, m.result_formats, values

    async def _describe(self, body: bytes) -> None:
        m = codec.parse_target(body, "Describe")
        if m.kind == "S":
            stmt = self._statement(m.name)
            if stmt.described is None:
                stmt.described = await self._describe_sql(stmt)
            d = stmt.described
            oids = [o or 25 for o in d.param_oids]
            self.send(codec.parameter_description(oids))
            if d.schema is None:
                self.send(codec.NO_DATA)
            else:
                self.send(codec.row_description(field_descs(d.schema), [0] * len(d.schema)))
            return
        portal = self._portal(m.name)
        if portal.schema is None and not portal.ran:
            await self._prepare_portal(portal)
        if portal.schema is None:
            self.send(codec.NO_DATA)
        else:
            self.send(self._encoded(portal).description)

    async def _execute(self, body: bytes) -> None:
        m = codec.parse_execute(body)
        portal = self._portal(m.portal)
        try:
            await self._run(portal, max_rows=max(m.max_rows, 0), describe=False)
        except BaseException:
            portal.close()  # a portal that failed is done: end its stream now
            portal.done = True
            raise

    async def _close(self, body: bytes) -> None:
        m = codec.parse_target(body, "Close")
        if m.kind == "S":
            self._statements.pop(m.name, None)
        else:
            p = self._portals.pop(m.name, None)
            if p is not None:
                p.close()
        self.send(codec.CLOSE_COMPLETE)

    async def _function_call(self, body: bytes) -> None:
        raise PgError("0A000", "the function call message is not supported")

    _extended: Final[dict[bytes, Callable[[Session, bytes], Any]]] = {
        b"P": _parse,
        b"B": _bind,
        b"D": _describe,
        b"E": _execute,
        b"C": _close,
        b"F": _function_call,
    }

    # -- describing and running statements -----------------------------------------------------

    async def _describe_sql(self, prepared: Prepared) -> Described:
        sql, param_oids, parsed = prepared.sql, prepared.param_oids, prepared.parsed
        stmt = await self._text(lambda: statements.classify(parsed), len(sql))
        nparams = highest_parameter(parsed.tokens) if parsed is not None else 0
        if stmt is not None or not sql:
            schema = None
            if isinstance(stmt, statements.Show):
                schema = _show_schema(stmt.name)
            elif isinstance(stmt, statements.Fetch):
                schema = self._portal(stmt.name).schema
            return Described(param_types(param_oids, nparams), schema)
        by_parsed = getattr(self._engine, "describe_parsed", None)
        if by_parsed is not None and parsed is not None:  # split once: not split again
            d = await self._call(lambda: by_parsed(parsed, param_oids, self._ctx))
        else:
            d = await self._call(lambda: self._engine.describe(sql, param_oids, self._ctx))
        return Described(param_types(d.param_oids or param_oids, nparams), d.schema)

    async def _prepare_portal(self, portal: Portal) -> None:
        """Find the portal's columns: run it now (finished results) or describe it (streams)."""
        if portal.plain:
            await self._start(portal)
            return
        stmt = await self._text(lambda: _classify(portal), len(portal.sql))
        if stmt is not None:
            if isinstance(stmt, statements.Show):
                portal.schema = _show_schema(stmt.name)
            elif isinstance(stmt, statements.Fetch):
                portal.schema = self._portal(stmt.name).schema
            return
        if _is_subscribe(portal):
            d = await self._call(lambda: self._engine.describe(portal.sql, (), self._ctx))
            portal.schema = d.schema
            return
        await self._start(portal)

    async def _start(self, portal: Portal) -> None:
        """Run the portal's statement (once); keep its rows or its stream."""
        portal.ran = True
        sql = portal.sql
        result: Rows | Stream
        prepared = getattr(self._engine, "execute_prepared", None)
        if portal.bound is not None and portal.plain and prepared is not None:
            bound = portal.bound  # a prepared statement's Execute: the engine may keep its plan
            start = getattr(self._engine, "start_prepared", None)
            self._fresh_cancel()
            started = None if start is None else start(bound, self._ctx)
            if isinstance(started, Values):  # answered at once
                portal.schema, portal.rows, portal.tag = started.schema, started.rows, started.tag
                return
            if started is not None:  # awaited here: no worker thread
                result = await self._wait(started)
            else:
                result = await self._call(lambda: prepared(bound, self._ctx))
        elif portal.parsed is not None and (run := getattr(self._engine, "execute_parsed", None)):
            parsed = portal.parsed  # split once: the engine does not split it again
            at_once = getattr(self._engine, "start_parsed", None)
            answered = None
            if at_once is not None:
                self._fresh_cancel()
                answered = at_once(parsed, self._ctx)
            if answered is not None:  # answered at once, on the loop
                portal.schema, portal.rows = answered.schema, answered.rows
                portal.tag = answered.tag
                return
            result = await self._call(lambda: run(parsed, self._ctx))
        else:
            if portal.bound is not None:  # the statement's text with the values bound
                sql = portal.bound.sql
            elif portal.parsed is not None and portal.parsed.arguments:
                raise PgError(
                    "0A000", "EXECUTE with arguments needs an engine that runs parsed statements"
                )
            result = await self._call(lambda: self._engine.execute(sql, self._ctx))
        if isinstance(result, Stream):
            self._cancel_held = True
            portal.pump = StreamPump(
                result,
                asyncio.get_running_loop(),
                str(self.pid),
                max_stall=self.options.max_stream_stall,
            )
            portal.schema = result.schema
            portal.tag = "SUBSCRIBE"
            return
        portal.tag = result.tag
        if result.table is not None:
            portal.schema = result.table.schema
            table = result.table
            if table.num_rows * max(table.num_columns, 1) <= INLINE_CELLS:
                portal.rows = table_rows(table)  # a few values: not worth a worker thread
            else:
                portal.rows = await self._call(lambda: table_rows(table))
        else:
            portal.done = True

    async def _run(self, portal: Portal, *, max_rows: int, describe: bool) -> None:
        if portal.done and portal.ran and portal.rows is None:
            self.send(codec.command_complete(portal.tag))
            return
        stmt = None
        if not portal.plain:  # a prepared SELECT is no session statement, whatever is bound
            stmt = await self._text(lambda: _classify(portal), len(portal.sql))
        if self._status == "E" and not isinstance(stmt, (statements.Commit, statements.Rollback)):
            raise PgError(
                "25P02",
                "current transaction is aborted, commands ignored until end of transaction block",
            )
        if not portal.sql:
            self.send(codec.EMPTY_QUERY)
            return
        if stmt is not None:
            await self._session_statement(stmt, describe=describe, formats=portal.formats)
            return
        if not portal.ran:
            await self._start(portal)
        if describe and portal.schema is not None:
            self.send(self._encoded(portal).description)
        await self._send_rows(portal, max_rows)

    def _encoded(self, portal: Portal) -> _Encoding:
        """The RowDescription and row encoder of ``portal``'s columns in its formats."""
        assert portal.schema is not None
        return self._encoding_of(portal.schema, portal.formats)

    def _encoding_of(self, schema: pa.Schema, formats: tuple[int, ...]) -> _Encoding:
        """The RowDescription and row encoder of ``schema``'s columns in ``formats``; those
        of the last result are kept, for the same schema object (a kept lookup's, at every
        Execute) in the same formats."""
        kept = self._encoding
        if kept is not None and kept[0] is schema and kept[1] == formats:
            return kept[2]
        fmts = _formats(formats, len(schema))
        encoding = _Encoding(
            codec.row_description(field_descs(schema), fmts), RowEncoder(schema, fmts)
        )
        self._encoding = (schema, formats, encoding)
        return encoding

    async def _send_rows(self, portal: Portal, max_rows: int) -> None:
        if portal.schema is None:
            self.send(codec.command_complete(portal.tag))
            return
        enc = self._encoded(portal).encoder
        if portal.rows is not None:
            end = (
                len(portal.rows)
                if max_rows <= 0
                else min(len(portal.rows), portal.offset + max_rows)
            )
            if portal.offset == 0 and end == len(portal.rows) <= KEEP_ROWS:
                self.send(self._whole(portal.rows, enc))  # a whole small result: one piece
                if self._out_len >= FLUSH_BYTES:
                    await self.flush()
            else:
                for row in portal.rows[portal.offset : end]:
                    self.send(enc.row(row))
                    if self._out_len >= FLUSH_BYTES:
                        await self.flush()
            sent = end - portal.offset
            portal.offset = end
            if end < len(portal.rows):
                self.send(codec.PORTAL_SUSPENDED)
            else:
                tag = _select_tag(portal.tag, sent)
                done = _COMPLETE.get(tag)
                self.send(codec.command_complete(tag) if done is None else done)
                portal.rows, portal.done = None, True
            return
        assert portal.pump is not None
        sent = await self._stream(portal, lambda row: self.send(enc.row(row)), max_rows)
        if portal.done:
            self.send(codec.command_complete(f"SUBSCRIBE {sent}"))
        else:
            self.send(codec.PORTAL_SUSPENDED)

    def _whole(self, rows: list[Any], enc: RowEncoder) -> bytes:
        """The DataRows of ``rows``, kept for the next result that is the same list."""
        encoded = self._encoded_rows
        kept = encoded.get(id(rows))
        if kept is not None and kept[0] is rows and kept[1] is enc:
            return kept[2]
        data = b"".join([enc.row(row) for row in rows])
        self._encoded_bytes += len(data)
        if self._encoded_bytes > ENCODED_BYTES:
            encoded.clear()
            self._encoded_bytes = len(data)
        encoded[id(rows)] = (rows, enc, data)
        return data

    async def _stream(self, portal: Portal, emit: Callable[[Any], None], max_rows: int) -> int:
        """Send a stream's rows as they come until it ends, ``max_rows`` went, or a cancel."""
        assert portal.pump is not None
        sent = 0
        while portal.pending and (max_rows <= 0 or sent < max_rows):
            emit(portal.pending.popleft())
            sent += 1
        while max_rows <= 0 or sent < max_rows:
            await self.flush()
            rows = await self._wait_rows(portal, None)
            if rows is None:
                portal.done = True
                break
            for row in rows:
                if max_rows > 0 and sent >= max_rows:
                    portal.pending.append(row)
                else:
                    emit(row)
                    sent += 1
        return sent

    async def _wait_rows(self, portal: Portal, timeout: float | None) -> list[Any] | None:
        assert portal.pump is not None
        task = asyncio.ensure_future(portal.pump.next_rows(timeout))
        self._running = task
        try:
            return await task
        except asyncio.CancelledError:
            if self._canceled:
                raise PgError("57014", "canceling statement due to user request") from None
            raise
        finally:
            self._running = None

    # -- session statements ----------------------------------------------------------------------

    async def _session_statement(
        self, stmt: statements.SessionStatement, *, describe: bool, formats: tuple[int, ...]
    ) -> None:
        await run_session_statement(self, stmt, describe=describe, formats=formats)

    # Helpers the session-statement module uses.

    @property
    def status(self) -> str:
        return self._status

    @status.setter
    def status(self, value: str) -> None:
        self._status = value

    @property
    def portals(self) -> dict[str, Portal]:
        return self._portals

    async def engine_call(self, fn: Callable[[Engine, Context], T]) -> T:
        """``fn(engine, context)`` on a worker thread (COPY FROM STDIN's engine calls)."""
        return await self._call(lambda: fn(self._engine, self._ctx))

    async def engine_set(self, stmt: statements.Set) -> None:
        """Pass a SET or RESET of one of the engine's variables on to the engine, as the typed
        statement it was recognised as, if it takes them (``Engine.set_variable``)."""
        setter = getattr(self._engine, "set_variable", None)
        if setter is not None:
            await self._call(lambda: setter(stmt, self._ctx))

    async def engine_transaction(self, stmt: statements.TransactionControl) -> None:
        """Pass BEGIN, COMMIT, ROLLBACK and the savepoint statements on to the engine, as the
        typed statements they were recognised as, if it keeps transactions
        (``Engine.transaction``)."""
        control = getattr(self._engine, "transaction", None)
        if control is not None:
            await self._call(lambda: control(stmt, self._ctx))

    async def start_portal(self, portal: Portal) -> None:
        await self._start(portal)

    @property
    def prepared(self) -> dict[str, Prepared]:
        return self._statements

    async def describe_prepared(self, prepared: Prepared) -> Described:
        return await self._describe_sql(prepared)

    async def run_portal(self, portal: Portal, *, describe: bool) -> None:
        await self._run(portal, max_rows=0, describe=describe)

    async def stream_rows(self, portal: Portal, emit: Callable[[Any], None], max_rows: int) -> int:
        return await self._stream(portal, emit, max_rows)

    async def wait_rows(self, portal: Portal, timeout: float | None) -> list[Any] | None:
        return await self._wait_rows(portal, timeout)

    def set_var(self, name: str, value: str | None) -> None:
        if value is None:
            defaults = default_vars(
                self.vars["user"],
                self.vars["database"],
                "",
                self.options.server_version,
                self.options.default_cluster(),
                statement_timeout=guc.show_ms(self.options.statement_timeout_ms),
            )
            if name in defaults:
                self.vars[name] = defaults[name]
            else:
                self.vars.pop(name, None)
        else:
            self.vars[name] = value
        if name in statements.REPORTED:
            self.send(codec.parameter_status(DISPLAY.get(name, name), self.vars.get(name, "")))


def _formats(formats: tuple[int, ...], n: int) -> list[int]:
    if not formats:
        return [0] * n
    if len(formats) == 1:
        return [formats[0]] * n
    if len(formats) != n:
        raise PgError("08P01", f"{len(formats)} result formats for {n} columns")
    return list(formats)


def _show_schema(name: str) -> Any:
    import pyarrow as pa

    if name == "all":
        return pa.schema(
            [("name", pa.string()), ("setting", pa.string()), ("description", pa.string())]
        )
    return pa.schema([(name, pa.string())])


def _select_tag(tag: str, sent: int) -> str:
    if tag.startswith("SELECT") or not tag:
        return f"SELECT {sent}"
    return tag


def _parsed(portal: Portal) -> Parsed | None:
    """The portal's statement as the SQL layer split it (a bound text is split here, once)."""
    if portal.parsed is None and portal.sql:
        parts = split_statements(portal.sql)
        if len(parts) > 1:
            raise PgError("42601", "cannot insert multiple commands into a prepared statement")
        portal.parsed = parts[0][1] if parts else None
    return portal.parsed


def _plain(parsed: Parsed | None) -> bool:
    """Whether a prepared statement is a ``SELECT`` (never a session statement, whatever
    values are bound into it)."""
    if parsed is None or not parsed.tokens:
        return False
    return parsed.tokens[0].token_type is TokenType.SELECT and statements.classify(parsed) is None


def _classify(portal: Portal) -> statements.SessionStatement | None:
    return statements.classify(_parsed(portal))


def _is_subscribe(portal: Portal) -> bool:
    parsed = _parsed(portal)
    return (
        parsed is not None and bool(parsed.tokens) and parsed.tokens[0].text.upper() == "SUBSCRIBE"
    )
