"""Hypothesis: random update streams with interleaved compactions and since downgrades.

At every readable time, ``snapshot`` equals the accumulation of everything written (the
oracle); a snapshot at ``as_of`` plus the listen from ``as_of`` equals it at every later time;
and Spark's read of ``live_batches`` equals ``snapshot``.
"""

from __future__ import annotations

import tempfile
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hypothesis import given, settings
from hypothesis import strategies as st

from spate.clock import ManualClock
from spate.frontier.antichain import Antichain
from spate.ids import SeededIdGen, ShardId
from spate.persist import ListenUpdates, PersistClient, PersistConfig, PersistLocation
from spate.persist.spark import spark_snapshot
from spate.repr.arrow import table_to_updates
from tests.persist.conftest import DESC, tok, updates

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Update = tuple[tuple[int, str], int, int]


@dataclass(frozen=True)
class Append:
    rows: tuple[tuple[int, int, int, int], ...]  # key, value, time offset, diff
    advance: int


@dataclass(frozen=True)
class Downgrade:
    lag: int


@dataclass(frozen=True)
class Compact:
    pass


@dataclass(frozen=True)
class Listen:
    pass


row = st.tuples(
    st.integers(0, 4), st.integers(0, 2), st.integers(0, 3), st.sampled_from((-1, 1, 2))
)
steps = st.lists(
    st.one_of(
        st.builds(Append, st.lists(row, max_size=6).map(tuple), st.integers(1, 4)),
        st.builds(Downgrade, st.integers(0, 4)),
        st.just(Compact()),
        st.just(Listen()),
    ),
    min_size=1,
    max_size=25,
)


def oracle(written: list[Update], t: int) -> Counter[tuple[int, str]]:
    acc: Counter[tuple[int, str]] = Counter()
    for r, time, d in written:
        if time <= t:
            acc[r] += d
    return Counter({r: d for r, d in acc.items() if d != 0})


def as_counter(table: object) -> Counter[tuple[int, str]]:
    acc: Counter[tuple[int, str]] = Counter()
    for r, _t, d in table_to_updates(table):  # type: ignore[arg-type]
        acc[(r[0], r[1])] += d  # type: ignore[index]
    return acc


def run(
    client: PersistClient, plan: list[object], *, check_every_step: bool
) -> tuple[PersistClient, object, list[Update], int]:
    shard = ShardId(uuid.uuid4())
    w = client.open_writer(shard, DESC)
    snap = client.open_leased_reader(shard, DESC)
    lis_reader = client.open_leased_reader(shard, DESC)
    written: list[Update] = []
    upper = 0
    listener = None
    listen_base: Counter[tuple[int, str]] = Counter()
    listened: list[Update] = []
    as_of = 0

    def check_listen() -> None:
        # Snapshot at as_of + the listened updates up to t == the oracle at t.
        assert listener is not None
        (f,) = listener.frontier.elements
        for t in range(as_of, f):
            acc = Counter(listen_base)
            for r, time, d in listened:
                if time <= t:
                    acc[r] += d
            assert Counter({r: d for r, d in acc.items() if d}) == oracle(written, t), t

    for step in plan:
        if isinstance(step, Append):
            ups = [
                ((k, f"v{v}"), upper + min(off, step.advance - 1), d) for k, v, off, d in step.rows
            ]
            w.compare_and_append(
                updates(ups) if ups else None,
                expected_upper=Antichain.of(upper),
                new_upper=Antichain.of(upper + step.advance),
                idempotency_token=tok(),
            )
            written += ups
            upper += step.advance
        elif isinstance(step, Downgrade):
            snap.downgrade_since(Antichain.of(max(0, upper - step.lag)))
        elif isinstance(step, Compact):
            w.maintenance()
        elif listener is None:
            (lo,) = lis_reader.since.elements
            if upper > lo:
                as_of = lo + (upper - 1 - lo) // 2
                listen_base = as_counter(lis_reader.snapshot(as_of))
                assert listen_base == oracle(written, as_of)
                listener = lis_reader.listener(as_of)
        else:
            for e in listener.poll_once():
                if isinstance(e, ListenUpdates):
                    listened += [((r[0], r[1]), t, d) for r, t, d in table_to_updates(e.updates)]  # type: ignore[index]
            check_listen()
            # The listener lets its since follow it (strictly below its frontier).
            (f,) = listener.frontier.elements
            lis_reader.downgrade_since(Antichain.of(max(as_of, f - 1)))
        if listener is None and upper > 2:
            lis_reader.downgrade_since(Antichain.of(upper - 2))
        if check_every_step and upper:
            (lo,) = snap.since.elements
            if lo < upper:
                t = upper - 1
                assert as_counter(snap.snapshot(t)) == oracle(written, t)
    (lo,) = snap.since.elements
    for t in range(lo, upper):
        assert as_counter(snap.snapshot(t)) == oracle(written, t), t
    if listener is not None:
        while listener.frontier != Antichain.of(upper):
            for e in listener.poll_once():
                if isinstance(e, ListenUpdates):
                    listened += [((r[0], r[1]), t, d) for r, t, d in table_to_updates(e.updates)]  # type: ignore[index]
        check_listen()
    return client, snap, written, upper


@settings(max_examples=150, deadline=None)
@given(plan=steps, factor=st.sampled_from((0.5, 2.0, 8.0)))
def test_snapshot_and_listen_equal_the_oracle_at_every_readable_time(
    plan: list[object], factor: float
) -> None:
    name = f"prop-{uuid.uuid4()}"
    client = PersistClient(
        PersistLocation.memory(name),
        clock=ManualClock(1),
        ids=SeededIdGen(1),
        config=PersistConfig(compaction_factor=factor, gc_every=3),
    )
    run(client, plan, check_every_step=True)
    client.close()


@settings(max_examples=6, deadline=None)
@given(plan=steps)
def test_spark_read_of_live_batches_equals_snapshot(
    spark: SparkSession, plan: list[object]
) -> None:
    with tempfile.TemporaryDirectory(prefix="spate-prop-") as d:
        client = PersistClient(
            PersistLocation.embedded(d), clock=ManualClock(1), ids=SeededIdGen(2)
        )
        _, snap, written, upper = run(client, plan, check_every_step=False)
        (lo,) = snap.since.elements  # type: ignore[attr-defined]
        for t in sorted({lo, upper - 1}):
            if not lo <= t < upper:
                continue
            df = spark_snapshot(spark, snap, t)  # type: ignore[arg-type]
            got: Counter[tuple[int, str]] = Counter()
            for r in df.collect():
                assert r["_time"] == t
                got[(r["k"], r["v"])] += r["_diff"]
            assert got == oracle(written, t)
            assert got == as_counter(snap.snapshot(t))  # type: ignore[attr-defined]
        client.close()
