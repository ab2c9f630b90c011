"""A writer's merges take the parts it wrote from memory (persist.part_cache), and merge them
into the same contents; reads that serve rows still verify every blob."""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path

import pyarrow as pa

from spate.clock import ManualClock
from spate.ids import SeededIdGen, ShardId
from spate.persist.client import PersistClient
from spate.persist.config import PersistConfig
from spate.persist.location import PersistLocation
from spate.persist.part_cache import PartCache
from spate.persist.state import BatchPart
from spate.repr.arrow import updates_schema
from tests.persist.conftest import DESC, A, tok, updates

SCHEMA = updates_schema(DESC)


def _part(key: str, table: pa.Table) -> BatchPart:
    return BatchPart(key=key, encoded_size=1, num_updates=table.num_rows, checksum=b"")


def _table(n: int) -> pa.Table:
    return updates([((i, "v"), 0, 1) for i in range(n)]).cast(SCHEMA)


def test_the_cache_keeps_recent_tables_within_its_budget() -> None:
    t = _table(100)
    cache = PartCache(int(t.nbytes) * 2)
    for key in ("a", "b", "c"):
        cache.put(key, t)
    assert cache.get(_part("a", t), SCHEMA) is None  # the least recently used went
    assert cache.get(_part("b", t), SCHEMA) is t
    assert cache.get(_part("c", t), SCHEMA) is t
    assert cache.nbytes == 2 * t.nbytes
    cache.discard(["b", "x"])
    assert cache.get(_part("b", t), SCHEMA) is None
    assert cache.nbytes == t.nbytes
    # another row count or schema than the part's: not served
    assert cache.get(_part("c", _table(3)), SCHEMA) is None
    assert cache.get(_part("c", t), pa.schema([pa.field("k", pa.int64())])) is None
    PartCache(0).put("a", t)  # larger than the budget: not kept
    assert cache.hits == 2


def _contents(client: PersistClient, shard: ShardId, as_of: int) -> Counter[tuple[object, ...]]:
    r = client.open_leased_reader(shard, DESC)
    snap = r.snapshot(as_of)
    out: Counter[tuple[object, ...]] = Counter()
    for k, v, d in zip(
        snap.column("k").to_pylist(),
        snap.column("v").to_pylist(),
        snap.column("_diff").to_pylist(),
        strict=True,
    ):
        out[(k, v)] += d
    return +out


def test_a_writer_merges_the_parts_it_wrote_from_memory(tmp_path: Path) -> None:
    """Compaction takes every part it merges from the cache (none fetched), and a client that
    never saw them reads the merged batches as the same contents."""
    location = PersistLocation.embedded(tmp_path / "data")
    clock = ManualClock(1_700_000_000_000)
    config = PersistConfig(compaction_min_inputs=2)
    writer_client = PersistClient(location, clock=clock, ids=SeededIdGen(1), config=config)
    shard = ShardId(uuid.uuid4())
    expected: Counter[tuple[object, ...]] = Counter()
    try:
        w = writer_client.open_writer(shard, DESC)
        for t in range(24):
            rows = [((t * 10 + i, f"v{i}"), t, 1) for i in range(5)]
            if t:  # retract a row of the step before, so merges consolidate
                rows.append((((t - 1) * 10, "v0"), t, -1))
            for (k, v), _t, d in rows:
                expected[(k, v)] += d
            w.compare_and_append(
                updates(rows), expected_upper=A(t), new_upper=A(t + 1), idempotency_token=tok()
            )
        writer_client.wait_for_maintenance()
        assert writer_client.parts.hits > 0
        batches = writer_client.fetch_state(shard).batches
        assert len(batches) < 24  # merged
    finally:
        writer_client.close()
    reader_client = PersistClient(location, clock=clock, ids=SeededIdGen(2), config=config)
    try:
        assert reader_client.parts.hits == 0
        assert _contents(reader_client, shard, 23) == +expected
    finally:
        reader_client.close()
