"""ComputeCommandHistory: reduction preserves replica end state and keeps the history small."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spate.errors import InvariantViolation
from spate.frontier import Antichain
from spate.ids import GlobalId, SeededIdGen
from spate.plan.dataflow import DataflowDescription
from spate.protocol.common import Hello
from spate.protocol.compute import (
    AllowCompaction,
    AllowWrites,
    CancelPeek,
    ComputeCommand,
    ComputeParameters,
    CreateDataflow,
    CreateInstance,
    Frontiers,
    InitializationComplete,
    InstanceConfig,
    Peek,
    Schedule,
    UpdateConfiguration,
)
from spate.protocol.history import ComputeCommandHistory
from tests.protocol.compute_model import SOURCE, dataflow, peek, replay, valid_commands

actions = st.lists(st.tuples(st.integers(0, 8), st.integers(0, 1000)), max_size=80)


def history_of(commands: list[ComputeCommand]) -> ComputeCommandHistory:
    h = ComputeCommandHistory()
    for c in commands:
        h.push(c)
    return h


@given(actions, st.integers(0, 2**16))
def test_reduced_history_replays_to_the_same_state(acts: list[tuple[int, int]], seed: int) -> None:
    commands = valid_commands(acts, seed)
    full = replay(commands).state()
    h = history_of(commands)  # pushes reduce along the way (amortised)
    assert replay(h.commands()).state() == full
    h.reduce()
    reduced = h.commands()
    assert replay(reduced).state() == full
    # Reduction never emits CancelPeek, dropped dataflows or a second UpdateConfiguration.
    assert not any(isinstance(c, CancelPeek) for c in reduced)
    assert sum(isinstance(c, UpdateConfiguration) for c in reduced) <= 1
    for c in reduced:
        if isinstance(c, CreateDataflow):
            assert c.dataflow.as_of is not None and not c.dataflow.as_of.is_empty()
    # Reducing again changes nothing (the reduced history is a fixed point).
    h.reduce()
    assert h.commands() == reduced


@given(actions, st.integers(0, 2**16))
def test_replica_history_without_peeks(acts: list[tuple[int, int]], seed: int) -> None:
    commands = valid_commands(acts, seed)
    h = history_of(commands)
    h.discard_peeks()
    h.reduce()
    assert not any(isinstance(c, (Peek, CancelPeek)) for c in h.commands())
    expected = replay(commands)
    expected.peeks.clear()
    assert replay(h.commands()).state() == expected.state()


def test_replay_order() -> None:
    ids = SeededIdGen(1)
    a, b, log = GlobalId.user(5), GlobalId.user(6), GlobalId.system(1)
    p = peek(a, 12, ids)
    h = history_of(
        [
            Hello(version=1, epoch=2, nonce=b"x" * 16),
            CreateInstance(InstanceConfig()),
            InitializationComplete(),
            AllowCompaction(log, Antichain.of(3)),
            CreateDataflow(dataflow([a, b], 10)),
            UpdateConfiguration(ComputeParameters(max_result_size=5)),
            AllowWrites(a),
            p,
            Schedule(a),
            AllowCompaction(b, Antichain.of(20)),
        ]
    )
    h.reduce()
    assert [type(c) for c in h.commands()] == [
        Hello,
        CreateInstance,
        UpdateConfiguration,
        CreateDataflow,
        Schedule,
        Peek,
        AllowCompaction,  # log collection
        AllowCompaction,  # b beyond the dataflow's new as_of
        InitializationComplete,
        AllowWrites,
    ]
    compactions = [c for c in h.commands() if isinstance(c, AllowCompaction)]
    assert compactions == [
        AllowCompaction(log, Antichain.of(3)),
        AllowCompaction(b, Antichain.of(20)),
    ]


def test_four_hundred_finished_peeks_reduce_to_a_handful() -> None:
    ids = SeededIdGen(2)
    index = GlobalId.user(7)
    h = history_of(
        [
            Hello(version=1, epoch=1, nonce=b"n" * 16),
            CreateInstance(InstanceConfig()),
            CreateDataflow(dataflow([index], 100)),
            Schedule(index),
            InitializationComplete(),
        ]
    )
    longest = 0
    for i in range(400):
        p = peek(index, 100 + i, ids)
        h.push(p)
        h.push(CancelPeek(p.uuid))
        longest = max(longest, len(h))
    assert longest < 20  # amortised reduction bounds it all along
    h.reduce()
    assert len(h) <= 10
    assert h.peek_count() == 0


def test_scenario_14_new_replica_gets_reduced_history() -> None:
    """A replica that reconnects sees the reduced history, at the history level."""
    ids = SeededIdGen(3)
    dropped, moved, untouched, log = (
        GlobalId.user(1),
        GlobalId.user(2),
        GlobalId.user(3),
        GlobalId.system(9),
    )
    h = ComputeCommandHistory()
    h.push(Hello(version=1, epoch=1, nonce=b"n" * 16))
    h.push(CreateInstance(InstanceConfig()))
    h.push(UpdateConfiguration(ComputeParameters(max_result_size=10)))
    for id in (dropped, moved, untouched):
        h.push(CreateDataflow(dataflow([id], 100)))
        h.push(Schedule(id))
    h.push(UpdateConfiguration(ComputeParameters(step_interval_ms=5)))
    h.push(AllowCompaction(log, Antichain.of(50)))
    for i in range(1000):
        p = peek((moved, untouched)[i % 2], 150 + i, ids)
        h.push(p)
        h.push(CancelPeek(p.uuid))
    h.push(AllowCompaction(moved, Antichain.of(150)))
    h.push(AllowCompaction(moved, Antichain.of(200)))
    h.push(AllowCompaction(dropped, Antichain.empty()))
    h.push(InitializationComplete())

    h.reduce()
    sent = h.commands()
    kinds = [type(c) for c in sent]
    assert kinds == [
        Hello,
        CreateInstance,
        UpdateConfiguration,
        CreateDataflow,
        CreateDataflow,
        Schedule,
        Schedule,
        AllowCompaction,
        InitializationComplete,
    ]
    assert sent[2] == UpdateConfiguration(ComputeParameters(max_result_size=10, step_interval_ms=5))
    created = [c.dataflow for c in sent if isinstance(c, CreateDataflow)]
    assert [(d.export_ids(), d.as_of) for d in created] == [
        ((moved,), Antichain.of(200)),
        ((untouched,), Antichain.of(100)),
    ]
    assert [c.id for c in sent if isinstance(c, Schedule)] == [moved, untouched]
    assert [c for c in sent if isinstance(c, AllowCompaction)] == [
        AllowCompaction(log, Antichain.of(50))
    ]
    assert not any(dropped in _ids(c) for c in sent)


def _ids(c: ComputeCommand) -> set[GlobalId]:
    if isinstance(c, CreateDataflow):
        return set(c.dataflow.export_ids())
    if isinstance(c, (Schedule, AllowCompaction, AllowWrites)):
        return {c.id}
    return set()


def test_dataflow_with_partially_dropped_exports_is_kept() -> None:
    a, b = GlobalId.user(1), GlobalId.user(2)
    h = history_of(
        [
            CreateDataflow(dataflow([a, b], 10)),
            AllowCompaction(a, Antichain.empty()),
            AllowCompaction(b, Antichain.of(30)),
            AllowWrites(a),
            AllowWrites(b),
        ]
    )
    h.reduce()
    assert h.commands() == (
        CreateDataflow(dataflow([a, b], 10).with_as_of(Antichain.of(30))),
        AllowCompaction(a, Antichain.empty()),
        AllowWrites(a),
        AllowWrites(b),
    )


def test_update_source_uppers_only_advances() -> None:
    a = GlobalId.user(4)
    h = history_of([CreateDataflow(dataflow([a], 10))])
    h.update_source_uppers({SOURCE: Antichain.of(42), GlobalId.user(99): Antichain.of(1)})
    (df,) = h.dataflows()
    assert df.source_imports[0].upper == Antichain.of(42)
    h.update_source_uppers({SOURCE: Antichain.of(40)})
    assert h.dataflows()[0].source_imports[0].upper == Antichain.of(42)
    h.update_source_uppers({SOURCE: Antichain.empty()})
    assert h.dataflows()[0].source_imports[0].upper == Antichain.empty()


def test_push_rejects_non_commands_and_missing_as_of() -> None:
    h = ComputeCommandHistory()
    with pytest.raises(TypeError, match="not a compute command: Frontiers"):
        h.push(Frontiers(GlobalId.user(1)))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"has no as_of"):
        h.push(CreateDataflow(DataflowDescription(debug_name="x")))
    assert len(h) == 0


def test_compaction_below_as_of_is_an_invariant_violation() -> None:
    a = GlobalId.user(1)
    h = history_of([CreateDataflow(dataflow([a], 10))])
    h.push(AllowCompaction(a, Antichain.of(5)))
    with pytest.raises(InvariantViolation, match=r"below its as_of \{10\}"):
        h.reduce()
