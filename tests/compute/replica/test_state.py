"""The replica state machine: stages, frontiers, peeks, compaction, drops, failures."""

from __future__ import annotations

import dataclasses

import pytest

from spate.compute.replica.actions import (
    AbortPeek,
    BuildDataflow,
    CompactExport,
    Configure,
    DataflowFailed,
    DropDataflow,
    DropSink,
    EnableWrites,
    Halt,
    PeekFinished,
    RunPeek,
    ScheduleDataflow,
    SinkProgress,
)
from spate.errors import InvariantViolation, ProtocolError
from spate.frontier import Antichain
from spate.ids import GlobalId
from spate.protocol.compute import (
    AllowCompaction,
    AllowWrites,
    CancelPeek,
    ComputeParameters,
    CreateDataflow,
    CreateInstance,
    Frontiers,
    InitializationComplete,
    InstanceConfig,
    PeekCanceled,
    PeekError,
    PeekResponse,
    PeekRows,
    Schedule,
    Status,
    SubscribeBatch,
    SubscribeDroppedAt,
    SubscribeResponse,
    UpdateConfiguration,
)
from spate.protocol.stages import StageViolation

from .helpers import (
    Harness,
    hello,
    importing_dataflow,
    index_dataflow,
    of_type,
    peek,
    sent,
    sink_dataflow,
    updates,
)

IX = GlobalId.user(42)
J = GlobalId.user(43)
E = Antichain.empty()


def f(t: int) -> Antichain[int]:
    return Antichain.of(t)


def started(h: Harness, *dataflows, schedule: bool = True) -> dict[GlobalId, int]:
    """Create, build and schedule ``dataflows`` on a fresh connection; export id -> key."""
    cmds = []
    for df in dataflows:
        cmds.append(CreateDataflow(df))
        if schedule:
            cmds.extend(Schedule(i) for i in df.export_ids())
    out = h.connect(cmds)
    h.build_all(out)
    keys = {}
    for b in of_type(out, BuildDataflow):
        for i in b.description.export_ids():
            keys[i] = b.key
    return keys


# --- stages ------------------------------------------------------------------------------


def test_commands_out_of_stage_are_refused_and_change_nothing() -> None:
    h = Harness()
    h.epoch = 1
    h.state.connect(1)
    with pytest.raises(StageViolation, match="expected Hello first"):
        h.cmd(Schedule(IX))
    h.cmd(hello(1))
    with pytest.raises(StageViolation, match="CreateInstance"):
        h.cmd(CreateDataflow(index_dataflow(IX, 0)))
    assert h.state.export_ids() == []


def test_initialization_is_buffered_until_complete() -> None:
    h = Harness()
    h.epoch = 1
    h.state.connect(1)
    h.cmd(hello(1))
    h.cmd(CreateInstance(InstanceConfig()))
    assert h.cmd(CreateDataflow(index_dataflow(IX, 10))) == []
    assert h.cmd(Schedule(IX)) == []
    out = h.cmd(InitializationComplete())
    assert [type(a) for a in out] == [BuildDataflow, ScheduleDataflow]
    with pytest.raises(StageViolation, match="initialization already completed"):
        h.cmd(InitializationComplete())


def test_commands_of_a_stale_epoch_are_ignored() -> None:
    h = Harness()
    started(h, index_dataflow(IX, 0))
    h.state.connect(2)
    assert h.state.command(1, AllowCompaction(IX, E)) == []
    assert h.state.export_ids() == [IX]


# --- frontiers -----------------------------------------------------------------------------


def test_index_frontiers_start_at_as_of_and_never_regress() -> None:
    h = Harness()
    key = started(h, index_dataflow(IX, 10))[IX]
    assert sent(h.step(key, 12)) == [Frontiers(IX, f(12), f(12), f(12))]
    assert sent(h.step(key, 12)) == []
    with pytest.raises(InvariantViolation, match="regressed"):
        h.step(key, 11)
    assert sent(h.step(key, 15)) == [Frontiers(IX, f(15), f(15), f(15))]


