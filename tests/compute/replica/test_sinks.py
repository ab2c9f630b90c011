"""Materialized-view sinks: racing writers each interval exactly once; read-only writes nothing."""

from __future__ import annotations

import itertools
import random
import uuid
from collections import Counter
from collections.abc import Iterator

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spate.clock import ManualClock
from spate.compute.replica.sinks import MaterializedViewSink
from spate.frontier import Antichain
from spate.ids import GlobalId, SeededIdGen, ShardId
from spate.persist import PersistClient
from spate.persist.blob_mem import MemBlob
from spate.persist.consensus_mem import MemConsensus
from spate.persist.read import ListenUpdates
from spate.repr import INT64, RelationDesc
from spate.repr.arrow import table_to_updates, updates_to_table

D = RelationDesc.of(("k", INT64, False))
MV = GlobalId.user(5)


@pytest.fixture
def client() -> Iterator[PersistClient]:
    c = PersistClient.from_stores(
        MemBlob(), MemConsensus(), clock=ManualClock(1), ids=SeededIdGen(1)
    )
    yield c
    c.close()


def view_updates(seed: int, upper: int) -> list[tuple[tuple[int], int, int]]:
    """A deterministic 'view': consolidated updates at times [3, upper)."""
    rng = random.Random(seed)
    live: list[int] = []
    out = []
    for t in range(3, upper):
        for _ in range(rng.randint(0, 3)):
            if live and rng.random() < 0.4:
                out.append(((live.pop(rng.randrange(len(live))),), t, -1))
            else:
                k = rng.randint(0, 1000)
                live.append(k)
                out.append(((k,), t, 1))
    return [(r, t, d) for (r, t), d in sorted(consolidate(out).items())]


def consolidate(updates) -> Counter:
    """(row, time) -> summed diff, zeros dropped."""
    acc: Counter = Counter()
    for r, t, d in updates:
        acc[(r, t)] += d
    return Counter({k: v for k, v in acc.items() if v})


def chunk(updates, lower: int, upper: int) -> pa.Table:
    return updates_to_table(D, [u for u in updates if lower <= u[1] < upper])


def shard_updates(client: PersistClient, shard: ShardId) -> Counter:
    """The shard's updates, consolidated: (row, time) -> diff."""
    reader = client.open_leased_reader(shard, D)
    events = reader.listener(0).poll_once()
    found = table_to_updates(reader.snapshot(0))
    for e in events:
        if isinstance(e, ListenUpdates):
            found += table_to_updates(e.updates)
    reader.expire()
    return consolidate(found)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    cuts=st.lists(st.lists(st.integers(4, 29), max_size=6), min_size=2, max_size=3),
    order=st.lists(st.integers(0, 2), min_size=5, max_size=40),
)
def test_racing_writers_write_every_interval_exactly_once(seed, cuts, order) -> None:
    """Writers with different step boundaries, flushing in a random interleaving, produce a
    shard whose updates are exactly the view's (no duplicate, nothing missing)."""
    client = PersistClient.from_stores(
        MemBlob(), MemConsensus(), clock=ManualClock(1), ids=SeededIdGen(seed)
    )
    shard = ShardId(uuid.UUID(int=seed + 1))
    upper = 30
    view = view_updates(seed, upper)
    sinks = []
    plans = []
    for i, c in enumerate(cuts):
        s = MaterializedViewSink(MV, client.open_writer(shard, D), as_of=3, ids=SeededIdGen(i))
        s.allow_writes()
        sinks.append(s)
        bounds = sorted({3, *c, upper})
        plans.append(list(itertools.pairwise(bounds)))
    steps = [0] * len(sinks)
    for i in order + [0, 1, 2] * 20:
        i %= len(sinks)
        if steps[i] < len(plans[i]):
            lo, hi = plans[i][steps[i]]
            steps[i] += 1
            sinks[i].add(chunk(view, lo, hi), upper=Antichain.of(hi))
        sinks[i].flush()
    for s in sinks:
        assert s.flush() == Antichain.of(upper)
    assert shard_updates(client, shard) == consolidate(view)
    assert sum(s.stats.appends for s in sinks) >= 1
    client.close()


def test_read_only_sink_writes_nothing_until_allowed(client: PersistClient) -> None:
    shard = ShardId(uuid.uuid4())
    view = view_updates(7, 20)
    s = MaterializedViewSink(MV, client.open_writer(shard, D), as_of=3, ids=SeededIdGen(3))
    s.add(chunk(view, 3, 10), upper=Antichain.of(10))
    assert s.flush() == Antichain.minimum()
    assert client.fetch_state(shard).upper == Antichain.minimum()
    # Another environment writes [0, 6): the read-only sink observes it and keeps the rest.
    other = MaterializedViewSink(MV, client.open_writer(shard, D), as_of=3, ids=SeededIdGen(4))
    other.allow_writes()
    other.add(chunk(view, 3, 6), upper=Antichain.of(6))
    assert other.flush() == Antichain.of(6)
    s._last_refresh = 0.0
    assert s.flush() == Antichain.of(6)
    s.allow_writes()
    s.add(chunk(view, 10, 20), upper=Antichain.of(20))
    assert s.flush() == Antichain.of(20)
    assert shard_updates(client, shard) == consolidate(view)


def test_a_lower_step_upper_is_refused(client: PersistClient) -> None:
    s = MaterializedViewSink(
        MV, client.open_writer(ShardId(uuid.uuid4()), D), as_of=3, ids=SeededIdGen(1)
    )
    s.add(chunk([], 3, 9), upper=Antichain.of(9))
    with pytest.raises(ValueError, match="below"):
        s.add(chunk([], 3, 5), upper=Antichain.of(5))
