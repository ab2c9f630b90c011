"""The storage replica's runtime: runs the ingestions and sinks a storage controller asks for.

One :class:`StorageReplica` lives as long as the process; controllers connect to it through the
authenticated transport (``handle`` is the server's connection handler). What to run, stop and
report is decided by its sans-I/O :class:`~spate.storage.replica.state.ReplicaState` (protocol
stages, reconciliation across connections, frontier and status reports: see there); this module
carries the actions out — one asyncio task per object, whose blocking steps run in threads —
and feeds the state the objects' progress as events.

Each object's task retries a failing step with backoff (the object is reported ``stalled``
meanwhile); nothing is written before ``AllowWrites``, and until then an ingestion reports the
uppers it reads from persist. A restarted replica rehydrates every object from persist
(ingestions resume exactly at their shards' uppers).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, TypeVar

from spate.clock import Clock
from spate.errors import ProtocolError
from spate.frontier.antichain import Frontier
from spate.ids import GlobalId, IdGen, ReplicaId
from spate.persist.client import PersistClient
from spate.protocol.connection import Connection
from spate.protocol.errors import ConnectionClosed
from spate.protocol.storage import ObjectStatus, RunIngestion, RunSink
from spate.protocol.storage_desc import IngestionDescription, SinkDescription
from spate.storage.replica.ingestion import IngestionRunner
from spate.storage.replica.objects import RunningObject
from spate.storage.replica.sink import SinkRunner
from spate.storage.replica.state import (
    Action,
    EnableWrites,
    Event,
    ExportsFailed,
    ReplicaState,
    Send,
    StartObject,
    Statistics,
    StatusChanged,
    StopObject,
    Uppers,
)
from spate.storage.secrets import SecretsDir, resolve_with
from spate.storage.sources.open import open_reader
from spate.storage.sources.stash import Stash

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_log: Final = logging.getLogger("spate.storage.replica")

DEFAULT_STATISTICS_INTERVAL_MS: Final = 1000
SINK_STEP_MS: Final = 100
MAX_BACKOFF_S: Final = 10.0
_D = TypeVar("_D", IngestionDescription, SinkDescription)


@dataclass
class ReplicaContext:
    """What a storage replica needs from its process."""

    persist: PersistClient
    stash: Stash
    clock: Clock
    ids: IdGen
    replica_id: ReplicaId | None = None
    spark: Callable[[], SparkSession] | None = None
    sink_step_ms: int = SINK_STEP_MS
    secrets: SecretsDir | None = None
    """Where connections' :class:`~spate.protocol.secret.SecretRef` are read
    (:mod:`spate.storage.secrets`)."""


class StorageReplica:
    """The runtime of a storage replica process (see the module docs)."""

    def __init__(self, ctx: ReplicaContext) -> None:
        self._ctx = ctx
        self.state = ReplicaState(clock=ctx.clock, replica_id=ctx.replica_id)
        self._objects: dict[GlobalId, RunningObject] = {}
        self._writes = asyncio.Event()
        self._conn: Connection | None = None
        self._send_lock = asyncio.Lock()
        self._stats_task: asyncio.Task[None] | None = None

    # -- introspection (tests) ------------------------------------------------------------------

    def running(self) -> dict[GlobalId, RunningObject]:
        return dict(self._objects)

    @property
    def writes_allowed(self) -> bool:
        return self._writes.is_set()

    # -- connections ----------------------------------------------------------------------------

    async def handle(self, conn: Connection) -> None:
        """Serve one authenticated controller connection until it closes."""
        epoch = conn.epoch
        self._conn = conn
        await self._perform(self.state.connect(epoch))
        if self._stats_task is None or self._stats_task.done():
            self._stats_task = asyncio.create_task(self._statistics_loop())
        try:
            while True:
                command = await conn.recv()
                await self._perform(self.state.command(epoch, command))
        except ConnectionClosed:
            pass
        except ProtocolError as e:
            _log.warning("storage replica: protocol error from %s: %s", conn.peer, e)
            raise
        finally:
            if self._conn is conn:
                self._conn = None
                await self._perform(self.state.disconnect(epoch))

    # -- carrying out actions -------------------------------------------------------------------

    async def _perform(self, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, Send):
                await self._send(action.message)
            elif isinstance(action, StartObject):
                self._start(action.command)
            elif isinstance(action, StopObject):
                await self._stop(action.id, release_upstream=action.release_upstream)
            elif isinstance(action, EnableWrites):
                self._writes.set()
            # Configure: the parameters are read from the state where they are used.

    async def _event(self, obj: RunningObject, event: Event) -> None:
        """Report ``obj``'s progress, unless it no longer runs (a late report of a stopped
        or replaced object)."""
        if self._objects.get(obj.id) is obj:
            await self._perform(self.state.handle(event))

    async def _send(self, message: object) -> None:
        conn = self._conn
        if conn is None or conn.closed:
            return
        async with self._send_lock:
            with contextlib.suppress(ConnectionClosed):
                await conn.send(message)

    # -- objects ----------------------------------------------------------------------------------

    def _start(self, command: RunIngestion | RunSink) -> None:
        obj = RunningObject(command.id, command)
        if isinstance(command, RunIngestion):
            obj.collections = command.description.collection_ids(command.id)
            obj.task = asyncio.create_task(self._ingestion_loop(obj, command))
        else:
            obj.collections = (command.id,)
            obj.task = asyncio.create_task(self._sink_loop(obj, command))
        self._objects[command.id] = obj

    async def _stop(self, id: GlobalId, *, release_upstream: bool) -> None:
        obj = self._objects.pop(id, None)
        if obj is None:
            return
        if not release_upstream:
            _log.info("storage replica: stopping %s", id)
        runner = obj.runner
        await obj.stop()
        if release_upstream and isinstance(runner, IngestionRunner):
            drop = getattr(runner.reader, "drop_upstream", None)
            if drop is not None:
                try:
                    await asyncio.to_thread(drop)
                except Exception as e:
                    _log.warning("storage replica: releasing upstream resources of %s: %s", id, e)

    async def _status(
        self, obj: RunningObject, status: ObjectStatus, error: str | None = None
    ) -> None:
        obj.status, obj.error = status, error
        await self._event(obj, StatusChanged(obj.id, status, error))

    async def _report(self, obj: RunningObject, uppers: dict[GlobalId, Frontier]) -> None:
        await self._event(obj, Uppers(obj.id, uppers))

    async def _ingestion_loop(self, obj: RunningObject, command: RunIngestion) -> None:
        d = command.description
        backoff = 0.5
        await self._status(obj, ObjectStatus.STARTING)
        while obj.runner is None:
            try:
                d = self._resolved(d)
                reader = await obj.in_thread(
                    functools.partial(
                        open_reader,
                        d,
                        stash=self._ctx.stash,
                        spark=self._ctx.spark,
                        max_files_per_poll=self.state.params.file_max_files_per_tick or 1000,
                    )
                )
                obj.runner = IngestionRunner(
                    command.id,
                    d,
                    reader=reader,
                    persist=self._ctx.persist,
                    clock=self._ctx.clock,
                    ids=self._ctx.ids,
                )
                await self._report(obj, await obj.in_thread(obj.runner.read_uppers))
            except Exception as e:
                await self._stalled(obj, e)
                await asyncio.sleep(backoff)
                backoff = min(MAX_BACKOFF_S, backoff * 2)
        runner = obj.runner
        assert isinstance(runner, IngestionRunner)
        await self._writes.wait()
        backoff = 0.5
        while True:
            try:
                await obj.in_thread(runner.step)
            except Exception as e:
                await self._stalled(obj, e)
                await asyncio.sleep(backoff)
                backoff = min(MAX_BACKOFF_S, backoff * 2)
                continue
            backoff = 0.5
            await self._status(obj, ObjectStatus.RUNNING)
            await self._report(obj, runner.uppers())
            failed = await obj.in_thread(runner.failed_exports)
            if failed:
                await self._event(obj, ExportsFailed(obj.id, failed))
            await asyncio.sleep(d.timestamp_interval_ms / 1000)

    async def _sink_loop(self, obj: RunningObject, command: RunSink) -> None:
        await self._status(obj, ObjectStatus.STARTING)
        await self._writes.wait()
        runner: SinkRunner | None = None
        backoff = 0.5
        while True:
            try:
                if runner is None:
                    description = self._resolved(command.description)
                    runner = SinkRunner(command.id, description, persist=self._ctx.persist)
                    obj.runner = runner
                await obj.in_thread(runner.step)
            except Exception as e:
                await self._stalled(obj, e)
                if runner is not None:
                    await obj.in_thread(runner.close)
                await asyncio.sleep(backoff)
                backoff = min(MAX_BACKOFF_S, backoff * 2)
                continue
            backoff = 0.5
            await self._status(obj, ObjectStatus.RUNNING)
            if runner.upper.as_option() != 0:  # the state sends only what advanced
                await self._report(obj, {obj.id: runner.upper})
            if runner.done():
                return
            await asyncio.sleep(self._ctx.sink_step_ms / 1000)

    def _resolved(self, description: _D) -> _D:
        """``description`` with its connection's secret read from the secrets directory (at
        each attempt to start: the file may appear later)."""
        connection = resolve_with(self._ctx.secrets, description.connection)
        return dataclasses.replace(description, connection=connection)

    async def _stalled(self, obj: RunningObject, error: Exception) -> None:
        message = f"{type(error).__name__}: {error}"
        _log.warning("storage replica: %s %s stalled: %s", obj.kind, obj.id, message)
        await self._status(obj, ObjectStatus.STALLED, message)

    async def _statistics_loop(self) -> None:
        while True:
            interval = self.state.params.statistics_interval_ms or DEFAULT_STATISTICS_INTERVAL_MS
            await asyncio.sleep(interval / 1000)
            sources = []
            sinks = []
            for obj in list(self._objects.values()):
                if isinstance(obj.runner, IngestionRunner):
                    sources.extend(obj.runner.statistics())
                elif isinstance(obj.runner, SinkRunner):
                    sinks.append(obj.runner.statistics())
            await self._perform(self.state.handle(Statistics(tuple(sources), tuple(sinks))))

    async def close(self) -> None:
        """Stop every object (they resume from persist in the next process)."""
        if self._stats_task is not None:
            self._stats_task.cancel()
            with contextlib.suppress(BaseException):
                await self._stats_task
        for obj in list(self._objects.values()):
            await obj.stop()
        self._objects.clear()
