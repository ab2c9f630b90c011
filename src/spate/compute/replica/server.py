"""The compute replica's protocol server: connections in, the state machine, actions out.

:class:`ComputeReplica` is the transport handler (:func:`spate.protocol.transport.serve`) of a
compute replica. For every authenticated connection it feeds each received command to the
:class:`~spate.compute.replica.state.ReplicaState` and performs the resulting actions: responses
go to the connection's outbox (one sender task per connection keeps them in order; a response
too large for one frame becomes an error answer to that peek or subscribe alone, and any other
failure to send is logged and resets the connection, so the controller reconnects), dataflow
work goes to the :class:`~spate.compute.replica.runtime.ComputeRuntime`. Events from the
runtime are fed back to the state the same way. Everything touching the state runs on the
event loop thread, so the state needs no locks.

* A newer controller epoch replaces the older connection (the transport closes it); commands
  of the old one that are still in flight are ignored by the state.
* A ``ProtocolError`` (a command out of its stage, a reused peek uuid) closes the connection;
  the replica keeps its dataflows and waits for the next controller.
* ``Halt`` (an incompatible ``CreateInstance``, a duplicate export): the replica stops serving
  at once, closes the connection and calls ``on_halt`` (the process exits, see ``main``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Final, cast

from spate.compute.replica.actions import Action, Event, Halt, Send
from spate.compute.replica.metrics import ReplicaMetrics
from spate.compute.replica.runtime import ComputeRuntime
from spate.compute.replica.state import ReplicaState
from spate.errors import ProtocolError
from spate.frontier.antichain import Antichain
from spate.persist import latency_trace
from spate.protocol.compute import (
    ComputeCommand,
    Frontiers,
    InitializationComplete,
    PeekError,
    PeekResponse,
    SubscribeBatch,
    SubscribeResponse,
)
from spate.protocol.connection import Connection
from spate.protocol.errors import ConnectionClosed, FrameTooLarge

_log: Final = logging.getLogger("spate.compute.replica")

_STOP: Final = object()


class _Outbox:
    """Responses for one connection, sent in order by one task."""

    def __init__(self, conn: Connection, metrics: ReplicaMetrics) -> None:
        self.conn = conn
        self._queue: asyncio.Queue[object] = asyncio.Queue()
        self._metrics = metrics
        self.task = asyncio.create_task(self._run(), name=f"spate-compute-send-{conn.epoch}")

    def put(self, response: object) -> None:
        self._queue.put_nowait(response)

    async def _run(self) -> None:
        while True:
            item = await self._queue.get()
            if item is _STOP:
                return
            try:
                try:
                    await self.conn.send(item)
                except FrameTooLarge as e:
                    instead = _instead_of_oversized(item, e)
                    if instead is None:
                        raise
                    _log.warning("epoch=%d: %s", self.conn.epoch, _message(instead))
                    item = instead
                    await self.conn.send(item)
            except ConnectionClosed:
                return
            except Exception:
                # A response that cannot be sent would leave the controller waiting forever on
                # a connection that looks alive: reset it, so the controller reconnects.
                _log.exception(
                    "epoch=%d: sending %s failed; resetting the connection",
                    self.conn.epoch,
                    type(item).__name__,
                )
                await self.conn.close()
                return
            self._metrics.response(item)
            if isinstance(item, SubscribeResponse) and isinstance(item.response, SubscribeBatch):
                upper = item.response.upper.as_option()
                latency_trace.mark("subscribe_sent", item.id, -1 if upper is None else upper)

    async def stop(self) -> None:
        self._queue.put_nowait(_STOP)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.task, 5.0)


def _instead_of_oversized(item: object, error: FrameTooLarge) -> object | None:
    """The error answer that replaces a peek or subscribe response too large for a frame."""
    why = (
        f"its encoded size of {error.length} bytes exceeds the largest frame of "
        f"{error.maximum} bytes; narrow the read (a filter, a limit, fewer columns)"
    )
    if isinstance(item, PeekResponse):
        return PeekResponse(item.uuid, PeekError(f"the result of peek {item.uuid} failed: {why}"))
    if isinstance(item, SubscribeResponse) and isinstance(item.response, SubscribeBatch):
        batch = item.response
        message = (
            f"the changes of subscribe {item.id} in [{batch.lower}, {batch.upper}) failed: {why}"
        )
        return SubscribeResponse(
            item.id, SubscribeBatch(batch.lower, Antichain.empty(), None, error=message)
        )
    return None


def _message(response: object) -> str:
    if isinstance(response, PeekResponse) and isinstance(response.response, PeekError):
        return response.response.message
    if isinstance(response, SubscribeResponse) and isinstance(response.response, SubscribeBatch):
        return response.response.error or ""
    return repr(response)


class ComputeReplica:
    """A compute replica: the transport handler around state and runtime (module docs).

    Create it, then ``await start()`` (starts the runtime), pass :meth:`handle` to
    ``serve(...)``, and ``await close()`` at the end.
    """

    def __init__(
        self,
        *,
        state: ReplicaState,
        runtime_factory: Callable[[Callable[[Event], None]], ComputeRuntime],
        metrics: ReplicaMetrics,
        on_halt: Callable[[str], None],
    ) -> None:
        self.state = state
        self.metrics = metrics
        self.runtime = runtime_factory(self.post)
        self._on_halt = on_halt
        self._outboxes: dict[int, _Outbox] = {}
        self._background: set[asyncio.Future[None]] = set()
        self._reporter: asyncio.Future[None] | None = None
        self.halted: str | None = None

    @property
    def name(self) -> str:
        return self.state.name

    async def start(self, *, warm_up: bool = True) -> None:
        await self.runtime.start(warm_up=warm_up)
        self._reporter = asyncio.ensure_future(self._report_statistics())

    async def _report_statistics(self) -> None:
        """Every logging interval, the dataflows' statistics that changed (one response)."""
        while self.halted is None:
            await asyncio.sleep(self.state.logging_interval_s)
            try:
                self._perform(self.state.report_statistics())
            except Exception as e:  # informational: never stops the replica
                _log.error("replica=%s: reporting statistics: %r", self.name, e, exc_info=e)

    async def close(self) -> None:
        if self._reporter is not None:
            self._reporter.cancel()
        for box in list(self._outboxes.values()):
            await box.stop()
        await self.runtime.close()

    # -- connections --------------------------------------------------------------------------

    async def handle(self, conn: Connection) -> None:
        """Serve one authenticated controller connection until it closes."""
        if self.halted is not None:
            await conn.close()
            return
        epoch = conn.epoch
        box = _Outbox(conn, self.metrics)
        self._outboxes[epoch] = box
        _log.info("replica=%s epoch=%d: controller %s connected", self.name, epoch, conn.peer)
        try:
            self._perform(self.state.connect(epoch))
            while self.halted is None:
                # The connection decodes only compute commands (anything else is a ProtocolError).
                command = cast(ComputeCommand, await conn.recv())
                self.metrics.command(command)
                try:
                    actions = self.state.command(epoch, command)
                except ProtocolError as e:
                    _log.warning(
                        "replica=%s epoch=%d: protocol violation, closing: %s", self.name, epoch, e
                    )
                    raise
                self._perform(actions)
                if isinstance(command, InitializationComplete):
                    self.metrics.reconciliation(self.state.stats)
        finally:
            self._perform(self.state.disconnect(epoch))
            self._outboxes.pop(epoch, None)
            await box.stop()
            _log.info("replica=%s epoch=%d: connection closed", self.name, epoch)

    # -- actions and events -------------------------------------------------------------------

    def post(self, event: Event) -> None:
        """An event from the runtime (event loop thread)."""
        if self.halted is None:
            self._perform(self.state.handle(event))

    def _perform(self, actions: list[Action]) -> None:
        for a in actions:
            if isinstance(a, Send):
                box = self._outboxes.get(a.epoch)
                if box is not None:
                    box.put(a.response)
                    if isinstance(a.response, Frontiers) and a.response.output_frontier is not None:
                        self.metrics.frontier(a.response.id, a.response.output_frontier)
            elif isinstance(a, Halt):
                self._halt(a.reason)
                return
            else:
                self.runtime.execute(a)

    def _halt(self, reason: str) -> None:
        if self.halted is not None:
            return
        self.halted = reason
        _log.critical("replica=%s: halting: %s", self.name, reason)
        for box in self._outboxes.values():
            task = asyncio.ensure_future(box.conn.close())
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        self._on_halt(reason)
