"""The storage controller's state, sans-I/O: collections, read capabilities, instances, exports.

Events in — API calls (create an instance, connect a replica, install a collection or an
export, drop them, set read policies, acquire read holds), replica events tagged
``(instance, replica, epoch)`` (:meth:`StorageState.handle`), committed table appends and
uppers observed elsewhere (:meth:`StorageState.update_write_frontiers`) and maintenance
(:meth:`StorageState.maintain`, :meth:`StorageState.flush`). Actions out
(:mod:`.actions`) — commands for replicas, connect/disconnect requests, since downgrades,
collections to forget and shards to finalize, rows for the storage-managed collections —
collected by :meth:`StorageState.drain`. No sockets, persist handles, consensus or threads
inside: the :class:`~spate.storage.controller.controller.StorageController` carries the actions
out. Time comes from an injected clock, nonces from an injected id generator.

Each API entry point validates its whole input first; a call that raised changed nothing.

Guarantees (checked by the stateful property test):

* the since of a collection is the frontier of its read capabilities, never passes an
  outstanding read hold, and never regresses; neither does a write frontier;
* every ingestion and sink of an instance runs on exactly one replica, the one with the lowest
  id, and a replica is told to stop what it no longer runs (it is rehydrated);
* responses of a stale connection epoch change nothing; a changed since reaches persist
  (``DowngradeSince``) and the replica that runs the collection (``AllowCompaction``);
* a collection whose since reached ``{}`` is forgotten exactly once (``ForgetCollections``),
  and its shard is finalized once nothing uses it; the command history stays reduced.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Final

from spate.clock import Clock
from spate.frontier.antichain import Frontier
from spate.frontier.mutable import ChangeBatch
from spate.frontier.read_hold import ReadHold
from spate.frontier.read_policy import ReadPolicy
from spate.ids import GlobalId, IdGen, InstanceId, ReplicaId, ShardId
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
from spate.protocol.storage_desc import CollectionMetadata, IngestionDescription, SourceExport
from spate.repr.types import Row
from spate.storage.controller.actions import (
    Action,
    AppendManaged,
    DowngradeSince,
    FinalizeShards,
    ForgetCollections,
    ForgetExports,
    SetManaged,
    StartManaged,
    StopManaged,
)
from spate.storage.controller.collections import Capabilities, CollectionState
from spate.storage.controller.errors import (
    IdentifierMissing,
    InstanceExists,
    InstanceMissing,
    InstanceNotEmpty,
    InvalidUsage,
    ReplicaExists,
    ReplicaMissing,
)
from spate.storage.controller.exports import Exports
from spate.storage.controller.instance import StorageInstance
from spate.storage.controller.replica_client import (
    ReplicaConnected,
    ReplicaEvent,
    ReplicaFailed,
    StorageReplicaLocation,
)
from spate.storage.controller.statistics import StatisticsStore
from spate.storage.controller.types import (
    CollectionDescription,
    IngestionExport,
    IngestionSource,
    IntrospectionKind,
    IntrospectionSource,
)

_log: Final = logging.getLogger("spate.storage.controller")

NO_REPLICA_HINT: Final = "There is currently no replica running this {kind}"


class StorageState:
    """The pure state of one storage controller (module docs). Event-loop thread only."""

    def __init__(self, *, epoch: int, clock: Clock, ids: IdGen, read_only: bool) -> None:
        self.epoch = epoch
        self._clock = clock
        self._ids = ids
        self.read_only = read_only
        self.caps = Capabilities()
        self.instances: dict[InstanceId, StorageInstance] = {}
        self.object_instance: dict[GlobalId, InstanceId] = {}
        """Ingestion or sink id → the instance that runs it."""
        self.collection_instance: dict[GlobalId, InstanceId] = {}
        """Collection or export id → the instance whose replica writes it."""
        self.statuses: dict[GlobalId, StatusUpdate] = {}
        self.error_counts: dict[GlobalId, int] = {}
        self.statistics = StatisticsStore()
        self.unfinalized: set[ShardId] = set()
        self.exports = Exports(self)
        self._deferred_runs: dict[InstanceId, list[RunIngestion | RunSink]] = {}
        self._params = StorageParameters()
        self._initialized = False
        self._out: list[Action] = []
        self._advanced: list[GlobalId] = []

    # -- the sans-I/O interface -------------------------------------------------------------------

    def drain(self) -> list[Action]:
        """The actions emitted since the last drain, in order."""
        out = list(self._out)
        self._out.clear()
        return out

    def take_advanced(self) -> list[GlobalId]:
        """Collections and exports whose upper advanced since the last call (once each)."""
        out, self._advanced = self._advanced, []
        ids = [id for id in dict.fromkeys(out) if self.has(id)]
        return ids

    def emit(self, action: Action) -> None:
        self._out.append(action)

    def has(self, id: GlobalId) -> bool:
        return id in self.caps.collections or id in self.caps.exports

    def upper_of(self, id: GlobalId) -> Frontier:
        if id in self.caps.collections:
            return self.caps.collections[id].write_frontier
        return self.caps.exports[id].write_frontier

    # -- configuration and instances --------------------------------------------------------------

    def initialization_complete(self) -> None:
        self._initialized = True
        for inst in self.instances.values():
            inst.send(InitializationComplete())

    def update_configuration(self, params: StorageParameters) -> None:
        self._params = self._params.update(params)
        for inst in self.instances.values():
            inst.send(UpdateConfiguration(params))

    def allow_writes(self) -> None:
        self.read_only = False
        for inst in self.instances.values():
            inst.send(AllowWrites())

    def create_instance(self, id: InstanceId) -> None:
        if id in self.instances:
            raise InstanceExists(id)
        inst = StorageInstance(id, controller_epoch=self.epoch, ids=self._ids, out=self._out)
        self.instances[id] = inst
        if not self._params.is_empty():
            inst.send(UpdateConfiguration(self._params))
        for command in self._deferred_runs.pop(id, []):
            inst.send(command)
        for obj, since in self._compaction_state(id):
            inst.send(AllowCompaction(obj, since))
        if self._initialized:
            inst.send(InitializationComplete())
        if not self.read_only:
            inst.send(AllowWrites())

    def _compaction_state(self, instance: InstanceId) -> list[tuple[GlobalId, Frontier]]:
        out = []
        for obj, inst in self.object_instance.items():
            if inst != instance:
                continue
            state = self.caps.collections.get(obj)
            if state is not None and not state.since.is_empty():
                out.append((obj, state.since))
        return out

    def drop_instance(self, id: InstanceId) -> None:
        inst = self.instances.get(id)
        if inst is None:
            raise InstanceMissing(id)
        running = [o for o, i in self.object_instance.items() if i == id]
        if running:
            raise InstanceNotEmpty(id, running)
        inst.close()
        del self.instances[id]

    def connect_replica(
        self, instance: InstanceId, replica: ReplicaId, location: StorageReplicaLocation
    ) -> None:
        inst = self.instances.get(instance)
        if inst is None:
            raise InstanceMissing(instance)
        if replica in inst.replicas:
            raise ReplicaExists(instance, replica)
        inst.add_replica(replica, location)

    def drop_replica(self, instance: InstanceId, replica: ReplicaId) -> None:
        inst = self.instances.get(instance)
        if inst is None:
            raise InstanceMissing(instance)
        if replica not in inst.replicas:
            raise ReplicaMissing(instance, replica)
        inst.drop_replica(replica)

    def run(self, instance: InstanceId, command: RunIngestion | RunSink) -> None:
        """Send ``command`` to ``instance`` (kept until the instance exists)."""
        inst = self.instances.get(instance)
        if inst is None:
            self._deferred_runs.setdefault(instance, []).append(command)
            return
        inst.send(command)

    def close(self) -> None:
        """Disconnect every replica (the controller shuts down)."""
        for inst in self.instances.values():
            inst.close()

    # -- collections ------------------------------------------------------------------------------

    def live(self, id: GlobalId) -> CollectionState:
        """A live collection (``IdentifierMissing`` if unknown or dropped)."""
        state = self.caps.collections.get(id)
        if state is None or state.dropped:
            raise IdentifierMissing(id)
        return state

    def collections(self) -> Iterator[tuple[GlobalId, CollectionState]]:
        for id, state in sorted(self.caps.collections.items()):
            if not state.dropped:
                yield id, state

    def install(
        self,
        id: GlobalId,
        description: CollectionDescription,
        shard: ShardId,
        *,
        since: Frontier,
        upper: Frontier,
    ) -> None:
        """Track a collection whose shard has ``since`` and ``upper`` (its since handle is the
        driver's). Ingestions are started by :meth:`start_ingestions`."""
        deps: tuple[GlobalId, ...] = ()
        if isinstance(description.data_source, IngestionExport):
            deps = (description.data_source.ingestion,)
        self.caps.add_collection(
            id, description, shard, since=since, upper=upper, dependencies=deps
        )
        source = description.data_source
        if isinstance(source, IntrospectionSource):
            self.emit(StartManaged(id, source.kind, shard, description.desc))
        elif isinstance(source, IngestionSource):
            self.object_instance[id] = source.instance
            self.collection_instance[id] = source.instance
            for eid in source.exports:
                self.collection_instance[eid] = source.instance

    def start_ingestions(self, ids: Sequence[GlobalId]) -> None:
        """Send ``RunIngestion`` for the ingestions among ``ids`` (their exports installed)."""
        for id in ids:
            source = self.caps.collections[id].description.data_source
            if isinstance(source, IngestionSource):
                self.run(source.instance, RunIngestion(id, self._ingestion_description(id)))

    def _ingestion_description(self, id: GlobalId) -> IngestionDescription:
        state = self.caps.collections[id]
        source = state.description.data_source
        assert isinstance(source, IngestionSource)
        exports = []
        for eid, reference in sorted(source.exports.items()):
            e = self.caps.collections[eid]
            exports.append(SourceExport(eid, reference, e.shard, e.description.desc))
        return IngestionDescription(
            source.connection,
            tuple(exports),
            CollectionMetadata(id, state.shard, state.description.desc),
            source.timestamp_interval_ms,
        )

    def drop_collections(self, ids: Sequence[GlobalId], *, validate: bool = True) -> None:
        """Give up the implied capabilities of ``ids`` (an ingestion drops its exports with
        it); once no hold remains the since is ``{}`` and ``flush`` forgets them.
        ``IdentifierMissing`` for an unknown or dropped id, unless not ``validate`` (skipped)."""
        if validate:
            for id in ids:
                self.live(id)
        todo: list[GlobalId] = []
        for id in ids:
            state = self.caps.collections.get(id)
            if state is None or state.dropped:
                continue
            todo.append(id)
            if isinstance(state.description.data_source, IngestionSource):
                todo.extend(state.description.data_source.exports)
        for id in sorted(set(todo), reverse=True):
            state = self.caps.collections.get(id)
            if state is None or state.dropped:
                continue  # an ingestion's export dropped (and forgotten) before it
            self.caps.drop_collection(id)
            if isinstance(state.description.data_source, IntrospectionSource):
                self.emit(StopManaged(id))

    def set_read_policy(self, policies: Sequence[tuple[GlobalId, ReadPolicy]]) -> None:
        for id, policy in policies:
            self.live(id)
            if not isinstance(policy, ReadPolicy):
                raise InvalidUsage(f"{id}: not a read policy: {policy!r}")
        self.caps.set_read_policies(list(policies))

    def update_write_frontiers(self, updates: Sequence[tuple[GlobalId, Frontier]]) -> None:
        """Advance write frontiers (regressions ignored) of collections written outside the
        controller and exports. ``IdentifierMissing`` for an unknown id."""
        for id, _ in updates:
            if not self.has(id):
                raise IdentifierMissing(id)
        self.observe_uppers(updates)

    def observe_uppers(self, uppers: Sequence[tuple[GlobalId, Frontier]]) -> None:
        """Uppers the driver observed: committed table appends, managed collections written,
        shards of collections written elsewhere (regressions and unknown ids ignored)."""
        self._advanced.extend(self.caps.update_write_frontiers(list(uppers)))

    def has_advanced(self) -> bool:
        return bool(self._advanced)

    def update_read_capabilities(self, changes: Mapping[GlobalId, ChangeBatch[int]]) -> None:
        for id in changes:
            if id not in self.caps.collections:
                raise IdentifierMissing(id)
        self.caps.update_read_capabilities(changes)

    def acquire_read_holds(self, ids: Sequence[GlobalId]) -> list[ReadHold]:
        return self.caps.acquire_read_holds(list(ids))

    # -- replica events ---------------------------------------------------------------------------

    def handle(self, event: ReplicaEvent) -> None:
        """Apply one replica event; a stale epoch (or a dropped replica) changes nothing."""
        inst = self.instances.get(event.instance)
        if inst is None or inst.current_epoch(event.replica) != event.epoch:
            return
        if isinstance(event, ReplicaConnected):
            inst.connected(event.replica, event.epoch)
            return
        if isinstance(event, ReplicaFailed):
            inst.failed(event.replica, event.epoch)
            return
        response = event.response
        if isinstance(response, FrontierUpper):
            self._advanced.extend(self.caps.update_write_frontiers([(response.id, response.upper)]))
        elif isinstance(response, StatisticsUpdates):
            self.statistics.apply(response, event.replica)
        elif isinstance(response, StatusUpdate):
            # An ingestion's or sink's, or an ingestion export's that ceased on its own.
            if response.id in self.object_instance or response.id in self.collection_instance:
                self.status_row(response.id, response.status, response.error, event.replica)
        elif isinstance(response, DroppedId):
            _log.info("storage replica %s dropped %s", event.replica, response.id)

    def status_row(
        self,
        id: GlobalId,
        status: ObjectStatus,
        error: str | None,
        replica: ReplicaId | None = None,
        hints: tuple[str, ...] = (),
    ) -> None:
        """Record a status of ingestion, sink or ingestion export ``id`` (and append it to its
        history)."""
        last = self.statuses.get(id)
        if last is not None and last.status is ObjectStatus.DROPPED:
            return  # "dropped" supersedes everything
        kind = (
            IntrospectionKind.SINK_STATUS_HISTORY
            if id in self.caps.exports
            else IntrospectionKind.SOURCE_STATUS_HISTORY
        )
        now_ms = self._clock.now_millis()
        occurred = dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=now_ms)
        details = json.dumps({"hints": list(hints)}) if hints else None
        who = None if replica is None else str(replica)
        self.emit(AppendManaged(kind, ((occurred, str(id), status.value, error, details, who),)))
        self.statuses[id] = StatusUpdate(id, status, now_ms, error, hints, replica_id=replica)
        if error is not None:
            self.error_counts[id] = self.error_counts.get(id, 0) + 1

    # -- maintenance ------------------------------------------------------------------------------

    def maintain(self) -> None:
        """Rehydrate failed replicas, report objects without a replica as paused, and state
        the desired contents of the differential storage-managed collections."""
        for inst in self.instances.values():
            inst.rehydrate_failed()
        self._paused_without_replicas()
        self.emit(
            SetManaged(IntrospectionKind.SOURCE_STATISTICS, tuple(self.statistics.source_rows()))
        )
        self.emit(SetManaged(IntrospectionKind.SINK_STATISTICS, tuple(self.statistics.sink_rows())))
        mapping = tuple((str(id), str(s.shard)) for id, s in self.collections())
        self.emit(SetManaged(IntrospectionKind.SHARD_MAPPING, mapping))
        self.emit(SetManaged(IntrospectionKind.FRONTIERS, tuple(self._frontier_rows())))

    def _frontier_rows(self) -> list[Row]:
        rows: list[Row] = []
        for id, s in self.caps.collections.items():
            if not s.dropped:
                rows.append((str(id), s.since.as_option(), s.write_frontier.as_option()))
        for id, e in self.caps.exports.items():
            if not e.dropped:
                rows.append((str(id), e.read_capability.as_option(), e.write_frontier.as_option()))
        return rows

    def _paused_without_replicas(self) -> None:
        for obj, instance in self.object_instance.items():
            inst = self.instances.get(instance)
            if inst is not None and inst.replicas:
                continue
            last = self.statuses.get(obj)
            if last is not None and last.status in (ObjectStatus.PAUSED, ObjectStatus.DROPPED):
                continue
            kind = "sink" if obj in self.caps.exports else "source"
            hint = NO_REPLICA_HINT.format(kind=kind)
            self.status_row(obj, ObjectStatus.PAUSED, None, hints=(hint,))

    def flush(self) -> None:
        """Push every changed since: ``DowngradeSince`` (collections) and ``AllowCompaction``
        to the instance that runs it; forget collections whose since reached ``{}`` and
        dropped exports; ask to finalize what is unfinalized."""
        pending = self.caps.take_pending()
        gone: list[GlobalId] = []
        for id, since in sorted(pending.items()):
            if id in self.caps.collections:
                self.emit(DowngradeSince(id, since))
                if since.is_empty():
                    gone.append(id)
            instance = self.collection_instance.get(id)
            if instance is not None and instance in self.instances:
                self.instances[instance].send(AllowCompaction(id, since))
        if gone:
            self._forget(gone)
        self.exports.forget_dropped()
        if gone:
            self.finalize_pending()

    def _forget(self, ids: list[GlobalId]) -> None:
        shards = tuple((id, self.caps.collections[id].shard) for id in ids)
        self.emit(ForgetCollections(shards))
        for id in ids:
            state = self.caps.collections.pop(id)
            self.collection_instance.pop(id, None)
            if isinstance(state.description.data_source, IngestionSource):
                self.status_row(id, ObjectStatus.DROPPED, None)
                self.object_instance.pop(id, None)
            self.unfinalized.add(state.shard)
        self.statistics.forget(set(ids))

    def finalizable(self) -> tuple[ShardId, ...]:
        """The unfinalized shards no live collection uses (none in read-only mode)."""
        if self.read_only or not self.unfinalized:
            return ()
        live = {s.shard for s in self.caps.collections.values()}
        return tuple(sorted(s for s in self.unfinalized if s not in live))

    def finalize_pending(self) -> None:
        """Ask to finalize every unfinalized shard no live collection uses."""
        todo = self.finalizable()
        if todo:
            self.emit(FinalizeShards(todo))

    def finalized(self, shards: Sequence[ShardId]) -> None:
        """The driver finalized ``shards`` (and removed them from the durable metadata)."""
        self.unfinalized.difference_update(shards)

    def forget_exports(self, ids: Sequence[GlobalId]) -> None:
        """Dropped exports leave the state (after ``ForgetExports``)."""
        self.emit(ForgetExports(tuple(ids)))
        for id in ids:
            self.caps.exports.pop(id)
            self.object_instance.pop(id, None)
            self.collection_instance.pop(id, None)
        self.statistics.forget(set(ids))

    def replica_connected(self, instance: InstanceId, replica: ReplicaId) -> bool:
        inst = self.instances.get(instance)
        r = None if inst is None else inst.replicas.get(replica)
        return r is not None and r.connected
