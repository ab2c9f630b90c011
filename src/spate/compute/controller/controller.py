"""The compute controller: the public API over compute instances, and their asyncio driver.

``ComputeController`` owns one sans-I/O :class:`~spate.compute.controller.instance.Instance`
per compute instance. Each API call validates its arguments, forwards to the instance, and
carries out the actions the instance emitted: commands go to replica clients, connect and
disconnect requests start and stop them, responses are queued for :meth:`process`, peek results
resolve the futures returned by :meth:`peek`. Replica clients report back through
:meth:`handle_replica_event`, which only queues; everything is applied inside :meth:`process`.

Use it from one asyncio event loop::

    controller = ComputeController(storage, connector=ClientConnector(open_tcp))
    controller.create_instance(InstanceId(1))
    controller.add_replica_to_instance(InstanceId(1), ReplicaId(1), config)
    controller.create_dataflow(InstanceId(1), dataflow)
    rows = controller.peek(InstanceId(1), IndexTarget(index_id), uuid, timestamp=42, ...)
    while True:
        await controller.ready()
        response = await controller.process()   # PeekNotification | SubscribeResponse | …

Obligations of the caller: call the API only from the event loop's thread; keep calling
``ready``/``process`` (replica responses and maintenance — rehydration of failed replicas,
warmup holds, scheduling, cleanup — happen only there). Every method validates first and raises
the narrow errors of :mod:`spate.compute.controller.errors`; a call that raised changed nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Final

from spate.clock import Clock, SystemClock
from spate.compute.controller import introspection
from spate.compute.controller.actions import (
    Action,
    ConnectReplica,
    DeliverPeekResult,
    DeliverResponse,
    DisconnectReplica,
    SendCommand,
)
from spate.compute.controller.errors import (
    CollectionMissing,
    InstanceExists,
    InstanceMissing,
    InstanceNotEmpty,
    InstanceShutDown,
)
from spate.compute.controller.events import (
    ReplicaConnected,
    ReplicaEvent,
    ReplicaFailed,
    ReplicaResponse,
)
from spate.compute.controller.hydration import DEFAULT_HYDRATION_CONCURRENCY
from spate.compute.controller.instance import Instance
from spate.compute.controller.introspection import (
    CollectionFrontiers,
    CollectionInfo,
    PeekInfo,
    ReplicaFrontiers,
    ReplicaInfo,
)
from spate.compute.controller.replica import ReplicaConfig
from spate.compute.controller.replica_client import ReplicaConnector, ReplicaHandle
from spate.compute.controller.responses import ComputeControllerResponse, PeekResult
from spate.compute.controller.storage import StorageCollections
from spate.frontier.antichain import Frontier
from spate.frontier.read_hold import ReadHold
from spate.frontier.read_policy import ReadPolicy
from spate.ids import GlobalId, IdGen, InstanceId, PeekId, ReplicaId, SystemIdGen
from spate.plan.dataflow import DataflowDescription
from spate.plan.finishing import RowSetFinishing
from spate.protocol.compute import (
    ComputeParameters,
    IndexTarget,
    InstanceConfig,
    PersistTarget,
)
from spate.repr.desc import RelationDesc
from spate.repr.types import Row

_log: Final = logging.getLogger("spate.compute.controller")

MAINTENANCE_INTERVAL_MS: Final = 1000
MAX_EVENTS_PER_PROCESS: Final = 256
"""Replica events one ``process()`` applies at most, so that a burst of reports (10,000
collections reporting at once) never blocks the event loop for the whole burst."""


class ComputeController:
    """All compute instances of an environment (module docs).

    ``epoch`` is the controller's own durable epoch (it MUST grow with every restart of the
    environment): replica connections use epochs ``epoch * 2**32 + n``, so a restarted
    controller's connections replace the old one's at every replica, and the old controller is
    refused from then on.
    """

    def __init__(
        self,
        storage: StorageCollections,
        *,
        connector: ReplicaConnector,
        clock: Clock | None = None,
        ids: IdGen | None = None,
        read_only: bool = False,
        epoch: int = 0,
        maintenance_interval_ms: int = MAINTENANCE_INTERVAL_MS,
        hydration_concurrency: int = DEFAULT_HYDRATION_CONCURRENCY,
        max_events_per_process: int = MAX_EVENTS_PER_PROCESS,
    ) -> None:
        if max_events_per_process < 1:
            raise ValueError(f"max_events_per_process must be >= 1, got {max_events_per_process}")
        if maintenance_interval_ms <= 0:
            raise ValueError(f"maintenance interval must be > 0 ms, got {maintenance_interval_ms}")
        if not 0 <= epoch < 2**31:
            raise ValueError(f"controller epoch must be in [0, 2**31), got {epoch}")
        if hydration_concurrency < 1:
            raise ValueError(f"hydration concurrency must be >= 1, got {hydration_concurrency}")
        self._storage = storage
        self._connector = connector
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._ids: IdGen = ids if ids is not None else SystemIdGen()
        self._read_only = read_only
        self._epoch_base = epoch << 32
        self._interval_s = maintenance_interval_ms / 1000.0
        self._hydration_concurrency = hydration_concurrency
        self._max_events = max_events_per_process
        self._instances: dict[InstanceId, Instance] = {}
        self._params = ComputeParameters()
        self._initialized = False
        self._shut_down = False
        self._responses: deque[ComputeControllerResponse] = deque()
        self._inbox: deque[ReplicaEvent] = deque()
        self._wakeup: asyncio.Event | None = None
        self._clients: dict[tuple[InstanceId, ReplicaId], tuple[int, ReplicaHandle]] = {}
        self._peek_futures: dict[tuple[InstanceId, PeekId], asyncio.Future[PeekResult]] = {}
        self._next_maintenance = self._clock.monotonic() + self._interval_s

    # -- instances ---------------------------------------------------------------------------

    def _instance(self, id: InstanceId) -> Instance:
        if self._shut_down:
            raise InstanceShutDown()
        inst = self._instances.get(id)
        if inst is None:
            raise InstanceMissing(id)
        return inst

    def instance_ids(self) -> list[InstanceId]:
        return sorted(self._instances)

    def create_instance(self, id: InstanceId, config: InstanceConfig | None = None) -> None:
        """Create instance ``id``; it starts with the accumulated configuration and, if the
        controller is initialized, already initialized. Raises ``InstanceExists``."""
        if self._shut_down:
            raise InstanceShutDown()
        if id in self._instances:
            raise InstanceExists(id)
        inst = Instance(
            id,
            storage=self._storage,
            ids=self._ids,
            config=config if config is not None else InstanceConfig(),
            params=self._params,
            initialized=self._initialized,
            read_only=self._read_only,
            hydration_concurrency=self._hydration_concurrency,
            epoch_base=self._epoch_base,
        )
        self._instances[id] = inst
        inst.on_actions = lambda: self._dispatch(inst)
        self._dispatch(inst)

    def drop_instance(self, id: InstanceId) -> None:
        """Drop an instance without replicas or live collections (``InstanceNotEmpty``
        otherwise). Pending peeks fail; its state and holds are released."""
        inst = self._instance(id)
        live = sorted(c.id for c in inst.live_collections())
        if inst.replicas or live:
            raise InstanceNotEmpty(id, [*sorted(inst.replicas), *live])
        inst.shutdown(f"instance {id} was dropped")
        self._dispatch(inst)
        del self._instances[id]

    def update_configuration(self, params: ComputeParameters) -> None:
        """Apply ``params`` on every instance now and remember them for future instances."""
        if self._shut_down:
            raise InstanceShutDown()
        self._params = self._params.update(params)
        for inst in self._instances.values():
            inst.update_configuration(params)
            self._dispatch(inst)

    def initialization_complete(self) -> None:
        """The caller has issued every command of its initial state (idempotent)."""
        self._initialized = True
        for inst in self._instances.values():
            inst.initialization_complete()
            self._dispatch(inst)

    def allow_writes(self, instance: InstanceId, id: GlobalId) -> None:
        """Let collection ``id`` write to persist (once; no-op while the controller is
        read-only or for an empty as_of)."""
        inst = self._instance(instance)
        inst.allow_writes(id)
        self._dispatch(inst)

    def exit_read_only(self) -> None:
        """Leave read-only mode (irreversible); collections still need ``allow_writes``."""
        self._read_only = False
        for inst in self._instances.values():
            inst.read_only = False

    @property
    def read_only(self) -> bool:
        return self._read_only

    # -- replicas ------------------------------------------------------------------------------

    def add_replica_to_instance(
        self, instance: InstanceId, replica: ReplicaId, config: ReplicaConfig
    ) -> None:
        """Connect a replica and replay the instance's reduced history to it.
        Raises ``InstanceMissing``, ``ReplicaExists``."""
        inst = self._instance(instance)
        inst.add_replica(replica, config)
        self._dispatch(inst)

    def drop_replica(self, instance: InstanceId, replica: ReplicaId) -> None:
        """Disconnect a replica; peeks and subscribes targeting it fail.
        Raises ``InstanceMissing``, ``ReplicaMissing``."""
        inst = self._instance(instance)
        inst.drop_replica(replica)
        self._dispatch(inst)

    # -- collections ---------------------------------------------------------------------------

    def create_dataflow(
        self,
        instance: InstanceId,
        dataflow: DataflowDescription,
        target_replica: ReplicaId | None = None,
    ) -> None:
        """Install ``dataflow``; its exports are readable at once at ``since = upper = as_of``.
        See :mod:`spate.compute.controller.dataflows` for the checks and errors."""
        inst = self._instance(instance)
        inst.create_dataflow(dataflow, target_replica)
        self._dispatch(inst)

    def drop_collections(self, instance: InstanceId, ids: Iterable[GlobalId]) -> None:
        """Drop collections (all or nothing). Raises ``InstanceMissing``,
        ``CollectionMissing``."""
        inst = self._instance(instance)
        inst.drop_collections(ids)
        self._dispatch(inst)

    def set_read_policy(
        self, instance: InstanceId, policies: Sequence[tuple[GlobalId, ReadPolicy]]
    ) -> None:
        """Set read policies (all or nothing). Raises ``InstanceMissing``,
        ``CollectionMissing``, ``WriteOnlyCollection``."""
        inst = self._instance(instance)
        inst.set_read_policy(policies)
        self._dispatch(inst)

    def acquire_read_hold(self, instance: InstanceId, id: GlobalId) -> ReadHold:
        """A read hold on ``id`` at its current since. The caller MUST release it."""
        inst = self._instance(instance)
        hold = inst.acquire_read_hold(id)
        self._dispatch(inst)
        return hold

    # -- peeks ---------------------------------------------------------------------------------

    def peek(
        self,
        instance: InstanceId,
        target: IndexTarget | PersistTarget,
        uuid: PeekId,
        timestamp: int,
        *,
        result_desc: RelationDesc,
        finishing: RowSetFinishing | None = None,
        literal_constraints: tuple[Row, ...] | None = None,
        target_replica: ReplicaId | None = None,
    ) -> asyncio.Future[PeekResult]:
        """Read ``target`` at ``timestamp``; the future resolves with exactly one result.
        Cancelling the future cancels the peek.

        An index target is an index export of this instance; a persist target names a storage
        collection (its shard and schema are filled in from storage). Raises
        ``InstanceMissing``, ``ReplicaMissing``, ``CollectionMissing``, ``PeekTargetInvalid``,
        ``PeekSinceViolation``, ``PeekExists``, ``InvalidPeek``; then no command was sent.
        """
        inst = self._instance(instance)
        loop = asyncio.get_running_loop()
        inst.peek(
            target,
            uuid,
            timestamp,
            finishing=finishing if finishing is not None else RowSetFinishing(),
            result_desc=result_desc,
            literal_constraints=literal_constraints,
            target_replica=target_replica,
            requested_at_ms=self._clock.now_millis(),
        )
        # A peek is never answered synchronously, so the future can be made after the fact.
        future: asyncio.Future[PeekResult] = loop.create_future()
        self._peek_futures[(instance, uuid)] = future
        future.add_done_callback(lambda f: self._peek_future_done(instance, uuid, f))
        self._dispatch(inst)
        return future

    def _peek_future_done(
        self, instance: InstanceId, uuid: PeekId, future: asyncio.Future[PeekResult]
    ) -> None:
        """A caller that cancels its future gives the peek up: cancel it, free its hold."""
        if not future.cancelled() or self._peek_futures.pop((instance, uuid), None) is None:
            return
        inst = self._instances.get(instance)
        if inst is not None and not inst.shut_down and uuid in inst.peeks:
            inst.cancel_peek(uuid)
            self._dispatch(inst)

    def cancel_peek(
        self, instance: InstanceId, uuid: PeekId, reason: PeekResult | None = None
    ) -> None:
        """Cancel a pending peek; its future gets ``reason`` (default ``PeekCanceled``)."""
        inst = self._instance(instance)
        inst.cancel_peek(uuid, reason)
        self._dispatch(inst)

    # -- introspection -------------------------------------------------------------------------

    def collection_ids(self, instance: InstanceId) -> list[GlobalId]:
        return sorted(c.id for c in self._instance(instance).live_collections())

    def collection_reverse_dependencies(self, instance: InstanceId, id: GlobalId) -> list[GlobalId]:
        """The live collections of ``instance`` that import ``id`` (which must be live)."""
        inst = self._instance(instance)
        inst.collection(id)
        return sorted(c.id for c in inst.live_collections() if id in c.compute_dependencies)

    def collection_frontiers(
        self, id: GlobalId, instance: InstanceId | None = None
    ) -> CollectionFrontiers:
        """Since and upper of ``id`` (searching every instance if none is given)."""
        if instance is not None:
            return introspection.collection_frontiers(self._instance(instance), id)
        for inst in self._instances.values():
            c = inst.collections.get(id)
            if c is not None and not c.dropped:
                return introspection.collection_frontiers(inst, id)
        raise CollectionMissing(id)

    def collection_error(self, instance: InstanceId, id: GlobalId) -> str | None:
        return introspection.collection_error(self._instance(instance), id)

    def collection_failure(self, instance: InstanceId, id: GlobalId) -> str | None:
        """Why no replica of ``instance`` computes ``id`` any more: each reported that the
        dataflow computing it failed for good (``None``: some replica still computes it).
        Reads waiting for ``id``'s upper can fail with it at once."""
        return introspection.collection_failure(self._instance(instance), id)

    def collection_hydrated(self, instance: InstanceId, id: GlobalId) -> bool:
        return introspection.collection_hydrated(self._instance(instance), id)

    def collections_hydrated_for_replicas(
        self,
        instance: InstanceId,
        replicas: Iterable[ReplicaId],
        exclude: Iterable[GlobalId] = (),
    ) -> bool:
        return introspection.collections_hydrated_for_replicas(
            self._instance(instance), replicas, exclude
        )

    def collection_info(self, instance: InstanceId, id: GlobalId) -> CollectionInfo:
        return introspection.collection_info(self._instance(instance), id)

    def replica_ids(self, instance: InstanceId) -> list[ReplicaId]:
        return sorted(self._instance(instance).replicas)

    def replica_info(self, instance: InstanceId, replica: ReplicaId) -> ReplicaInfo:
        return introspection.replica_info(self._instance(instance), replica)

    def replica_frontiers(
        self, instance: InstanceId, replica: ReplicaId
    ) -> dict[GlobalId, ReplicaFrontiers]:
        return introspection.replica_frontiers(self._instance(instance), replica)

    def peeks(self, instance: InstanceId) -> list[PeekInfo]:
        """The peeks of ``instance`` waiting for an answer."""
        return introspection.peeks(self._instance(instance))

    def subscribes(self, instance: InstanceId) -> dict[GlobalId, Frontier]:
        """The subscribes ``instance`` runs, with their uppers."""
        return introspection.subscribes(self._instance(instance))

    def history_len(self, instance: InstanceId) -> int:
        """Commands in the instance's history (bounded by its live objects)."""
        return len(self._instance(instance).history)

    # -- driving -------------------------------------------------------------------------------

    def handle_replica_event(self, event: ReplicaEvent) -> None:
        """Queue an event from a replica client; applied by the next :meth:`process`."""
        self._inbox.append(event)
        if self._wakeup is not None:
            self._wakeup.set()

    async def ready(self) -> None:
        """Return once :meth:`process` has something to do: a queued response or replica
        event, or a due maintenance pass. Cancel-safe."""
        if self._wakeup is None:
            self._wakeup = asyncio.Event()
        while True:
            self._wakeup.clear()
            if self._responses or self._inbox:
                return
            delay = self._next_maintenance - self._clock.monotonic()
            if delay <= 0:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), timeout=delay)

    async def process(self) -> ComputeControllerResponse | None:
        """Apply queued replica events (at most ``max_events_per_process``), run maintenance
        if due, and return at most one response."""
        return self.process_now()

    def process_now(self) -> ComputeControllerResponse | None:
        """:meth:`process` without the coroutine (for synchronous drivers and tests)."""
        inbox = self._inbox
        instances = self._instances
        touched: set[InstanceId] = set()
        for _ in range(min(len(inbox), self._max_events)):
            event = inbox.popleft()
            inst = instances.get(event.instance)
            if inst is None:
                continue
            touched.add(inst.id)
            if type(event) is ReplicaResponse:
                inst.handle_response(event.replica, event.epoch, event.response)
            elif isinstance(event, ReplicaConnected):
                inst.replica_connected(event.replica, event.epoch)
            elif isinstance(event, ReplicaFailed):
                inst.replica_failed(event.replica, event.epoch, event.reason)
        for id in touched:
            self._dispatch(instances[id])
        if self._clock.monotonic() >= self._next_maintenance:
            self.maintain()
        return self._responses.popleft() if self._responses else None

    def maintain(self) -> None:
        """Run one maintenance pass on every instance now."""
        self._next_maintenance = self._clock.monotonic() + self._interval_s
        for inst in self._instances.values():
            inst.maintain()
            self._dispatch(inst)

    def shutdown(self) -> None:
        """Stop every replica client and fail every pending peek. Irreversible."""
        for inst in self._instances.values():
            inst.shutdown("compute controller shut down")
            self._dispatch(inst)
        self._shut_down = True

    # -- carrying out actions ------------------------------------------------------------------

    def _dispatch(self, inst: Instance) -> None:
        for action in inst.drain():
            self._carry_out(action)

    def _carry_out(self, action: Action) -> None:
        if isinstance(action, SendCommand):
            entry = self._clients.get((action.instance, action.replica))
            if entry is not None and entry[0] == action.epoch:
                entry[1].send(action.command)
        elif isinstance(action, DeliverResponse):
            self._responses.append(action.response)
            if self._wakeup is not None:
                self._wakeup.set()
        elif isinstance(action, DeliverPeekResult):
            future = self._peek_futures.pop((action.instance, action.uuid), None)
            if future is not None and not future.done():
                future.set_result(action.result)
        elif isinstance(action, ConnectReplica):
            key = (action.instance, action.replica)
            old = self._clients.pop(key, None)
            if old is not None:
                old[1].close()
            handle = self._connector.connect(
                action.instance,
                action.replica,
                action.epoch,
                action.config,
                self.handle_replica_event,
            )
            self._clients[key] = (action.epoch, handle)
        elif isinstance(action, DisconnectReplica):
            key = (action.instance, action.replica)
            entry = self._clients.get(key)
            if entry is not None and entry[0] == action.epoch:
                del self._clients[key]
                entry[1].close()
