"""The storage command history's reduction cases, on the instance history the controller keeps."""

from __future__ import annotations

import dataclasses

from spate.frontier import Antichain
from spate.ids import GlobalId, SeededIdGen
from spate.protocol.common import PROTOCOL_VERSION, Hello
from spate.protocol.storage import (
    AllowCompaction,
    AllowWrites,
    InitializationComplete,
    RunIngestion,
    RunSink,
    StorageParameters,
    UpdateConfiguration,
)
from spate.protocol.storage_desc import (
    LoadGenerator,
    LoadGeneratorSource,
    ParquetSinkConnection,
    SinkDescription,
)
from spate.protocol.storage_history import StorageCommandHistory
from tests.storage.replica._setup import loadgen_ingestion

AUCTION = LoadGeneratorSource(LoadGenerator.AUCTION)


def ingestion() -> tuple[GlobalId, RunIngestion]:
    id, description = loadgen_ingestion(AUCTION, SeededIdGen(1), first_id=1)
    return id, RunIngestion(id, description)


def sink(as_of: int = 1) -> RunSink:
    _, description = loadgen_ingestion(AUCTION, SeededIdGen(1), first_id=1)
    e = description.exports[0]
    return RunSink(
        GlobalId.user(9),
        SinkDescription(
            e.id, e.shard, e.desc, ParquetSinkConnection("/tmp/x"), Antichain.of(as_of)
        ),
    )


def reduced(*commands: object) -> list[object]:
    h = StorageCommandHistory()
    for c in commands:
        h.push(c)  # type: ignore[arg-type]
    h.reduce()
    return list(h.commands())


def test_reduce_drops_dropped_ingestion() -> None:
    id, run = ingestion()
    out = reduced(run, AllowCompaction(id, Antichain.of(5)), AllowCompaction(id, Antichain.empty()))
    assert out == []


def test_reduce_keeps_compacted_ingestion() -> None:
    id, run = ingestion()
    out = reduced(run, AllowCompaction(id, Antichain.of(3)), AllowCompaction(id, Antichain.of(5)))
    assert out == [run, AllowCompaction(id, Antichain.of(5))]


def test_reduce_keeps_partially_dropped_ingestion() -> None:
    _id, run = ingestion()
    export = run.description.exports[0].id
    out = reduced(run, AllowCompaction(export, Antichain.empty()))
    assert out == [run, AllowCompaction(export, Antichain.empty())]


def test_ingestion_replay_preserves_latest_permission() -> None:
    id, run = ingestion()
    altered = RunIngestion(id, dataclasses.replace(run.description, timestamp_interval_ms=500))
    export = run.description.exports[1].id
    out = reduced(
        run,
        AllowCompaction(export, Antichain.of(3)),
        altered,
        AllowCompaction(export, Antichain.of(7)),
    )
    assert out == [altered, AllowCompaction(export, Antichain.of(7))]


def test_reduce_drops_dropped_sink() -> None:
    run = sink()
    assert reduced(run, AllowCompaction(run.id, Antichain.empty())) == []


def test_reduce_keeps_compacted_sink() -> None:
    run = sink(as_of=1)
    out = reduced(run, AllowCompaction(run.id, Antichain.of(4)))
    assert out == [RunSink(run.id, dataclasses.replace(run.description, as_of=Antichain.of(4)))]


def test_reduce_drops_stray_compactions() -> None:
    assert reduced(AllowCompaction(GlobalId.user(42), Antichain.of(3))) == []


def test_reduce_merges_configuration_and_orders_the_replay() -> None:
    _id, run = ingestion()
    hello = Hello(PROTOCOL_VERSION, 1, b"n" * 16)
    out = reduced(
        hello,
        UpdateConfiguration(StorageParameters(statistics_interval_ms=10)),
        InitializationComplete(),
        run,
        UpdateConfiguration(StorageParameters(status_interval_ms=20)),
        AllowWrites(),
    )
    assert out == [
        hello,
        UpdateConfiguration(StorageParameters(statistics_interval_ms=10, status_interval_ms=20)),
        run,
        InitializationComplete(),
        AllowWrites(),
    ]


def test_the_controller_history_stays_bounded() -> None:
    h = StorageCommandHistory()
    id, run = ingestion()
    h.push(run)
    for t in range(1, 2000):
        h.push(AllowCompaction(id, Antichain.of(t)))
    h.reduce()
    assert len(h) == 2
