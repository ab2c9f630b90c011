"""The storage replica: runs the ingestions and sinks a storage controller asks for.

One :class:`StorageReplica` lives as long as the process; controllers connect to it through the
authenticated transport (``handle`` is the server's connection handler). Per connection, the
protocol stages are checked (:class:`~spate.protocol.stages.ReplicaStages`) before any command
acts. Objects keep running across reconnections:

* the replayed history (``RunIngestion``/``RunSink`` with unchanged descriptions) reuses what
  runs; a changed description restarts the object; after ``InitializationComplete`` every object
  the new history did not mention is stopped, and the replica re-reports the frontier and status
  of everything it runs;
* ``AllowCompaction(id, {})`` for an ingestion or a sink stops it, releases its upstream
  resources (a PostgreSQL slot) and answers ``DroppedId(id)``;
* nothing is written (persist or external systems) before ``AllowWrites``; until then an
  ingestion reports the uppers it reads from persist.

Responses: ``FrontierUpper`` whenever a collection's upper advances (never regressing on one
connection), ``StatusUpdate`` when an object's status changes (``starting``, ``running``,
``stalled`` with the error), ``StatisticsUpdates`` every ``statistics_interval_ms``. A failing
step marks its object ``stalled`` and is retried with backoff; a restarted replica rehydrates
every object from persist (ingestions resume exactly at their shards' uppers).
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
from spate.protocol.common import Hello
from spate.protocol.connection import Connection
from spate.protocol.errors import ConnectionClosed
from spate.protocol.stages import ReplicaStages
from spate.protocol.storage import (
    AllowCompaction,
    AllowWrites,
    DroppedId,
    FrontierUpper,
    InitializationComplete,
    ObjectStatus,
    RunIngestion,
    RunSink,
    StatisticsUpdates,
    StatusUpdate,
    StorageParameters,
    UpdateConfiguration,
)
from spate.protocol.storage_desc import IngestionDescription, SinkDescription
from spate.storage.replica.ingestion import IngestionRunner
from spate.storage.replica.objects import RunningObject
from spate.storage.replica.sink import SinkRunner
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
    """The long-lived state of a storage replica process (see the module docs)."""

    def __init__(self, ctx: ReplicaContext) -> None:
        self._ctx = ctx
        self._objects: dict[GlobalId, RunningObject] = {}
        self._params = StorageParameters()
        self._writes = asyncio.Event()
        self._conn: Connection | None = None
        self._reported: dict[GlobalId, Frontier] = {}
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
        stages = ReplicaStages("storage", epoch=conn.epoch)
        mentioned: set[GlobalId] = set()
        self._conn = conn
        self._reported = {}
        if self._stats_task is None or self._stats_task.done():
            self._stats_task = asyncio.create_task(self._statistics_loop())
        try:
            while True:
                command = await conn.recv()
                stages.observe(command)
                await self._apply(command, mentioned)
        except ConnectionClosed:
            pass
        except ProtocolError as e:
            _log.warning("storage replica: protocol error from %s: %s", conn.peer, e)
            raise
        finally:
            if self._conn is conn:
                self._conn = None

    async def _apply(self, command: object, mentioned: set[GlobalId]) -> None:
        if isinstance(command, Hello):
            return
        if isinstance(command, UpdateConfiguration):
            self._params = self._params.update(command.params)
        elif isinstance(command, (RunIngestion, RunSink)):
            mentioned.add(command.id)
            await self._run(command)
        elif isinstance(command, AllowCompaction):
            if command.frontier.is_empty() and command.id in self._objects:
                await self._drop(command.id)
        elif isinstance(command, InitializationComplete):
            for id in [i for i in self._objects if i not in mentioned]:
                _log.info("storage replica: stopping %s, which the controller no longer runs", id)
                await self._objects.pop(id).stop()
            await self._report_all()
        elif isinstance(command, AllowWrites):
            self._writes.set()

    async def _send(self, message: object) -> None:
        conn = self._conn
        if conn is None or conn.closed:
            return
        async with self._send_lock:
            with contextlib.suppress(ConnectionClosed):
                await conn.send(message)

    # -- objects ----------------------------------------------------------------------------------

    async def _run(self, command: RunIngestion | RunSink) -> None:
        existing = self._objects.get(command.id)
        if existing is not None:
            if existing.command == command:
                return
            await existing.stop()
        obj = RunningObject(command.id, command)
        if isinstance(command, RunIngestion):
            obj.collections = command.description.collection_ids(command.id)
            obj.task = asyncio.create_task(self._ingestion_loop(obj, command))
        else:
            obj.collections = (command.id,)
            obj.task = asyncio.create_task(self._sink_loop(obj, command))
        self._objects[command.id] = obj

    async def _drop(self, id: GlobalId) -> None:
        obj = self._objects.pop(id)
        runner = obj.runner
        await obj.stop()
        if isinstance(runner, IngestionRunner):
            reader = runner.reader
            drop = getattr(reader, "drop_upstream", None)
            if drop is not None:
                try:
                    await asyncio.to_thread(drop)
                except Exception as e:
                    _log.warning("storage replica: releasing upstream resources of %s: %s", id, e)
        for cid in obj.collections:
            self._reported.pop(cid, None)
        await self._send(DroppedId(id))

    async def _status(
        self, obj: RunningObject, status: ObjectStatus, error: str | None = None
    ) -> None:
        if obj.status is status and obj.error == error:
            return
        obj.status, obj.error = status, error
        await self._send(
            StatusUpdate(
                obj.id,
                status,
                self._ctx.clock.now_millis(),
                error=error,
                replica_id=self._ctx.replica_id,
            )
        )

    async def _report(self, uppers: dict[GlobalId, Frontier]) -> None:
        for id, upper in uppers.items():
            last = self._reported.get(id)
            if last is not None and not last.less_than(upper):
                continue
            self._reported[id] = upper
            await self._send(FrontierUpper(id, upper))

    async def _report_all(self) -> None:
        for obj in list(self._objects.values()):
            runner = obj.runner
            if isinstance(runner, IngestionRunner):
                await self._report(runner.uppers())
            elif isinstance(runner, SinkRunner) and runner.upper.as_option() != 0:
                await self._report({obj.id: runner.upper})
            if obj.status is not None:
                status, error = obj.status, obj.error
                obj.status = None
                await self._status(obj, status, error)

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
                        max_files_per_poll=self._params.file_max_files_per_tick or 1000,
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
                await self._report(await obj.in_thread(obj.runner.read_uppers))
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
            await self._report(runner.uppers())
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
                moved = await obj.in_thread(runner.step)
            except Exception as e:
                await self._stalled(obj, e)
                if runner is not None:
                    await obj.in_thread(runner.close)
                await asyncio.sleep(backoff)
                backoff = min(MAX_BACKOFF_S, backoff * 2)
                continue
            backoff = 0.5
            await self._status(obj, ObjectStatus.RUNNING)
            if (moved or obj.id not in self._reported) and runner.upper.as_option() != 0:
                await self._report({obj.id: runner.upper})
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
            interval = self._params.statistics_interval_ms or DEFAULT_STATISTICS_INTERVAL_MS
            await asyncio.sleep(interval / 1000)
            sources = []
            sinks = []
            for obj in list(self._objects.values()):
                if isinstance(obj.runner, IngestionRunner):
                    sources.extend(obj.runner.statistics())
                elif isinstance(obj.runner, SinkRunner):
                    sinks.append(obj.runner.statistics())
            if sources or sinks:
                await self._send(StatisticsUpdates(tuple(sources), tuple(sinks)))

    async def close(self) -> None:
        """Stop every object (they resume from persist in the next process)."""
        if self._stats_task is not None:
            self._stats_task.cancel()
            with contextlib.suppress(BaseException):
                await self._stats_task
        for obj in list(self._objects.values()):
            await obj.stop()
        self._objects.clear()
