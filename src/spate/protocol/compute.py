"""The compute protocol: commands from the controller and responses from a compute replica.

The protocol is asynchronous, in order and reliable per connection. Each connection is
one *protocol iteration* (epoch). Both sides MUST tolerate messages that do not reflect the
latest state: a ``PeekResponse`` other than ``Canceled`` after a ``CancelPeek``, a ``CancelPeek``
for a peek already answered, frontiers for a collection the controller already dropped.

Stages on the replica: *Creation* (``Hello``, then ``CreateInstance``; the replica
sends nothing), *Initialization* (the replayed history, ending with ``InitializationComplete``;
the replica reconciles and may defer responses), *Computation* (read-only until
``AllowWrites``). A command out of its stage is a ``ProtocolError`` and closes the connection.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import pyarrow as pa

from spate.frontier.antichain import Frontier
from spate.ids import GlobalId, PeekId, ShardId
from spate.plan.dataflow import DataflowDescription
from spate.plan.finishing import RowSetFinishing
from spate.protocol.common import Hello, all_unset, merge_set_fields
from spate.repr.desc import RelationDesc
from spate.repr.types import Row
from spate.wire import wire

# --- configuration ---------------------------------------------------------------------------


@wire("compute.instance_config")
@dataclass(frozen=True, slots=True)
class InstanceConfig:
    """Replica-wide settings fixed for the life of the replica process.

    ``logging_interval_ms``: how often the replica reports statistics and status.
    ``expiration_offset_ms``: dataflows may stop advancing this long past wall-clock time
    (``None``: never). On reconnection the config MUST be compatible with the previous one:
    equal, except that the expiration offset may only tighten.
    """

    logging_interval_ms: int = 1000
    expiration_offset_ms: int | None = None

    def compatible_with(self, previous: InstanceConfig) -> bool:
        if self.logging_interval_ms != previous.logging_interval_ms:
            return False
        if previous.expiration_offset_ms is None:
            return True
        return (
            self.expiration_offset_ms is not None
            and self.expiration_offset_ms <= previous.expiration_offset_ms
        )


@wire("compute.parameters")
@dataclass(frozen=True, slots=True)
class ComputeParameters:
    """Tunables applied immediately and globally (also to running dataflows and peeks).

    Every field is optional; ``None`` means "keep the previous value". ``update`` overlays the
    set fields of a later value, which lets the history keep a single merged command.
    """

    max_result_size: int | None = None
    """Largest peek or subscribe batch, in bytes of encoded rows; larger ones become errors."""
    step_interval_ms: int | None = None
    """How often the replica steps its dataflows when inputs advance."""
    arrangement_merge_effort: int | None = None
    """How much merging an arrangement does per step (higher: fewer, larger batches)."""
    max_one_off_rows: int | None = None
    """Largest estimated row count of a one-off read's dataflow (a product of cross-joined
    inputs); a larger one is refused before it runs, its peeks answered with an error of
    SQLSTATE 53200. Unset: the replica's default (10^8)."""

    def update(self, later: ComputeParameters) -> ComputeParameters:
        return merge_set_fields(self, later)

    def is_empty(self) -> bool:
        return all_unset(self)


# --- commands --------------------------------------------------------------------------------


@wire("compute.create_instance")
@dataclass(frozen=True, slots=True)
class CreateInstance:
    """Complete the creation stage: build the replica's compute state.

     The controller MUST send it exactly once per connection, right after ``Hello``. On a
     reconnection the replica MUST halt if ``config`` is not compatible with the previous one
    : mixing two configurations would give wrong results.
    """

    config: InstanceConfig


@wire("compute.initialization_complete")
@dataclass(frozen=True, slots=True)
class InitializationComplete:
    """End of the initialization stage: the replayed history is complete.

    The controller MUST send it at most once per connection. The replica MUST now reconcile its
    state with the commands received (reusing compatible dataflows) and then answer
    everything it deferred.
    """


@wire("compute.allow_writes")
@dataclass(frozen=True, slots=True)
class AllowWrites:
    """Collection ``id`` may now write to persist (leave read-only mode). Irreversible.

    The controller MUST send it at most once per collection and only for collections with a
    non-empty as_of. Until it arrives, a replica computes materialized views but writes nothing.
    """

    id: GlobalId


@wire("compute.update_configuration")
@dataclass(frozen=True, slots=True)
class UpdateConfiguration:
    """Apply ``params`` now, to everything. Unset fields keep their previous value."""

    params: ComputeParameters


