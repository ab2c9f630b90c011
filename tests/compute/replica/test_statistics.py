"""The replica's dataflow statistics: cumulative per dataflow, reported per export, only what
changed since the last report (everything again on a new connection)."""

from __future__ import annotations

from spate.compute.replica.actions import BuildDataflow, Stepped
from spate.frontier import Antichain
from spate.ids import GlobalId
from spate.protocol.compute import (
    CreateDataflow,
    DataflowStatistics,
    InstanceConfig,
    Schedule,
    StatisticsUpdates,
)

from .helpers import Harness, index_dataflow, of_type, sent

IX = GlobalId.user(42)
J = GlobalId.user(43)


def _start(h: Harness, *ids: GlobalId) -> dict[GlobalId, int]:
    cmds = []
    for id in ids:
        cmds += [CreateDataflow(index_dataflow(id, 10)), Schedule(id)]
    out = h.connect(cmds, config=InstanceConfig(logging_interval_ms=250))
    h.build_all(out)
    return {
        i: b.key
        for b in of_type(out, BuildDataflow)
        if isinstance(b, BuildDataflow)
        for i in b.description.export_ids()
    }


def _step(h: Harness, key: int, upper: int, **counts: float) -> None:
    h.event(
        Stepped(
            key,
            Antichain.of(upper),
            seconds=counts.get("seconds", 0.0),
            spark_jobs=int(counts.get("jobs", 0)),
            rows_in=int(counts.get("rows_in", 0)),
            rows_out=int(counts.get("rows_out", 0)),
        )
    )


def test_statistics_accumulate_and_only_changes_are_reported() -> None:
    h = Harness()
    keys = _start(h, IX, J)
    assert h.state.logging_interval_s == 0.25
    assert sent(h.run(h.state.report_statistics())) == [
        StatisticsUpdates((DataflowStatistics(IX), DataflowStatistics(J)))
    ]  # the first report on a connection has every dataflow
    assert sent(h.run(h.state.report_statistics())) == []  # nothing stepped since
    _step(h, keys[IX], 11, seconds=0.0204, jobs=2, rows_in=5, rows_out=4)
    _step(h, keys[IX], 12, seconds=0.01, jobs=1, rows_in=3, rows_out=1)
    assert sent(h.run(h.state.report_statistics())) == [
        StatisticsUpdates((DataflowStatistics(IX, 2, 3, 30, 8, 5),))
    ]
    assert sent(h.run(h.state.report_statistics())) == []
    # a new connection (a new controller state) replaying the same dataflows: the dataflows
    # are reused, and their statistics are all reported again
    h.connect(
        [CreateDataflow(index_dataflow(i, 10)) for i in (IX, J)] + [Schedule(IX), Schedule(J)],
        config=InstanceConfig(logging_interval_ms=250),
    )
    assert sent(h.run(h.state.report_statistics())) == [
        StatisticsUpdates((DataflowStatistics(IX, 2, 3, 30, 8, 5), DataflowStatistics(J)))
    ]


def test_no_statistics_without_an_initialized_connection() -> None:
    h = Harness()
    keys = _start(h, IX)
    h.run(h.state.disconnect(h.epoch))
    _step(h, keys[IX], 11, rows_in=1)
    assert h.state.report_statistics() == []
