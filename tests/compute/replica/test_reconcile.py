"""Reconciliation on reconnection, on the pure state machine."""

from __future__ import annotations

import dataclasses

from spate.compute.replica.actions import (
    AbortPeek,
    BuildDataflow,
    CompactExport,
    DataflowFailed,
    DropDataflow,
    Halt,
    PeekFinished,
    RunPeek,
    ScheduleDataflow,
)
from spate.compute.replica.reconcile import incompatibility
from spate.frontier import Antichain
from spate.ids import GlobalId
from spate.plan.builder import col, lit
from spate.plan.relation import Filter
from spate.protocol.compute import (
    AllowCompaction,
    CreateDataflow,
    Frontiers,
    InstanceConfig,
    Schedule,
    SubscribeResponse,
)

from .helpers import Harness, importing_dataflow, index_dataflow, of_type, peek, sent, sink_dataflow

IX = GlobalId.user(42)
J = GlobalId.user(43)
S = GlobalId.transient(5)
E = Antichain.empty()


def f(t: int) -> Antichain[int]:
    return Antichain.of(t)


def first_connection(h: Harness, *dataflows) -> dict[GlobalId, int]:
    cmds = []
    for df in dataflows:
        cmds.append(CreateDataflow(df))
        cmds.extend(Schedule(i) for i in df.export_ids())
    out = h.connect(cmds)
    h.build_all(out)
    return {i: b.key for b in of_type(out, BuildDataflow) for i in b.description.export_ids()}


def test_compatible_dataflow_is_reused_and_compacted_to_the_new_as_of() -> None:
    h = Harness()
    key = first_connection(h, index_dataflow(IX, 10))[IX]
    h.step(key, 120)
    again = index_dataflow(IX, 100)
    out = h.connect([CreateDataflow(again), Schedule(IX)])
    assert of_type(out, BuildDataflow) == []
    assert of_type(out, ScheduleDataflow) == []  # already running
    assert of_type(out, CompactExport) == [CompactExport(key, IX, f(100))]
    # Frontiers are reported afresh, at least the new as_of, right after reconciliation.
    assert sent(out) == [Frontiers(IX, f(120), f(120), f(120))]
    assert h.state.stats.reused == 1 and h.state.stats.replaced == 0


def test_reused_dataflow_behind_the_new_as_of_reports_nothing_until_it_catches_up() -> None:
    h = Harness()
    key = first_connection(h, index_dataflow(IX, 10))[IX]
    h.step(key, 50)
    out = h.connect([CreateDataflow(index_dataflow(IX, 100))])
    assert sent(out) == []
    assert sent(h.step(key, 90)) == []
    assert sent(h.step(key, 100)) == [Frontiers(IX, f(100), f(100), f(100))]


def test_refreshed_source_uppers_do_not_prevent_reuse() -> None:
    h = Harness()
    df = index_dataflow(IX, 10)
    first_connection(h, df)
    src = dataclasses.replace(df.source_imports[0], upper=f(500))
    again = dataclasses.replace(df, source_imports=(src,), as_of=f(20))
    out = h.connect([CreateDataflow(again)])
    assert of_type(out, BuildDataflow) == []


def test_incompatible_or_compacted_dataflows_are_replaced() -> None:
    df = index_dataflow(IX, 10)
    other_plan = dataclasses.replace(
        df,
        objects_to_build=(
            dataclasses.replace(
                df.objects_to_build[0],
                plan=Filter(df.objects_to_build[0].plan, (col("k").eq(lit(1)),)),
            ),
        ),
    )
    assert incompatibility(df, other_plan) == "objects to build differ"
    assert "before the running as_of" in (incompatibility(df, df.with_as_of(f(5))) or "")
    for new in (other_plan, df.with_as_of(f(5))):
        h = Harness()
        key = first_connection(h, df)[IX]
        out = h.connect([CreateDataflow(new)])
        assert of_type(out, DropDataflow) == [DropDataflow(key)]
        (build,) = of_type(out, BuildDataflow)
        assert build.key != key
        assert sent(out) == []  # no spurious empty frontiers for the replaced one
        assert h.state.stats.replaced == 1


def test_dataflow_compacted_beyond_the_new_as_of_is_replaced() -> None:
    h = Harness()
    key = first_connection(h, index_dataflow(IX, 10))[IX]
    h.step(key, 300)
    h.cmd(AllowCompaction(IX, f(200)))
    out = h.connect([CreateDataflow(index_dataflow(IX, 150))])
    assert of_type(out, DropDataflow) == [DropDataflow(key)]
    assert len(of_type(out, BuildDataflow)) == 1


def test_subscribes_are_never_reused_and_never_report_dropped_at() -> None:
    h = Harness()
    key = first_connection(h, sink_dataflow(S, 10, subscribe=True))[S]
    h.step(key, 20)
    out = h.connect([CreateDataflow(sink_dataflow(S, 20, subscribe=True))])
    assert of_type(out, DropDataflow) == [DropDataflow(key)]
    assert [r for r in sent(out) if isinstance(r, SubscribeResponse)] == []
    assert len(of_type(out, BuildDataflow)) == 1
    assert sent(h.step(key, 30)) == []  # the old one is gone


def test_dataflows_missing_from_the_new_history_are_dropped_silently() -> None:
    h = Harness()
    keys = first_connection(h, index_dataflow(IX, 10), index_dataflow(J, 10))
    out = h.connect([CreateDataflow(index_dataflow(J, 10))])
    assert of_type(out, DropDataflow) == [DropDataflow(keys[IX])]
    assert all(r.id != IX for r in sent(out) if isinstance(r, Frontiers))
    # A later AllowCompaction({}) for it (a stray one) is ignored, not answered.
    assert h.cmd(AllowCompaction(IX, E)) == []
    assert h.state.stats.dropped == 1 and h.state.stats.replaced == 0


