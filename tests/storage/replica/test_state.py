"""The storage replica's sans-I/O state: commands and events in, actions out (no sockets, no
runners)."""

from __future__ import annotations

import pytest

from spate.clock import ManualClock
from spate.frontier import Antichain
from spate.ids import GlobalId, ReplicaId
from spate.protocol.common import PROTOCOL_VERSION, Hello
from spate.protocol.stages import StageViolation
from spate.protocol.storage import (
    AllowCompaction,
    AllowWrites,
    DroppedId,
    FrontierUpper,
    InitializationComplete,
    ObjectStatus,
    SinkStatistics,
    StatisticsUpdates,
    StatusUpdate,
    StorageParameters,
    UpdateConfiguration,
)
from spate.storage.replica.state import (
    Configure,
    EnableWrites,
    ExportsFailed,
    ReplicaState,
    Send,
    StartObject,
    Statistics,
    StatusChanged,
    StopObject,
    Uppers,
)
from tests.protocol.storage_model import ingestion, sink

A, A_EXPORT = GlobalId.user(1), GlobalId.user(2)
S = GlobalId.user(10)


def hello(epoch: int) -> Hello:
    return Hello(PROTOCOL_VERSION, epoch, b"n" * 16)


def sent(actions: list[object]) -> list[object]:
    return [a.message for a in actions if isinstance(a, Send)]


def test_objects_survive_a_reconnection_and_unmentioned_ones_stop() -> None:
    clock = ManualClock(5)
    state = ReplicaState(clock=clock, replica_id=ReplicaId(3))
    run_a, run_s = ingestion(A, [A_EXPORT]), sink(S, A_EXPORT, 0)
    state.connect(1)
    assert state.command(1, hello(1)) == []
    assert state.command(1, run_a) == [StartObject(run_a)]
    assert state.command(1, run_s) == [StartObject(run_s)]
    assert state.command(1, InitializationComplete()) == []
    assert state.command(1, AllowWrites()) == [EnableWrites()]
    assert sent(state.handle(Uppers(A, {A: Antichain.of(4), A_EXPORT: Antichain.of(4)}))) == [
        FrontierUpper(A, Antichain.of(4)),
        FrontierUpper(A_EXPORT, Antichain.of(4)),
    ]
    assert sent(state.handle(Uppers(A, {A: Antichain.of(3)}))) == []  # never regresses
    assert sent(state.handle(StatusChanged(A, ObjectStatus.RUNNING))) == [
        StatusUpdate(A, ObjectStatus.RUNNING, 5, replica_id=ReplicaId(3))
    ]
    assert state.handle(StatusChanged(A, ObjectStatus.RUNNING)) == []  # unchanged: not sent
    # A new connection replays A only: A keeps running, S stops, A is reported afresh.
    state.disconnect(1)
    state.connect(2)
    state.command(2, hello(2))
    assert state.command(2, run_a) == []  # unchanged: reused
    out = state.command(2, InitializationComplete())
    assert out[0] == StopObject(S, release_upstream=False)
    assert sent(out) == [
        FrontierUpper(A, Antichain.of(4)),
        FrontierUpper(A_EXPORT, Antichain.of(4)),
        StatusUpdate(A, ObjectStatus.RUNNING, 5, replica_id=ReplicaId(3)),
    ]
    assert set(state.objects) == {A}
    assert state.handle(StatusChanged(S, ObjectStatus.STALLED, "late")) == []  # not running


def test_a_changed_description_restarts_and_compaction_to_empty_drops() -> None:
    state = ReplicaState(clock=ManualClock(0))
    state.connect(7)
    state.command(7, hello(7))
    first = ingestion(A, [A_EXPORT])
    changed = ingestion(A, [A_EXPORT], seed=1)
    state.command(7, first)
    assert state.command(7, changed) == [
        StopObject(A, release_upstream=False),
        StartObject(changed),
    ]
    state.command(7, InitializationComplete())
    assert state.command(7, AllowCompaction(A_EXPORT, Antichain.of(3))) == []
    assert state.command(7, AllowCompaction(A, Antichain.empty())) == [
        StopObject(A, release_upstream=True),
        Send(DroppedId(A)),
    ]
    assert state.objects == {}
    params = StorageParameters(statistics_interval_ms=5)
    assert state.command(7, UpdateConfiguration(params)) == [Configure(params)]
    assert state.params.statistics_interval_ms == 5


def test_out_of_stage_commands_change_nothing_and_statistics_are_sent_when_there_are_some() -> None:
    state = ReplicaState(clock=ManualClock(0))
    state.connect(1)
    with pytest.raises(StageViolation):
        state.command(1, ingestion(A, [A_EXPORT]))  # before Hello
    assert state.objects == {}
    state.command(1, hello(1))
    assert state.command(2, ingestion(A, [A_EXPORT])) == []  # not the current connection
    assert state.handle(Statistics((), ())) == []
    stats = Statistics((), (SinkStatistics(S),))
    assert sent(state.handle(stats)) == [StatisticsUpdates((), (SinkStatistics(S),))]


def test_a_failed_export_is_reported_ceased_once_and_again_on_a_new_connection() -> None:
    clock = ManualClock(7)
    state = ReplicaState(clock=clock, replica_id=ReplicaId(3))
    run_a = ingestion(A, [A_EXPORT])
    state.connect(1)
    state.command(1, hello(1))
    state.command(1, run_a)
    state.command(1, InitializationComplete())
    ceased = StatusUpdate(
        A_EXPORT, ObjectStatus.CEASED, 7, error="table t changed", replica_id=ReplicaId(3)
    )
    assert sent(state.handle(ExportsFailed(A, {A_EXPORT: "table t changed"}))) == [ceased]
    assert state.handle(ExportsFailed(A, {A_EXPORT: "table t changed"})) == []  # once
    assert state.handle(ExportsFailed(A, {S: "not an export of A"})) == []
    state.disconnect(1)
    state.connect(2)
    state.command(2, hello(2))
    state.command(2, run_a)
    assert ceased in sent(state.command(2, InitializationComplete()))
