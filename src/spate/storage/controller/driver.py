"""The storage controller's driver: replica responses, since propagation, maintenance.

Mixed into :class:`~spate.storage.controller.controller.StorageController`; everything here runs
inside ``process`` (spec §6.2 "ready / process"):

1. **responses** — ``FrontierUpper`` advances write frontiers (regressions are ignored),
   ``StatusUpdate`` goes to the status history, ``StatisticsUpdates`` replaces the statistics of
   its ``(id, replica, worker)``; responses of a stale connection epoch are dropped;
2. **maintenance** (every ``maintenance_interval_ms``) — rehydrate failed replicas, follow the
   uppers of collections written elsewhere, report objects without a replica as ``paused``,
   write the storage-managed collections, retry finalizations;
3. **flush** — push every changed since to persist (critical since handles, fenced by epoch)
   and as ``AllowCompaction`` to the instance running the collection; a collection whose since
   reached ``{}`` is forgotten: one metadata update removes its id → shard mapping and adds the
   shard to the unfinalized set, then the shard is finalized.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import json
import logging
from collections import deque
from dataclasses import dataclass
from typing import Final

from spate.clock import Clock
from spate.frontier.antichain import Frontier
from spate.ids import GlobalId, IdGen, InstanceId, ReplicaId, ShardId
from spate.persist.client import PersistClient
from spate.persist.errors import Fenced
from spate.persist.since import SinceHandle
from spate.protocol.storage import (
    AllowCompaction,
    DroppedId,
    FrontierUpper,
    ObjectStatus,
    StatisticsUpdates,
    StatusUpdate,
)
from spate.repr.types import Row
from spate.storage.controller.collection_manager import CollectionManager
from spate.storage.controller.collections import Capabilities
from spate.storage.controller.errors import ControllerFenced
from spate.storage.controller.finalization import finalize_shard
from spate.storage.controller.instance import StorageInstance
from spate.storage.controller.metadata import ControllerMetadata, MetadataStore
from spate.storage.controller.replica_client import (
    ReplicaConnected,
    ReplicaEvent,
    ReplicaFailed,
)
from spate.storage.controller.statistics import StatisticsStore
from spate.storage.controller.table_writes import TableWrites
from spate.storage.controller.types import IngestionSource, IntrospectionKind, OtherSource

_log: Final = logging.getLogger("spate.storage.controller")

NO_REPLICA_HINT: Final = "There is currently no replica running this {kind}"


@dataclass(frozen=True, slots=True)
class FrontierUpdates:
    """What ``process`` returns: collections and exports whose upper advanced."""

    updates: tuple[tuple[GlobalId, Frontier], ...]


class ControllerDriver:
    """The ``ready``/``process`` half of the storage controller (module docs)."""

    _persist: PersistClient
    _clock: Clock
    _ids: IdGen
    _read_only: bool
    _interval_s: float
    _meta: MetadataStore
    epoch: int
    _caps: Capabilities
    _since_handles: dict[GlobalId, SinceHandle]
    tables: TableWrites
    _advanced: list[GlobalId]
    _instances: dict[InstanceId, StorageInstance]
    _object_instance: dict[GlobalId, InstanceId]
    _collection_instance: dict[GlobalId, InstanceId]
    _inbox: deque[ReplicaEvent]
    _wakeup: asyncio.Event
    _statuses: dict[GlobalId, StatusUpdate]
    statistics: StatisticsStore
    _manager: CollectionManager
    _unfinalized: set[ShardId]
    _next_maintenance: float

    def _event(self, event: ReplicaEvent) -> None:
        self._inbox.append(event)
        self._wakeup.set()

    async def ready(self) -> None:
        """Wait until ``process`` has something to do (a response, or maintenance is due)."""
        if self._inbox or self._advanced:
            return
        timeout = max(0.0, self._next_maintenance - self._clock.monotonic())
        self._wakeup.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._wakeup.wait()

    async def process(self) -> FrontierUpdates | None:
        """Apply responses, run maintenance when due, push since changes; return the uppers
        that advanced. Raises ``ControllerFenced`` when a newer controller took over."""
        advanced, self._advanced = self._advanced, []
        while self._inbox:
            advanced.extend(self._apply(self._inbox.popleft()))
        if self._clock.monotonic() >= self._next_maintenance:
            self._next_maintenance = self._clock.monotonic() + self._interval_s
            advanced.extend(await self._maintain())
        await self._flush()
        ids = [
            id
            for id in dict.fromkeys(advanced)
            if id in self._caps.collections or id in self._caps.exports
        ]
        if not ids:
            return None
        return FrontierUpdates(tuple((id, self._upper_of(id)) for id in ids))

    def _upper_of(self, id: GlobalId) -> Frontier:
        if id in self._caps.collections:
            return self._caps.collections[id].write_frontier
        return self._caps.exports[id].write_frontier

    # -- responses ------------------------------------------------------------------------------

    def _apply(self, event: ReplicaEvent) -> list[GlobalId]:
        inst = self._instances.get(event.instance)
        if inst is None or inst.current_epoch(event.replica) != event.epoch:
            return []  # a stale epoch, or a dropped instance or replica
        if isinstance(event, ReplicaConnected):
            inst.connected(event.replica, event.epoch)
            return []
        if isinstance(event, ReplicaFailed):
            inst.failed(event.replica, event.epoch)
            return []
        response = event.response
        if isinstance(response, FrontierUpper):
            return self._caps.update_write_frontiers([(response.id, response.upper)])
        if isinstance(response, StatisticsUpdates):
            self.statistics.apply(response, event.replica)
        elif isinstance(response, StatusUpdate):
            if response.id in self._object_instance:
                self._status_row(response.id, response.status, response.error, event.replica)
        elif isinstance(response, DroppedId):
            _log.info("storage replica %s dropped %s", event.replica, response.id)
        return []

    def status(self, id: GlobalId) -> StatusUpdate | None:
        """The latest status of ingestion or sink ``id``."""
        return self._statuses.get(id)

    def _status_row(
        self,
        id: GlobalId,
        status: ObjectStatus,
        error: str | None,
        replica: ReplicaId | None = None,
        hints: tuple[str, ...] = (),
    ) -> None:
        last = self._statuses.get(id)
        if last is not None and last.status is ObjectStatus.DROPPED:
            return  # "dropped" supersedes everything
        kind = (
            IntrospectionKind.SINK_STATUS_HISTORY
            if id in self._caps.exports
            else IntrospectionKind.SOURCE_STATUS_HISTORY
        )
        now_ms = self._clock.now_millis()
        occurred = dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=now_ms)
        details = json.dumps({"hints": list(hints)}) if hints else None
        who = None if replica is None else str(replica)
        self._manager.append(kind, [(occurred, str(id), status.value, error, details, who)])
        self._statuses[id] = StatusUpdate(id, status, now_ms, error, hints, replica_id=replica)

    # -- maintenance ----------------------------------------------------------------------------

    async def _maintain(self) -> list[GlobalId]:
        for inst in self._instances.values():
            inst.rehydrate_failed()
        others = [
            (id, s.shard)
            for id, s in self._caps.collections.items()
            if isinstance(s.description.data_source, OtherSource) and not s.since.is_empty()
        ]
        uppers = await asyncio.to_thread(
            lambda: [(id, self._persist.fetch_state(shard).upper) for id, shard in others]
        )
        advanced = self._caps.update_write_frontiers(uppers)
        self._paused_without_replicas()
        m = self._manager
        m.set_desired(IntrospectionKind.SOURCE_STATISTICS, self.statistics.source_rows())
        m.set_desired(IntrospectionKind.SINK_STATISTICS, self.statistics.sink_rows())
        m.set_desired(
            IntrospectionKind.SHARD_MAPPING,
            [(str(id), str(s.shard)) for id, s in self._caps.collections.items() if not s.dropped],
        )
        m.set_desired(IntrospectionKind.FRONTIERS, self._frontier_rows())
        written = await asyncio.to_thread(m.tick)
        advanced.extend(self._caps.update_write_frontiers(written.items()))
        await self.tables.maintain()
        await self._finalize_pending()
        return advanced

    def _frontier_rows(self) -> list[Row]:
        rows: list[Row] = []
        for id, s in self._caps.collections.items():
            if not s.dropped:
                rows.append((str(id), s.since.as_option(), s.write_frontier.as_option()))
        for id, e in self._caps.exports.items():
            if not e.dropped:
                rows.append((str(id), e.read_capability.as_option(), e.write_frontier.as_option()))
        return rows

    def _paused_without_replicas(self) -> None:
        for obj, instance in self._object_instance.items():
            inst = self._instances.get(instance)
            if inst is not None and inst.replicas:
                continue
            last = self._statuses.get(obj)
            if last is not None and last.status in (ObjectStatus.PAUSED, ObjectStatus.DROPPED):
                continue
            kind = "sink" if obj in self._caps.exports else "source"
            hint = NO_REPLICA_HINT.format(kind=kind)
            self._status_row(obj, ObjectStatus.PAUSED, None, hints=(hint,))

    # -- flushing since changes -----------------------------------------------------------------

    async def _flush(self) -> None:
        pending = self._caps.take_pending()
        if not pending:
            return
        downgrades: list[tuple[SinceHandle, Frontier]] = []
        gone: list[GlobalId] = []
        for id, since in sorted(pending.items()):
            if id in self._caps.collections:
                handle = self._since_handles.get(id)
                if handle is not None:
                    downgrades.append((handle, since))
                if since.is_empty():
                    gone.append(id)
            instance = self._collection_instance.get(id)
            if instance is not None and instance in self._instances:
                self._instances[instance].send(AllowCompaction(id, since))
        if downgrades:
            await asyncio.to_thread(self._downgrade, downgrades)
        if gone:
            await self._forget(gone)
        await self._forget_exports()

    def _downgrade(self, downgrades: list[tuple[SinceHandle, Frontier]]) -> None:
        for handle, since in downgrades:
            try:
                handle.downgrade_since(since)
            except Fenced as e:
                raise ControllerFenced(
                    self.epoch, e.current_epoch, f"downgrading the since of {handle.shard_id}"
                ) from None

    async def _forget(self, ids: list[GlobalId]) -> None:
        """Collections whose since reached ``{}`` (module docs)."""
        shards = {id: self._caps.collections[id].shard for id in ids}

        def forget(meta: ControllerMetadata) -> ControllerMetadata:
            cols = {k: v for k, v in meta.collections.items() if k not in shards}
            unfinalized = tuple(dict.fromkeys([*meta.unfinalized, *shards.values()]))
            return dataclasses.replace(meta, collections=cols, unfinalized=unfinalized)

        await asyncio.to_thread(self._meta.update, forget)
        for id in ids:
            state = self._caps.collections.pop(id)
            self._since_handles.pop(id, None)
            self._collection_instance.pop(id, None)
            await self.tables.forget(id)
            if isinstance(state.description.data_source, IngestionSource):
                self._status_row(id, ObjectStatus.DROPPED, None)
                self._object_instance.pop(id, None)
            self._unfinalized.add(state.shard)
        self.statistics.forget(set(ids))
        await self._finalize_pending()

    async def _forget_exports(self) -> None:
        done = [id for id, e in self._caps.exports.items() if e.dropped]
        if not done:
            return

        def forget(meta: ControllerMetadata) -> ControllerMetadata:
            exports = {k: v for k, v in meta.exports.items() if k not in done}
            return dataclasses.replace(meta, exports=exports)

        await asyncio.to_thread(self._meta.update, forget)
        for id in done:
            self._caps.exports.pop(id)
            self._object_instance.pop(id, None)
            self._collection_instance.pop(id, None)
        self.statistics.forget(set(done))

    async def _finalize_pending(self) -> list[ShardId]:
        if self._read_only or not self._unfinalized:
            return []
        live = {s.shard for s in self._caps.collections.values()}
        done: list[ShardId] = []
        for shard in sorted(s for s in self._unfinalized if s not in live):
            finished = await asyncio.to_thread(
                finalize_shard, self._persist, shard, epoch=self.epoch, ids=self._ids
            )
            if finished:
                done.append(shard)
        if done:
            finished_set = set(done)

            def remove(meta: ControllerMetadata) -> ControllerMetadata:
                left = tuple(s for s in meta.unfinalized if s not in finished_set)
                return dataclasses.replace(meta, unfinalized=left)

            await asyncio.to_thread(self._meta.update, remove)
            self._unfinalized -= finished_set
        return done
