"""The storage controller: the public API over storage collections, exports and instances.

Spec §6.2. One ``StorageController`` per environment, used from one asyncio event loop:

    controller = StorageController(persist, open=tcp_opener)
    await controller.open()                      # claims an epoch, restores collections/exports
    controller.create_instance(InstanceId(1))
    controller.connect_replica(InstanceId(1), ReplicaId(1), location)
    await controller.create_collections([(source_id, ...), (export_id, ...)])
    await controller.reconcile_state()           # finalize leftovers of dropped collections
    controller.initialization_complete()
    controller.allow_writes()
    while True:
        await controller.ready()
        response = await controller.process()    # FrontierUpdates for the caller

Obligations of callers: call the API from the event loop's thread; keep calling ``ready`` /
``process`` (replica responses, since downgrades, finalization and the collection manager's
writes happen only there). Every method validates its whole input first and raises the narrow
errors of :mod:`spate.storage.controller.errors`; a call that raised changed nothing. Methods
that do persist I/O are ``async`` (they run it in threads); the rest are synchronous and
in-memory, as the compute controller requires of ``collection_frontiers``,
``acquire_read_holds`` and ``collection_metadata``: a ``StorageController`` is the compute
controller's :class:`~spate.compute.controller.storage.StorageCollections`.

**Fencing** (spec §7.4): ``open`` claims the next controller epoch in the durable metadata and
every critical since handle is claimed with it. When a newer controller takes over, this one's
next since downgrade or metadata update raises ``ControllerFenced`` out of ``process`` (or the
call): the caller MUST stop ("halt").
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Final

from spate.clock import Clock, SystemClock
from spate.frontier.antichain import Frontier
from spate.frontier.mutable import ChangeBatch
from spate.frontier.read_hold import ReadHold
from spate.frontier.read_policy import ReadPolicy
from spate.ids import GlobalId, IdGen, InstanceId, ReplicaId, ShardId, SystemIdGen
from spate.persist.client import PersistClient
from spate.persist.errors import AsOfBeforeSince, Fenced
from spate.persist.since import SinceHandle
from spate.protocol.storage import (
    AllowCompaction,
    AllowWrites,
    InitializationComplete,
    RunIngestion,
    RunSink,
    StatusUpdate,
    StorageParameters,
    UpdateConfiguration,
)
from spate.protocol.storage_desc import (
    CollectionMetadata,
    IngestionDescription,
    SourceExport,
)
from spate.repr.arrow import table_to_updates
from spate.repr.types import Row
from spate.storage.controller.collection_manager import CollectionManager
from spate.storage.controller.collections import Capabilities, CollectionState
from spate.storage.controller.errors import (
    ControllerFenced,
    IdentifierMissing,
    InstanceExists,
    InstanceMissing,
    InstanceNotEmpty,
    InvalidUsage,
    ReadBeforeSince,
    ReplicaExists,
    ReplicaMissing,
)
from spate.storage.controller.exports import ExportsApi
from spate.storage.controller.instance import StorageInstance
from spate.storage.controller.metadata import (
    ControllerMetadata,
    DurableCollection,
    MetadataStore,
)
from spate.storage.controller.replica_client import (
    OpenConnection,
    ReplicaEvent,
    StorageReplicaLocation,
    tcp_opener,
)
from spate.storage.controller.statistics import StatisticsStore
from spate.storage.controller.table_txn import INLINE_MAX_BYTES, TableTxnLog
from spate.storage.controller.table_writes import TableWrites
from spate.storage.controller.tables import TableUpdates
from spate.storage.controller.types import (
    CollectionDescription,
    IngestionExport,
    IngestionSource,
    IntrospectionSource,
)
from spate.storage.controller.validation import validate_collections
from spate.storage.interface import (
    StorageCollectionMetadata,
    StorageCollections,
    StorageFrontiers,
)

_log: Final = logging.getLogger("spate.storage.controller")

MAINTENANCE_INTERVAL_MS: Final = 1000


class StorageController(ExportsApi):
    """See the module docs."""

    def __init__(
        self,
        persist: PersistClient,
        *,
        open: OpenConnection = tcp_opener,
        clock: Clock | None = None,
        ids: IdGen | None = None,
        read_only: bool = False,
        maintenance_interval_ms: int = MAINTENANCE_INTERVAL_MS,
        inline_append_bytes: int = INLINE_MAX_BYTES,
    ) -> None:
        if maintenance_interval_ms <= 0:
            raise ValueError(f"maintenance interval must be > 0 ms, got {maintenance_interval_ms}")
        self._persist = persist
        self._open_connection = open
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._ids: IdGen = ids if ids is not None else SystemIdGen()
        self._read_only = read_only
        self._interval_s = maintenance_interval_ms / 1000.0
        self._meta = MetadataStore(persist.consensus)
        self.epoch = 0
        self._caps = Capabilities()
        self.tables = TableWrites(
            persist,
            TableTxnLog(persist, inline_max_bytes=inline_append_bytes),
            self._caps,
            ids=self._ids,
            live=self._live,
            on_uppers=self._table_uppers,
        )
        self.tables.read_only = read_only
        self._advanced: list[GlobalId] = []
        self._since_handles: dict[GlobalId, SinceHandle] = {}
        self._instances: dict[InstanceId, StorageInstance] = {}
        self._deferred_runs: dict[InstanceId, list[RunIngestion | RunSink]] = {}
        self._object_instance: dict[GlobalId, InstanceId] = {}
        self._collection_instance: dict[GlobalId, InstanceId] = {}
        self._params = StorageParameters()
        self._initialized = False
        self._inbox: deque[ReplicaEvent] = deque()
        self._wakeup = asyncio.Event()
        self._statuses: dict[GlobalId, StatusUpdate] = {}
        self.statistics = StatisticsStore()
        self._manager = CollectionManager(persist, self._clock, self._ids, read_only=read_only)
        self._unfinalized: set[ShardId] = set()
        self._next_maintenance = 0.0
        self._opened = False

    # -- boot -------------------------------------------------------------------------------------

    async def open(self, epoch: int | None = None) -> None:
        """Claim the next controller epoch (or ``epoch``, which must be newer) and restore every
        collection and export recorded in the durable metadata."""
        meta = await asyncio.to_thread(self._meta.open, epoch)
        self.epoch = meta.epoch
        self._unfinalized = set(meta.unfinalized)
        # A multi-table append left pending by a predecessor is finished before anything else.
        pending = await asyncio.to_thread(self.tables.txn.claim, meta.epoch)
        descs = {id: c.description.desc for id, c in meta.collections.items()}
        await self.tables.recover_intent(pending, descs)
        self._opened = True
        order = _dependency_order(meta.collections)
        for id in order:
            await self._install(id, meta.collections[id].description, meta.collections[id].shard)
        self._start_ingestions(order)
        for id, exp in sorted(meta.exports.items()):
            await self._restore_export(id, exp)

    def _check_open(self) -> None:
        if not self._opened:
            raise InvalidUsage("the storage controller is not open; await open() first")

    async def _install(
        self, id: GlobalId, description: CollectionDescription, shard: ShardId
    ) -> None:
        """Open the collection's critical since handle and start tracking it."""
        try:
            handle = await asyncio.to_thread(
                self._persist.open_critical_since, shard, epoch=self.epoch
            )
        except Fenced as e:
            raise ControllerFenced(self.epoch, e.current_epoch, f"opening shard {shard}") from None
        state = await asyncio.to_thread(self._persist.fetch_state, shard)
        deps: tuple[GlobalId, ...] = ()
        if isinstance(description.data_source, IngestionExport):
            deps = (description.data_source.ingestion,)
        since = handle.since.join(state.since)
        self._since_handles[id] = handle
        self._caps.add_collection(
            id, description, shard, since=since, upper=state.upper, dependencies=deps
        )
        source = description.data_source
        if isinstance(source, IntrospectionSource):
            self._manager.register(id, source.kind, shard, description.desc)
        elif isinstance(source, IngestionSource):
            self._object_instance[id] = source.instance
            self._collection_instance[id] = source.instance
            for eid in source.exports:
                self._collection_instance[eid] = source.instance

    def _start_ingestions(self, ids: Sequence[GlobalId]) -> None:
        """Send ``RunIngestion`` for the ingestions among ``ids`` (their exports installed)."""
        for id in ids:
            source = self._caps.collections[id].description.data_source
            if isinstance(source, IngestionSource):
                self._run(source.instance, RunIngestion(id, self._ingestion_description(id)))

    def _ingestion_description(self, id: GlobalId) -> IngestionDescription:
        state = self._caps.collections[id]
        source = state.description.data_source
        assert isinstance(source, IngestionSource)
        exports = []
        for eid, reference in sorted(source.exports.items()):
            e = self._caps.collections[eid]
            exports.append(SourceExport(eid, reference, e.shard, e.description.desc))
        return IngestionDescription(
            source.connection,
            tuple(exports),
            CollectionMetadata(id, state.shard, state.description.desc),
            source.timestamp_interval_ms,
        )

    def _run(self, instance: InstanceId, command: RunIngestion | RunSink) -> None:
        inst = self._instances.get(instance)
        if inst is None:
            self._deferred_runs.setdefault(instance, []).append(command)
            return
        inst.send(command)

    # -- configuration and instances --------------------------------------------------------------

    def initialization_complete(self) -> None:
        """Send ``InitializationComplete`` to every instance (and to later ones at creation)."""
        self._initialized = True
        for inst in self._instances.values():
            inst.send(InitializationComplete())

    def update_configuration(self, params: StorageParameters) -> None:
        self._params = self._params.update(params)
        for inst in self._instances.values():
            inst.send(UpdateConfiguration(params))

    @property
    def read_only(self) -> bool:
        return self._read_only

    def allow_writes(self) -> None:
        """Leave read-only mode (irreversible): replicas, tables and the collection manager
        may write."""
        self._read_only = False
        self._manager.read_only = False
        self.tables.read_only = False
        for inst in self._instances.values():
            inst.send(AllowWrites())

    def create_instance(self, id: InstanceId) -> None:
        """A new storage instance with no replicas. ``InstanceExists`` if it exists."""
        if id in self._instances:
            raise InstanceExists(id)
        inst = StorageInstance(
            id, controller_epoch=self.epoch, open=self._open_connection, events=self._event
        )
        self._instances[id] = inst
        if not self._params.is_empty():
            inst.send(UpdateConfiguration(self._params))
        for command in self._deferred_runs.pop(id, []):
            inst.send(command)
        for obj, since in self._compaction_state(id):
            inst.send(AllowCompaction(obj, since))
        if self._initialized:
            inst.send(InitializationComplete())
        if not self._read_only:
            inst.send(AllowWrites())

    def _compaction_state(self, instance: InstanceId) -> list[tuple[GlobalId, Frontier]]:
        out = []
        for obj, inst in self._object_instance.items():
            if inst != instance:
                continue
            state = self._caps.collections.get(obj)
            if state is not None and not state.since.is_empty():
                out.append((obj, state.since))
        return out

    def drop_instance(self, id: InstanceId) -> None:
        """Drop an instance that runs nothing (``InstanceNotEmpty`` otherwise)."""
        inst = self._instances.get(id)
        if inst is None:
            raise InstanceMissing(id)
        running = [o for o, i in self._object_instance.items() if i == id]
        if running:
            raise InstanceNotEmpty(id, running)
        inst.close()
        del self._instances[id]

    def connect_replica(
        self, instance: InstanceId, replica: ReplicaId, location: StorageReplicaLocation
    ) -> None:
        """Add a replica to ``instance``; it is hydrated with the instance's history."""
        inst = self._instances.get(instance)
        if inst is None:
            raise InstanceMissing(instance)
        if replica in inst.replicas:
            raise ReplicaExists(instance, replica)
        inst.add_replica(replica, location)

    def drop_replica(self, instance: InstanceId, replica: ReplicaId) -> None:
        inst = self._instances.get(instance)
        if inst is None:
            raise InstanceMissing(instance)
        if replica not in inst.replicas:
            raise ReplicaMissing(instance, replica)
        inst.drop_replica(replica)

    def instance_ids(self) -> list[InstanceId]:
        return sorted(self._instances)

    def history_len(self, instance: InstanceId) -> int:
        inst = self._instances.get(instance)
        if inst is None:
            raise InstanceMissing(instance)
        return len(inst.history)

    # -- collections ------------------------------------------------------------------------------

    def _live(self, id: GlobalId) -> CollectionState:
        state = self._caps.collections.get(id)
        if state is None or state.dropped:
            raise IdentifierMissing(id)
        return state

    def collection(self, id: GlobalId) -> CollectionState:
        """The state of a live collection (``IdentifierMissing`` if unknown or dropped). Treat
        as read-only; use :meth:`collection_mut` to change it."""
        return self._live(id)

    def collection_mut(self, id: GlobalId) -> CollectionState:
        return self._live(id)

    def collections(self) -> Iterator[tuple[GlobalId, CollectionState]]:
        for id, state in sorted(self._caps.collections.items()):
            if not state.dropped:
                yield id, state

    def check_exists(self, id: GlobalId) -> None:
        self._live(id)

    def collection_frontiers(self, id: GlobalId) -> StorageFrontiers:
        """Since and upper of ``id``; answered while any hold on a dropped ``id`` remains."""
        state = self._caps.collections.get(id)
        if state is None:
            raise IdentifierMissing(id)
        return StorageFrontiers(state.since, state.write_frontier)

    def collections_frontiers(self, ids: Sequence[GlobalId]) -> list[StorageFrontiers]:
        return [self.collection_frontiers(id) for id in ids]

    def collection_metadata(self, id: GlobalId) -> StorageCollectionMetadata:
        """The persist shard and schema of ``id`` (never changes)."""
        state = self._caps.collections.get(id)
        if state is None:
            raise IdentifierMissing(id)
        return StorageCollectionMetadata(id, state.shard, state.description.desc)

    def acquire_read_holds(self, ids: Sequence[GlobalId]) -> list[ReadHold]:
        """One hold per id at its current since (earliest possible), all or nothing."""
        return self._caps.acquire_read_holds(list(ids))

    async def create_collections(
        self, collections: Sequence[tuple[GlobalId, CollectionDescription]]
    ) -> None:
        """Create collections (spec §6.2): validate all, durably assign a shard to each new id,
        open its critical since handle, and start what writes it (ingestions are sent to their
        instance; storage-managed collections are registered with the collection manager).

        An id that exists with the same description is left alone (so a restarted caller may
        re-create what ``open`` restored); with another description it is
        ``CollectionIdReused``.
        """
        self._check_open()
        new = validate_collections(
            collections,
            existing=self._caps.collections,
            exports=self._caps.exports,
            instances=self._instances,
        )
        if not new:
            return
        shards = {id: ShardId.new(self._ids) for id, _ in new}

        def add(meta: ControllerMetadata) -> ControllerMetadata:
            cols = dict(meta.collections)
            for id, description in new:
                existing = cols.get(id)
                if existing is not None and existing.description == description:
                    shards[id] = existing.shard
                    continue
                cols[id] = DurableCollection(shards[id], description)
            return dataclasses.replace(meta, collections=cols)

        await asyncio.to_thread(self._meta.update, add)
        order = _dependency_order({id: DurableCollection(shards[id], d) for id, d in new})
        for id in order:
            await self._install(id, dict(new)[id], shards[id])
        self._start_ingestions(order)

    async def migrate_collections(self, keep: Sequence[GlobalId]) -> list[ShardId]:
        """Forget every durable collection not in ``keep``: its shard is moved to the
        unfinalized set (then finalized by ``reconcile_state``). Returns those shards."""
        self._check_open()
        keep_set = set(keep)
        dropped: list[ShardId] = []

        def migrate(meta: ControllerMetadata) -> ControllerMetadata:
            cols = {k: v for k, v in meta.collections.items() if k in keep_set}
            gone = [v.shard for k, v in meta.collections.items() if k not in keep_set]
            dropped[:] = gone
            unfinalized = tuple(dict.fromkeys([*meta.unfinalized, *gone]))
            return dataclasses.replace(meta, collections=cols, unfinalized=unfinalized)

        await asyncio.to_thread(self._meta.update, migrate)
        self._unfinalized.update(dropped)
        return dropped

    async def reconcile_state(self) -> list[ShardId]:
        """Finalize every shard left unfinalized (by a drop or a crash); return those done."""
        self._check_open()
        return await self._finalize_pending()

    # -- dropping ---------------------------------------------------------------------------------

    def drop_sources(self, ids: Sequence[GlobalId]) -> None:
        """Drop collections (an ingestion drops its exports with it): their implied capability
        becomes ``{}``; once no hold remains, the since is ``{}``, the replicas stop them and
        their shards are finalized. ``IdentifierMissing`` for an unknown or dropped id."""
        for id in ids:
            self._live(id)
        self._drop_collections(ids)

    def drop_sources_unvalidated(self, ids: Sequence[GlobalId]) -> None:
        """``drop_sources`` that silently skips unknown and dropped ids."""
        self._drop_collections(
            [
                id
                for id in ids
                if id in self._caps.collections and not self._caps.collections[id].dropped
            ]
        )

    def drop_tables(self, ids: Sequence[GlobalId]) -> None:
        for id in ids:
            if not self._live(id).description.is_table:
                raise InvalidUsage(f"{id} is not a table")
        self._drop_collections(ids)

    def _drop_collections(self, ids: Sequence[GlobalId]) -> None:
        todo: list[GlobalId] = []
        for id in ids:
            state = self._caps.collections[id]
            todo.append(id)
            if isinstance(state.description.data_source, IngestionSource):
                todo.extend(state.description.data_source.exports)
        for id in sorted(set(todo), reverse=True):
            state = self._caps.collections[id]
            if state.dropped:
                continue
            self._caps.drop_collection(id)
            if isinstance(state.description.data_source, IntrospectionSource):
                self._manager.unregister(id)

    # -- reads and writes -------------------------------------------------------------------------

    async def append(self, commands: Sequence[tuple[GlobalId, TableUpdates, Frontier]]) -> None:
        """Append to tables, all or nothing: see :meth:`.table_writes.TableWrites.append`."""
        await self.tables.append(commands)

    async def append_table(
        self, write_ts: int, advance_to: int, tables: Sequence[tuple[GlobalId, Sequence[Row]]]
    ) -> None:
        """Insert rows at ``write_ts`` and advance every live table to ``advance_to``,
        atomically: see :meth:`.table_writes.TableWrites.append_table`."""
        await self.tables.append_table(write_ts, advance_to, tables)

    def _table_uppers(self, uppers: Sequence[tuple[GlobalId, Frontier]]) -> None:
        """Committed table appends, applied synchronously (the one truth of a table's upper);
        ``process`` reports them."""
        self._advanced.extend(self._caps.update_write_frontiers(uppers))
        if self._advanced:
            self._wakeup.set()

    def set_read_policy(self, policies: Sequence[tuple[GlobalId, ReadPolicy]]) -> None:
        """Set read policies; the implied capability never regresses (spec §2.3)."""
        for id, policy in policies:
            self._live(id)
            if not isinstance(policy, ReadPolicy):
                raise InvalidUsage(f"{id}: not a read policy: {policy!r}")
        self._caps.set_read_policies(list(policies))

    def update_write_frontiers(self, updates: Sequence[tuple[GlobalId, Frontier]]) -> None:
        """Advance write frontiers (collections written outside the controller, exports)."""
        for id, _ in updates:
            if id not in self._caps.collections and id not in self._caps.exports:
                raise IdentifierMissing(id)
        self._caps.update_write_frontiers(list(updates))

    def update_read_capabilities(self, changes: Mapping[GlobalId, ChangeBatch[int]]) -> None:
        for id in changes:
            if id not in self._caps.collections:
                raise IdentifierMissing(id)
        self._caps.update_read_capabilities(changes)

    async def snapshot(self, id: GlobalId, as_of: int) -> list[tuple[Row, int]]:
        """The consolidated contents of ``id`` at ``as_of`` (waits for the upper to pass it)."""
        state = self._live(id)
        if not state.since.less_equal(as_of):
            raise ReadBeforeSince(id, since=state.since, timestamp=as_of)
        (hold,) = self._caps.acquire_read_holds([id])
        try:

            def read() -> list[tuple[Row, int]]:
                reader = self._persist.open_leased_reader(state.shard, state.description.desc)
                try:
                    table = reader.snapshot(as_of)
                finally:
                    reader.expire()
                return [(row, diff) for row, _t, diff in table_to_updates(table)]

            try:
                return await asyncio.to_thread(read)
            except AsOfBeforeSince:
                raise ReadBeforeSince(id, since=state.since, timestamp=as_of) from None
        finally:
            hold.release()

    def unfinalized_shards(self) -> set[ShardId]:
        return set(self._unfinalized)

    async def shutdown(self) -> None:
        """Stop the replica clients and release persist handles (the replicas keep running)."""
        for inst in self._instances.values():
            inst.close()
        self._manager.close()
        await self.tables.shutdown()


def _dependency_order(collections: Mapping[GlobalId, DurableCollection]) -> list[GlobalId]:
    """Ingestions before their exports; otherwise by id."""
    first = [
        id
        for id, c in collections.items()
        if not isinstance(c.description.data_source, IngestionExport)
    ]
    rest = [id for id in collections if id not in set(first)]
    return sorted(first) + sorted(rest)


if TYPE_CHECKING:

    def _is_storage_collections(c: StorageController) -> StorageCollections:
        return c  # mypy checks that the storage controller is what compute requires