def test_materialized_view_reports_the_shard_upper_as_write_frontier() -> None:
    h = Harness()
    mv = GlobalId.user(7)
    key = started(h, sink_dataflow(mv, 10, subscribe=False))[mv]
    assert sent(h.step(key, 12)) == [Frontiers(mv, None, f(12), f(12))]
    # Another replica wrote further than we computed: the write frontier jumps ahead.
    assert sent(h.event(SinkProgress(key, mv, f(30)))) == [Frontiers(mv, f(30), None, None)]
    assert sent(h.event(SinkProgress(key, mv, f(20)))) == []
    assert of_type(h.cmd(AllowWrites(mv)), EnableWrites) == [EnableWrites(key, mv)]
    out = h.cmd(AllowCompaction(mv, E))
    assert sent(out) == [Frontiers(mv, E, E, E)]
    assert of_type(out, DropDataflow) == [DropDataflow(key)]


def test_allow_writes_for_an_index_does_nothing() -> None:
    h = Harness()
    started(h, index_dataflow(IX, 0))
    assert h.cmd(AllowWrites(IX)) == []


# --- peeks ---------------------------------------------------------------------------------


def test_peek_waits_for_the_upper_then_runs_once() -> None:
    """A peek waits for the upper, replica side: ts 20 on an index with upper 15."""
    h = Harness()
    key = started(h, index_dataflow(IX, 0))[IX]
    h.step(key, 15)
    p = peek(IX, 20, 1)
    assert h.cmd(p) == []
    assert of_type(h.step(key, 20), RunPeek) == []
    assert of_type(h.step(key, 21), RunPeek) == [RunPeek(h.epoch, p, key)]
    rows = updates([((1, "a"), 0, 1)]).drop_columns(["_time"])
    first = sent(h.event(PeekFinished(h.epoch, p.uuid, rows=rows)))
    assert first == [PeekResponse(p.uuid, PeekRows(rows))]
    assert h.event(PeekFinished(h.epoch, p.uuid, rows=rows)) == []
    assert h.state.pending_peeks() == []


def test_peek_below_the_compaction_frontier_is_an_error() -> None:
    """A peek below the compaction frontier, replica side."""
    h = Harness()
    key = started(h, index_dataflow(IX, 0))[IX]
    h.step(key, 30)
    assert of_type(h.cmd(AllowCompaction(IX, f(10))), CompactExport) == [
        CompactExport(key, IX, f(10))
    ]
    (resp,) = sent(h.cmd(peek(IX, 5, 1)))
    assert isinstance(resp, PeekResponse) and isinstance(resp.response, PeekError)
    msg = resp.response.message
    assert "compaction frontier {10}" in msg
    assert "beyond the time of the attempted read (5)" in msg
    assert str(IX) in msg


def test_a_waiting_peek_overtaken_by_compaction_is_answered_with_an_error() -> None:
    h = Harness()
    key = started(h, index_dataflow(IX, 0))[IX]
    p = peek(IX, 50, 1)
    h.cmd(p)
    (resp,) = sent(h.cmd(AllowCompaction(IX, f(60))))
    assert (
        isinstance(resp.response, PeekError) and "compaction frontier {60}" in resp.response.message
    )
    assert of_type(h.step(key, 100), RunPeek) == []


def test_cancel_peek_answers_canceled_exactly_once() -> None:
    h = Harness()
    key = started(h, index_dataflow(IX, 0))[IX]
    waiting, running = peek(IX, 50, 1), peek(IX, 0, 2)
    h.cmd(waiting)
    h.step(key, 1)
    assert of_type(h.cmd(running), RunPeek) == [RunPeek(h.epoch, running, key)]
    assert sent(h.cmd(CancelPeek(waiting.uuid))) == [PeekResponse(waiting.uuid, PeekCanceled())]
    out = h.cmd(CancelPeek(running.uuid))
    assert of_type(out, AbortPeek) == [AbortPeek(running.uuid)]
    assert sent(out) == [PeekResponse(running.uuid, PeekCanceled())]
    assert h.event(PeekFinished(h.epoch, running.uuid, rows=updates([]))) == []
    assert h.cmd(CancelPeek(running.uuid)) == []
    assert of_type(h.step(key, 100), RunPeek) == []


