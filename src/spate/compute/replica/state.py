"""The compute replica's state machine (sans-I/O): commands and events in, actions out.

:class:`ReplicaState` lives as long as the replica process; connections come and go. It is
driven by three kinds of calls, each returning the actions the driver must perform in order
(:mod:`spate.compute.replica.actions`):

* ``connect(epoch)`` / ``disconnect(epoch)`` — a controller connection (one protocol
  iteration) starts or ends; a newer epoch replaces an older one (the transport enforces it);
* ``command(epoch, command)`` — a command arrived. It is checked against the protocol stage
  first (``StageViolation`` closes the connection and nothing is applied);
* ``handle(event)`` — the driver reports progress of dataflows, sinks and peeks.

Obligations kept here, each tested in ``tests/compute/replica``:

* **Stages.** Commands of the initialization stage are buffered; at ``InitializationComplete``
  the replica *reconciles* (:mod:`spate.compute.replica.reconcile`): compatible running
  dataflows are reused (and compacted to the new as_of), the others are dropped without any
  report, pending peeks of older connections are forgotten without an answer, and then the
  buffered commands run. A ``CreateInstance`` incompatible with the previous one halts.
* **Frontiers** of index and materialized-view exports never regress, the first is ``>=`` the
  as_of, and ``{}`` is final (:mod:`spate.compute.replica.frontiers`). An index reports its
  dataflow's upper for all three kinds; a materialized view reports the upper of its shard as
  the write frontier and its dataflow's upper as input and output frontier.
* **Peeks** get exactly one answer per connection: an index peek waits until the dataflow's
  upper is beyond its timestamp and is answered ``PeekError`` (naming both frontiers) below the
  arrangement's compaction frontier; ``CancelPeek`` answers ``PeekCanceled`` unless answered;
  results above ``max_result_size`` become errors.
* **Subscribes** are batched by :mod:`spate.compute.replica.subscribe`; ``AllowCompaction({})``
  yields ``DroppedAt`` (never for subscribes dropped by reconciliation).
* **Compaction.** An index arrangement compacts to the controller's frontier, but never beyond
  what this replica's own dataflows still read from it (``since <= upper - 1`` of every
  importer). ``{}`` drops the export (reporting ``{}`` frontiers); the dataflow is dropped when
  all its exports are and no other dataflow imports from it.
* A failing dataflow is reported (``Status`` naming each export), its waiting peeks are
  answered with its error, its subscribes end with an error batch; the replica carries on.

Responses are only sent on a connection past ``InitializationComplete``; anything produced
while no such connection exists is dropped (a reconnection reconciles and reports afresh).
"""

from __future__ import annotations

import logging
from typing import Final

import pyarrow as pa

from spate.compute.replica.actions import (
    AbortPeek,
    Action,
    BuildDataflow,
    CompactExport,
    Configure,
    DataflowFailed,
    DataflowReady,
    DropDataflow,
    DropSink,
    EnableWrites,
    Event,
    Halt,
    PeekFinished,
    RunPeek,
    ScheduleDataflow,
    Send,
    SinkProgress,
    Stepped,
)
from spate.compute.replica.peeks import (
    PendingPeek,
    PendingPeeks,
    index_peek_problem,
    peek_answer,
    peek_error,
    read_before_since,
    runnable,
)
from spate.compute.replica.reconcile import ReconciliationStats, plan_reconciliation
from spate.compute.replica.records import DataflowRecord, DataflowTable, ExportRecord
from spate.errors import Problem, ProtocolError
from spate.frontier.antichain import Antichain, Frontier
from spate.ids import GlobalId, PeekId
from spate.plan.dataflow import DataflowDescription
from spate.protocol.common import Hello
from spate.protocol.compute import (
    EVAL_ERROR_STATUS,
    EVAL_ERRORS_CLEARED,
    AllowCompaction,
    AllowWrites,
    CancelPeek,
    ComputeCommand,
    ComputeParameters,
    ComputeResponse,
    CreateDataflow,
    CreateInstance,
    IndexTarget,
    InitializationComplete,
    Peek,
    PeekCanceled,
    PeekResponse,
    Schedule,
    Status,
    UpdateConfiguration,
    failed_status,
)
from spate.protocol.stages import ReplicaStages, Stage
from spate.repr.arrow import updates_schema
from spate.soft_assert import soft_assert

__all__ = ["ReconciliationStats", "ReplicaState", "read_before_since"]

_log: Final = logging.getLogger("spate.compute.replica")


