"""WriteHandle, ReadHandle and SinceHandle on real files + SQLite."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spate.clock import ManualClock
from spate.errors import SchemaMismatch
from spate.frontier import Antichain
from spate.ids import CONTROLLER_CRITICAL_SINCE, SeededIdGen, ShardId
from spate.persist import (
    Appended,
    AsOfBeforeSince,
    Fenced,
    InvalidAppend,
    InvalidBounds,
    LeaseExpired,
    ListenCompactedPast,
    ListenProgress,
    ListenUpdates,
    NotFinalizable,
    OpaqueMismatch,
    PersistClient,
    PersistConfig,
    PersistLocation,
    UpdateBeyondUpper,
    UpdateNotBeyondLower,
    UpperMismatch,
    UpperTimeout,
)
from spate.repr.arrow import table_to_updates
from tests.persist.conftest import DESC, EMPTY, A, tok, updates


def blob_files(client: PersistClient, shard: ShardId) -> list[str]:
    return sorted(k for k, _ in client.blob.list_keys(f"{shard}/"))


def rows_of(table: pa.Table) -> list[tuple[tuple[object, ...], int, int]]:
    return sorted(table_to_updates(table), key=repr)


def test_compare_and_append_wins_or_reports_the_current_upper(
    client: PersistClient, shard: ShardId
) -> None:
    w = client.open_writer(shard, DESC)
    assert w.upper == A(0)
    r1 = w.compare_and_append(
        updates([((1, "a"), 0, 1), ((2, "b"), 2, 1)]),
        expected_upper=A(0),
        new_upper=A(3),
        idempotency_token=tok(),
    )
    assert r1 == Appended(A(3), deduplicated=False) and w.upper == A(3)
    w2 = client.open_writer(shard, DESC)
    r2 = w2.compare_and_append(
        updates([((3, "c"), 1, 1)]), expected_upper=A(0), new_upper=A(2), idempotency_token=tok()
    )
    assert r2 == UpperMismatch(expected=A(0), current=A(3))
    assert w2.upper == A(3)
    # The loser's blob was removed; only the winner's batch remains.
    assert len(blob_files(client, shard)) == 1
    assert w2.fetch_recent_upper() == A(3)


@pytest.mark.parametrize(
    ("rows", "lower", "upper", "error", "fragment"),
    [
        ([((1, "a"), 0, 1)], A(5), A(2), InvalidBounds, "lower {5} is not <= upper {2}"),
        ([((1, "a"), 1, 1)], A(2), A(5), UpdateNotBeyondLower, "time 1 is not beyond lower {2}"),
        ([((1, "a"), 5, 1)], A(2), A(5), UpdateBeyondUpper, "time 5 is at or beyond"),
        ([((1, "a"), 1, 1)], EMPTY, EMPTY, UpdateNotBeyondLower, "lower {}"),
    ],
)
def test_usage_errors_name_the_shard_and_frontiers_and_change_nothing(
    client: PersistClient,
    shard: ShardId,
    rows: list[tuple[tuple[object, ...], int, int]],
    lower: object,
    upper: object,
    error: type[Exception],
    fragment: str,
) -> None:
    w = client.open_writer(shard, DESC)
    before = client.fetch_state(shard)
    with pytest.raises(error) as e:
        w.compare_and_append(
            updates(rows), expected_upper=lower, new_upper=upper, idempotency_token=tok()
        )  # type: ignore[arg-type]
    assert str(shard) in str(e.value) and fragment in str(e.value)
    assert client.fetch_state(shard) == before
    assert blob_files(client, shard) == []


def test_schema_errors_reject_the_whole_batch(client: PersistClient, shard: ShardId) -> None:
    w = client.open_writer(shard, DESC)
    before = client.fetch_state(shard)
    bad_null = pa.table(
        {"k": pa.array([1, None], pa.int64()), "v": ["a", "b"], "_time": [0, 0], "_diff": [1, 1]}
    )
    with pytest.raises(SchemaMismatch, match="column 'k'"):
        w.compare_and_append(bad_null, expected_upper=A(0), new_upper=A(1), idempotency_token=tok())
    wrong_cols = pa.table({"k": [1], "_time": [0], "_diff": [1]})
    with pytest.raises(SchemaMismatch, match="columns"):
        w.compare_and_append(
            wrong_cols, expected_upper=A(0), new_upper=A(1), idempotency_token=tok()
        )
    no_time = pa.table({"k": [1], "v": ["a"], "_diff": [1]})
    with pytest.raises(SchemaMismatch, match="_time"):
        w.compare_and_append(no_time, expected_upper=A(0), new_upper=A(1), idempotency_token=tok())
    wrong_type = pa.table({"k": ["x"], "v": ["a"], "_time": [0], "_diff": [1]})
    with pytest.raises(SchemaMismatch, match="column 'k'"):
        w.compare_and_append(
            wrong_type, expected_upper=A(0), new_upper=A(1), idempotency_token=tok()
        )
    assert client.fetch_state(shard) == before and blob_files(client, shard) == []


def test_append_trims_noops_and_refuses_gaps(client: PersistClient, shard: ShardId) -> None:
    a = client.open_writer(shard, DESC)
    b = client.open_writer(shard, DESC)
    batch = updates([((i, "x"), i, 1) for i in range(6)])
    assert a.append(batch, lower=A(0), upper=A(6)) == Appended(A(6), deduplicated=False)
    # Replica b writes the same data: a no-op success.
    assert b.append(batch, lower=A(0), upper=A(6)).upper == A(6)
    # b is ahead in a wider window: the overlap is trimmed away.
    more = updates([((i, "x"), i, 1) for i in range(4, 9)])
    assert b.append(more, lower=A(4), upper=A(9)) == Appended(A(9), deduplicated=False)
    with pytest.raises(InvalidAppend, match="gap"):
        a.append(updates([((20, "x"), 20, 1)]), lower=A(20), upper=A(21))
    r = client.open_leased_reader(shard, DESC)
    snap = r.snapshot(8)
    assert sorted(row[0] for row, _, _ in table_to_updates(snap)) == list(range(9))
    assert all(d == 1 for _, _, d in table_to_updates(snap))


def test_snapshot_is_consolidated_at_as_of_and_refuses_below_since(
    client: PersistClient, shard: ShardId
) -> None:
    w = client.open_writer(shard, DESC)
    w.compare_and_append(
        updates([((1, "a"), 0, 2), ((1, "a"), 1, -1), ((2, "b"), 1, 1), ((3, "c"), 3, 1)]),
        expected_upper=A(0),
        new_upper=A(4),
        idempotency_token=tok(),
    )
    r = client.open_leased_reader(shard, DESC)
    assert rows_of(r.snapshot(0)) == [((1, "a"), 0, 2)]
    assert rows_of(r.snapshot(2)) == [((1, "a"), 2, 1), ((2, "b"), 2, 1)]
    assert r.snapshot(3).schema == w.schema
    r.downgrade_since(A(2))
    with pytest.raises(AsOfBeforeSince, match=r"as of 1 is not beyond its since \{2\}"):
        r.snapshot(1)
    assert rows_of(r.snapshot(3)) == [((1, "a"), 3, 1), ((2, "b"), 3, 1), ((3, "c"), 3, 1)]


def test_snapshot_updates_counts_what_a_snapshot_reads_without_fetching_it(
    client: PersistClient, shard: ShardId
) -> None:
    w = client.open_writer(shard, DESC)
    w.compare_and_append(
        updates([((1, "a"), 0, 2), ((1, "a"), 1, -1), ((2, "b"), 1, 1)]),
        expected_upper=A(0),
        new_upper=A(2),
        idempotency_token=tok(),
    )
    w.compare_and_append(
        updates([((3, "c"), 3, 1)]), expected_upper=A(2), new_upper=A(4), idempotency_token=tok()
    )
    r = client.open_leased_reader(shard, DESC)
    for key in blob_files(client, shard):  # nothing is fetched: the parts may be gone
        client.blob.delete(key)
    assert r.snapshot_updates(0) == 3  # the first batch (before consolidation)
    assert r.snapshot_updates(3) == 4
    with pytest.raises(UpperTimeout):
        r.snapshot_updates(4, timeout=0.05)


def test_snapshot_waits_for_the_upper_or_times_out(client: PersistClient, shard: ShardId) -> None:
    w = client.open_writer(shard, DESC)
    r = client.open_leased_reader(shard, DESC)
    with pytest.raises(UpperTimeout, match=r"upper \{0\} did not pass 5"):
        r.snapshot(5, timeout=0.05)

    def later() -> None:
        w.compare_and_append(
            updates([((7, "late"), 5, 1)]),
            expected_upper=A(0),
            new_upper=A(6),
            idempotency_token=tok(),
        )

    t = threading.Timer(0.1, later)
    t.start()
    try:
        assert rows_of(r.snapshot(5, timeout=10)) == [((7, "late"), 5, 1)]
    finally:
        t.join()


async def test_listen_streams_updates_and_progress_that_complete_a_snapshot(
    client: PersistClient, shard: ShardId
) -> None:
    w = client.open_writer(shard, DESC)
    w.compare_and_append(
        updates([((1, "a"), 0, 1), ((2, "b"), 2, 1)]),
        expected_upper=A(0),
        new_upper=A(3),
        idempotency_token=tok(),
    )
    r = client.open_leased_reader(shard, DESC)
    events: list[object] = []

    async def consume() -> None:
        async for e in r.listen(1):
            events.append(e)
            if isinstance(e, ListenProgress) and e.upper.is_empty():
                return

    task = asyncio.create_task(consume())
    for lo, rows in ((3, [((3, "c"), 3, 1), ((1, "a"), 4, -1)]), (5, [((4, "d"), 6, 1)])):
        await asyncio.sleep(0.02)
        await asyncio.to_thread(
            w.compare_and_append,
            updates(rows),
            expected_upper=A(lo),
            new_upper=A(lo + 2),
            idempotency_token=tok(),
        )
    await asyncio.to_thread(
        w.compare_and_append, None, expected_upper=A(7), new_upper=EMPTY, idempotency_token=tok()
    )
    await asyncio.wait_for(task, timeout=10)
    streamed = [
        u for e in events if isinstance(e, ListenUpdates) for u in table_to_updates(e.updates)
    ]
    assert sorted(streamed, key=repr) == sorted(
        [((2, "b"), 2, 1), ((3, "c"), 3, 1), ((1, "a"), 4, -1), ((4, "d"), 6, 1)], key=repr
    )
    progress = [e.upper for e in events if isinstance(e, ListenProgress)]
    assert progress[-1] == EMPTY and progress == sorted(
        progress, key=lambda f: f.as_option() or 2**64
    )


def test_live_batches_are_explicit_verified_files(client: PersistClient, shard: ShardId) -> None:
    w = client.open_writer(shard, DESC)
    for i in range(3):
        w.compare_and_append(
            updates([((i, "x"), i, 1)]),
            expected_upper=A(i),
            new_upper=A(i + 1),
            idempotency_token=tok(),
        )
    # Background maintenance may merge the three batches; let it finish so the state compared
    # below is the one the read is served from.
    client.wait_for_maintenance()
    r = client.open_leased_reader(shard, DESC)
    live = r.live_batches(2)
    state = client.fetch_state(shard)
    keys = sorted(p.key for b in state.batches for p in b.parts)
    assert sorted(live.paths) == sorted(str(client.blob.local_path(k)) for k in keys)
    assert all(os.path.isfile(p) and p.endswith(".parquet") for p in live.paths)
    assert live.staged_dir is None


def test_live_batches_stage_non_file_blobs_and_clean_up() -> None:
    c = PersistClient(
        PersistLocation.memory(f"stage-{os.getpid()}"), clock=ManualClock(1), ids=SeededIdGen(3)
    )
    shard = ShardId.new(SeededIdGen(4))
    w = c.open_writer(shard, DESC)
    w.compare_and_append(
        updates([((1, "a"), 0, 1)]), expected_upper=A(0), new_upper=A(1), idempotency_token=tok()
    )
    r = c.open_leased_reader(shard, DESC)
    with r.live_batches(0) as live:
        assert live.staged_dir is not None and len(live.paths) == 1
        assert pq.read_table(live.paths[0]).num_rows == 1
    assert not Path(live.staged_dir).exists()
    c.close()


def test_expired_reader_releases_since_and_is_refused(
    client: PersistClient, clock: ManualClock, shard: ShardId
) -> None:
    lease = client.config.reader_lease_ms
    w = client.open_writer(shard, DESC)
    slow = client.open_leased_reader(shard, DESC)
    fast = client.open_leased_reader(shard, DESC)
    fast.downgrade_since(A(10))
    assert client.fetch_state(shard).since == A(0)
    for _ in range(3):  # the slow reader misses three heartbeats
        clock.advance(lease // 2 + 1)
        fast.downgrade_since(A(10))
        w.heartbeat()
    state = client.fetch_state(shard)
    assert slow.reader_id not in state.leased_readers and state.since == A(10)
    with pytest.raises(LeaseExpired, match=str(slow.reader_id)):
        slow.downgrade_since(A(11))
    with pytest.raises(LeaseExpired):
        slow.snapshot(10, timeout=0)


def test_epoch_two_fences_epoch_one(client: PersistClient, shard: ShardId) -> None:
    one = client.open_critical_since(shard, epoch=1)
    assert one.downgrade_since(A(3)) == A(3)
    two = client.open_critical_since(shard, epoch=2)
    assert two.opaque == 2 and two.since == A(3)
    for i in range(100):
        with pytest.raises(Fenced) as e:
            one.downgrade_since(A(10 + i))
        assert e.value.epoch == 1 and e.value.current_epoch == 2
        assert "epoch 1 is fenced by epoch 2" in str(e.value)
    raw = one.compare_and_downgrade_since(1, 1, A(50))
    assert raw == OpaqueMismatch(expected=1, current=2, since=A(3))
    with pytest.raises(Fenced):
        client.open_critical_since(shard, epoch=1)
    assert two.downgrade_since(A(5)) == A(5)
    assert client.fetch_state(shard).critical_readers[CONTROLLER_CRITICAL_SINCE].since == A(5)


def test_finalization_makes_a_tombstone_and_deletes_data(
    client: PersistClient, shard: ShardId
) -> None:
    w = client.open_writer(shard, DESC)
    since = client.open_critical_since(shard, epoch=1)
    w.compare_and_append(
        updates([((1, "a"), 0, 1)]), expected_upper=A(0), new_upper=A(1), idempotency_token=tok()
    )
    with pytest.raises(NotFinalizable, match=r"since \{0\} and upper \{1\}"):
        client.finalize_shard(shard)
    assert not client.is_finalized(shard)
    since.downgrade_since(EMPTY)
    w.compare_and_append(None, expected_upper=A(1), new_upper=EMPTY, idempotency_token=tok())
    client.finalize_shard(shard)
    assert client.is_finalized(shard)
    assert blob_files(client, shard) == []
    assert len(client.consensus.scan(str(shard), 0, 100)) == 1
    assert w.compare_and_append(
        None, expected_upper=A(1), new_upper=A(2), idempotency_token=tok()
    ) == (UpperMismatch(A(1), EMPTY))
    client.finalize_shard(shard)  # idempotent


def test_compaction_and_gc_keep_disk_bounded_and_contents_exact(
    client: PersistClient, shard: ShardId
) -> None:
    w = client.open_writer(shard, DESC)
    r = client.open_leased_reader(shard, DESC)
    for t in range(40):
        w.compare_and_append(
            updates([((t % 5, "v"), t, 1), ((t % 5, "v"), t, -1), ((t % 7, f"w{t % 3}"), t, 1)]),
            expected_upper=A(t),
            new_upper=A(t + 1),
            idempotency_token=tok(),
        )
        r.downgrade_since(A(t))
    # The writer compacts in the background: once it is done, the reader moves its seqno
    # hold past the last compaction and GC can retire what it replaced.
    client.wait_for_maintenance()
    r.heartbeat()
    client.collect_garbage(shard)
    state = client.fetch_state(shard)
    assert len(state.batches) <= 6
    live = {p.key for b in state.batches for p in b.parts}
    assert set(blob_files(client, shard)) == live
    assert len(client.consensus.scan(str(shard), 0, 10_000)) < 40
    expected: dict[tuple[object, ...], int] = {}
    for t in range(40):
        row = (t % 7, f"w{t % 3}")
        expected[row] = expected.get(row, 0) + 1
    got = {row: d for row, _, d in table_to_updates(r.snapshot(39))}
    assert got == expected


def test_gc_never_deletes_what_a_reader_may_still_read(
    client: PersistClient, shard: ShardId
) -> None:
    w = client.open_writer(shard, DESC)
    r = client.open_leased_reader(shard, DESC)
    w.compare_and_append(
        updates([((1, "a"), 0, 1)]), expected_upper=A(0), new_upper=A(1), idempotency_token=tok()
    )
    held = r.live_batches(0)
    other = client.open_leased_reader(shard, DESC)
    for t in range(1, 20):
        w.compare_and_append(
            updates([((t, "a"), t, 1)]),
            expected_upper=A(t),
            new_upper=A(t + 1),
            idempotency_token=tok(),
        )
        other.downgrade_since(A(t))
    # the background merges replace the batch r was handed (under load they lag the appends)
    client.wait_for_maintenance()
    client.collect_garbage(shard)
    # r never moved its seqno hold: the files it was handed are still there.
    assert all(os.path.isfile(p) for p in held.paths)
    r.downgrade_since(A(5))
    client.wait_for_maintenance()
    client.collect_garbage(shard)
    assert not any(os.path.isfile(p) for p in held.paths)


def test_gc_deletes_orphans_of_expired_writers_only(
    client: PersistClient, clock: ManualClock, shard: ShardId
) -> None:
    w = client.open_writer(shard, DESC)
    live_writer = client.open_writer(shard, DESC)
    orphan = f"{shard}/{w.writer_id}.dead.parquet"
    in_flight = f"{shard}/{live_writer.writer_id}.inflight.parquet"
    client.blob.set(orphan, b"never committed")
    client.blob.set(in_flight, b"about to be committed")
    client.collect_garbage(shard)
    assert client.blob.get(orphan) is not None  # w is still registered
    clock.advance(client.config.writer_lease_ms + 1)
    live_writer.heartbeat()  # expires w
    client.collect_garbage(shard)
    assert client.blob.get(orphan) is None
    assert client.blob.get(in_flight) is not None


def test_listen_refuses_batches_compacted_past_its_frontier(
    client: PersistClient, shard: ShardId
) -> None:
    w = client.open_writer(shard, DESC)
    r = client.open_leased_reader(shard, DESC)
    listener = r.listener(0)
    for t in range(4):
        w.compare_and_append(
            updates([((t, "x"), t, 1)]),
            expected_upper=A(t),
            new_upper=A(t + 1),
            idempotency_token=tok(),
        )
    # Misuse: the reader lets its since pass the listen's frontier ({1}), then a compaction
    # advances times: updates can no longer be reported at their own times. (Eight batches:
    # a run of small batches is merged once it has ``compaction_min_inputs`` of them.)
    r.downgrade_since(A(3))
    for t in range(4, 8):
        w.compare_and_append(
            updates([((t, "x"), t, 1)]),
            expected_upper=A(t),
            new_upper=A(t + 1),
            idempotency_token=tok(),
        )
    client.wait_for_maintenance()
    assert any(b.since == A(3) for b in client.fetch_state(shard).batches)
    with pytest.raises(ListenCompactedPast, match=r"frontier \{1\}"):
        listener.poll_once()


def test_a_readers_gc_runs_on_the_maintenance_thread(
    tmp_path: Path, clock: ManualClock, shard: ShardId, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A since downgrade that makes GC worthwhile leaves the GC to the client's maintenance
    thread (the downgrading caller, a replica's step loop, does not wait for it), and the GC
    still happens: the retired batches' blobs are deleted."""
    from spate.persist import maintenance

    passes: list[tuple[str | None, int]] = []
    run = maintenance.run_maintenance

    def recording(ctx, before, *, writer, schema, gc_guard=None):  # type: ignore[no-untyped-def]
        passes.append((writer, threading.get_ident()))
        return run(ctx, before, writer=writer, schema=schema, gc_guard=gc_guard)

    monkeypatch.setattr(maintenance, "run_maintenance", recording)
    c = PersistClient(
        PersistLocation.embedded(tmp_path / "data"),
        clock=clock,
        ids=SeededIdGen(12),
        config=PersistConfig(gc_every=1, compaction_min_inputs=2),
    )
    try:
        w = c.open_writer(shard, DESC)
        r = c.open_leased_reader(shard, DESC)
        for u in range(6):
            w.compare_and_append(
                updates([((u, "a"), u, 1)]),
                expected_upper=Antichain.of(u),
                new_upper=Antichain.of(u + 1),
                idempotency_token=tok(),
            )
            r.downgrade_since(Antichain.of(u))
        c.wait_for_maintenance()
        readers = [t for writer, t in passes if writer is None]
        assert readers and threading.get_ident() not in readers
        assert r.snapshot(5).num_rows == 6
    finally:
        c.close()
