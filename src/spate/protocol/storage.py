"""The storage protocol: commands from the controller and responses from a storage replica.

Like compute, the protocol is asynchronous, in order and reliable per connection,
and each connection is one protocol iteration (epoch). Stages on the replica: *Creation*
(``Hello``), *Initialization* (the replayed history, ending with ``InitializationComplete``),
*Computation*, read-only until ``AllowWrites``. A command out of its stage is a
``ProtocolError`` and closes the connection (:mod:`spate.protocol.stages`).

Unlike compute, frontiers are reported per collection as a single ``FrontierUpper`` and the
replica reports statuses and statistics of everything it runs.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass

from spate.frontier.antichain import Frontier
from spate.ids import GlobalId, ReplicaId
from spate.protocol.common import Hello, all_unset, merge_set_fields
from spate.protocol.storage_desc import IngestionDescription, SinkDescription
from spate.wire import wire

# --- configuration ---------------------------------------------------------------------------


@wire("storage.parameters")
@dataclass(frozen=True, slots=True)
class StorageParameters:
    """Tunables applied immediately to everything the replica runs.

    Every field is optional; ``None`` means "keep the previous value". ``update`` overlays the
    set fields of a later value, which lets the history keep a single merged command.
    """

    statistics_interval_ms: int | None = None
    """How often the replica sends ``StatisticsUpdates``."""
    status_interval_ms: int | None = None
    """How often a running object re-reports an unchanged ``running`` status (0: never)."""
    pg_snapshot_batch_rows: int | None = None
    """Rows per batch while snapshotting a PostgreSQL table."""
    pg_keepalive_interval_ms: int | None = None
    """How often a CDC source sends standby status (LSN feedback) to PostgreSQL."""
    file_max_files_per_tick: int | None = None
    """Most files a file source ingests in one timestamp."""
    sink_max_batch_rows: int | None = None
    """Most rows a sink writes in one transaction or file before committing progress."""

    def update(self, later: StorageParameters) -> StorageParameters:
        return merge_set_fields(self, later)

    def is_empty(self) -> bool:
        return all_unset(self)


# --- commands --------------------------------------------------------------------------------


@wire("storage.initialization_complete")
@dataclass(frozen=True, slots=True)
class InitializationComplete:
    """End of the initialization stage: the replayed history is complete.

    The controller MUST send it at most once per connection. The replica MUST then stop every
    ingestion and sink it runs that the history did not mention, and answer what it deferred.
    """


@wire("storage.allow_writes")
@dataclass(frozen=True, slots=True)
class AllowWrites:
    """Leave read-only mode: ingestions and sinks may now write. Irreversible.

    Until it arrives a replica MAY read upstream and prepare, but MUST NOT append to persist
    shards or write to external systems (a new controller is still hydrating beside the old).
    """


@wire("storage.update_configuration")
@dataclass(frozen=True, slots=True)
class UpdateConfiguration:
    """Apply ``params`` now, to everything. Unset fields keep their previous value."""

    params: StorageParameters


@wire("storage.run_ingestion")
@dataclass(frozen=True, slots=True)
class RunIngestion:
    """Run (or, if already running, re-run with the new description) ingestion ``id``.

    The controller MUST have created every collection of the description (their shards exist)
    and MUST NOT reuse an id for another ingestion. The replica MUST resume each export at its
    shard's upper, and report ``FrontierUpper`` for the ingestion's collections as they
    advance and ``StatusUpdate`` (``starting``, then ``running`` or ``stalled``…).
    """

    id: GlobalId
    description: IngestionDescription


@wire("storage.run_sink")
@dataclass(frozen=True, slots=True)
class RunSink:
    """Run (or re-run with the new description) sink ``id``.

    The controller MUST hold back compaction of ``from_id`` at ``description.as_of`` or
    earlier. The replica reports ``FrontierUpper(id, …)`` as the sink's progress commits.
    """

    id: GlobalId
    description: SinkDescription


@wire("storage.allow_compaction")
@dataclass(frozen=True, slots=True)
class AllowCompaction:
    """Nobody outside the replica needs collection ``id`` at times not beyond ``frontier``.

    ``frontier == {}`` is the canonical drop: for an ingestion's own id the replica MUST stop
    the ingestion; for a sink, stop the sink; then answer ``DroppedId(id)``. Compaction
    frontiers of one id MUST NOT regress.
    """

    id: GlobalId
    frontier: Frontier


StorageCommand = (
    Hello
    | InitializationComplete
    | AllowWrites
    | UpdateConfiguration
    | RunIngestion
    | RunSink
    | AllowCompaction
)

# --- responses -------------------------------------------------------------------------------


@wire("storage.frontier_upper")
@dataclass(frozen=True, slots=True)
class FrontierUpper:
    """Collection ``id`` (an ingestion's collection or a sink) is complete below ``upper``.

    MUST NOT regress; after ``{}`` no more reports for ``id``.
    """

    id: GlobalId
    upper: Frontier


@wire("storage.dropped_id")
@dataclass(frozen=True, slots=True)
class DroppedId:
    """The replica stopped ``id`` after ``AllowCompaction(id, {})`` and freed its resources."""

    id: GlobalId


@wire("storage.source_statistics")
@dataclass(frozen=True, slots=True)
class SourceStatistics:
    """Current values (not deltas) for one ingestion collection on one worker."""

    id: GlobalId
    worker: int = 0
    messages_received: int = 0
    bytes_received: int = 0
    updates_staged: int = 0
    updates_committed: int = 0
    records_indexed: int = 0
    snapshot_committed: bool = False
    snapshot_records_known: int | None = None
    snapshot_records_staged: int | None = None
    offset_known: int | None = None
    offset_committed: int | None = None
    rehydration_latency_ms: int | None = None


@wire("storage.sink_statistics")
@dataclass(frozen=True, slots=True)
class SinkStatistics:
    """Current values (not deltas) for one sink on one worker."""

    id: GlobalId
    worker: int = 0
    messages_staged: int = 0
    messages_committed: int = 0
    bytes_staged: int = 0
    bytes_committed: int = 0


@wire("storage.statistics_updates")
@dataclass(frozen=True, slots=True)
class StatisticsUpdates:
    """Periodic statistics; each entry replaces the previous value for its (id, worker)."""

    sources: tuple[SourceStatistics, ...] = ()
    sinks: tuple[SinkStatistics, ...] = ()


class ObjectStatus(enum.Enum):
    """The health of an ingestion or sink. ``dropped`` supersedes everything."""

    STARTING = "starting"
    RUNNING = "running"
    PAUSED = "paused"
    STALLED = "stalled"
    CEASED = "ceased"
    DROPPED = "dropped"


@wire("storage.status_update")
@dataclass(frozen=True, slots=True)
class StatusUpdate:
    """A change in the status of ingestion or sink ``id`` at wall-clock ``timestamp_ms``, or
    of one export (subsource) of a running ingestion that stopped for good while the ingestion
    goes on: then ``id`` is the export's and the status ``ceased``.

    ``error`` is set for ``stalled`` and ``ceased``; ``hints`` suggest fixes;
    ``namespaced_errors`` carries per-component errors (``{"postgres": "slot missing"}``).
    A replica SHOULD NOT repeat ``paused``; after ``dropped`` no more updates for ``id``.
    """

    id: GlobalId
    status: ObjectStatus
    timestamp_ms: int
    error: str | None = None
    hints: tuple[str, ...] = ()
    namespaced_errors: dict[str, str] = dataclasses.field(default_factory=dict)
    replica_id: ReplicaId | None = None

    def __hash__(self) -> int:
        return hash((self.id, self.status, self.timestamp_ms, self.error, self.hints))


StorageResponse = FrontierUpper | DroppedId | StatisticsUpdates | StatusUpdate