def test_importers_are_reused_only_with_their_index() -> None:
    h = Harness()
    keys = first_connection(h, index_dataflow(IX, 10), importing_dataflow(J, IX, 10))
    # Same importer, but its index is rebuilt (new plan) -> both are rebuilt.
    base = index_dataflow(IX, 10)
    changed = dataclasses.replace(base, debug_name="x", until=f(1000))
    out = h.connect([CreateDataflow(changed), CreateDataflow(importing_dataflow(J, IX, 10))])
    drops = [a.key for a in of_type(out, DropDataflow)]
    assert drops == [keys[J], keys[IX]]  # importer first
    builds = of_type(out, BuildDataflow)
    assert len(builds) == 2
    assert builds[1].index_sources == {IX: builds[0].key}


def test_importers_and_index_reused_together() -> None:
    h = Harness()
    keys = first_connection(h, index_dataflow(IX, 10), importing_dataflow(J, IX, 10))
    out = h.connect(
        [CreateDataflow(index_dataflow(IX, 10)), CreateDataflow(importing_dataflow(J, IX, 10))]
    )
    assert of_type(out, BuildDataflow) == [] and of_type(out, DropDataflow) == []
    assert h.state.stats.reused == 2
    assert h.state.dataflow_keys() == sorted(keys.values())


def test_pending_peeks_of_the_old_connection_are_forgotten_without_answer() -> None:
    h = Harness()
    key = first_connection(h, index_dataflow(IX, 0))[IX]
    h.step(key, 5)
    waiting, running = peek(IX, 50, 1), peek(IX, 1, 2)
    h.cmd(waiting)
    h.cmd(running)
    old_epoch = h.epoch
    out = h.connect([CreateDataflow(index_dataflow(IX, 0))])
    assert of_type(out, AbortPeek) == [AbortPeek(running.uuid)]
    assert h.state.pending_peeks() == []
    assert h.event(PeekFinished(old_epoch, running.uuid, rows=None, error="late")) == []
    assert of_type(h.step(key, 60), RunPeek) == []


def test_replayed_live_peek_with_an_old_uuid_is_accepted() -> None:
    h = Harness()
    key = first_connection(h, index_dataflow(IX, 0))[IX]
    p = peek(IX, 50, 1)
    h.cmd(p)
    out = h.connect([CreateDataflow(index_dataflow(IX, 0)), p])
    assert of_type(out, RunPeek) == []
    assert of_type(h.step(key, 51), RunPeek) == [RunPeek(h.epoch, p, key)]


def test_incompatible_create_instance_halts() -> None:
    h = Harness()
    first_connection(h, index_dataflow(IX, 0))
    out = h.connect([], config=InstanceConfig(logging_interval_ms=5))
    halts = of_type(out, Halt)
    assert halts and "not compatible" in halts[0].reason


def test_tightened_expiration_is_compatible() -> None:
    h = Harness()
    h.connect([], config=InstanceConfig(expiration_offset_ms=1000))
    out = h.connect([], config=InstanceConfig(expiration_offset_ms=500))
    assert of_type(out, Halt) == []
    out = h.connect([], config=InstanceConfig(expiration_offset_ms=900))
    assert of_type(out, Halt) != []


def test_responses_are_dropped_while_disconnected_and_initializing() -> None:
    h = Harness()
    key = first_connection(h, index_dataflow(IX, 0))[IX]
    h.state.disconnect(h.epoch)
    assert sent(h.step(key, 10)) == []
    h.epoch += 1
    h.state.connect(h.epoch)
    assert sent(h.step(key, 20)) == []


def test_a_dataflow_still_being_built_is_reused() -> None:
    h = Harness()
    out = h.connect([CreateDataflow(index_dataflow(IX, 10)), Schedule(IX)])
    (build,) = of_type(out, BuildDataflow)
    out = h.connect([CreateDataflow(index_dataflow(IX, 10)), Schedule(IX)])
    assert of_type(out, BuildDataflow) == [] and of_type(out, DropDataflow) == []
    h.build_all([build])
    assert sent(h.step(build.key, 12)) == [Frontiers(IX, f(12), f(12), f(12))]


def test_a_failed_dataflow_is_rebuilt() -> None:
    h = Harness()
    key = first_connection(h, index_dataflow(IX, 10))[IX]
    h.event(DataflowFailed(key, "boom"))
    out = h.connect([CreateDataflow(index_dataflow(IX, 10))])
    assert len(of_type(out, BuildDataflow)) == 1


def test_a_dataflow_not_built_yet_is_rebuilt_at_the_new_as_of() -> None:
    """A replica whose Spark was still starting when its controller went away must not build
    the old description later: the new controller holds the inputs only from its as_of on."""
    h = Harness()
    first = h.connect([CreateDataflow(index_dataflow(IX, 0)), Schedule(IX)])
    (old,) = of_type(first, BuildDataflow)  # never reported built
    out = h.connect([CreateDataflow(index_dataflow(IX, 100)), Schedule(IX)])
    assert of_type(out, DropDataflow) == [DropDataflow(old.key)]
    (new,) = of_type(out, BuildDataflow)
    assert new.description.as_of == f(100)
    # Built at the same as_of, it is reused as before.
    h.build_all(out)
    out = h.connect([CreateDataflow(index_dataflow(IX, 100)), Schedule(IX)])
    assert of_type(out, BuildDataflow) == []
