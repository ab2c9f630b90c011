"""Sink runners: the external system equals the collection at the sink's frontier, across crashes."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from spate.clock import ManualClock
from spate.frontier import Antichain
from spate.ids import GlobalId, SeededIdGen, ShardId
from spate.protocol.storage_desc import ParquetSinkConnection, SinkDescription
from spate.repr.arrow import table_to_updates, updates_to_table
from spate.storage.replica.sink import SinkRunner
from spate.storage.sinks.interval import SinkError
from spate.storage.sinks.parquet_dir import ParquetDirSink
from tests.storage.replica._setup import persist_client
from tests.storage.sinks._collection import DESC, at, random_updates


def write_collection(
    client: Any, shard: ShardId, updates: list[Any], upto: int, writer: Any
) -> None:
    lower = writer.upper.as_option()
    batch = [u for u in updates if lower <= u[1] < upto]
    writer.compare_and_append(
        updates_to_table(DESC, batch),
        expected_upper=writer.upper,
        new_upper=Antichain.of(upto),
        idempotency_token=SeededIdGen(upto).uuid(),
    )


@pytest.mark.parametrize("with_snapshot", [True, False])
def test_parquet_sink_survives_crashes(tmp_path: Path, seed: int, with_snapshot: bool) -> None:
    rng = random.Random(seed)
    clock = ManualClock(0)
    client = persist_client(clock, seed)
    shard = ShardId.new(SeededIdGen(seed))
    updates = random_updates(rng, 80)
    writer = client.open_writer(shard, DESC)
    hold = client.open_leased_reader(shard, DESC)  # the controller's hold on the input
    as_of = 10
    write_collection(client, shard, updates, 5, writer)
    desc = SinkDescription(
        GlobalId.user(1),
        shard,
        DESC,
        ParquetSinkConnection(str(tmp_path)),
        Antichain.of(as_of),
        with_snapshot=with_snapshot,
    )
    sink_id = GlobalId.user(2)
    runner = SinkRunner(sink_id, desc, persist=client, snapshot_timeout_s=0.01)
    assert not runner.step()  # the input has not passed as_of yet
    upto = 5
    while upto < 80:
        upto = min(80, upto + rng.randint(1, 9))
        write_collection(client, shard, updates, upto, writer)
        runner.step()
        if rng.random() < 0.3:
            runner = SinkRunner(sink_id, desc, persist=client)  # crash: a new process
            if rng.random() < 0.5:
                runner.step()
        hold.downgrade_since(Antichain.of(max(0, runner.upper.as_option() - 1)))
    runner.step()
    assert runner.upper == Antichain.of(80)
    written = table_to_updates(ParquetDirSink(tmp_path, DESC, sink=str(sink_id)).read_all())
    if with_snapshot:
        assert at(written, 79) == at(updates, 79)
    # Snapshot rows are consolidated at as_of; compare accumulations at every time from as_of.
    for time in range(as_of, 80):
        want = at([u for u in updates if with_snapshot or u[1] > as_of], time)
        assert at(written, time) == want, time

    # Nothing twice: past the snapshot, the sink holds exactly the collection's updates.
    def consolidated(ups: Any) -> Counter[Any]:
        out: Counter[Any] = Counter()
        for r, t, d in ups:
            if t > as_of:
                out[(r, t)] += d
        return Counter({k: v for k, v in out.items() if v})

    assert consolidated(written) == consolidated(updates)
    stats = runner.statistics()
    assert stats.id == sink_id


def test_up_to_stops_the_sink(tmp_path: Path) -> None:
    clock = ManualClock(0)
    client = persist_client(clock, 3)
    shard = ShardId.new(SeededIdGen(3))
    updates = [((1, "a"), 1, 1), ((2, "b"), 6, 1), ((3, "c"), 12, 1)]
    writer = client.open_writer(shard, DESC)
    write_collection(client, shard, updates, 20, writer)
    desc = SinkDescription(
        GlobalId.user(1),
        shard,
        DESC,
        ParquetSinkConnection(str(tmp_path)),
        Antichain.of(2),
        up_to=Antichain.of(10),
    )
    runner = SinkRunner(GlobalId.user(2), desc, persist=client)
    assert runner.step()
    assert runner.upper == Antichain.of(10) and runner.done()
    assert not runner.step()
    written = table_to_updates(ParquetDirSink(tmp_path, DESC, sink="u2").read_all())
    assert sorted(written) == [((1, "a"), 2, 1), ((2, "b"), 6, 1)]
    with pytest.raises(SinkError, match="as_of is empty"):
        SinkRunner(GlobalId.user(3), _empty_as_of(desc), persist=client)


def _empty_as_of(desc: SinkDescription) -> SinkDescription:
    import dataclasses

    return dataclasses.replace(desc, as_of=Antichain.empty())