def test_results_larger_than_max_result_size_become_errors() -> None:
    h = Harness()
    key = started(h, index_dataflow(IX, 0))[IX]
    h.step(key, 1)
    out = h.cmd(UpdateConfiguration(ComputeParameters(max_result_size=64)))
    assert out == [Configure(ComputeParameters(max_result_size=64))]
    p = peek(IX, 0, 1)
    h.cmd(p)
    rows = updates([((i, "x" * 20), 0, 1) for i in range(10)])
    (resp,) = sent(h.event(PeekFinished(h.epoch, p.uuid, rows=rows)))
    assert isinstance(resp.response, PeekError)
    assert "exceeds max size of 64 bytes" in resp.response.message


def test_peek_of_an_unknown_index_is_an_error_naming_the_indexes() -> None:
    h = Harness()
    started(h, index_dataflow(IX, 0))
    (resp,) = sent(h.cmd(peek(J, 0, 1)))
    assert isinstance(resp.response, PeekError)
    assert f"collection {J} is not an index here; indexes: {IX}" == resp.response.message


def test_reusing_a_peek_uuid_within_an_epoch_is_a_protocol_error() -> None:
    h = Harness()
    started(h, index_dataflow(IX, 0))
    h.cmd(peek(IX, 5, 1))
    with pytest.raises(ProtocolError, match="reused"):
        h.cmd(peek(IX, 6, 1))


def test_dropping_an_index_answers_its_waiting_peeks() -> None:
    h = Harness()
    key = started(h, index_dataflow(IX, 0))[IX]
    p = peek(IX, 50, 1)
    h.cmd(p)
    out = h.cmd(AllowCompaction(IX, E))
    assert sent(out) == [
        Frontiers(IX, E, E, E),
        PeekResponse(p.uuid, PeekError(f"collection {IX} was dropped")),
    ]
    assert of_type(out, DropDataflow) == [DropDataflow(key)]
    assert h.step(key, 10) == []
    assert h.state.export_ids() == []


# --- subscribes ----------------------------------------------------------------------------


def test_subscribe_batches_are_contiguous_and_dropped_at_the_last_upper() -> None:
    h = Harness()
    s = GlobalId.transient(3)
    key = started(h, sink_dataflow(s, 10, subscribe=True))[s]
    b1 = sent(h.step(key, 12, t3=updates([((1, "a"), 10, 1), ((1, "a"), 10, 1)])))
    b2 = sent(h.step(key, 15))
    assert [r.response.lower for r in b1 + b2] == [Antichain.minimum(), f(12)]
    assert [r.response.upper for r in b1 + b2] == [f(12), f(15)]
    assert b1[0].response.updates.column("_diff").to_pylist() == [2]
    assert b2[0].response.updates.num_rows == 0
    out = h.cmd(AllowCompaction(s, E))
    assert sent(out) == [SubscribeResponse(s, SubscribeDroppedAt(f(15)))]
    assert of_type(out, DropDataflow) == [DropDataflow(key)]
    assert h.step(key, 20) == []


def test_subscribe_up_to_ends_with_an_empty_upper_and_nothing_after() -> None:
    h = Harness()
    s = GlobalId.transient(3)
    key = started(h, sink_dataflow(s, 10, subscribe=True, with_snapshot=False, up_to=f(14)))[s]
    batch = updates([((1, "a"), 10, 1), ((2, "b"), 11, 1), ((3, "c"), 14, 1)])
    (resp,) = sent(h.step(key, 20, t3=batch))
    assert isinstance(resp.response, SubscribeBatch)
    assert resp.response.upper == E
    assert resp.response.updates.column("_time").to_pylist() == [11]
    assert sent(h.step(key, 30)) == []
    assert sent(h.cmd(AllowCompaction(s, E))) == []


