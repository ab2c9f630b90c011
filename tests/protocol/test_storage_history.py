"""StorageCommandHistory: its reduction cases and a replay-equivalence property."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spate.frontier import Antichain
from spate.ids import GlobalId
from spate.protocol.common import Hello
from spate.protocol.compute import Schedule
from spate.protocol.storage import (
    AllowCompaction,
    AllowWrites,
    InitializationComplete,
    RunIngestion,
    RunSink,
    StorageCommand,
    StorageParameters,
    UpdateConfiguration,
)
from spate.protocol.storage_history import StorageCommandHistory
from tests.protocol.storage_model import counter, ingestion, replay, sink, valid_commands

U = GlobalId.user
HELLO = Hello(version=1, epoch=1, nonce=b"n")


def reduced(commands: list[StorageCommand]) -> tuple[StorageCommand, ...]:
    h = StorageCommandHistory()
    for c in commands:
        h.push(c)
    h.reduce()
    return h.commands()


def test_reduce_drops_dropped_ingestion() -> None:
    run = ingestion(U(1), [U(2), U(3)])
    out = reduced(
        [
            HELLO,
            run,
            AllowCompaction(U(2), Antichain.of(5)),
            AllowCompaction(U(1), Antichain.of(5)),
            AllowCompaction(U(1), Antichain.empty()),
        ]
    )
    assert out == (HELLO,)


def test_reduce_keeps_compacted_ingestion() -> None:
    run = ingestion(U(1), [U(2)], remap=U(9))
    out = reduced(
        [
            HELLO,
            run,
            AllowCompaction(U(1), Antichain.of(3)),
            AllowCompaction(U(2), Antichain.of(4)),
            AllowCompaction(U(9), Antichain.of(2)),
            AllowCompaction(U(2), Antichain.of(7)),
        ]
    )
    assert out == (
        HELLO,
        run,
        AllowCompaction(U(1), Antichain.of(3)),
        AllowCompaction(U(2), Antichain.of(7)),
        AllowCompaction(U(9), Antichain.of(2)),
    )


def test_reduce_keeps_partially_dropped_ingestion() -> None:
    run = ingestion(U(1), [U(2), U(3)])
    out = reduced([HELLO, run, AllowCompaction(U(3), Antichain.empty())])
    assert out == (HELLO, run, AllowCompaction(U(3), Antichain.empty()))


def test_ingestion_replay_preserves_latest_permission() -> None:
    """The latest RunIngestion wins, and each collection keeps its latest compaction."""
    first = ingestion(U(1), [U(2)], seed=1)
    altered = ingestion(U(1), [U(2)], seed=2)
    assert first != altered
    out = reduced(
        [
            HELLO,
            first,
            AllowCompaction(U(2), Antichain.of(10)),
            altered,
            AllowCompaction(U(2), Antichain.of(20)),
            AllowWrites(),
        ]
    )
    assert out == (HELLO, altered, AllowCompaction(U(2), Antichain.of(20)), AllowWrites())


def test_reduce_drops_dropped_sink() -> None:
    out = reduced(
        [
            HELLO,
            sink(U(5), U(1), 10),
            AllowCompaction(U(5), Antichain.of(12)),
            AllowCompaction(U(5), Antichain.empty()),
        ]
    )
    assert out == (HELLO,)


def test_reduce_keeps_compacted_sink() -> None:
    out = reduced([HELLO, sink(U(5), U(1), 10), AllowCompaction(U(5), Antichain.of(15))])
    # The compaction is folded into the sink's as_of; no AllowCompaction remains.
    assert out == (HELLO, sink(U(5), U(1), 15))
    out = reduced([HELLO, sink(U(5), U(1), 10), AllowCompaction(U(5), Antichain.of(4))])
    assert out == (HELLO, sink(U(5), U(1), 10))


def test_reduce_drops_stray_compactions() -> None:
    run = counter(U(1), U(2))
    out = reduced(
        [
            HELLO,
            AllowCompaction(U(40), Antichain.of(3)),
            run,
            AllowCompaction(U(41), Antichain.empty()),
            InitializationComplete(),
        ]
    )
    assert out == (HELLO, run, InitializationComplete())


def test_replay_order_and_merged_configuration() -> None:
    out = reduced(
        [
            AllowWrites(),
            InitializationComplete(),
            AllowCompaction(U(2), Antichain.of(1)),
            sink(U(5), U(2), 0),
            UpdateConfiguration(StorageParameters(statistics_interval_ms=10)),
            counter(U(1), U(2)),
            HELLO,
            UpdateConfiguration(StorageParameters(sink_max_batch_rows=5)),
        ]
    )
    assert [type(c) for c in out] == [
        Hello,
        UpdateConfiguration,
        RunIngestion,
        RunSink,
        InitializationComplete,
        AllowWrites,
    ]
    assert out[1] == UpdateConfiguration(
        StorageParameters(statistics_interval_ms=10, sink_max_batch_rows=5)
    )


def test_commands_for_a_replica_filters_objects() -> None:
    h = StorageCommandHistory()
    for c in [
        HELLO,
        counter(U(1), U(2)),
        counter(U(3), U(4)),
        sink(U(5), U(2), 0),
        AllowCompaction(U(2), Antichain.of(3)),
        AllowCompaction(U(4), Antichain.of(3)),
        InitializationComplete(),
    ]:
        h.push(c)
    h.reduce()
    mine = h.commands_for(lambda id: id in (U(1), U(5)))
    assert mine == (
        HELLO,
        counter(U(1), U(2)),
        sink(U(5), U(2), 0),
        AllowCompaction(U(2), Antichain.of(3)),
        InitializationComplete(),
    )


def test_push_rejects_compute_commands() -> None:
    h = StorageCommandHistory()
    with pytest.raises(TypeError, match="not a storage command: Schedule"):
        h.push(Schedule(U(1)))  # type: ignore[arg-type]
    assert len(h) == 0


actions = st.lists(st.tuples(st.integers(0, 6), st.integers(0, 1000)), max_size=60)


@given(actions)
def test_reduced_storage_history_replays_to_the_same_state(acts: list[tuple[int, int]]) -> None:
    commands = valid_commands(acts)
    full = replay(commands).state()
    h = StorageCommandHistory()
    for c in commands:
        h.push(c)
    assert replay(h.commands()).state() == full
    h.reduce()
    once = h.commands()
    assert replay(once).state() == full
    assert sum(isinstance(c, UpdateConfiguration) for c in once) <= 1
    h.reduce()
    assert h.commands() == once
    # O(live objects): at most one run per object plus a compaction per collection.
    runs = [c for c in once if isinstance(c, (RunIngestion, RunSink))]
    assert len(runs) == len({c.id for c in runs})
