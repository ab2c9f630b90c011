"""Sequential hydration: the gate alone, and through the controller."""

from __future__ import annotations

import pytest

from spate.compute.controller.hydration import HydrationGate
from spate.frontier import Antichain
from spate.ids import GlobalId
from spate.protocol.compute import (
    AllowCompaction,
    CreateDataflow,
    Frontiers,
    Schedule,
)

from .harness import I1, R1, R2, D, Harness, f, index_dataflow

A, B, C = GlobalId.user(11), GlobalId.user(12), GlobalId.user(13)
S = GlobalId.user(1)


def created(gate: HydrationGate, *ids: GlobalId, as_of: int = 5) -> None:
    for id in ids:
        assert gate.on_command(CreateDataflow(index_dataflow(S, id, as_of))) == [
            CreateDataflow(index_dataflow(S, id, as_of))
        ]


def test_gate_limits_and_releases_in_order() -> None:
    gate = HydrationGate(limit=2)
    created(gate, A, B, C)
    assert gate.on_command(Schedule(A)) == [Schedule(A)]
    assert gate.on_command(Schedule(B)) == [Schedule(B)]
    assert gate.on_command(Schedule(C)) == []
    assert gate.queued == (C,)
    assert gate.on_progress(A, f(5)) == []  # output at the as_of: not hydrated yet
    assert gate.on_progress(A, f(6)) == [Schedule(C)]
    assert gate.hydrating == {B, C}
    assert gate.on_progress(B, Antichain.empty()) == []  # {} also counts as hydrated
    assert gate.hydrating == {C}


def test_gate_passes_transient_and_untracked_schedules() -> None:
    gate = HydrationGate(limit=1)
    t = GlobalId.transient(1)
    created(gate, A, t)
    assert gate.on_command(Schedule(A)) == [Schedule(A)]
    assert gate.on_command(Schedule(t)) == [Schedule(t)]
    assert gate.on_command(Schedule(GlobalId.user(77))) == [Schedule(GlobalId.user(77))]


def test_gate_drops_the_schedule_of_a_dataflow_dropped_while_queued() -> None:
    gate = HydrationGate(limit=1)
    created(gate, A, B, C)
    gate.on_command(Schedule(A))
    assert gate.on_command(Schedule(B)) == []
    assert gate.on_command(Schedule(C)) == []
    drop = AllowCompaction(B, Antichain.empty())
    assert gate.on_command(drop) == [drop]
    assert gate.queued == (C,)
    drop_a = AllowCompaction(A, Antichain.empty())
    assert gate.on_command(drop_a) == [drop_a, Schedule(C)]


def test_gate_rejects_a_zero_limit() -> None:
    with pytest.raises(ValueError, match="concurrency"):
        HydrationGate(limit=0)


async def test_controller_hydrates_one_dataflow_at_a_time_per_replica() -> None:
    h = Harness(hydration_concurrency=1)
    h.storage.add_collection(S, D, upper=10)
    a, b = h.add_replica(R1), h.add_replica(R2)
    for id in (A, B, C):
        h.controller.create_dataflow(I1, index_dataflow(S, id, 5))
    assert [c for c in a.commands if isinstance(c, Schedule)] == [Schedule(A)]
    assert h.controller.replica_info(I1, R1).queued_for_hydration == (B, C)
    h.respond(R1, Frontiers(A, output_frontier=f(6)))
    assert [c for c in a.commands if isinstance(c, Schedule)] == [Schedule(A), Schedule(B)]
    # Each replica has its own gate: R2 still waits for A.
    assert [c for c in b.commands if isinstance(c, Schedule)] == [Schedule(A)]
    # All three are scheduled as far as the instance (and its history) is concerned.
    assert all(h.inst.collections[id].scheduled for id in (A, B, C))
