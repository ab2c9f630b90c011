"""The storage replica's state machine (sans-I/O): commands and events in, actions out.

:class:`ReplicaState` lives as long as the replica process; controller connections come and go.
It is driven by three kinds of calls, each returning the actions its runtime
(:class:`~spate.storage.replica.server.StorageReplica`) must carry out, in order:

* ``connect(epoch)`` / ``disconnect(epoch)`` — a controller connection starts or ends;
* ``command(epoch, command)`` — a command arrived. It is checked against the protocol stage
  first (``StageViolation``: the connection closes and nothing is applied);
* ``handle(event)`` — the runtime reports an object's uppers, status or statistics.

Obligations kept here:

* **Reconciliation.** Objects keep running across connections. The replayed history reuses
  what runs (a ``RunIngestion``/``RunSink`` with an unchanged description is a no-op); a changed
  description restarts the object; at ``InitializationComplete`` every object the connection's
  history did not mention is stopped (no report), then the uppers and status of everything that
  runs are reported afresh on the new connection.
* **Dropping.** ``AllowCompaction(id, {})`` for a running object stops it, releases its upstream
  resources and answers ``DroppedId(id)`` (after the stop).
* **Frontiers** reported on one connection never regress (a report that does not advance is
  not sent).
* **Statuses** are sent when they change (``starting``, ``running``, ``stalled`` with its
  error), stamped with the injected clock. An ingestion's export that stopped for good while
  the ingestion goes on (a MySQL table changed upstream) is reported once as ``ceased`` under
  the export's id, and again on every new connection.
* **Writes.** Nothing is written before ``AllowWrites`` (``EnableWrites``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from spate.clock import Clock
from spate.frontier.antichain import Frontier
from spate.ids import GlobalId, ReplicaId
from spate.protocol.common import Hello
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
    SinkStatistics,
    SourceStatistics,
    StatisticsUpdates,
    StatusUpdate,
    StorageParameters,
    UpdateConfiguration,
)

# -- actions (out) --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StartObject:
    """Start running ``command``'s ingestion or sink (nothing of that id runs now)."""

    command: RunIngestion | RunSink


@dataclass(frozen=True, slots=True)
class StopObject:
    """Stop object ``id`` (wait for its step in flight, close it); with ``release_upstream``
    also release what it holds upstream (a replication slot): it is dropped for good."""

    id: GlobalId
    release_upstream: bool


@dataclass(frozen=True, slots=True)
class Send:
    """Send ``message`` on the current connection (dropped if there is none)."""

    message: DroppedId | FrontierUpper | StatusUpdate | StatisticsUpdates


@dataclass(frozen=True, slots=True)
class Configure:
    """The replica's parameters are now ``params`` (already merged)."""

    params: StorageParameters


@dataclass(frozen=True, slots=True)
class EnableWrites:
    """Objects may write (persist and external systems) from now on."""


Action = StartObject | StopObject | Send | Configure | EnableWrites

# -- events (in) ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Uppers:
    """Object ``id`` reached these uppers (of its collections)."""

    id: GlobalId
    uppers: Mapping[GlobalId, Frontier]


@dataclass(frozen=True, slots=True)
class StatusChanged:
    """Object ``id`` is now ``status`` (with ``error`` when stalled)."""

    id: GlobalId
    status: ObjectStatus
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Statistics:
    """Statistics of the running objects, collected now."""

    sources: tuple[SourceStatistics, ...]
    sinks: tuple[SinkStatistics, ...]


@dataclass(frozen=True, slots=True)
class ExportsFailed:
    """Ingestion ``id``'s exports ``failed`` (export id -> why) stopped for good; the others
    go on. Each report names every failed export so far."""

    id: GlobalId
    failed: Mapping[GlobalId, str]


Event = Uppers | StatusChanged | Statistics | ExportsFailed


@dataclass
class ObjectState:
    """What the state knows of one running object."""

    command: RunIngestion | RunSink
    collections: tuple[GlobalId, ...]
    status: ObjectStatus | None = None
    error: str | None = None
    uppers: dict[GlobalId, Frontier] = field(default_factory=dict)
    failed_exports: dict[GlobalId, str] = field(default_factory=dict)


