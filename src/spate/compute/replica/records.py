"""What the replica state keeps per running dataflow and per export (pure records), and the
table of them: which dataflows run here, which one exports each collection, who imports whom."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from spate.compute.replica.frontiers import ExportReports
from spate.compute.replica.reconcile import RunningDataflow
from spate.compute.replica.subscribe import SubscribeState
from spate.errors import Problem
from spate.frontier.antichain import Antichain, Frontier
from spate.ids import GlobalId
from spate.plan.dataflow import DataflowDescription
from spate.plan.errors import InvalidDataflow
from spate.protocol.compute import DataflowStatistics, StatisticsUpdates

ExportKind = Literal["index", "mv", "subscribe"]
DataflowStatus = Literal["building", "ready", "failed"]


@dataclass
class ExportRecord:
    """One export of a running dataflow.

    ``allowed`` is the controller's compaction frontier (``AllowCompaction``); ``applied`` what
    the arrangement was actually compacted to (at most ``allowed``, held back by importers).
    ``shard_upper`` is the observed upper of a materialized view's shard.
    """

    id: GlobalId
    kind: ExportKind
    allowed: Frontier
    applied: Frontier
    reports: ExportReports | None = None
    subscribe: SubscribeState | None = None
    shard_upper: Frontier = Antichain.minimum()
    dropped: bool = False

    @classmethod
    def new(cls, id: GlobalId, kind: ExportKind, as_of: int) -> ExportRecord:
        lower = Antichain.of(as_of)
        e = cls(id, kind, allowed=lower, applied=lower)
        if kind != "subscribe":
            e.reports = ExportReports.starting_at(id, lower)
        return e


@dataclass
class StepCounts:
    """Cumulative counts of a dataflow's steps (reported as ``DataflowStatistics``).

    ``changed``: counted since the last report."""

    steps: int = 0
    spark_jobs: int = 0
    seconds: float = 0.0
    rows_in: int = 0
    rows_out: int = 0
    changed: bool = False

    def add(self, seconds: float, spark_jobs: int, rows_in: int, rows_out: int) -> None:
        self.steps += 1
        self.spark_jobs += spark_jobs
        self.seconds += seconds
        self.rows_in += rows_in
        self.rows_out += rows_out
        self.changed = True

    def report(self, id: GlobalId) -> DataflowStatistics:
        return DataflowStatistics(
            id,
            steps=self.steps,
            spark_jobs=self.spark_jobs,
            step_time_ms=round(self.seconds * 1000),
            rows_in=self.rows_in,
            rows_out=self.rows_out,
        )


@dataclass
class DataflowRecord:
    """A dataflow the replica runs (or failed to run), under process-unique ``key``.

    ``importers[x]``: keys of the dataflows reading this dataflow's index export ``x``;
    ``index_sources[x]``: the key of the dataflow exporting the index this one imports as ``x``.
    """

    key: int
    description: DataflowDescription
    as_of: int
    exports: dict[GlobalId, ExportRecord]
    upper: Frontier
    index_sources: dict[GlobalId, int] = field(default_factory=dict)
    importers: dict[GlobalId, set[int]] = field(default_factory=dict)
    status: DataflowStatus = "building"
    error: Problem | None = None
    eval_error: Problem | None = None
    """Its error collection is not empty at its latest complete time: why (else ``None``)."""
    scheduled: bool = False
    dropped: bool = False
    counts: StepCounts = field(default_factory=StepCounts)

    def live_exports(self) -> list[ExportRecord]:
        return [e for e in self.exports.values() if not e.dropped]

    def since(self, export: ExportRecord) -> Frontier:
        """The compaction frontier of ``export``'s arrangement (reads below it fail)."""
        return Antichain.of(self.as_of).join(export.applied)

    def need(self) -> Frontier:
        """How far this dataflow still reads its index imports: ``max(as_of, upper - 1)``.

        (``{}`` once it reads nothing more: failed, dropped or complete.)
        """
        if self.status == "failed" or self.dropped:
            return Antichain.empty()
        u = self.upper.as_option()
        if u is None:
            return Antichain.empty()
        return Antichain.of(max(self.as_of, u - 1))

    def exports_str(self) -> str:
        return exports_str(self.description)


