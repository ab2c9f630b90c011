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


# -- self-correction: restarted, duplicated and lagging writers ----------------------------------


def accumulate(updates, t: int) -> Counter:
    """The collection at time ``t``: row -> multiplicity, zeros dropped."""
    acc: Counter = Counter()
    for r, time, d in updates:
        if time <= t:
            acc[r] += d
    return Counter({r: m for r, m in acc.items() if m})


def emitted(view, as_of: int, upper: int):
    """What a dataflow started at ``as_of`` outputs below ``upper``: the view's contents at
    ``as_of`` (its snapshot, at time ``as_of``), then the view's updates after it."""
    snap = [(r, as_of, m) for r, m in sorted(accumulate(view, as_of).items())]
    return snap + [u for u in view if as_of < u[1] < upper]


def write_raw(client: PersistClient, shard: ShardId, updates, upper: int) -> None:
    """Append ``updates`` below ``upper`` with a writer that follows no rule (a crash left
    them, or an earlier, wrong writer)."""
    w = client.open_writer(shard, D)
    lower = w.fetch_recent_upper()
    (lo,) = lower.elements
    rows = [(r, max(t, lo), d) for r, t, d in updates]
    w.compare_and_append(
        updates_to_table(D, rows),
        expected_upper=lower,
        new_upper=Antichain.of(upper),
        idempotency_token=uuid.uuid4(),
    )
    w.expire()


def shard_at(client: PersistClient, shard: ShardId, t: int) -> Counter:
    return accumulate([(r, time, d) for (r, time), d in shard_updates(client, shard).items()], t)


def run_writer(client: PersistClient, shard: ShardId, view, as_of: int, cuts, upper: int, i=0):
    s = MaterializedViewSink(MV, client.open_writer(shard, D), as_of=as_of, ids=SeededIdGen(i))
    s.allow_writes()
    for lo, hi in itertools.pairwise(sorted({as_of, *cuts, upper})):
        s.add(
            updates_to_table(D, [u for u in emitted(view, as_of, hi) if u[1] >= lo]),
            upper=Antichain.of(hi),
        )
        s.flush()
    return s


def test_a_view_restarted_beyond_its_shard_upper_is_not_double_counted(
    client: PersistClient,
) -> None:
    """The crash case: the view's shard stops at 10, its inputs were compacted to 15, so the
    restarted dataflow's as_of is 15 and its first output is the whole view at 15. The shard
    holds, from 15 on, exactly the view (before, it held the view twice)."""
    shard = ShardId(uuid.uuid4())
    view = view_updates(11, 30)
    run_writer(client, shard, view, 3, [6], 10)
    assert shard_at(client, shard, 9) == accumulate(view, 9)
    s = run_writer(client, shard, view, 15, [20, 25], 30, i=1)
    assert s.stats.corrections == 1
    for t in range(15, 30):
        assert shard_at(client, shard, t) == accumulate(view, t), t
    # Times the inputs no longer have keep the view as it was at the old upper.
    for t in range(10, 15):
        assert shard_at(client, shard, t) == accumulate(view, 9), t


def test_stale_rows_left_in_the_shard_are_retracted_by_the_next_writer(
    client: PersistClient,
) -> None:
    """A shard holding the view twice (the old double count) and a row that is not in the view
    is mended by the first write of a restarted writer, at the shard's upper."""
    shard = ShardId(uuid.uuid4())
    view = view_updates(5, 30)
    write_raw(client, shard, emitted(view, 3, 12) * 2 + [((10_001,), 3, 1)], 12)
    assert shard_at(client, shard, 11) != accumulate(view, 11)
    run_writer(client, shard, view, 11, [15, 20], 30)
    for t in range(12, 30):
        assert shard_at(client, shard, t) == accumulate(view, t), t


def test_restarted_and_racing_writers_converge_to_the_view(seed: int) -> None:
    """Writers started at random as_ofs (restarts after crashes), some abandoned midway
    (killed), several alive at once (replicas), and crashes of all of them that leave junk
    behind: in any interleaving, the shard equals the view at every time from the latest
    as_of on, and nothing is double-counted."""
    rng = random.Random(seed)
    for trial in range(25):
        client = PersistClient.from_stores(
            MemBlob(), MemConsensus(), clock=ManualClock(1), ids=SeededIdGen(seed + trial)
        )
        shard = ShardId(uuid.UUID(int=trial + 1))
        upper = 40
        view = view_updates(rng.randrange(10_000), upper)
        if rng.random() < 0.5:  # a shard a crash left wrong
            junk = [
                ((rng.randint(0, 1000),), rng.randint(0, 5), rng.choice([1, 2, -1]))
                for _ in range(5)
            ]
            write_raw(client, shard, junk + emitted(view, 3, 6), 6)
        live: list[tuple[MaterializedViewSink, list[tuple[int, int]]]] = []
        as_ofs = []
        for i in range(rng.randint(2, 5)):
            as_of = rng.randint(3, 30)
            as_ofs.append(as_of)
            s = MaterializedViewSink(
                MV, client.open_writer(shard, D), as_of=as_of, ids=SeededIdGen(100 * trial + i)
            )
            s.allow_writes()
            cuts = sorted({as_of, *rng.sample(range(as_of + 1, upper), 3), upper})
            steps = list(itertools.pairwise(cuts))
            live.append((s, steps))
            for _ in range(rng.randint(0, 6)):  # interleave the live writers' steps
                w, todo = rng.choice(live)
                if todo:
                    lo, hi = todo.pop(0)
                    w.add(
                        updates_to_table(D, [u for u in emitted(view, w._as_of, hi) if u[1] >= lo]),
                        upper=Antichain.of(hi),
                    )
                w.flush()
            if rng.random() < 0.3:
                live.pop(rng.randrange(len(live)))  # killed: never writes again
            if rng.random() < 0.2:  # every process killed, and junk left behind (old code)
                current = client.fetch_state(shard).upper.as_option()
                if current is not None and current < upper - 1:
                    live.clear()
                    write_raw(client, shard, [((5000 + i,), current, 1)], current + 1)
                    as_ofs.append(current + 1)  # below its upper, the junk stays (append-only)
        last_as_of = rng.randint(min(max(as_ofs), 38), 38)
        final = run_writer(client, shard, view, last_as_of, [39], upper, i=999)
        for w, todo in live:  # the survivors finish too
            for lo, hi in todo:
                w.add(
                    updates_to_table(D, [u for u in emitted(view, w._as_of, hi) if u[1] >= lo]),
                    upper=Antichain.of(hi),
                )
                w.flush()
        assert final.flush() == Antichain.of(upper)
        for t in range(max(last_as_of, *as_ofs), upper):
            assert shard_at(client, shard, t) == accumulate(view, t), (seed, trial, t)
        client.close()
