"""Promises of the storage controller about read holds and durable collections: a prepared
export holds its input, an export holds its input at where it resumes until ``drop_sinks``,
and ``migrate_collections`` does not finalize collections it was not told about."""

from __future__ import annotations

from pathlib import Path

import pytest

from spate.frontier import Antichain, ReadPolicy
from spate.ids import GlobalId, InstanceId
from spate.protocol.storage_desc import ParquetSinkConnection
from spate.storage.controller import ExportDescription, StorageController
from spate.storage.controller.errors import UnknownCollections
from tests.storage.controller._harness import environment, table

I1 = InstanceId(1)
SINK = GlobalId.user(40)


async def _table_at(c: StorageController, id: int, upper: int) -> GlobalId:
    tid, desc = table(id)
    await c.create_collections([(tid, desc)])
    await c.append([(tid, [], Antichain.of(upper))])
    return tid


def _since(c: StorageController, id: GlobalId) -> int | None:
    return c.collection_frontiers(id).since.as_option()


def _compact_to(c: StorageController, id: GlobalId, t: int) -> None:
    c.set_read_policy([(id, ReadPolicy.valid_from(Antichain.of(t)))])


async def test_a_prepared_export_holds_its_input_until_it_is_cancelled() -> None:
    async with environment() as env:
        c = await env.controller()
        c.allow_writes()
        tid = await _table_at(c, 1, 20)
        _compact_to(c, tid, 5)
        assert _since(c, tid) == 5
        token = c.prepare_export(SINK, tid)
        assert token.acquired_since == Antichain.of(5)
        _compact_to(c, tid, 8)
        assert _since(c, tid) == 5  # the token holds the input where the sink will start
        assert c.collection(tid).read_capabilities.counts() == [(5, 1), (8, 1)]
        c.cancel_prepare_export(token)
        assert _since(c, tid) == 8
        await c.shutdown()


async def test_an_export_holds_its_input_until_drop_sinks(tmp_path: Path) -> None:
    async with environment() as env:
        c = await env.controller()
        c.allow_writes()
        c.create_instance(I1)  # no replica: the sink never reports progress
        tid = await _table_at(c, 1, 20)
        _compact_to(c, tid, 5)
        token = c.prepare_export(SINK, tid)
        await c.create_exports(
            [(token, ExportDescription(I1, ParquetSinkConnection(str(tmp_path))))]
        )
        _compact_to(c, tid, 8)
        assert _since(c, tid) == 5  # the sink resumes at 5: its input stays readable there
        assert c.collection(tid).read_capabilities.counts() == [(5, 1), (8, 1)]
        c.drop_sinks([SINK])
        assert _since(c, tid) == 8
        assert c.collection(tid).read_capabilities.counts() == [(8, 1)]
        await c.shutdown()


async def test_migrate_collections_refuses_collections_it_was_not_told_about() -> None:
    async with environment() as env:
        c = await env.controller()
        c.allow_writes()
        kept = await _table_at(c, 1, 10)
        other = await _table_at(c, 2, 10)
        shard = c.collection_metadata(other).shard
        await c.shutdown()
        c = await env.controller()
        with pytest.raises(UnknownCollections, match="u2") as e:
            await c.migrate_collections([kept])
        assert isinstance(e.value, ValueError)
        assert await c.reconcile_state() == []  # nothing was marked for finalization
        assert shard not in c.unfinalized_shards()
        await c.shutdown()
        c = await env.controller()  # the refused call changed nothing durable
        assert {id for id, _ in c.collections()} == {kept, other}
        assert await c.migrate_collections([kept], finalize_unknown=True) == [shard]
        assert shard in c.unfinalized_shards()
        await c.shutdown()
