"""What the replica state keeps per running dataflow and per export (pure records)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from spate.compute.replica.frontiers import ExportReports
from spate.compute.replica.subscribe import SubscribeState
from spate.frontier.antichain import Antichain, Frontier
from spate.ids import GlobalId
from spate.plan.dataflow import DataflowDescription

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
    error: str | None = None
    scheduled: bool = False
    dropped: bool = False

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
