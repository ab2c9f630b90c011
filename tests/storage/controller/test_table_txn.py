"""Atomic multi-table appends ("several tables atomically at one timestamp").

In memory: a concurrent writer on one shard gives ``InvalidUppers`` and writes nothing anywhere;
staged (large) calls; an application that fails half-way is finished by the next call; an
applied intent re-applied by the next controller is a no-op; a fenced controller commits
nothing; an expired table writer is replaced. With real processes: kill -9 a controller at each
crash point of the protocol, restart, and every table holds the call's rows exactly once (or,
before the commit point, not at all).
"""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

from spate.clock import ManualClock, SystemClock
from spate.frontier import Antichain
from spate.ids import GlobalId, ShardId, SystemIdGen
from spate.persist import PersistClient, PersistConfig, PersistLocation
from spate.repr.arrow import updates_to_table
from spate.storage.controller import StorageController
from spate.storage.controller.errors import ControllerFenced, InvalidUppers
from spate.storage.controller.table_txn import STAGED_PREFIX, IntentWrite, TableTxnLog
from tests._crash_child import records_until_killed
from tests.storage.controller._harness import TABLE_DESC, environment, table

U1, U2, U3 = GlobalId.user(1), GlobalId.user(2), GlobalId.user(3)


def _rows(n: int, at: int, tag: str) -> list[tuple[tuple[int, str], int, int]]:
    return [((i, f"{tag}-{i}"), at, 1) for i in range(n)]


async def _contents(c: StorageController, id: GlobalId, as_of: int) -> Counter[tuple[object, ...]]:
    return Counter({row: diff for row, diff in await c.snapshot(id, as_of)})


def _staged(persist: PersistClient) -> list[str]:
    return [k for k, _ in persist.blob.list_keys(STAGED_PREFIX)]


async def test_concurrent_writer_on_one_shard_gives_invalid_uppers_and_writes_nothing() -> None:
    async with environment() as env:
        c = await env.controller()
        await c.create_collections([table(1), table(2), table(3)])
        c.allow_writes()
        await c.append([(U1, _rows(2, 0, "a"), Antichain.of(1)), (U2, [], Antichain.of(1))])
        # Another writer moves u2's shard behind the controller's back.
        shard2 = c.collection_metadata(U2).shard
        other = env.client().open_writer(shard2, TABLE_DESC)
        other.compare_and_append(
            updates_to_table(TABLE_DESC, [((9, "z"), 1, 1)]),
            expected_upper=Antichain.of(1),
            new_upper=Antichain.of(4),
            idempotency_token=uuid.uuid4(),
        )
        persist = env.client()
        before = {id: persist.fetch_state(c.collection_metadata(id).shard) for id in (U1, U3)}
        with pytest.raises(InvalidUppers, match=r"current upper \{4\}") as info:
            await c.append(
                [
                    (U1, _rows(3, 1, "b"), Antichain.of(2)),
                    (U2, _rows(3, 1, "b"), Antichain.of(2)),
                    (U3, _rows(3, 1, "b"), Antichain.of(2)),
                ]
            )
        assert info.value.uppers == ((U2, Antichain.of(4)),)
        # Nothing of the call landed anywhere, and nothing is pending or staged.
        for id in (U1, U3):
            after = persist.fetch_state(c.collection_metadata(id).shard)
            assert after.upper == before[id].upper and after.batches == before[id].batches
        assert c.tables.txn.pending is None or c.tables.txn.pending.token == c.tables.applied_token
        assert _staged(persist) == []
        await c.process()
        # A retry above the moved upper lands in all three.
        await c.append([(id, _rows(1, 4, "c"), Antichain.of(5)) for id in (U1, U2, U3)])
        for id in (U1, U2, U3):
            got = await _contents(c, id, 4)
            assert got[(0, "c-0")] == 1 and got[(0, "b-0")] == 0
        await c.shutdown()


