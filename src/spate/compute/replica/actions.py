"""What the replica state machine asks its driver to do (actions), and what the driver reports
back (events). Plain frozen values: the state machine never performs I/O itself.

Keys: every dataflow the replica builds gets a process-unique integer ``key`` (a reconnection
may reuse a running dataflow under a new description, and an export id may be rebuilt after a
reconciliation, so export ids alone do not name a running dataflow).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pyarrow as pa

from spate.errors import Problem
from spate.frontier.antichain import Frontier
from spate.ids import GlobalId, PeekId
from spate.plan.dataflow import DataflowDescription
from spate.protocol.compute import ComputeParameters, ComputeResponse, Peek

# --- actions ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Send:
    """Send ``response`` on connection ``epoch`` (if it is still open)."""

    epoch: int
    response: ComputeResponse


@dataclass(frozen=True, slots=True)
class Halt:
    """Stop the process: continuing would risk wrong results (an incompatible configuration)."""

    reason: str


@dataclass(frozen=True, slots=True)
class BuildDataflow:
    """Build ``description`` at its as_of, suspended. Report ``DataflowReady`` or
    ``DataflowFailed``. ``index_sources`` maps each index import to the key of the running
    dataflow that exports it. Materialized views start read-only (see ``EnableWrites``)."""

    key: int
    description: DataflowDescription
    index_sources: Mapping[GlobalId, int]


@dataclass(frozen=True, slots=True)
class ScheduleDataflow:
    """Start stepping dataflow ``key`` as its inputs advance; report each ``Stepped``."""

    key: int


@dataclass(frozen=True, slots=True)
class CompactExport:
    """Let index export ``export`` of dataflow ``key`` compact to ``frontier``; ``{}`` drops the
    export's arrangement (the dataflow's other exports continue)."""

    key: int
    export: GlobalId
    frontier: Frontier


@dataclass(frozen=True, slots=True)
class DropSink:
    """Stop the materialized-view or subscribe export ``export`` of dataflow ``key``."""

    key: int
    export: GlobalId


@dataclass(frozen=True, slots=True)
class DropDataflow:
    """Drop dataflow ``key`` and release everything it holds. No more events for it."""

    key: int


@dataclass(frozen=True, slots=True)
class RunPeek:
    """Answer ``peek`` now with ``PeekFinished`` (index peeks: the index of dataflow ``key`` is
    readable at the peek's timestamp; persist peeks: wait for the shard's upper yourself)."""

    epoch: int
    peek: Peek
    key: int | None = None


@dataclass(frozen=True, slots=True)
class AbortPeek:
    """Stop working on peek ``uuid`` (its answer would be discarded anyway)."""

    uuid: PeekId


@dataclass(frozen=True, slots=True)
class EnableWrites:
    """The materialized-view export ``export`` of dataflow ``key`` may write to its shard."""

    key: int
    export: GlobalId


@dataclass(frozen=True, slots=True)
class Configure:
    """Apply the merged parameters (all fields set or ``None`` for defaults)."""

    params: ComputeParameters


Action = (
    Send
    | Halt
    | BuildDataflow
    | ScheduleDataflow
    | CompactExport
    | DropSink
    | DropDataflow
    | RunPeek
    | AbortPeek
    | EnableWrites
    | Configure
)

# --- events ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DataflowReady:
    """Dataflow ``key`` was built; its upper is ``upper`` (its as_of)."""

    key: int
    upper: Frontier


@dataclass(frozen=True, slots=True)
class Stepped:
    """Dataflow ``key`` produced its output up to ``upper``.

    ``subscribe_updates``: per subscribe export, the updates of the step (times in the step's
    interval, consolidated, external column names, ``_time``, ``_diff``).
    """

    key: int
    upper: Frontier
    subscribe_updates: Mapping[GlobalId, pa.Table] = field(default_factory=dict)
    error: Problem | None = None
    """The dataflow's error collection is not empty just before ``upper``: why reads of its
    exports fail there (and its subscribes end)."""
    seconds: float = 0.0
    """Wall time of the step."""
    spark_jobs: int = 0
    """Spark actions the step ran."""
    rows_in: int = 0
    """Input updates the step read."""
    rows_out: int = 0
    """Updates the step produced into the dataflow's exports."""


@dataclass(frozen=True, slots=True)
class DataflowFailed:
    """Dataflow ``key`` cannot continue (it failed to build, or a step failed for good).
    ``sqlstate``: the code of the error that failed it (``None``: it has none)."""

    key: int
    message: str
    sqlstate: str | None = None


@dataclass(frozen=True, slots=True)
class SinkProgress:
    """The shard of materialized-view export ``export`` has (at least) upper ``upper``."""

    key: int
    export: GlobalId
    upper: Frontier


@dataclass(frozen=True, slots=True)
class PeekFinished:
    """The answer to peek ``uuid`` of connection ``epoch``: rows, or an error message with the
    error's SQLSTATE and PostgreSQL text (``None``: it has none)."""

    epoch: int
    uuid: PeekId
    rows: pa.Table | None = None
    error: str | None = None
    sqlstate: str | None = None
    pg_message: str | None = None


Event = DataflowReady | Stepped | DataflowFailed | SinkProgress | PeekFinished