def test_failed_subscribe_ends_with_an_error_batch() -> None:
    h = Harness()
    s = GlobalId.transient(3)
    key = started(h, sink_dataflow(s, 10, subscribe=True))[s]
    h.step(key, 12)
    out = sent(h.event(DataflowFailed(key, "boom")))
    assert out[0] == Status(f"collection {s} failed: boom", s)
    assert out[1] == SubscribeResponse(
        s, SubscribeBatch(f(12), E, None, error=f"collection {s} failed: boom")
    )


# --- compaction with importers --------------------------------------------------------------


def test_index_compaction_is_held_back_by_importing_dataflows() -> None:
    h = Harness()
    keys = started(h, index_dataflow(IX, 0), importing_dataflow(J, IX, 0))
    a, b = keys[IX], keys[J]
    h.step(a, 50)
    assert h.cmd(AllowCompaction(IX, f(40))) == []  # J has read nothing yet: held at its as_of
    out = h.step(b, 21)
    assert of_type(out, CompactExport) == [CompactExport(a, IX, f(20))]
    out = h.step(b, 60)
    assert of_type(out, CompactExport) == [CompactExport(a, IX, f(40))]


def test_an_imported_index_is_kept_until_its_importer_is_dropped() -> None:
    h = Harness()
    keys = started(h, index_dataflow(IX, 0), importing_dataflow(J, IX, 0))
    a, b = keys[IX], keys[J]
    out = h.cmd(AllowCompaction(IX, E))
    assert sent(out) == [Frontiers(IX, E, E, E)]
    assert of_type(out, DropDataflow) == []
    out = h.cmd(AllowCompaction(J, E))
    assert of_type(out, DropDataflow) == [DropDataflow(b), DropDataflow(a)]


def test_a_failed_dataflow_fails_its_importers_and_their_peeks() -> None:
    h = Harness()
    keys = started(h, index_dataflow(IX, 0), importing_dataflow(J, IX, 0))
    p = peek(J, 5, 1)
    h.cmd(p)
    out = h.event(DataflowFailed(keys[IX], "int64 overflow"))
    statuses = [r for r in sent(out) if isinstance(r, Status)]
    assert [s.id for s in statuses] == [IX, J]
    assert f"its index import {IX} failed: int64 overflow" in statuses[1].message
    (answer,) = [r for r in sent(out) if isinstance(r, PeekResponse)]
    assert isinstance(answer.response, PeekError) and "int64 overflow" in answer.response.message
    assert sorted(a.key for a in of_type(out, DropDataflow)) == sorted(keys.values())
    # Still an export the controller may drop; dropping reports empty frontiers.
    assert sent(h.cmd(AllowCompaction(IX, E))) == [Frontiers(IX, E, E, E)]


def test_an_invalid_dataflow_is_reported_not_built() -> None:
    h = Harness()
    df = importing_dataflow(J, IX, 0)  # imports an index nobody exports
    out = h.connect([CreateDataflow(df)])
    assert of_type(out, BuildDataflow) == []
    (status,) = sent(out)
    assert status == Status(
        f"collection {J} failed: its index import {IX} is not an index on this replica", J
    )


def test_a_duplicate_export_halts() -> None:
    h = Harness()
    started(h, index_dataflow(IX, 0))
    (halt,) = h.cmd(CreateDataflow(index_dataflow(IX, 5)))
    assert isinstance(halt, Halt) and str(IX) in halt.reason


def test_mv_drop_with_other_exports_alive_drops_only_the_sink() -> None:
    h = Harness()
    mv = GlobalId.user(9)
    df = index_dataflow(IX, 0)
    (sink,) = sink_dataflow(mv, 0, subscribe=False).sink_exports
    built = df.objects_to_build[0].id
    both = dataclasses.replace(df, sink_exports=(dataclasses.replace(sink, from_id=built),))
    keys = started(h, both)
    out = h.cmd(AllowCompaction(mv, E))
    assert of_type(out, DropSink) == [DropSink(keys[mv], mv)]
    assert of_type(out, DropDataflow) == []
    out = h.cmd(AllowCompaction(IX, E))
    assert of_type(out, DropDataflow) == [DropDataflow(keys[IX])]