class ReplicaState:
    """The state of one compute replica process (module docs). Not thread-safe."""

    def __init__(self, *, name: str = "replica") -> None:
        self.name = name
        self._table = DataflowTable()
        self._instance: CreateInstance | None = None
        self._epoch: int | None = None
        self._stages: ReplicaStages | None = None
        self._buffer: list[ComputeCommand] = []
        self._params = ComputeParameters()
        self._peeks = PendingPeeks()
        self.stats = ReconciliationStats()
        self._stats_epoch: int | None = None

    # -- inspection ---------------------------------------------------------------------------

    @property
    def epoch(self) -> int | None:
        """The epoch of the current connection (``None``: none)."""
        return self._epoch

    @property
    def params(self) -> ComputeParameters:
        return self._params

    @property
    def initialized(self) -> bool:
        """The current connection is past ``InitializationComplete``."""
        return self._stages is not None and self._stages.stage in (
            Stage.COMPUTATION,
            Stage.READ_WRITE,
        )

    def export_ids(self) -> list[GlobalId]:
        """Live exports, in id order."""
        return self._table.export_ids()

    def dataflow_keys(self) -> list[int]:
        return self._table.keys()

    def dataflow_of(self, export: GlobalId) -> int | None:
        return self._table.by_export.get(export)

    def pending_peeks(self) -> list[PeekId]:
        return self._peeks.uuids()

    @property
    def logging_interval_s(self) -> float:
        """How often to report statistics (the instance config's; 1 s before it is known)."""
        return 1.0 if self._instance is None else self._instance.config.logging_interval_ms / 1e3

    def report_statistics(self) -> list[Action]:
        """Send the statistics of the dataflows that stepped since the last report (of all of
        them, the first time on a connection). Called every :attr:`logging_interval_s`."""
        if self._epoch is None or not self.initialized:
            return []
        fresh, self._stats_epoch = self._stats_epoch != self._epoch, self._epoch
        return self._send(self._table.statistics(all=fresh))

    # -- connections --------------------------------------------------------------------------

    def connect(self, epoch: int) -> list[Action]:
        """A controller connected with ``epoch`` (newer than any before: the transport checks)."""
        if self._epoch is not None:
            soft_assert(epoch > self._epoch, f"epoch {epoch} after epoch {self._epoch}")
        self._epoch = epoch
        self._stages = ReplicaStages("compute", epoch=epoch)
        self._buffer = []
        return []

    def disconnect(self, epoch: int) -> list[Action]:
        """Connection ``epoch`` ended. Dataflows keep running; their reports are dropped."""
        if epoch == self._epoch:
            self._epoch = None
            self._stages = None
            self._buffer = []
        return []

    def _send(self, response: ComputeResponse | None) -> list[Action]:
        if response is None or self._epoch is None or not self.initialized:
            return []
        return [Send(self._epoch, response)]

    # -- commands -----------------------------------------------------------------------------

    def command(self, epoch: int, command: ComputeCommand) -> list[Action]:
        """Apply ``command`` from connection ``epoch`` (stale epochs are ignored).

        Raises ``StageViolation`` (a ``ProtocolError``) for a command out of its stage and
        ``ProtocolError`` for a peek uuid reused within the epoch; in both cases nothing
        changed and the connection must close.
        """
        if epoch != self._epoch or self._stages is None:
            return []
        stage = self._stages.stage
        if isinstance(command, Peek) and self._uuid_taken(epoch, command.uuid):
            raise ProtocolError(f"peek uuid {command.uuid} reused within epoch {epoch}")
        self._stages.observe(command)
        if isinstance(command, Hello):
            return []
        if isinstance(command, CreateInstance):
            return self._create_instance(command)
        if isinstance(command, InitializationComplete):
            return self._reconcile()
        if stage is Stage.INITIALIZATION:
            self._buffer.append(command)
            return []
        return self._apply(command)

    def _uuid_taken(self, epoch: int, uuid: PeekId) -> bool:
        if any(isinstance(c, Peek) and c.uuid == uuid for c in self._buffer):
            return True
        p = self._peeks.get(uuid)
        return p is not None and p.epoch == epoch

    def _create_instance(self, command: CreateInstance) -> list[Action]:
        previous = self._instance
        if previous is not None and not command.config.compatible_with(previous.config):
            return [
                Halt(
                    f"{self.name}: CreateInstance {command.config} is not compatible with the "
                    f"previous {previous.config}; halting (a new process starts clean)"
                )
            ]
        self._instance = command
        return []

    def _apply(self, command: ComputeCommand) -> list[Action]:
        if isinstance(command, CreateDataflow):
            return self._create_dataflow(command.dataflow)
        if isinstance(command, Schedule):
            return self._schedule(command.id)
        if isinstance(command, AllowCompaction):
            return self._allow_compaction(command.id, command.frontier)
        if isinstance(command, Peek):
            return self._peek(command)
        if isinstance(command, CancelPeek):
            return self._cancel_peek(command.uuid)
        if isinstance(command, UpdateConfiguration):
            self._params = self._params.update(command.params)
            return [Configure(self._params)]
        if isinstance(command, AllowWrites):
            return self._allow_writes(command.id)
        raise ProtocolError(f"{type(command).__name__} is not a computation command")

    # -- reconciliation -----------------------------------------------------------------------

    def _reconcile(self) -> list[Action]:
        commands, self._buffer = self._buffer, []
        creates = [c for c in commands if isinstance(c, CreateDataflow)]
        new = [c.dataflow for c in creates]
        plan = plan_reconciliation(self._table.running(), new)
        actions: list[Action] = [AbortPeek(u) for u in self._peeks.clear()]
        for key in plan.drop:
            df = self._table.by_key[key]
            _log.info(
                "replica=%s dataflow=%d collection=%s: reconciliation drops it: %s",
                self.name,
                key,
                df.exports_str(),
                plan.reasons.get(key, ""),
            )
            actions += self._drop_silently(df)
        reused: list[DataflowRecord] = []
        for i, key in plan.reuse.items():
            df = self._table.by_key[key]
            desc = new[i]
            assert desc.as_of is not None
            df.description = desc
            for e in df.exports.values():
                if e.reports is not None:
                    e.reports.reset(desc.as_of)
                actions += self._compact(df, e, desc.as_of)
            reused.append(df)
            _log.info(
                "replica=%s dataflow=%d collection=%s: reconciliation reuses it at as_of %s",
                self.name,
                key,
                df.exports_str(),
                desc.as_of,
            )
        self.stats.reconciliations += 1
        self.stats.reused += len(plan.reuse)
        self.stats.replaced += plan.replaced
        self.stats.dropped += len(plan.drop)
        skip = {id(creates[i]) for i in plan.reuse}
        for c in commands:
            if id(c) not in skip:
                actions += self._apply(c)
        for df in reused:
            actions += self._report_current(df)
        return actions

    def _report_current(self, df: DataflowRecord) -> list[Action]:
        if df.status != "ready":
            return []
        out: list[Action] = []
        for e in df.live_exports():
            if e.reports is not None:
                write = df.upper if e.kind == "index" else e.shard_upper
                out += self._send(e.reports.offer(write=write, input=df.upper, output=df.upper))
        return out

    def _drop_silently(self, df: DataflowRecord) -> list[Action]:
        for e in df.exports.values():
            if e.reports is not None:
                e.reports.mark_reported_empty()
            if e.subscribe is not None:
                e.subscribe.silence()
            if not e.dropped:
                e.dropped = True
                if self._table.by_export.get(e.id) == df.key:
                    del self._table.by_export[e.id]
        return self._release(df)

    # -- dataflows ----------------------------------------------------------------------------

    def _create_dataflow(self, desc: DataflowDescription) -> list[Action]:
        for id in desc.export_ids():
            if id in self._table.by_export:
                return [
                    Halt(
                        f"{self.name}: CreateDataflow {desc.debug_name!r} exports {id}, which "
                        f"dataflow {self._table.by_export[id]} already exports"
                    )
                ]
        invalid = self._table.problem(desc)
        df = self._table.add(desc)
        problem = self._table.link_imports(df) if invalid is None else Problem(invalid)
        if problem is not None:
            return self._fail(df, problem)
        return [BuildDataflow(df.key, desc, dict(df.index_sources))]

    def _schedule(self, id: GlobalId) -> list[Action]:
        df = self._table.exporter(id)
        if df is None:
            _log.warning(
                "replica=%s collection=%s: Schedule of an unknown id ignored", self.name, id
            )
            return []
        if df.scheduled or df.status == "failed":
            return []
        df.scheduled = True
        return [ScheduleDataflow(df.key)]

    def _allow_writes(self, id: GlobalId) -> list[Action]:
        df = self._table.exporter(id)
        if df is None or df.exports[id].kind != "mv":
            _log.info("replica=%s collection=%s: AllowWrites: not a view here", self.name, id)
            return []
        return [EnableWrites(df.key, id)]

    def _fail(self, df: DataflowRecord, problem: Problem) -> list[Action]:
        """Fail ``df`` for ``problem``: its peeks, subscribes and importers fail with it (and
        its SQLSTATE)."""
        message = problem.message
        if df.status == "failed":
            return []
        df.status = "failed"
        df.error = problem
        _log.error(
            "replica=%s dataflow=%d collection=%s: failed: %s",
            self.name,
            df.key,
            df.exports_str(),
            message,
        )
        out: list[Action] = [DropDataflow(df.key)]
        for e in df.live_exports():
            status = failed_status(e.id, message)
            text = status.message
            out += self._send(status)
            if e.subscribe is not None:
                why = Problem(text, problem.sqlstate, problem.pg_message)
                out += self._send(e.subscribe.fail(why))
        for p in self._peeks.take_waiting(lambda p: p.key == df.key):
            out += self._send(
                peek_error(p.peek.uuid, problem.within(f"collection {p.target} failed: "))
            )
        # Persist peeks of a view this dataflow writes would wait for an upper that no longer
        # moves here: they fail with the dataflow's error instead.
        written = {e.id for e in df.exports.values() if e.kind == "mv"}
        for p in self._peeks:
            if p.key is None and p.target in written:
                self._peeks.pop(p.peek.uuid)
                out.append(AbortPeek(p.peek.uuid))
                why = problem.within(f"materialized view {p.target} failed: ")
                out += self._send(peek_error(p.peek.uuid, why))
        for export_id, importers in df.importers.items():
            for k in sorted(importers):
                imp = self._table.by_key.get(k)
                if imp is not None:
                    out += self._fail(imp, problem.within(f"its index import {export_id} failed: "))
        return out

    # -- compaction and drops -----------------------------------------------------------------

    def _compact(self, df: DataflowRecord, e: ExportRecord, frontier: Frontier) -> list[Action]:
        """Raise the controller's frontier of index export ``e``; apply what importers allow."""
        e.allowed = e.allowed.join(frontier)
        if e.kind != "index" or e.dropped or df.status == "failed":
            return []
        target = e.allowed
        for k in df.importers.get(e.id, ()):
            imp = self._table.by_key.get(k)
            if imp is not None:
                target = target.meet(imp.need())
        if target.is_empty() or not e.applied.less_than(target):
            return []
        e.applied = target
        out: list[Action] = [CompactExport(df.key, e.id, target)]
        since = df.since(e)
        for p in self._peeks.take_waiting(
            lambda p: (
                p.key == df.key and p.target == e.id and not since.less_equal(p.peek.timestamp)
            )
        ):
            out += self._send(
                peek_error(p.peek.uuid, read_before_since(e.id, since, p.peek.timestamp))
            )
        return out

    def _allow_compaction(self, id: GlobalId, frontier: Frontier) -> list[Action]:
        df = self._table.exporter(id)
        if df is None:
            _log.info(
                "replica=%s collection=%s: AllowCompaction of an unknown id ignored", self.name, id
            )
            return []
        e = df.exports[id]
        if not frontier.is_empty():
            return self._compact(df, e, frontier)
        return self._drop_export(df, e)

    def _drop_export(self, df: DataflowRecord, e: ExportRecord) -> list[Action]:
        out: list[Action] = []
        e.dropped = True
        del self._table.by_export[e.id]
        if e.reports is not None:
            out += self._send(e.reports.drop())
        if e.subscribe is not None:
            out += self._send(e.subscribe.drop())
        for p in self._peeks.take_waiting(lambda p: p.key == df.key and p.target == e.id):
            out += self._send(peek_error(p.peek.uuid, f"collection {e.id} was dropped"))
        if not df.live_exports():
            return out + self._release(df)
        if df.status == "failed":
            return out
        if e.kind != "index":
            out.append(DropSink(df.key, e.id))
        elif not df.importers.get(e.id):
            out.append(CompactExport(df.key, e.id, Antichain.empty()))
        return out

    def _release(self, df: DataflowRecord) -> list[Action]:
        """``df`` has no live export: drop it once nothing imports from it, then its sources."""
        df.dropped = True
        if any(df.importers.values()):
            return []
        del self._table.by_key[df.key]
        out: list[Action] = [DropDataflow(df.key)]
        for ix_id, source_key in df.index_sources.items():
            source = self._table.by_key.get(source_key)
            if source is None:
                continue
            source.importers.get(ix_id, set()).discard(df.key)
            if source.dropped:
                out += self._release(source)
            else:
                e = source.exports[ix_id]
                out += self._compact(source, e, e.allowed)
        return out

    # -- peeks --------------------------------------------------------------------------------

    def _peek(self, peek: Peek) -> list[Action]:
        epoch = self._epoch
        assert epoch is not None
        if not isinstance(peek.target, IndexTarget):
            writer = self._table.exporter(peek.target.id)
            if writer is not None and writer.status == "failed":
                why = (writer.error or Problem("")).within(
                    f"materialized view {peek.target.id} failed: "
                )
                return self._send(peek_error(peek.uuid, why))
            self._peeks.add(PendingPeek(epoch, peek, None, running=True))
            return [RunPeek(epoch, peek)]
        df = self._table.exporter(peek.target.id)
        problem = index_peek_problem(peek, df, self._table.index_ids)
        if problem is not None or df is None:
            return self._send(peek_error(peek.uuid, problem or ""))
        pending = PendingPeek(epoch, peek, df.key)
        self._peeks.add(pending)
        return self._maybe_run(df, pending)

    def _maybe_run(self, df: DataflowRecord, p: PendingPeek) -> list[Action]:
        if p.running or not runnable(df, p):
            return []
        p.running = True
        return [RunPeek(p.epoch, p.peek, df.key)]

    def _cancel_peek(self, uuid: PeekId) -> list[Action]:
        p = self._peeks.pop(uuid)
        if p is None:
            return []
        out: list[Action] = [AbortPeek(uuid)] if p.running else []
        return out + self._send(PeekResponse(uuid, PeekCanceled()))

    def _peek_finished(self, event: PeekFinished) -> list[Action]:
        p = self._peeks.get(event.uuid)
        if p is None or p.epoch != event.epoch or not p.running:
            return []
        self._peeks.pop(event.uuid)
        limit = self._params.max_result_size
        error = (
            None if event.error is None else Problem(event.error, event.sqlstate, event.pg_message)
        )
        return self._send(peek_answer(event.uuid, event.rows, error, max_result_size=limit))

    # -- events -------------------------------------------------------------------------------

    def handle(self, event: Event) -> list[Action]:
        """Apply a report from the driver (reports about dropped dataflows are ignored)."""
        if isinstance(event, PeekFinished):
            return self._peek_finished(event)
        df = self._table.by_key.get(event.key)
        if df is None or df.status == "failed":
            return []
        if isinstance(event, DataflowReady):
            if df.status == "building":
                df.status = "ready"
                df.upper = df.upper.join(event.upper)
            return []
        if isinstance(event, DataflowFailed):
            return self._fail(df, Problem(event.message, event.sqlstate))
        if isinstance(event, SinkProgress):
            e = df.exports.get(event.export)
            if e is None or e.dropped or e.reports is None:
                return []
            e.shard_upper = e.shard_upper.join(event.upper)
            return self._send(e.reports.offer(write=e.shard_upper))
        return self._stepped(df, event)

    def _stepped(self, df: DataflowRecord, event: Stepped) -> list[Action]:
        if df.status != "ready":
            return []
        soft_assert(
            df.upper.less_equal(event.upper),
            f"dataflow {df.key}: upper regressed from {df.upper} to {event.upper}",
        )
        df.upper = df.upper.join(event.upper)
        df.counts.add(event.seconds, event.spark_jobs, event.rows_in, event.rows_out)
        out: list[Action] = []
        limit = self._params.max_result_size
        if event.error != df.eval_error:
            df.eval_error = event.error
            for e in df.live_exports():
                text = (
                    EVAL_ERROR_STATUS + event.error.message if event.error else EVAL_ERRORS_CLEARED
                )
                out += self._send(Status(text, e.id))
        for e in df.live_exports():
            if event.error is not None and e.subscribe is not None:
                out += self._send(e.subscribe.fail(event.error.within(f"collection {e.id}: ")))
                continue
            if e.kind == "index" and e.reports is not None:
                out += self._send(e.reports.offer_all(df.upper))
            elif e.kind == "mv" and e.reports is not None:
                out += self._send(e.reports.offer(input=df.upper, output=df.upper))
            elif e.subscribe is not None:
                updates = event.subscribe_updates.get(e.id)
                if updates is None:
                    updates = _empty_sink_updates(df.description, e.id)
                out += self._send(e.subscribe.step(df.upper, updates, max_result_size=limit))
        for p in self._peeks:
            if p.key == df.key:
                out += self._maybe_run(df, p)
        for ix_id, source_key in df.index_sources.items():
            source = self._table.by_key.get(source_key)
            if source is not None and not source.dropped:
                e = source.exports[ix_id]
                out += self._compact(source, e, e.allowed)
        return out


def _empty_sink_updates(desc: DataflowDescription, id: GlobalId) -> pa.Table:
    sink = next(s for s in desc.sink_exports if s.id == id)
    return updates_schema(sink.from_desc).empty_table()