def exports_str(desc: DataflowDescription) -> str:
    return ",".join(str(i) for i in desc.export_ids()) or "-"


class DataflowTable:
    """The dataflows a replica runs (or failed to run) by key, and the dataflow exporting each
    live collection. Keys are unique for the life of the process."""

    def __init__(self) -> None:
        self.by_key: dict[int, DataflowRecord] = {}
        self.by_export: dict[GlobalId, int] = {}
        self._next_key = 1

    def export_ids(self) -> list[GlobalId]:
        """Live exports, in id order."""
        return sorted(self.by_export)

    def keys(self) -> list[int]:
        return sorted(self.by_key)

    def statistics(self, *, all: bool) -> StatisticsUpdates | None:
        """The counts of the live dataflows that stepped since the last call (``all``: of every
        live dataflow), one entry per live index or view export; ``None`` when there are none.
        """
        out: list[DataflowStatistics] = []
        for key in self.keys():
            df = self.by_key[key]
            if df.dropped or not (all or df.counts.changed):
                continue
            df.counts.changed = False
            out += [df.counts.report(e.id) for e in df.live_exports() if e.kind != "subscribe"]
        return StatisticsUpdates(tuple(out)) if out else None

    def exporter(self, id: GlobalId) -> DataflowRecord | None:
        """The dataflow exporting live collection ``id``."""
        key = self.by_export.get(id)
        return None if key is None else self.by_key.get(key)

    def index_ids(self) -> list[GlobalId]:
        """Live index exports, in id order."""
        return sorted(
            i for i, k in self.by_export.items() if self.by_key[k].exports[i].kind == "index"
        )

    def problem(self, desc: DataflowDescription) -> str | None:
        """Why ``desc`` cannot run here (no as_of, invalid, an index import not exported here
        as an index), or ``None``."""
        if desc.as_of is None or desc.as_of.is_empty():
            return f"as_of must be set and non-empty, got {desc.as_of}"
        try:
            desc.validate()
        except InvalidDataflow as e:
            return str(e)
        for imp in desc.index_imports:
            source = self.exporter(imp.id)
            if source is None or source.exports[imp.id].kind != "index":
                return f"its index import {imp.id} is not an index on this replica"
        return None

    def add(self, desc: DataflowDescription) -> DataflowRecord:
        """Record ``desc`` under a new key as the exporter of its exports (none of which may be
        exported already)."""
        key = self._next_key
        self._next_key += 1
        as_of = 0 if desc.as_of is None or desc.as_of.is_empty() else desc.as_of.elements[0]
        exports: dict[GlobalId, ExportRecord] = {}
        for exp in desc.index_exports:
            exports[exp.id] = ExportRecord.new(exp.id, "index", as_of)
        for s in desc.sink_exports:
            kind: ExportKind = "subscribe" if s.is_subscribe() else "mv"
            e = exports[s.id] = ExportRecord.new(s.id, kind, as_of)
            if kind == "subscribe":
                e.subscribe = SubscribeState(
                    s.id, as_of=as_of, with_snapshot=s.with_snapshot, end=s.up_to.meet(desc.until)
                )
        df = DataflowRecord(key, desc, as_of, exports, Antichain.of(as_of))
        self.by_key[key] = df
        for id in exports:
            self.by_export[id] = key
        return df

    def link_imports(self, df: DataflowRecord) -> Problem | None:
        """Record which dataflows ``df``'s index imports read from (each must be exported here);
        the problem when one of them has failed, else ``None``."""
        problem = None
        for ix in df.description.index_imports:
            source = self.by_key[self.by_export[ix.id]]
            df.index_sources[ix.id] = source.key
            source.importers.setdefault(ix.id, set()).add(df.key)
            if source.status == "failed" and source.error is not None:
                problem = source.error.within(f"its index import {ix.id} failed: ")
        return problem

    def running(self) -> list[RunningDataflow]:
        """What reconciliation needs to know of every dataflow not dropped."""
        return [
            RunningDataflow(
                key=df.key,
                description=df.description,
                compaction={
                    e.id: Antichain.empty() if e.dropped else df.since(e)
                    for e in df.exports.values()
                },
                healthy=df.status != "failed",
                index_sources=dict(df.index_sources),
                built=df.status == "ready",
            )
            for df in self.by_key.values()
            if not df.dropped
        ]
