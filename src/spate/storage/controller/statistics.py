"""Statistics of ingestions and sinks, as the replicas last reported them.

Each ``StatisticsUpdates`` entry is a full current value for its ``(id, worker)`` on the replica
that sent it, so the store keeps the latest one per ``(id, replica, worker)`` and renders the
rows of the ``SOURCE_STATISTICS`` / ``SINK_STATISTICS`` introspection collections from them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spate.ids import GlobalId, ReplicaId
from spate.protocol.storage import SinkStatistics, SourceStatistics, StatisticsUpdates
from spate.repr.types import Row

Key = tuple[GlobalId, ReplicaId | None, int]


@dataclass
class StatisticsStore:
    sources: dict[Key, SourceStatistics] = field(default_factory=dict)
    sinks: dict[Key, SinkStatistics] = field(default_factory=dict)

    def apply(self, update: StatisticsUpdates, replica: ReplicaId | None) -> None:
        for s in update.sources:
            self.sources[(s.id, replica, s.worker)] = s
        for k in update.sinks:
            self.sinks[(k.id, replica, k.worker)] = k

    def forget(self, ids: set[GlobalId]) -> None:
        self.sources = {k: v for k, v in self.sources.items() if k[0] not in ids}
        self.sinks = {k: v for k, v in self.sinks.items() if k[0] not in ids}

    def source(self, id: GlobalId) -> list[SourceStatistics]:
        return [v for k, v in self.sources.items() if k[0] == id]

    def sink(self, id: GlobalId) -> list[SinkStatistics]:
        return [v for k, v in self.sinks.items() if k[0] == id]

    def source_rows(self) -> list[Row]:
        return [
            (
                str(s.id),
                None if r is None else str(r),
                w,
                s.messages_received,
                s.bytes_received,
                s.updates_staged,
                s.updates_committed,
                s.snapshot_committed,
                s.offset_known,
                s.offset_committed,
            )
            for (_, r, w), s in sorted(self.sources.items(), key=lambda kv: repr(kv[0]))
        ]

    def sink_rows(self) -> list[Row]:
        return [
            (
                str(s.id),
                None if r is None else str(r),
                w,
                s.messages_staged,
                s.messages_committed,
                s.bytes_staged,
                s.bytes_committed,
            )
            for (_, r, w), s in sorted(self.sinks.items(), key=lambda kv: repr(kv[0]))
        ]
