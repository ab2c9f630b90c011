"""The storage controller's driver: carries out the actions of its pure state.

:class:`Driver` owns everything that does I/O — replica clients, critical since handles, the
durable metadata, the collection manager's writers — and nothing else: what to do is decided
by :class:`~spate.storage.controller.state.StorageState`. Actions that only touch memory or a
queue (replica commands and connections, rows for the storage-managed collections) are carried
out at once (:meth:`Driver.dispatch`); actions that do persist or consensus I/O (since
downgrades, forgetting collections and exports, finalizing shards) are queued and carried out,
in order, in threads, inside ``process`` (:meth:`Driver.run_io`).

Inside ``process``:

1. **events** — replica responses and connection events go to the state;
2. **maintenance** (every ``maintenance_interval_ms``) — the state rehydrates failed replicas,
   reports objects without a replica as ``paused`` and states the desired contents of the
   differential managed collections; the driver follows the uppers of collections written
   elsewhere, writes the managed collections, finishes table-write intents, retries
   finalizations;
3. **flush** — every changed since goes to persist and to the replica running the collection;
   collections whose since reached ``{}`` are forgotten and their shards finalized.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from spate.clock import Clock
from spate.frontier.antichain import Antichain, Frontier
from spate.ids import GlobalId, IdGen, InstanceId, ReplicaId, ShardId
from spate.persist.client import PersistClient
from spate.persist.error_shard import errors_shard
from spate.persist.errors import Fenced
from spate.persist.since import SinceHandle
from spate.repr.desc import RelationDesc
from spate.repr.types import Row
from spate.storage.controller.actions import (
    Action,
    AppendManaged,
    ConnectReplica,
    DisconnectReplica,
    DowngradeSince,
    FinalizeShards,
    ForgetCollections,
    ForgetExports,
    SendCommand,
    SetManaged,
    StartManaged,
    StopManaged,
)
from spate.storage.controller.collection_manager import CollectionManager
from spate.storage.controller.errors import ControllerFenced
from spate.storage.controller.finalization import finalize_shard
from spate.storage.controller.metadata import ControllerMetadata, MetadataStore
from spate.storage.controller.replica_client import (
    OpenConnection,
    ReplicaEvent,
    StorageReplicaClient,
)
from spate.storage.controller.state import StorageState
from spate.storage.controller.table_writes import TableWrites
from spate.storage.controller.types import CollectionDescription, IntrospectionKind, OtherSource

_log: Final = logging.getLogger("spate.storage.controller")

IntrospectionProvider = Callable[[], Mapping[IntrospectionKind, Iterable[Row]]]
"""Called on the event loop before each write of the managed collections: the desired
contents of the kinds written for someone else (the environment's catalog relations)."""


@dataclass(frozen=True, slots=True)
class FrontierUpdates:
    """What ``process`` returns: collections and exports whose upper advanced."""

    updates: tuple[tuple[GlobalId, Frontier], ...]


class Driver:
    """Carries out a :class:`StorageState`'s actions (module docs). Event-loop thread only."""

    def __init__(
        self,
        state: StorageState,
        persist: PersistClient,
        meta: MetadataStore,
        manager: CollectionManager,
        tables: TableWrites,
        *,
        open: OpenConnection,
        clock: Clock,
        ids: IdGen,
        interval_s: float,
    ) -> None:
        self._state = state
        self._persist = persist
        self._meta = meta
        self._manager = manager
        self._tables = tables
        self._open = open
        self._clock = clock
        self._ids = ids
        self._interval_s = interval_s
        self._clients: dict[tuple[InstanceId, ReplicaId], StorageReplicaClient] = {}
        self.since_handles: dict[GlobalId, SinceHandle] = {}
        self.errors_since_handles: dict[GlobalId, SinceHandle] = {}
        """The critical since of each materialized view's errors shard, downgraded with the
        view's (:mod:`spate.persist.error_shard`)."""
        self._inbox: deque[ReplicaEvent] = deque()
        self._io: deque[Action] = deque()
        self._wakeup = asyncio.Event()
        self._next_maintenance = 0.0
        self.provider: IntrospectionProvider | None = None

    # -- events and actions -----------------------------------------------------------------------

    def event(self, event: ReplicaEvent) -> None:
        """A replica client's report (applied in the next ``process``)."""
        self._inbox.append(event)
        self._wakeup.set()

    def wake(self) -> None:
        self._wakeup.set()

    def dispatch(self) -> None:
        """Carry out the state's in-memory actions now; queue the I/O ones for ``process``."""
        for action in self._state.drain():
            if isinstance(action, ConnectReplica):
                key = (action.instance, action.replica)
                old = self._clients.pop(key, None)
                if old is not None:
                    old.close()
                self._clients[key] = StorageReplicaClient(
                    action.instance,
                    action.replica,
                    action.epoch,
                    action.location,
                    self._open,
                    self.event,
                )
            elif isinstance(action, SendCommand):
                client = self._clients.get((action.instance, action.replica))
                if client is not None and client.epoch == action.epoch:
                    client.send(action.command)
            elif isinstance(action, DisconnectReplica):
                client = self._clients.get((action.instance, action.replica))
                if client is not None and client.epoch == action.epoch:
                    client.close()
                    del self._clients[(action.instance, action.replica)]
            elif isinstance(action, StartManaged):
                self._manager.register(action.id, action.kind, action.shard, action.desc)
            elif isinstance(action, StopManaged):
                self._manager.unregister(action.id)
            elif isinstance(action, AppendManaged):
                self._manager.append(action.kind, action.rows)
            elif isinstance(action, SetManaged):
                self._manager.set_desired(action.kind, action.rows)
            else:
                self._io.append(action)
                self._wakeup.set()

    async def run_io(self) -> None:
        """Carry out the queued I/O actions, in order."""
        while self._io:
            action = self._io.popleft()
            if isinstance(action, DowngradeSince):
                batch = [action]
                while self._io and isinstance(self._io[0], DowngradeSince):
                    nxt = self._io.popleft()
                    assert isinstance(nxt, DowngradeSince)
                    batch.append(nxt)
                await asyncio.to_thread(self._downgrade, batch)
            elif isinstance(action, ForgetCollections):
                await self._forget(action)
            elif isinstance(action, ForgetExports):
                await self._forget_exports(action.ids)
            elif isinstance(action, FinalizeShards):
                await self.finalize(action.shards)

    # -- ready / process --------------------------------------------------------------------------

    async def ready(self) -> None:
        """Wait until ``process`` has something to do (an event, or maintenance is due)."""
        if self._inbox or self._io or self._state.has_advanced():
            return
        timeout = max(0.0, self._next_maintenance - self._clock.monotonic())
        self._wakeup.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._wakeup.wait()

    async def process(self) -> FrontierUpdates | None:
        """Apply events, run maintenance when due, push since changes; return the uppers that
        advanced. Raises ``ControllerFenced`` when a newer controller took over."""
        while self._inbox:
            self._state.handle(self._inbox.popleft())
        self.dispatch()
        if self._clock.monotonic() >= self._next_maintenance:
            self._next_maintenance = self._clock.monotonic() + self._interval_s
            await self._maintain()
        self._state.flush()
        self.dispatch()
        await self.run_io()
        ids = self._state.take_advanced()
        if not ids:
            return None
        return FrontierUpdates(tuple((id, self._state.upper_of(id)) for id in ids))

    async def _maintain(self) -> None:
        state = self._state
        state.maintain()
        self.dispatch()
        others = [
            (id, s.shard)
            for id, s in state.caps.collections.items()
            if isinstance(s.description.data_source, OtherSource) and not s.since.is_empty()
        ]
        uppers = await asyncio.to_thread(
            lambda: [(id, self._persist.fetch_state(shard).upper) for id, shard in others]
        )
        state.observe_uppers(uppers)
        await self.write_managed()
        await self._tables.maintain()
        state.finalize_pending()
        self.dispatch()
        await self.run_io()

    async def write_managed(self) -> None:
        """Ask the provider for its desired rows, then write every managed collection once."""
        self._provide()
        written = await asyncio.to_thread(self._manager.tick)
        self._state.observe_uppers(list(written.items()))

    def _provide(self) -> None:
        if self.provider is None:
            return
        try:
            desired = self.provider()
        except Exception:  # introspection must never stop the controller
            _log.warning("the introspection provider failed", exc_info=True)
            return
        for kind, rows in desired.items():
            self._manager.set_desired(kind, rows)

    # -- persist ----------------------------------------------------------------------------------

    async def start_at(self, shards: Sequence[tuple[ShardId, RelationDesc]], ts: int) -> None:
        """Advance each new shard's upper from ``[0]`` to ``[ts]`` with no data, in order
        (a shard already at or beyond ``ts`` is left alone)."""

        def advance() -> None:
            for shard, desc in shards:
                writer = self._persist.open_writer(shard, desc)
                try:
                    writer.append(None, lower=Antichain.of(0), upper=Antichain.of(ts))
                finally:
                    writer.expire()

        await asyncio.to_thread(advance)

    async def install(
        self, id: GlobalId, description: CollectionDescription, shard: ShardId
    ) -> None:
        """Open the collection's critical since handle and start tracking it."""
        epoch = self._state.epoch
        try:
            handle = await asyncio.to_thread(self._persist.open_critical_since, shard, epoch=epoch)
        except Fenced as e:
            raise ControllerFenced(epoch, e.current_epoch, f"opening shard {shard}") from None
        shard_state = await asyncio.to_thread(self._persist.fetch_state, shard)
        if isinstance(description.data_source, OtherSource):  # a view: its errors shard too
            try:
                self.errors_since_handles[id] = await asyncio.to_thread(
                    self._persist.open_critical_since, errors_shard(shard), epoch=epoch
                )
            except Fenced as e:
                raise ControllerFenced(epoch, e.current_epoch, f"opening shard {shard}") from None
        self.since_handles[id] = handle
        self._state.install(
            id,
            description,
            shard,
            since=handle.since.join(shard_state.since),
            upper=shard_state.upper,
        )
        self.dispatch()

    def _downgrade(self, downgrades: Sequence[DowngradeSince]) -> None:
        for d in downgrades:
            handle = self.since_handles.get(d.id)
            if handle is None:
                continue
            errors = self.errors_since_handles.get(d.id)
            try:
                if errors is not None:  # the view's error history is compacted with it
                    errors.downgrade_since(d.since)
                handle.downgrade_since(d.since)
            except Fenced as e:
                raise ControllerFenced(
                    self._state.epoch,
                    e.current_epoch,
                    f"downgrading the since of {handle.shard_id}",
                ) from None

    async def _forget(self, action: ForgetCollections) -> None:
        """Collections whose since reached ``{}``: one metadata update removes their id → shard
        mappings and adds their shards to the unfinalized set."""
        shards = dict(action.collections)

        def forget(meta: ControllerMetadata) -> ControllerMetadata:
            cols = {k: v for k, v in meta.collections.items() if k not in shards}
            unfinalized = tuple(dict.fromkeys([*meta.unfinalized, *shards.values()]))
            return dataclasses.replace(meta, collections=cols, unfinalized=unfinalized)

        await asyncio.to_thread(self._meta.update, forget)
        for id in shards:
            self.since_handles.pop(id, None)
            self.errors_since_handles.pop(id, None)
            await self._tables.forget(id)

    async def _forget_exports(self, ids: Sequence[GlobalId]) -> None:
        gone = set(ids)

        def forget(meta: ControllerMetadata) -> ControllerMetadata:
            exports = {k: v for k, v in meta.exports.items() if k not in gone}
            return dataclasses.replace(meta, exports=exports)

        await asyncio.to_thread(self._meta.update, forget)

    async def finalize(self, shards: Sequence[ShardId]) -> list[ShardId]:
        """Finalize ``shards`` (those whose readers are gone); remove the finalized ones from
        the durable unfinalized set and tell the state. Returns them."""
        done: list[ShardId] = []
        for shard in shards:
            if shard not in self._state.unfinalized:
                continue  # finalized meanwhile
            finished = await asyncio.to_thread(
                finalize_shard, self._persist, shard, epoch=self._state.epoch, ids=self._ids
            )
            if finished:
                done.append(shard)
        if done:
            finished_set = set(done)

            def remove(meta: ControllerMetadata) -> ControllerMetadata:
                left = tuple(s for s in meta.unfinalized if s not in finished_set)
                return dataclasses.replace(meta, unfinalized=left)

            await asyncio.to_thread(self._meta.update, remove)
            self._state.finalized(done)
        return done

    async def shutdown(self) -> None:
        """Stop the replica clients (the replicas keep running)."""
        for client in self._clients.values():
            client.close()
        self._clients.clear()
        self._state.drain()
