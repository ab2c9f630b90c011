"""Acceptance scenarios at the storage controller: replicas, ingestions, drops, fencing."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from spate.errors import SchemaMismatch
from spate.frontier import Antichain, ReadPolicy
from spate.ids import CONTROLLER_CRITICAL_SINCE, GlobalId, InstanceId, ReplicaId
from spate.persist.errors import AsOfBeforeSince, Fenced, UpperTimeout
from spate.persist.state import OpaqueMismatch
from spate.protocol.storage import ObjectStatus, RunIngestion
from spate.repr.arrow import table_to_updates, updates_to_table
from spate.storage.controller import (
    CollectionDescription,
    IntrospectionKind,
    IntrospectionSource,
)
from spate.storage.controller.driver import Driver
from spate.storage.controller.errors import (
    ControllerFenced,
    IdentifierMissing,
    InvalidUppers,
    ReadBeforeSince,
    UpdateBeyondUpper,
    UpdateNotBeyondLower,
)
from spate.storage.controller.introspection import INTROSPECTION_DESCS
from tests.storage.controller._harness import (
    TABLE_DESC,
    beyond,
    counter_ingestion,
    environment,
    pump_until,
    table,
)


async def test_20_storage_read_policy_never_regresses() -> None:
    async with environment() as env:
        c = await env.controller()
        tid, desc = table(1)
        await c.create_collections([(tid, desc)])
        c.allow_writes()
        await c.append([(tid, [((1, "a"), 5, 1)], Antichain.of(100))])
        await pump_until(c, beyond(c, tid, 99))
        c.set_read_policy([(tid, ReadPolicy.lag_writes_by(10, 1))])
        assert c.collection_frontiers(tid).since == Antichain.of(90)
        c.set_read_policy([(tid, ReadPolicy.valid_from(Antichain.of(50)))])
        assert c.collection_frontiers(tid).since == Antichain.of(90)  # no regression
        assert c.collection(tid).read_policy == ReadPolicy.valid_from(Antichain.of(50))
        c.set_read_policy([(tid, ReadPolicy.valid_from(Antichain.of(95)))])
        assert c.collection_frontiers(tid).since == Antichain.of(95)
        # The since reaches persist through process (the critical since handle).
        await c.process()
        shard = c.collection_metadata(tid).shard
        assert c._persist.fetch_state(shard).since == Antichain.of(95)
        await c.shutdown()


async def test_21_storage_drop() -> None:
    async with environment() as env:
        c = await env.controller()
        inst = InstanceId(1)
        c.create_instance(inst)
        c.connect_replica(inst, ReplicaId(1), await env.start_replica(7001))
        status_id = GlobalId.system(1)
        await c.create_collections(
            [
                (
                    status_id,
                    CollectionDescription(
                        INTROSPECTION_DESCS[IntrospectionKind.SOURCE_STATUS_HISTORY],
                        IntrospectionSource(IntrospectionKind.SOURCE_STATUS_HISTORY),
                    ),
                )
            ]
        )
        collections = counter_ingestion(inst, 10, tick_interval_ms=10)
        source, export = collections[0][0], collections[1][0]
        await c.create_collections(collections)
        c.initialization_complete()
        c.allow_writes()
        await pump_until(
            c, lambda: c.collection_frontiers(export).upper.as_option() not in (0, None)
        )
        shard = c.collection_metadata(source).shard
        # A read hold on the ingestion keeps its since after the drop.
        (hold,) = c.acquire_read_holds([source])
        c.drop_sources([source])
        with pytest.raises(IdentifierMissing, match=f"identifier is not present: {source}"):
            c.collection(source)
        await c.process()
        assert not c.collection_frontiers(source).since.is_empty()
        hold.release()
        await pump_until(c, lambda: source not in dict(c.state.caps.collections))
        # The persist critical since went to {}; AllowCompaction(S, {}) went to the instance,
        # whose replica stopped the ingestion (releasing its readers): the shard is finalized.
        state = c._persist.fetch_state(shard)
        assert state.tombstone or state.critical_readers[CONTROLLER_CRITICAL_SINCE].since.is_empty()
        c.state.instances[inst].history.reduce()
        sent = [
            cmd
            for cmd in c.state.instances[inst].history.commands()
            if isinstance(cmd, RunIngestion)
        ]
        assert sent == []  # the dropped ingestion left the (reduced) history
        assert c.status(source).status is ObjectStatus.DROPPED
        await pump_until(c, lambda: c._persist.is_finalized(shard))
        assert source not in env.replicas[7001][0].running()
        # The "dropped" row reaches the status history collection.
        await pump_until(
            c,
            lambda: any(
                r[0][1] == str(source) and r[0][2] == "dropped" for r in _status_rows(c, status_id)
            ),
        )
        with pytest.raises(IdentifierMissing):
            c.drop_sources([GlobalId.user(999)])
        with pytest.raises(IdentifierMissing):  # a double drop
            c.drop_sources([source])
        c.drop_sources_unvalidated([GlobalId.user(999), source])  # no-op
        await c.shutdown()


def _status_rows(c, id):  # type: ignore[no-untyped-def]
    shard = c.collection_metadata(id).shard
    state = c._persist.fetch_state(shard)
    if state.upper.as_option() in (0, None):
        return []
    reader = c._persist.open_leased_reader(
        shard, INTROSPECTION_DESCS[IntrospectionKind.SOURCE_STATUS_HISTORY]
    )
    try:
        return [
            (row, d)
            for row, _t, d in table_to_updates(reader.snapshot(state.upper.as_option() - 1))
        ]
    finally:
        reader.expire()


async def test_22_table_append_checks() -> None:
    async with environment() as env:
        c = await env.controller()
        tid, desc = table(1)
        await c.create_collections([(tid, desc)])
        c.allow_writes()
        with pytest.raises(
            UpdateBeyondUpper,
            match=f"{tid}: update at time .* is at or beyond the new upper",
        ):
            await c.append([(tid, [((1, "a"), 10, 1)], Antichain.of(10))])
        with pytest.raises(SchemaMismatch, match="column 'k'"):
            await c.append([(tid, [(("x", "a"), 1, 1)], Antichain.of(10))])
        with pytest.raises(SchemaMismatch, match="2 values"):
            await c.append([(tid, [((1,), 1, 1)], Antichain.of(10))])
        with pytest.raises(IdentifierMissing):
            await c.append([(GlobalId.user(77), [], Antichain.of(10))])
        shard = c.collection_metadata(tid).shard
        assert c._persist.fetch_state(shard).upper == Antichain.of(0)  # nothing written
        # Another writer advances the shard: the append fails with the current upper.
        other = env.client().open_writer(shard, TABLE_DESC)
        other.compare_and_append(
            updates_to_table(TABLE_DESC, [((9, "z"), 3, 1)]),
            expected_upper=Antichain.of(0),
            new_upper=Antichain.of(7),
            idempotency_token=uuid.uuid4(),
        )
        with pytest.raises(InvalidUppers, match=r"current upper \{7\}") as info:
            await c.append([(tid, [((1, "a"), 1, 1)], Antichain.of(10))])
        assert info.value.uppers == ((tid, Antichain.of(7)),)
        response = await c.process()
        assert response is not None and (tid, Antichain.of(7)) in response.updates
        with pytest.raises(UpdateNotBeyondLower):
            await c.append([(tid, [((1, "a"), 5, 1)], Antichain.of(10))])
        await c.append([(tid, [((1, "a"), 8, 1)], Antichain.of(10))])
        await c.ready()
        response = await c.process()
        assert response is not None and (tid, Antichain.of(10)) in response.updates
        assert sorted(await c.snapshot(tid, 9)) == [((1, "a"), 1), ((9, "z"), 1)]
        await c.shutdown()


async def test_22b_several_tables_at_one_timestamp() -> None:
    async with environment() as env:
        c = await env.controller()
        await c.create_collections([table(1), table(2), table(3)])
        c.allow_writes()
        await c.append_table(5, 6, [(GlobalId.user(1), [(1, "a")]), (GlobalId.user(2), [(2, "b")])])
        await c.process()
        for i in (1, 2, 3):
            assert c.collection_frontiers(GlobalId.user(i)).upper == Antichain.of(6)
        assert await c.snapshot(GlobalId.user(1), 5) == [((1, "a"), 1)]
        assert await c.snapshot(GlobalId.user(3), 5) == []
        await c.shutdown()


async def test_24_persist_since_semantics() -> None:
    async with environment() as env:
        c = await env.controller()
        tid, desc = table(1)
        await c.create_collections([(tid, desc)])
        c.allow_writes()
        await c.append([(tid, [((1, "a"), 5, 1)], Antichain.of(20))])
        await c.process()
        persist = env.client()
        shard = c.collection_metadata(tid).shard
        reader = persist.open_leased_reader(shard, TABLE_DESC)
        reader.downgrade_since(Antichain.of(12))
        c.set_read_policy([(tid, ReadPolicy.valid_from(Antichain.of(15)))])
        await c.process()
        # Shard since = min over all readers (the controller's critical one at 15, ours at 12).
        assert persist.fetch_state(shard).since == Antichain.of(12)
        assert reader.downgrade_since(Antichain.of(3)) == Antichain.of(12)  # lower: no-op
        newcomer = persist.open_leased_reader(shard, TABLE_DESC)
        assert newcomer.since == Antichain.of(12)  # registers at the shard's since
        critical = persist.open_critical_since(shard)
        result = critical.compare_and_downgrade_since(99, 99, Antichain.of(16))
        assert isinstance(result, OpaqueMismatch) and result.current == c.epoch
        with pytest.raises(AsOfBeforeSince):
            newcomer.snapshot(11)
        with pytest.raises(ReadBeforeSince, match=f"read of {tid} at .* is before its since"):
            await c.snapshot(tid, 14)
        with pytest.raises(UpperTimeout):
            newcomer.snapshot(25, timeout=0.05)  # blocks while the upper is not past 25
        waiting = asyncio.create_task(newcomer.snapshot_async(25, timeout=10))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        await c.append([(tid, [((2, "b"), 24, 1)], Antichain.of(30))])
        rows = await waiting
        assert sorted(r for r, _t, _d in table_to_updates(rows)) == [(1, "a"), (2, "b")]
        reader.expire()
        newcomer.expire()
        await c.shutdown()


async def test_25_controller_fencing_and_finalization(monkeypatch: pytest.MonkeyPatch) -> None:
    async with environment() as env:
        a = await env.controller(epoch=3)
        tid, desc = table(1)
        await a.create_collections([(tid, desc), table(2)])
        a.allow_writes()
        shard = a.collection_metadata(tid).shard
        # Epoch 2 cannot open what epoch 3 holds ("fenced by envd").
        with pytest.raises(ControllerFenced, match="fenced by envd at epoch 3"):
            await env.controller(epoch=2)
        with pytest.raises(Fenced):
            env.client().open_critical_since(shard, CONTROLLER_CRITICAL_SINCE, epoch=2)
        # Epoch 4 takes over and bumps the opaque; epoch 3 is fenced at its next downgrade.
        b = await env.controller(epoch=4)
        assert (
            env.client().fetch_state(shard).critical_readers[CONTROLLER_CRITICAL_SINCE].opaque == 4
        )
        a.set_read_policy([(tid, ReadPolicy.valid_from(Antichain.of(1)))])
        with pytest.raises(ControllerFenced, match="epoch 3 fenced by envd at epoch 4"):
            await a.process()
        with pytest.raises(ControllerFenced):  # nor can it write a table
            await a.append([(tid, [((1, "a"), 0, 1)], Antichain.of(1))])
        assert env.client().fetch_state(shard).upper == Antichain.of(0)
        # b restored both tables from the durable metadata.
        assert {id for id, _ in b.collections()} == {tid, GlobalId.user(2)}
        b.allow_writes()

        # Crash between recording a dropped table's shard as unfinalized and finalizing it.
        async def crash(*args: object, **kw: object) -> list[object]:
            return []

        monkeypatch.setattr(Driver, "finalize", crash)
        b.drop_tables([tid])
        await b.process()
        assert shard in b.unfinalized_shards()
        assert not env.client().is_finalized(shard)
        monkeypatch.undo()
        c = await env.controller(epoch=5)
        assert shard in c.unfinalized_shards()
        assert [id for id, _ in c.collections()] == [GlobalId.user(2)]  # the mapping is gone
        done = await c.reconcile_state()
        assert done == [shard]
        state = env.client().fetch_state(shard)
        assert state.tombstone and state.since.is_empty() and state.upper.is_empty()
        assert c.unfinalized_shards() == set()
        # A live collection's shard is never finalized.
        assert not env.client().is_finalized(c.collection_metadata(GlobalId.user(2)).shard)
