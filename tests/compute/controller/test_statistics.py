"""The dataflow statistics the replicas report: the controller keeps the latest per replica
and collection."""

from __future__ import annotations

from spate.ids import GlobalId, ReplicaId
from spate.protocol.compute import DataflowStatistics, StatisticsUpdates

from .harness import I1, R1, R2, D, Harness, index_dataflow

S = GlobalId.user(1)
IDX = GlobalId.user(10)


def _stats(h: Harness, replica: ReplicaId) -> DataflowStatistics | None:
    return h.controller.replica_frontiers(I1, replica)[IDX].statistics


async def test_the_latest_statistics_per_replica_and_collection_are_kept() -> None:
    h = Harness()
    h.storage.add_collection(S, D, upper=100)
    h.add_replica(R1)
    h.add_replica(R2)
    h.controller.create_dataflow(I1, index_dataflow(S, IDX, 10))
    assert _stats(h, R1) is None and _stats(h, R2) is None  # nothing reported yet
    first = DataflowStatistics(IDX, steps=1, spark_jobs=2, step_time_ms=30, rows_in=5, rows_out=5)
    h.respond(R1, StatisticsUpdates((first,)))
    assert _stats(h, R1) == first and _stats(h, R2) is None
    later = DataflowStatistics(IDX, steps=3, spark_jobs=2, step_time_ms=41, rows_in=9, rows_out=7)
    other = DataflowStatistics(IDX, steps=1, rows_in=5)
    h.respond(R1, StatisticsUpdates((later,)))
    h.respond(R2, StatisticsUpdates((other,)))
    assert _stats(h, R1) == later and _stats(h, R2) == other
    info = h.controller.collection_info(I1, IDX)
    assert info.replicas[R1].statistics == later
    # an entry for a collection the controller does not know is ignored, not a replica bug
    unknown = DataflowStatistics(GlobalId.user(99), steps=1)
    h.respond(R1, StatisticsUpdates((unknown, later)))
    assert h.controller.replica_info(I1, R1).health == "connected"
    assert GlobalId.user(99) not in h.controller.replica_frontiers(I1, R1)


async def test_statistics_of_a_stale_epoch_are_ignored() -> None:
    h = Harness()
    h.storage.add_collection(S, D, upper=100)
    h.add_replica(R1)
    h.controller.create_dataflow(I1, index_dataflow(S, IDX, 10))
    current = DataflowStatistics(IDX, steps=2, rows_in=4)
    h.respond(R1, StatisticsUpdates((current,)))
    epoch = h.controller.replica_info(I1, R1).epoch
    h.respond(R1, StatisticsUpdates((DataflowStatistics(IDX, steps=1),)), epoch=epoch - 1)
    assert _stats(h, R1) == current