class ReplicaState:
    """The sans-I/O state of a storage replica (module docs). Event-loop thread only."""

    def __init__(self, *, clock: Clock, replica_id: ReplicaId | None = None) -> None:
        self._clock = clock
        self._replica_id = replica_id
        self.objects: dict[GlobalId, ObjectState] = {}
        self.params = StorageParameters()
        self.writes_allowed = False
        self._epoch: int | None = None
        self._stages: ReplicaStages | None = None
        self._mentioned: set[GlobalId] = set()
        self._reported: dict[GlobalId, Frontier] = {}

    # -- connections ------------------------------------------------------------------------------

    def connect(self, epoch: int) -> list[Action]:
        """A controller connection with ``epoch`` starts (it replaces any other)."""
        self._epoch = epoch
        self._stages = ReplicaStages("storage", epoch=epoch)
        self._mentioned = set()
        self._reported = {}
        return []

    def disconnect(self, epoch: int) -> list[Action]:
        if self._epoch == epoch:
            self._epoch = None
            self._stages = None
        return []

    def command(self, epoch: int, command: object) -> list[Action]:
        """Apply ``command`` of connection ``epoch`` (``StageViolation`` out of stage)."""
        if epoch != self._epoch or self._stages is None:
            return []  # a replaced connection's late command
        self._stages.observe(command)
        out: list[Action] = []
        if isinstance(command, Hello):
            return out
        if isinstance(command, UpdateConfiguration):
            self.params = self.params.update(command.params)
            out.append(Configure(self.params))
        elif isinstance(command, (RunIngestion, RunSink)):
            self._mentioned.add(command.id)
            self._run(command, out)
        elif isinstance(command, AllowCompaction):
            if command.frontier.is_empty() and command.id in self.objects:
                obj = self.objects.pop(command.id)
                for cid in obj.collections:
                    self._reported.pop(cid, None)
                out.append(StopObject(command.id, release_upstream=True))
                out.append(Send(DroppedId(command.id)))
        elif isinstance(command, InitializationComplete):
            for id in [i for i in self.objects if i not in self._mentioned]:
                del self.objects[id]
                out.append(StopObject(id, release_upstream=False))
            self._report_all(out)
        elif isinstance(command, AllowWrites) and not self.writes_allowed:
            self.writes_allowed = True
            out.append(EnableWrites())
        return out

    def _run(self, command: RunIngestion | RunSink, out: list[Action]) -> None:
        existing = self.objects.get(command.id)
        if existing is not None:
            if existing.command == command:
                return
            out.append(StopObject(command.id, release_upstream=False))
        if isinstance(command, RunIngestion):
            collections = command.description.collection_ids(command.id)
        else:
            collections = (command.id,)
        self.objects[command.id] = ObjectState(command, tuple(collections))
        out.append(StartObject(command))

    def _report_all(self, out: list[Action]) -> None:
        for id, obj in list(self.objects.items()):
            self._report(obj, obj.uppers, out)
            if obj.status is not None:
                out.append(Send(self._status_update(id, obj)))
            for eid, error in obj.failed_exports.items():
                out.append(Send(self._export_ceased(eid, error)))

    # -- events -----------------------------------------------------------------------------------

    def handle(self, event: Event) -> list[Action]:
        """Apply a report of the runtime (events of objects no longer running are ignored)."""
        out: list[Action] = []
        if isinstance(event, Statistics):
            if event.sources or event.sinks:
                out.append(Send(StatisticsUpdates(event.sources, event.sinks)))
            return out
        obj = self.objects.get(event.id)
        if obj is None:
            return out
        if isinstance(event, Uppers):
            for cid, upper in event.uppers.items():
                last = obj.uppers.get(cid)
                obj.uppers[cid] = upper if last is None else last.join(upper)
            self._report(obj, event.uppers, out)
        elif isinstance(event, ExportsFailed):
            for eid, error in event.failed.items():
                if eid in obj.collections and obj.failed_exports.get(eid) != error:
                    obj.failed_exports[eid] = error
                    out.append(Send(self._export_ceased(eid, error)))
        elif obj.status is not event.status or obj.error != event.error:
            obj.status, obj.error = event.status, event.error
            out.append(Send(self._status_update(event.id, obj)))
        return out

    def _report(
        self, obj: ObjectState, uppers: Mapping[GlobalId, Frontier], out: list[Action]
    ) -> None:
        for cid, upper in uppers.items():
            last = self._reported.get(cid)
            if last is not None and not last.less_than(upper):
                continue
            self._reported[cid] = upper
            out.append(Send(FrontierUpper(cid, upper)))

    def _status_update(self, id: GlobalId, obj: ObjectState) -> StatusUpdate:
        assert obj.status is not None
        return StatusUpdate(
            id,
            obj.status,
            self._clock.now_millis(),
            error=obj.error,
            replica_id=self._replica_id,
        )

    def _export_ceased(self, export: GlobalId, error: str) -> StatusUpdate:
        return StatusUpdate(
            export,
            ObjectStatus.CEASED,
            self._clock.now_millis(),
            error=error,
            replica_id=self._replica_id,
        )
