"""The Parquet directory sink: exactly once across reopenings, clear errors for bad intervals."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

from spate.frontier import Antichain
from spate.repr.arrow import table_to_updates, updates_to_table
from spate.repr.desc import RelationDesc
from spate.repr.types import INT64
from spate.storage.sinks.interval import SinkError, SinkFenced
from spate.storage.sinks.parquet_dir import ParquetDirSink, read_committed
from tests.storage.sinks._collection import DESC, at, interval, random_updates


def accumulate(sink: ParquetDirSink, time: int) -> Counter[tuple[object, ...]]:
    return at(table_to_updates(sink.read_all()), time)


def test_crashes_and_replays_write_each_update_once(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    updates = random_updates(rng, 60)
    sink = ParquetDirSink(tmp_path, DESC, sink="u9")
    lower = 0
    while lower < 60:
        upper = min(60, lower + rng.randint(1, 8))
        batch = interval(updates, lower, upper)
        if rng.random() < 0.2:
            # Crash after writing a data file but before the manifest names it.
            (tmp_path / f"part-{lower:020d}-{upper:020d}.parquet").write_bytes(b"half a file")
            sink = ParquetDirSink(tmp_path, DESC, sink="u9")
            assert sink.upper == Antichain.of(lower)
        assert sink.write(batch, lower=Antichain.of(lower), upper=Antichain.of(upper))
        if rng.random() < 0.3:
            # A replica that restarts from an older frontier replays: nothing is written twice.
            sink = ParquetDirSink(tmp_path, DESC, sink="u9")
            assert not sink.write(batch, lower=Antichain.of(lower), upper=Antichain.of(upper))
        assert sink.upper == Antichain.of(upper)
        assert accumulate(sink, upper - 1) == at(updates, upper - 1)
        lower = upper
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names[0] == "_manifest.json"
    assert all(n.startswith("part-") for n in names[1:])  # no leftovers
    assert Counter(table_to_updates(sink.read_all())) == Counter(updates)


def test_bad_intervals_and_batches_write_nothing(tmp_path: Path) -> None:
    sink = ParquetDirSink(tmp_path, DESC, sink="u9")
    ok = updates_to_table(DESC, [((1, "a"), 3, 1)])
    assert sink.write(ok, lower=Antichain.of(0), upper=Antichain.of(5))
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(SinkError, match="gap after the sink's frontier"):
        sink.write(ok, lower=Antichain.of(6), upper=Antichain.of(9))
    with pytest.raises(SinkFenced, match="overlaps"):
        sink.write(ok, lower=Antichain.of(3), upper=Antichain.of(9))
    late = updates_to_table(DESC, [((1, "a"), 9, 1)])
    with pytest.raises(SinkError, match=r"not within \[\{5\}, \{9\}\)"):
        sink.write(late, lower=Antichain.of(5), upper=Antichain.of(9))
    wrong = updates_to_table(RelationDesc.of(("k", INT64, False)), [((1,), 6, 1)])
    with pytest.raises(SinkError, match="columns"):
        sink.write(wrong, lower=Antichain.of(5), upper=Antichain.of(9))
    assert not sink.write(ok, lower=Antichain.of(5), upper=Antichain.of(5))  # nothing to do
    nulls = pa.table({"k": pa.array([None], pa.int64()), "v": ["x"], "_time": [6], "_diff": [1]})
    with pytest.raises(SinkError, match="column 'k'"):
        sink.write(nulls, lower=Antichain.of(5), upper=Antichain.of(9))
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert sink.upper == Antichain.of(5)
    with pytest.raises(SinkError, match="belongs to sink u9"):
        ParquetDirSink(tmp_path, DESC, sink="u10")


def test_closing_the_sink(tmp_path: Path) -> None:
    sink = ParquetDirSink(tmp_path, DESC, sink="u9")
    last = updates_to_table(DESC, [((1, "a"), 100, 1)])
    assert sink.write(last, lower=Antichain.of(0), upper=Antichain.empty())
    assert ParquetDirSink(tmp_path, DESC, sink="u9").upper == Antichain.empty()
    assert any(p.name.endswith("-inf.parquet") for p in tmp_path.iterdir())


def test_reading_a_live_sink_leaves_its_directory_alone(tmp_path: Path) -> None:
    """A reader must not delete the temp files of a writer that is still running."""
    sink = ParquetDirSink(tmp_path, DESC, sink="u9")
    first = updates_to_table(DESC, [((1, "a"), 3, 1), ((2, "b"), 4, 1)])
    assert sink.write(first, lower=Antichain.of(0), upper=Antichain.of(5))
    in_flight = [tmp_path / "._manifest.json.tmp", tmp_path / "part-x-y.parquet"]
    for path in in_flight:
        path.write_bytes(b"being written")
    before = sorted(p.name for p in tmp_path.iterdir())
    contents = read_committed(tmp_path, DESC, sink="u9")
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert contents.upper == Antichain.of(5)
    assert Counter(table_to_updates(contents.updates)) == Counter(table_to_updates(first))
    with pytest.raises(SinkError, match="belongs to sink u9"):
        read_committed(tmp_path, DESC, sink="u10")
    empty = read_committed(tmp_path / "none", DESC, sink="u9")
    assert empty.upper == Antichain.of(0) and empty.updates.num_rows == 0