async def test_staged_large_append_lands_once_and_leaves_no_staged_blobs() -> None:
    async with environment() as env:
        c = await env.controller(inline_append_bytes=0)
        await c.create_collections([table(1), table(2)])
        c.allow_writes()
        # Two calls back to back: the second starts from the uppers the first left (no process).
        await c.append([(U1, _rows(500, 0, "x"), Antichain.of(1)), (U2, [], Antichain.of(1))])
        await c.append([(U1, [], Antichain.of(3)), (U2, _rows(700, 2, "y"), Antichain.of(3))])
        assert sum((await _contents(c, U1, 2)).values()) == 500
        assert sum((await _contents(c, U2, 2)).values()) == 700
        persist = env.client()
        assert _staged(persist) == []
        assert c.tables.txn.pending is not None  # applied, cleared lazily by maintenance
        await c.process()
        assert TableTxnLog(persist)._load().pending is None
        await c.shutdown()


async def test_failed_application_is_finished_by_the_next_call_or_maintenance(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with environment() as env:
        c = await env.controller()
        await c.create_collections([table(1), table(2)])
        c.allow_writes()
        real = TableTxnLog.updates

        def failing_for_u2(self: TableTxnLog, write: IntentWrite) -> pa.Table | None:
            if write.id == U2:
                raise OSError("injected: blob store unavailable")
            return real(self, write)

        persist = env.client()

        def uppers() -> list[int | None]:
            return [
                persist.fetch_state(c.collection_metadata(id).shard).upper.as_option()
                for id in (U1, U2)
            ]

        for t, finish in ((0, "append"), (2, "maintenance")):
            monkeypatch.setattr(TableTxnLog, "updates", failing_for_u2)
            both = [(id, _rows(2, t, "a"), Antichain.of(t + 1)) for id in (U1, U2)]
            with pytest.raises(OSError, match="injected"):
                await c.append(both)
            assert uppers() == [t + 1, t]  # committed, half-applied for now
            monkeypatch.setattr(TableTxnLog, "updates", real)
            if finish == "append":  # the next call finishes the committed one first
                await c.append([(id, _rows(1, t + 1, "b"), Antichain.of(t + 2)) for id in (U1, U2)])
            else:
                await c.process()
                assert uppers() == [t + 1, t + 1]
        for id in (U1, U2):
            got = await _contents(c, id, 2)
            assert got == Counter({(0, "a-0"): 2, (1, "a-1"): 2, (0, "b-0"): 1})
        await c.shutdown()


async def test_next_controller_reapplies_an_uncleared_intent_as_a_no_op() -> None:
    async with environment() as env:
        a = await env.controller()
        await a.create_collections([table(1), table(2)])
        a.allow_writes()
        await a.append(
            [(U1, _rows(2, 0, "a"), Antichain.of(1)), (U2, _rows(2, 0, "a"), Antichain.of(1))]
        )
        await a.append([(U1, _rows(1, 1, "b"), Antichain.of(2))])  # moves u1 past the intent
        assert a.tables.txn.pending is not None  # applied, not cleared: no maintenance ran
        b = await env.controller()
        for id, as_of, n in ((U1, 1, 3), (U2, 0, 2)):
            assert sum((await _contents(b, id, as_of)).values()) == n
        # The old controller is fenced: its multi-table call commits nothing.
        with pytest.raises(ControllerFenced):
            await a.append([(U1, [], Antichain.of(3)), (U2, [], Antichain.of(3))])
        with pytest.raises(ControllerFenced):
            await a.append([(U2, [], Antichain.of(3))])
        persist = env.client()
        assert persist.fetch_state(b.collection_metadata(U2).shard).upper == Antichain.of(1)
        await b.shutdown()


async def test_expired_table_writer_is_replaced() -> None:
    clock = ManualClock(1_000_000)
    location = PersistLocation.memory(f"lease-{uuid.uuid4().hex}")
    config = PersistConfig(writer_lease_ms=1000, reader_lease_ms=1000)
    persist = PersistClient(location, clock=clock, ids=SystemIdGen(), config=config)
    other = PersistClient(location, clock=clock, ids=SystemIdGen(), config=config)
    c = StorageController(persist, clock=SystemClock())
    await c.open()
    await c.create_collections([table(1), table(2)])
    c.allow_writes()
    await c.append([(U1, _rows(1, 0, "a"), Antichain.of(1)), (U2, [], Antichain.of(1))])
    clock.advance(5000)
    for id in (U1, U2):  # anyone's state change now expires the controller's writers
        other.open_leased_reader(c.collection_metadata(id).shard, TABLE_DESC).expire()
    await c.append(
        [(U1, _rows(1, 1, "b"), Antichain.of(2)), (U2, _rows(1, 1, "b"), Antichain.of(2))]
    )
    await c.append([(U1, _rows(1, 2, "c"), Antichain.of(3))])
    assert sum((await _contents(c, U1, 2)).values()) == 3
    assert sum((await _contents(c, U2, 1)).values()) == 1
    await c.shutdown()


# --- kill -9 at every step of the protocol -----------------------------------------------------

BIG_ROWS = 60_000


def _run_child(data: Path, point: str, inline_bytes: int) -> list[dict[str, object]]:
    return records_until_killed(
        [
            "tests.storage.controller._children",
            "txn",
            "--data",
            str(data),
            "--rows",
            str(BIG_ROWS),
            "--inline-bytes",
            str(inline_bytes),
        ],
        point,
    )


@pytest.mark.integration
@pytest.mark.parametrize(
    ("point", "inline_bytes", "uppers_at_crash", "committed"),
    [
        ("storage.append.before_intent", 0, [0, 0], False),
        ("storage.append.after_intent", 1 << 30, [0, 0], True),
        ("storage.append.after_shard@1", 1 << 30, [1, 0], True),
        ("storage.append.after_shard@1", 0, [1, 0], True),
        ("persist.after_blob_set@1", 1 << 30, [0, 0], True),
        ("storage.append.after_apply", 0, [1, 1], True),
    ],
)
async def test_kill_during_multi_table_append_then_restart(
    tmp_path: Path,
    point: str,
    inline_bytes: int,
    uppers_at_crash: list[int],
    committed: bool,
) -> None:
    data = tmp_path / "data"
    log = _run_child(data, point, inline_bytes)
    assert not any("ack" in r for r in log)
    shards = next(r["ready"] for r in log if "ready" in r)
    assert isinstance(shards, dict)
    location = PersistLocation.embedded(data)
    persist = PersistClient(location, clock=SystemClock(), ids=SystemIdGen())
    try:
        small, big = (ShardId.parse(shards[str(id)]) for id in (U1, U2))
        # The small table's shard finishes first (the big one encodes 60k rows meanwhile).
        got = [persist.fetch_state(s).upper.as_option() for s in (small, big)]
        assert got == uppers_at_crash
        c = StorageController(persist)
        await c.open()  # finishes a pending intent before anything else
        want = 1 if committed else 0
        for id, s in ((U1, small), (U2, big)):
            assert persist.fetch_state(s).upper == Antichain.of(want)
            assert c.collection_frontiers(id).upper == Antichain.of(want)
        if committed:
            small_rows = await _contents(c, U1, 0)
            assert small_rows == Counter({(-1, "small"): 1})
            big_rows = await _contents(c, U2, 0)
            assert len(big_rows) == BIG_ROWS and set(big_rows.values()) == {1}
        assert _staged(persist) == []  # staged data of the dead call is gone either way
        await c.process()  # maintenance clears the finished intent
        assert TableTxnLog(persist)._load().pending is None
        # The tables take writes again from where the call left them.
        c.allow_writes()
        await c.append([(id, [((7, "next"), want, 1)], Antichain.of(want + 1)) for id in (U1, U2)])
        assert (await _contents(c, U1, want))[(7, "next")] == 1
        await c.shutdown()
    finally:
        persist.close()
