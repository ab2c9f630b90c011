"""Portals and cursors: a bound statement's rows, handed out a few at a time.

A portal over a finished result keeps the rows and an offset. A portal over a stream
(SUBSCRIBE) owns a :class:`StreamPump`: a thread that iterates the engine's stream and passes
each batch's rows to the event loop through a bounded queue, so a slow client slows the pump
(and the subscription) instead of buffering without bound. Stopping the pump ends the stream
from the pump's own thread (the stream's contract) once its current wait returns.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import threading
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any, Final

import pyarrow as pa

from spate.pgwire.engine import Bound, Stream
from spate.pgwire.errors import PgError
from spate.sql import Parsed

log = logging.getLogger(__name__)

QUEUE_BATCHES: Final = 8

RowValues = tuple[Any, ...]


def table_rows(table: pa.Table) -> list[RowValues]:
    if table.num_columns == 0:
        return [() for _ in range(table.num_rows)]
    cols = [c.to_pylist() for c in table.columns]
    return list(zip(*cols, strict=True))


class _End:
    def __init__(self, error: BaseException | None) -> None:
        self.error = error


class StreamPump:
    """Moves a :class:`Stream`'s batches from a thread of its own onto the loop."""

    def __init__(
        self, stream: Stream, loop: asyncio.AbstractEventLoop, name: str, *, max_stall: float
    ) -> None:
        self.schema = stream.schema
        self._max_stall = max_stall
        self._failure: PgError | None = None
        self._stream = stream
        self._loop = loop
        self._queue: asyncio.Queue[list[RowValues] | _End] = asyncio.Queue(QUEUE_BATCHES)
        self._stop = threading.Event()
        self.finished = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"pgwire-stream-{name}", daemon=True)
        self._thread.start()

    def _put(self, item: list[RowValues] | _End) -> bool:
        fut = asyncio.run_coroutine_threadsafe(self._queue.put(item), self._loop)
        waited = 0.0
        while True:
            try:
                fut.result(timeout=0.2)
                return True
            except FutureTimeout:
                waited += 0.2
                if self._stop.is_set():
                    fut.cancel()
                    return False
                if waited >= self._max_stall:
                    # A client that stops reading must not hold the subscription (and the
                    # read holds behind it) for ever.
                    fut.cancel()
                    self._failure = PgError(
                        "53400",
                        f"the client read this subscription too slowly: nothing was taken "
                        f"for {self._max_stall:g} s, so it was ended",
                    )
                    self._loop.call_soon_threadsafe(self._offer_end)
                    return False
            except RuntimeError:  # the loop is gone
                return False

    def _run(self) -> None:
        error: BaseException | None = None
        try:
            for batch in self._stream.batches:
                if self._stop.is_set():
                    break
                if not self._put(table_rows(batch)):
                    break
        except Exception as e:
            error = e
        finally:
            try:
                self._stream.close()
            except Exception:
                log.exception("closing a stream failed")
            self.finished.set()
        if not self._stop.is_set() and self._failure is None:
            with contextlib.suppress(RuntimeError):
                self._put(_End(error))

    def _offer_end(self) -> None:
        if self._failure is not None and not self._queue.full():
            self._queue.put_nowait(_End(self._failure))

    def stop(self) -> None:
        """Ask the pump to end the stream; it does so when the stream next yields."""
        self._stop.set()

    async def next_rows(self, timeout: float | None) -> list[RowValues] | None:
        """The rows of the next batch (possibly none: progress), or ``None`` at the end.

        Raises the stream's error, and ``TimeoutError`` when nothing came within ``timeout``.
        """
        if self._failure is not None and self._queue.empty():
            raise self._failure
        if timeout is None:
            item = await self._queue.get()
        else:
            item = await asyncio.wait_for(self._queue.get(), timeout)
        if isinstance(item, _End):
            self._queue.put_nowait(item)  # every later call sees the end too
            if item.error is not None:
                raise item.error
            return None
        return item

    def ready_rows(self) -> list[RowValues] | None:
        """Rows already queued, without waiting (``None`` at the end)."""
        out: list[RowValues] = []
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if isinstance(item, _End):
                self._queue.put_nowait(item)
                if item.error is not None:
                    raise item.error
                return out or None
            out.extend(item)
        return out


@dataclass(slots=True)
class Portal:
    """A bound statement ready to run, or a cursor part way through its rows."""

    sql: str
    formats: tuple[int, ...]
    schema: pa.Schema | None = None
    rows: list[RowValues] | None = None
    tag: str = ""
    offset: int = 0
    pump: StreamPump | None = None
    pending: collections.deque[RowValues] = field(default_factory=collections.deque)
    done: bool = False
    ran: bool = False
    cursor: bool = False  # declared with DECLARE (closed at the end of the transaction)
    parsed: Parsed | None = None
    """``sql`` as the SQL layer split it (``None``: not yet; a bound text is split once)."""
    bound: Bound | None = None
    """The Execute of a prepared statement with parameters this portal is (its values)."""
    plain: bool = False
    """A statement the engine runs (a ``SELECT``), known from its prepared statement: not
    looked at again for a session statement."""

    def close(self) -> None:
        if self.pump is not None:
            self.pump.stop()
            self.pump = None
