"""The storage controller: the public API over storage collections, exports and instances.

One ``StorageController`` per environment, used from one asyncio event loop:

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
controller's :class:`~spate.storage.interface.StorageCollections`.

Inside, it is three parts: the pure :class:`~.state.StorageState` (collections, read
capabilities, instances, exports, command histories) decides; the :class:`~.driver.Driver`
carries out the actions it returns (replica connections, since downgrades, metadata updates,
finalization, managed collections); :class:`~.table_writes.TableWrites` writes tables. The
methods here validate, call the state, then let the driver act.

**Fencing**: ``open`` claims the next controller epoch in the durable metadata and
every critical since handle is claimed with it. When a newer controller takes over, this one's
next since downgrade or metadata update raises ``ControllerFenced`` out of ``process`` (or the
call): the caller MUST stop ("halt").
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Final

import pyarrow as pa

from spate.clock import Clock, SystemClock
from spate.frontier.antichain import Frontier
from spate.frontier.mutable import ChangeBatch
from spate.frontier.read_hold import ReadHold
from spate.frontier.read_policy import ReadPolicy
from spate.ids import GlobalId, IdGen, InstanceId, ReplicaId, ShardId, SystemIdGen
from spate.persist.client import PersistClient
from spate.persist.errors import AsOfBeforeSince
from spate.protocol.storage import StatusUpdate, StorageParameters
from spate.repr.arrow import table_to_updates
from spate.repr.types import Row
from spate.storage.controller.collection_manager import CollectionManager
from spate.storage.controller.collections import CollectionState, ExportState
from spate.storage.controller.driver import Driver, FrontierUpdates
from spate.storage.controller.driver import IntrospectionProvider as IntrospectionProvider
from spate.storage.controller.errors import (
    IdentifierMissing,
    InstanceMissing,
    InvalidUsage,
    ReadBeforeSince,
    UnknownCollections,
)
from spate.storage.controller.metadata import (
    ControllerMetadata,
    DurableCollection,
    DurableExport,
    MetadataStore,
)
from spate.storage.controller.replica_client import (
    OpenConnection,
    StorageReplicaLocation,
    tcp_opener,
)
from spate.storage.controller.state import StorageState
from spate.storage.controller.statistics import StatisticsStore
from spate.storage.controller.table_txn import INLINE_MAX_BYTES, TableTxnLog
from spate.storage.controller.table_writes import TableWrites
from spate.storage.controller.tables import TableUpdates
from spate.storage.controller.types import (
    CollectionDescription,
    CreateExportToken,
    ExportDescription,
    IngestionExport,
    IngestionSource,
)
from spate.storage.controller.validation import validate_collections
from spate.storage.interface import (
    StorageCollectionMetadata,
    StorageCollections,
    StorageFrontiers,
)

_log: Final = logging.getLogger("spate.storage.controller")

MAINTENANCE_INTERVAL_MS: Final = 1000


class StorageController:
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
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._ids: IdGen = ids if ids is not None else SystemIdGen()
        self._meta = MetadataStore(persist.consensus)
        self.state = StorageState(epoch=0, clock=self._clock, ids=self._ids, read_only=read_only)
        self.tables = TableWrites(
            persist,
            TableTxnLog(persist, inline_max_bytes=inline_append_bytes),
            self.state.caps,
            ids=self._ids,
            live=self.state.live,
            on_uppers=self._table_uppers,
        )
        self.tables.read_only = read_only
        self._manager = CollectionManager(persist, self._clock, self._ids, read_only=read_only)
        self._driver = Driver(
            self.state,
            persist,
            self._meta,
            self._manager,
            self.tables,
            open=open,
            clock=self._clock,
            ids=self._ids,
            interval_s=maintenance_interval_ms / 1000.0,
        )
        self._opened = False

    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def statistics(self) -> StatisticsStore:
        return self.state.statistics

    # -- boot -------------------------------------------------------------------------------------

    async def open(self, epoch: int | None = None) -> None:
        """Claim the next controller epoch (or ``epoch``, which must be newer) and restore every
        collection and export recorded in the durable metadata."""
        meta = await asyncio.to_thread(self._meta.open, epoch)
        self.state.epoch = meta.epoch
        self.state.unfinalized = set(meta.unfinalized)
        # A multi-table append left pending by a predecessor is finished before anything else.
        pending = await asyncio.to_thread(self.tables.txn.claim, meta.epoch)
        descs = {id: c.description.desc for id, c in meta.collections.items()}
        await self.tables.recover_intent(pending, descs)
        self._opened = True
        order = _dependency_order(meta.collections)
        for id in order:
            await self._driver.install(
                id, meta.collections[id].description, meta.collections[id].shard
            )
        self.state.start_ingestions(order)
        for id, exp in sorted(meta.exports.items()):
            self.state.exports.restore(id, exp.from_id, exp.description, exp.as_of)
        self._act()

    def _check_open(self) -> None:
        if not self._opened:
            raise InvalidUsage("the storage controller is not open; await open() first")

    def _act(self) -> None:
        """Let the driver carry out what the state decided."""
        self._driver.dispatch()

    # -- configuration and instances --------------------------------------------------------------

    def initialization_complete(self) -> None:
        """Send ``InitializationComplete`` to every instance (and to later ones at creation)."""
        self.state.initialization_complete()
        self._act()

    def update_configuration(self, params: StorageParameters) -> None:
        self.state.update_configuration(params)
        self._act()

    @property
    def read_only(self) -> bool:
        return self.state.read_only

    def allow_writes(self) -> None:
        """Leave read-only mode (irreversible): replicas, tables and the collection manager
        may write."""
        self.state.allow_writes()
        self._manager.read_only = False
        self.tables.read_only = False
        self._act()

    def create_instance(self, id: InstanceId) -> None:
        """A new storage instance with no replicas. ``InstanceExists`` if it exists."""
        self.state.create_instance(id)
        self._act()

    def drop_instance(self, id: InstanceId) -> None:
        """Drop an instance that runs nothing (``InstanceNotEmpty`` otherwise)."""
        self.state.drop_instance(id)
        self._act()

    def connect_replica(
        self, instance: InstanceId, replica: ReplicaId, location: StorageReplicaLocation
    ) -> None:
        """Add a replica to ``instance``; it is hydrated with the instance's history."""
        self.state.connect_replica(instance, replica, location)
        self._act()

    def drop_replica(self, instance: InstanceId, replica: ReplicaId) -> None:
        self.state.drop_replica(instance, replica)
        self._act()

    def instance_ids(self) -> list[InstanceId]:
        return sorted(self.state.instances)

    def history_len(self, instance: InstanceId) -> int:
        inst = self.state.instances.get(instance)
        if inst is None:
            raise InstanceMissing(instance)
        return len(inst.history)

    # -- collections ------------------------------------------------------------------------------

    def collection(self, id: GlobalId) -> CollectionState:
        """The state of a live collection (``IdentifierMissing`` if unknown or dropped). Treat
        as read-only; use :meth:`collection_mut` to change it."""
        return self.state.live(id)

    def collection_mut(self, id: GlobalId) -> CollectionState:
        return self.state.live(id)

    def collections(self) -> Iterator[tuple[GlobalId, CollectionState]]:
        return self.state.collections()

    def check_exists(self, id: GlobalId) -> None:
        self.state.live(id)

    def collection_frontiers(self, id: GlobalId) -> StorageFrontiers:
        """Since and upper of ``id``; answered while any hold on a dropped ``id`` remains."""
        state = self.state.caps.collections.get(id)
        if state is None:
            raise IdentifierMissing(id)
        return StorageFrontiers(state.since, state.write_frontier)

    def collections_frontiers(self, ids: Sequence[GlobalId]) -> list[StorageFrontiers]:
        return [self.collection_frontiers(id) for id in ids]

    def collection_metadata(self, id: GlobalId) -> StorageCollectionMetadata:
        """The persist shard and schema of ``id`` (never changes)."""
        state = self.state.caps.collections.get(id)
        if state is None:
            raise IdentifierMissing(id)
        return StorageCollectionMetadata(id, state.shard, state.description.desc)

    def acquire_read_holds(self, ids: Sequence[GlobalId]) -> list[ReadHold]:
        """One hold per id at its current since (earliest possible), all or nothing."""
        return self.state.acquire_read_holds(ids)

    async def create_collections(
        self,
        collections: Sequence[tuple[GlobalId, CollectionDescription]],
        *,
        register_ts: int | None = None,
    ) -> None:
        """Create collections: validate all, durably assign a shard to each new id, open its
        critical since handle, and start what writes it (ingestions are sent to their instance;
        storage-managed collections are registered with the collection manager).

        ``register_ts`` is the time of the creation: a new ingestion's collections start with
        ``upper == [register_ts]`` (empty before it), so that the ingestion binds what its
        source finds first (a PostgreSQL snapshot, the files present) at ``register_ts``, and
        every read at or after it sees that data.

        An id that exists with the same description is left alone (so a restarted caller may
        re-create what ``open`` restored); with another description it is
        ``CollectionIdReused``.
        """
        self._check_open()
        if register_ts is not None and (
            not isinstance(register_ts, int) or isinstance(register_ts, bool) or register_ts < 0
        ):
            raise InvalidUsage(f"register_ts must be a timestamp (int >= 0), got {register_ts!r}")
        new = validate_collections(
            collections,
            existing=self.state.caps.collections,
            exports=self.state.caps.exports,
            instances=self.state.instances,
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

        fresh = dict(shards)
        await asyncio.to_thread(self._meta.update, add)
        if register_ts is not None and register_ts > 0:
            # Shards assigned by this call: nobody else writes them yet. The remap collection
            # first, so that an export is never ahead of its bindings.
            ingestions = [
                id
                for id, d in new
                if isinstance(d.data_source, IngestionSource) and shards[id] == fresh[id]
            ]
            exports = [
                id
                for id, d in new
                if isinstance(d.data_source, IngestionExport)
                and d.data_source.ingestion in ingestions
                and shards[id] == fresh[id]
            ]
            descs = dict(new)
            await self._driver.start_at(
                [(shards[id], descs[id].desc) for id in [*ingestions, *exports]], register_ts
            )
        order = _dependency_order({id: DurableCollection(shards[id], d) for id, d in new})
        for id in order:
            await self._driver.install(id, dict(new)[id], shards[id])
        self.state.start_ingestions(order)
        self._act()

    async def migrate_collections(
        self, keep: Sequence[GlobalId], *, finalize_unknown: bool = False
    ) -> list[ShardId]:
        """Forget every durable collection not in ``keep``: its shard is moved to the
        unfinalized set (then finalized by ``reconcile_state``), which destroys its data.
        Returns those shards.

        Only with ``finalize_unknown=True``: otherwise a durable collection that ``keep`` does
        not name raises ``UnknownCollections`` (naming them) and nothing changes, so that an
        incomplete list cannot destroy data by accident."""
        self._check_open()
        keep_set = set(keep)
        dropped: list[ShardId] = []

        def migrate(meta: ControllerMetadata) -> ControllerMetadata:
            unknown = sorted((k for k in meta.collections if k not in keep_set), key=str)
            if unknown and not finalize_unknown:
                raise UnknownCollections(unknown)
            cols = {k: v for k, v in meta.collections.items() if k in keep_set}
            gone = [v.shard for k, v in meta.collections.items() if k not in keep_set]
            dropped[:] = gone
            unfinalized = tuple(dict.fromkeys([*meta.unfinalized, *gone]))
            return dataclasses.replace(meta, collections=cols, unfinalized=unfinalized)

        await asyncio.to_thread(self._meta.update, migrate)
        self.state.unfinalized.update(dropped)
        return dropped

    async def reconcile_state(self) -> list[ShardId]:
        """Finalize every shard left unfinalized (by a drop or a crash); return those done."""
        self._check_open()
        return await self._driver.finalize(self.state.finalizable())

    # -- dropping ---------------------------------------------------------------------------------

    def drop_sources(self, ids: Sequence[GlobalId]) -> None:
        """Drop collections (an ingestion drops its exports with it): their implied capability
        becomes ``{}``; once no hold remains, the since is ``{}``, the replicas stop them and
        their shards are finalized. ``IdentifierMissing`` for an unknown or dropped id."""
        self.state.drop_collections(ids)
        self._act()

    def drop_sources_unvalidated(self, ids: Sequence[GlobalId]) -> None:
        """``drop_sources`` that silently skips unknown and dropped ids."""
        self.state.drop_collections(ids, validate=False)
        self._act()

    def drop_tables(self, ids: Sequence[GlobalId]) -> None:
        for id in ids:
            if not self.state.live(id).description.is_table:
                raise InvalidUsage(f"{id} is not a table")
        self.state.drop_collections(ids)
        self._act()

    # -- exports ----------------------------------------------------------------------------------

    def export(self, id: GlobalId) -> ExportState:
        return self.state.exports.get(id)

    def export_mut(self, id: GlobalId) -> ExportState:
        return self.state.exports.get(id)

    def prepare_export(self, id: GlobalId, from_id: GlobalId) -> CreateExportToken:
        """Hold ``from_id`` at its implied capability for export ``id``."""
        return self.state.exports.prepare(id, from_id)

    def cancel_prepare_export(self, token: CreateExportToken) -> None:
        self.state.exports.cancel_prepare(token)

    async def create_exports(
        self, exports: Sequence[tuple[CreateExportToken, ExportDescription]]
    ) -> None:
        """Create sinks from prepared tokens: record each as_of durably, send ``RunSink``."""
        self._check_open()
        self.state.exports.validate_create(exports)

        def add(meta: ControllerMetadata) -> ControllerMetadata:
            exps = dict(meta.exports)
            for token, description in exports:
                exps[token.id] = DurableExport(token.from_id, description, token.acquired_since)
            return dataclasses.replace(meta, exports=exps)

        await asyncio.to_thread(self._meta.update, add)
        for token, description in exports:
            self.state.exports.install(token, description, as_of=token.acquired_since)
        self._act()

    def drop_sinks(self, ids: Sequence[GlobalId]) -> None:
        """Release each export's hold on its input, stop it, record ``dropped``."""
        self.state.exports.drop(ids)
        self._act()

    def drop_sinks_unvalidated(self, ids: Sequence[GlobalId]) -> None:
        self.state.exports.drop(ids, validate=False)
        self._act()

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
        self.state.observe_uppers(uppers)
        if self.state.has_advanced():
            self._driver.wake()

    def set_read_policy(self, policies: Sequence[tuple[GlobalId, ReadPolicy]]) -> None:
        """Set read policies; the implied capability never regresses."""
        self.state.set_read_policy(policies)

    def update_write_frontiers(self, updates: Sequence[tuple[GlobalId, Frontier]]) -> None:
        """Advance write frontiers (collections written outside the controller, exports)."""
        self.state.update_write_frontiers(updates)
        self._driver.wake()

    def update_read_capabilities(self, changes: Mapping[GlobalId, ChangeBatch[int]]) -> None:
        self.state.update_read_capabilities(changes)

    async def snapshot(self, id: GlobalId, as_of: int) -> list[tuple[Row, int]]:
        """The consolidated contents of ``id`` at ``as_of`` (waits for the upper to pass it)."""
        table = await self.snapshot_table(id, as_of)
        return [(row, diff) for row, _t, diff in table_to_updates(table)]

    async def snapshot_table(self, id: GlobalId, as_of: int) -> pa.Table:
        """:meth:`snapshot` as Arrow (the updates schema, every ``_time`` the ``as_of``)."""
        state = self.state.live(id)
        if not state.since.less_equal(as_of):
            raise ReadBeforeSince(id, since=state.since, timestamp=as_of)
        (hold,) = self.state.acquire_read_holds([id])
        try:

            def read() -> pa.Table:
                reader = self._persist.open_leased_reader(state.shard, state.description.desc)
                try:
                    return reader.snapshot(as_of)
                finally:
                    reader.expire()

            try:
                return await asyncio.to_thread(read)
            except AsOfBeforeSince:
                raise ReadBeforeSince(id, since=state.since, timestamp=as_of) from None
        finally:
            hold.release()

    def set_introspection_provider(self, provider: IntrospectionProvider | None) -> None:
        """``provider()`` states the desired contents of managed collections of the kinds it
        returns; it is called on the event loop before each write of the managed collections
        (every maintenance interval, and at :meth:`write_introspection`)."""
        self._driver.provider = provider

    async def write_introspection(self) -> None:
        """Write every managed collection now (fresh rows from the provider), so that a read
        at ``upper - 1`` of each afterwards sees the present. No-op in read-only mode."""
        self._check_open()
        await self._driver.write_managed()

    def error_count(self, id: GlobalId) -> int:
        """How many errors ingestion or sink ``id`` reported (stalled or ceased statuses)."""
        return self.state.error_counts.get(id, 0)

    def status(self, id: GlobalId) -> StatusUpdate | None:
        """The latest status of ingestion or sink ``id``."""
        return self.state.statuses.get(id)

    def unfinalized_shards(self) -> set[ShardId]:
        return set(self.state.unfinalized)

    # -- the loop ---------------------------------------------------------------------------------

    async def ready(self) -> None:
        """Wait until ``process`` has something to do (a response, or maintenance is due)."""
        await self._driver.ready()

    async def process(self) -> FrontierUpdates | None:
        """Apply responses, run maintenance when due, push since changes; return the uppers
        that advanced. Raises ``ControllerFenced`` when a newer controller took over."""
        return await self._driver.process()

    async def shutdown(self) -> None:
        """Stop the replica clients and release persist handles (the replicas keep running)."""
        await self._driver.shutdown()
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