@wire("compute.create_dataflow")
@dataclass(frozen=True, slots=True)
class CreateDataflow:
    """Build ``dataflow``, suspended until each export is ``Schedule``d.

    The controller MUST ensure every import exists and is readable at the ``as_of`` (its since
    is ``<=`` the ``as_of``), export ids are unique within the epoch, ``as_of`` is set and
    non-empty, and ``objects_to_build`` is topologically ordered. Afterwards the replica MUST
    report ``Frontiers`` for index and materialized-view exports, and ``SubscribeResponse``s for
    subscribe exports. A replica MAY halt on a violated precondition (halting is preferred to
    wrong results).
    """

    dataflow: DataflowDescription


@wire("compute.schedule")
@dataclass(frozen=True, slots=True)
class Schedule:
    """Start computing the (suspended) dataflow that exports ``id``.

    The controller MUST NOT send it for an unknown id or an id already compacted to ``{}``.
    """

    id: GlobalId


@wire("compute.allow_compaction")
@dataclass(frozen=True, slots=True)
class AllowCompaction:
    """Readers outside the replica no longer need times not beyond ``frontier`` for ``id``.

    The replica MAY compact the export's arrangement up to ``frontier`` (which may be beyond
    the collection's upper). ``frontier == {}`` is the canonical drop: the replica MUST drop the
    dataflow and eventually report every frontier of ``id`` as ``{}`` (subscribes: ``DroppedAt``
    unless already complete). The replica MUST keep internal inputs readable for as long as its
    own dataflows read them.
    """

    id: GlobalId
    frontier: Frontier


@wire("compute.peek_target_index")
@dataclass(frozen=True, slots=True)
class IndexTarget:
    """Peek the arrangement (index export) ``id`` on this replica."""

    id: GlobalId


@wire("compute.peek_target_persist")
@dataclass(frozen=True, slots=True)
class PersistTarget:
    """Peek the persist shard ``shard`` of collection ``id`` directly (the fast path)."""

    id: GlobalId
    shard: ShardId
    desc: RelationDesc


PeekTarget = IndexTarget | PersistTarget


@wire("compute.peek")
@dataclass(frozen=True, slots=True)
class Peek:
    """Read ``target`` at ``timestamp`` and answer with exactly one ``PeekResponse``.

    ``literal_constraints``: when set (never empty), only rows whose index key equals one of
    these key tuples. ``finishing`` is applied to the accumulated rows (see
    :mod:`spate.plan.finishing`). ``result_desc`` is the schema of the finished rows.

    The controller MUST NOT reuse ``uuid`` within an epoch and MUST NOT peek a collection it
    has not created. If ``timestamp`` is not beyond the target's since, the replica MUST answer
    ``PeekError`` (never undefined behaviour). If ``timestamp`` is not below the target's upper,
    the replica MUST wait until it is. Results larger than ``max_result_size`` MUST become
    ``PeekError``.
    """

    target: IndexTarget | PersistTarget
    uuid: PeekId
    timestamp: int
    finishing: RowSetFinishing
    result_desc: RelationDesc
    literal_constraints: tuple[Row, ...] | None = None


@wire("compute.cancel_peek")
@dataclass(frozen=True, slots=True)
class CancelPeek:
    """Best-effort cancellation of peek ``uuid``.

    If the replica cancels it, it MUST answer ``PeekCanceled``; if the peek was already
    answered, it MUST NOT answer again. Unknown uuids are ignored.
    """

    uuid: PeekId


ComputeCommand = (
    Hello
    | CreateInstance
    | InitializationComplete
    | AllowWrites
    | UpdateConfiguration
    | CreateDataflow
    | Schedule
    | AllowCompaction
    | Peek
    | CancelPeek
)

# --- responses -------------------------------------------------------------------------------


@wire("compute.frontiers")
@dataclass(frozen=True, slots=True)
class Frontiers:
    """New frontiers of collection ``id`` on this replica (``None``: unchanged).

    * ``write_frontier``: contents are sealed below it; ``{}`` means they never change again.
    * ``input_frontier``: the replica has finished reading its inputs below it.
    * ``output_frontier``: the replica has finished processing input up to it (hydration).

    Sent only for index and materialized-view exports. The replica MUST NOT regress: the first
    report of each kind is ``>=`` the as_of, later ones ``>=`` earlier ones, and after ``{}`` a
    kind is never reported again. After ``AllowCompaction({})`` the replica MUST eventually
    report ``{}`` for every kind not already ``{}``.
    """

    id: GlobalId
    write_frontier: Frontier | None = None
    input_frontier: Frontier | None = None
    output_frontier: Frontier | None = None


@wire("compute.peek_rows")
@dataclass(frozen=True, slots=True)
class PeekRows:
    """The finished rows: the ``result_desc`` columns plus ``_diff`` (multiplicity > 0)."""

    rows: pa.Table


@wire("compute.peek_error", 2)
@dataclass(frozen=True, slots=True)
class PeekError:
    """The peek failed; ``message`` says why, naming the collection and frontiers.

    ``sqlstate``: the SQLSTATE of the error the replica raised evaluating the read (``22012``
    a division by zero, ``22P02`` text that does not parse as its cast's type, ``53200`` a
    one-off refused as too large…); ``None`` when the read could not be served at all (not an
    index here, below the since, a dataflow that failed without one). ``pg_message``:
    PostgreSQL's text for that error (``division by zero``; ``None``: the message). Readers
    take both from these fields, never from the message."""

    message: str
    sqlstate: str | None = None
    pg_message: str | None = None


@wire("compute.peek_canceled")
@dataclass(frozen=True, slots=True)
class PeekCanceled:
    """The peek was canceled by ``CancelPeek`` before it was answered."""


@wire("compute.peek_response")
@dataclass(frozen=True, slots=True)
class PeekResponse:
    """The one answer to peek ``uuid``. ``PeekCanceled`` only after a ``CancelPeek``."""

    uuid: PeekId
    response: PeekRows | PeekError | PeekCanceled


@wire("compute.subscribe_batch", 2)
@dataclass(frozen=True, slots=True)
class SubscribeBatch:
    """The changes of a subscribe in ``[lower, upper)``.

    ``updates``: the data columns plus ``_time`` and ``_diff``, consolidated, every time within
    ``[lower, upper)`` and ``>= as_of``; or ``error`` instead (``updates`` is then ``None``).
    Consecutive batches are contiguous, increasing and non-empty intervals; the first batch's
    upper is ``>= as_of``. After a batch with ``upper == {}`` no more responses follow.
    ``error_sqlstate`` and ``error_pg_message``: the SQLSTATE and PostgreSQL's text of
    ``error``, as :class:`PeekError`'s.
    """

    lower: Frontier
    upper: Frontier
    updates: pa.Table | None
    error: str | None = None
    error_sqlstate: str | None = None
    error_pg_message: str | None = None


@wire("compute.subscribe_dropped_at")
@dataclass(frozen=True, slots=True)
class SubscribeDroppedAt:
    """The subscribe was dropped by ``AllowCompaction({})`` at ``frontier`` (its last upper)."""

    frontier: Frontier


@wire("compute.subscribe_response")
@dataclass(frozen=True, slots=True)
class SubscribeResponse:
    """Progress of subscribe ``id``."""

    id: GlobalId
    response: SubscribeBatch | SubscribeDroppedAt


@wire("compute.status")
@dataclass(frozen=True, slots=True)
class Status:
    """Informational status of the replica. Correctness MUST NOT depend on it."""

    message: str
    id: GlobalId | None = None


@wire("compute.dataflow_statistics")
@dataclass(frozen=True, slots=True)
class DataflowStatistics:
    """Cumulative counts of the dataflow that exports ``id``, since the replica built it.

    ``steps``: steps run (idle ones included); ``spark_jobs``: Spark actions those steps ran
    (an idle step, or one whose operators took the driver path, runs none); ``step_time_ms``:
    wall time spent stepping; ``rows_in``: input updates the steps read; ``rows_out``: updates
    they produced into the dataflow's exports. Each report is a full current value.
    """

    id: GlobalId
    steps: int = 0
    spark_jobs: int = 0
    step_time_ms: int = 0
    rows_in: int = 0
    rows_out: int = 0


@wire("compute.statistics_updates")
@dataclass(frozen=True, slots=True)
class StatisticsUpdates:
    """Statistics of the dataflows that changed since the last report; sent at most once per
    ``logging_interval_ms``. Informational: correctness MUST NOT depend on it."""

    dataflows: tuple[DataflowStatistics, ...] = ()


EVAL_ERROR_STATUS: Final = "evaluation error: "
"""A :class:`Status` message starting so: collection ``id``'s error collection is not empty at
its latest time (the rest says why); :data:`EVAL_ERRORS_CLEARED`: it is empty again."""
EVAL_ERRORS_CLEARED: Final = "evaluation errors cleared"


def failed_status(id: GlobalId, message: str) -> Status:
    """The :class:`Status` a replica sends when the dataflow computing ``id`` failed for good
    there (not an evaluation error: Spark failing, an input it cannot read): the replica
    computes ``id`` no more until it is rehydrated."""
    return Status(f"collection {id} failed: {message}", id)


def is_failed_status(status: Status) -> bool:
    """Whether ``status`` is a :func:`failed_status`."""
    return status.id is not None and status.message.startswith(f"collection {status.id} failed: ")


ComputeResponse = Frontiers | PeekResponse | SubscribeResponse | Status | StatisticsUpdates
