"""The storage controller end to end with in-process replicas: ingestions, sinks, restarts."""

from __future__ import annotations

from pathlib import Path

import pytest

from spate.frontier import Antichain, ReadPolicy
from spate.ids import GlobalId, InstanceId, ReplicaId
from spate.protocol.storage import ObjectStatus
from spate.protocol.storage_desc import LoadGenerator, LoadGeneratorSource, ParquetSinkConnection
from spate.repr.arrow import table_to_updates
from spate.repr.desc import RelationDesc
from spate.repr.types import INT64
from spate.storage.controller import (
    CollectionDescription,
    ExportDescription,
    IngestionExport,
    IngestionSource,
    IntrospectionKind,
    IntrospectionSource,
    OtherSource,
)
from spate.storage.controller.errors import (
    CollectionIdReused,
    ExportInstanceMissing,
    IdentifierMissing,
    IngestionInstanceMissing,
    InstanceExists,
    InstanceNotEmpty,
    InvalidUsage,
    ReadOnly,
    ReplicaExists,
    SinkIdReused,
)
from spate.storage.controller.introspection import INTROSPECTION_DESCS
from spate.storage.sinks.parquet_dir import read_committed
from spate.storage.sources.open import progress_desc
from tests.storage.controller._harness import (
    TABLE_DESC,
    beyond,
    counter_ingestion,
    environment,
    pump_until,
    table,
)

I1 = InstanceId(1)


def introspection(id: int, kind: IntrospectionKind) -> tuple[GlobalId, CollectionDescription]:
    return GlobalId.system(id), CollectionDescription(
        INTROSPECTION_DESCS[kind], IntrospectionSource(kind)
    )


async def test_ingestion_sink_and_restarts(tmp_path: Path) -> None:
    async with environment() as env:
        c = await env.controller()
        c.create_instance(I1)
        c.connect_replica(I1, ReplicaId(1), await env.start_replica(7101))
        await c.create_collections(
            [
                introspection(1, IntrospectionKind.SOURCE_STATUS_HISTORY),
                introspection(2, IntrospectionKind.SOURCE_STATISTICS),
                introspection(3, IntrospectionKind.SHARD_MAPPING),
            ]
        )
        collections = counter_ingestion(I1, 10, tick_interval_ms=10, rows_per_tick=2)
        source, export = collections[0][0], collections[1][0]
        await c.create_collections(collections)
        c.initialization_complete()
        c.allow_writes()
        await pump_until(c, beyond(c, export, 0))
        start = c.collection_frontiers(export).upper.as_option()
        assert start is not None
        # A sink of the export into a Parquet directory.
        sink = GlobalId.user(20)
        token = c.prepare_export(sink, export)
        await c.create_exports(
            [(token, ExportDescription(I1, ParquetSinkConnection(str(tmp_path / "out"))))]
        )
        with pytest.raises(SinkIdReused):
            c.prepare_export(sink, export)
        await pump_until(
            c, lambda: (u := c.export(sink).write_frontier.as_option()) is not None and u > start
        )
        assert c.status(source) is not None and c.status(source).status is ObjectStatus.RUNNING
        # The export's hold keeps the export readable where the sink is.
        sink_upper = c.export(sink).write_frontier.as_option()
        assert c.collection_frontiers(export).since.less_equal(sink_upper - 1)

        # Restart the replica: it rehydrates from persist and continues without gaps.
        await env.stop_replica(7101)
        await env.start_replica(7101)
        mark = c.collection_frontiers(export).upper.as_option()
        await pump_until(c, beyond(c, export, mark + 50))

        # Restart the controller: everything is restored from the durable metadata.
        await c.shutdown()
        c2 = await env.controller()
        assert {id for id, _ in c2.collections()} >= {source, export}
        assert c2.export(sink).from_id == export
        c2.create_instance(I1)
        c2.connect_replica(I1, ReplicaId(1), env.replicas[7101][1] and await _same(env, 7101))
        c2.initialization_complete()
        c2.allow_writes()
        mark = c2.collection_frontiers(export).upper.as_option()
        await pump_until(c2, beyond(c2, export, mark + 50))
        await pump_until(
            c2, lambda: (u := c2.export(sink).write_frontier.as_option()) is not None and u > mark
        )
        # The sink equals the collection at its frontier, with nothing twice.
        frontier = c2.export(sink).write_frontier.as_option()
        assert frontier is not None
        written = table_to_updates(
            read_committed(
                tmp_path / "out", c2.collection(export).description.desc, sink=str(sink)
            ).updates
        )
        acc: dict[tuple[object, ...], int] = {}
        for row, _t, d in written:
            acc[row] = acc.get(row, 0) + d
        rows = dict(await c2.snapshot(export, frontier - 1))
        assert {r: n for r, n in acc.items() if n} == rows
        assert all(n == 1 for n in rows.values())
        # Statistics and the shard mapping reach their introspection collections.
        await pump_until(c2, lambda: len(c2.statistics.source(source)) > 0)
        mapping_upper = c2.collection_frontiers(GlobalId.system(3)).upper.as_option()
        mapping = dict(r for r, _ in await c2.snapshot(GlobalId.system(3), mapping_upper - 1))
        assert mapping[str(export)] == str(c2.collection_metadata(export).shard)
        await c2.shutdown()


async def _same(env, port):  # type: ignore[no-untyped-def]
    from spate.storage.controller import StorageReplicaLocation
    from tests.storage.controller._harness import SECRET

    return StorageReplicaLocation("127.0.0.1", port, SECRET)


async def test_objects_without_replicas_are_paused() -> None:
    async with environment() as env:
        c = await env.controller()
        c.create_instance(I1)
        await c.create_collections(counter_ingestion(I1, 10))
        await pump_until(c, lambda: c.status(GlobalId.user(10)) is not None)
        status = c.status(GlobalId.user(10))
        assert status is not None and status.status is ObjectStatus.PAUSED
        assert "no replica running this source" in status.hints[0]
        await c.shutdown()


async def test_bad_input_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    async with environment() as env:
        c = await env.controller(read_only=True)
        tid, tdesc = table(1)
        await c.create_collections([(tid, tdesc)])
        with pytest.raises(CollectionIdReused):
            await c.create_collections(
                [(tid, CollectionDescription(RelationDesc.of(("x", INT64)), tdesc.data_source))]
            )
        await c.create_collections([(tid, tdesc)])  # the same description: nothing to do
        with pytest.raises(CollectionIdReused, match="named twice"):
            await c.create_collections([table(2), table(2)])
        with pytest.raises(IngestionInstanceMissing, match="instance i1 missing for ingestion u10"):
            await c.create_collections(counter_ingestion(I1, 10))
        c.create_instance(I1)
        with pytest.raises(InstanceExists):
            c.create_instance(I1)
        good = counter_ingestion(I1, 10)
        with pytest.raises(IdentifierMissing, match="export of ingestion u10"):
            await c.create_collections(good[:1])  # its export is missing
        bad_progress = [
            (good[0][0], CollectionDescription(TABLE_DESC, good[0][1].data_source)),
            good[1],
        ]
        with pytest.raises(InvalidUsage, match="records its progress with schema"):
            await c.create_collections(bad_progress)
        wrong_out = [
            good[0],
            (good[1][0], CollectionDescription(TABLE_DESC, good[1][1].data_source)),
        ]
        with pytest.raises(InvalidUsage, match="output 'counter' has schema"):
            await c.create_collections(wrong_out)
        source = LoadGeneratorSource(LoadGenerator.COUNTER)
        no_output = [
            (
                GlobalId.user(30),
                CollectionDescription(
                    progress_desc(source), IngestionSource(I1, source, {GlobalId.user(31): "nope"})
                ),
            ),
            (
                GlobalId.user(31),
                CollectionDescription(TABLE_DESC, IngestionExport(GlobalId.user(30), "nope")),
            ),
        ]
        with pytest.raises(InvalidUsage, match="no output 'nope'"):
            await c.create_collections(no_output)
        with pytest.raises(InvalidUsage, match="a source_statistics collection has schema"):
            await c.create_collections(
                [
                    (
                        GlobalId.system(5),
                        CollectionDescription(
                            TABLE_DESC, IntrospectionSource(IntrospectionKind.SOURCE_STATISTICS)
                        ),
                    )
                ]
            )
        assert [id for id, _ in c.collections()] == [tid]  # nothing was created
        await c.create_collections(good)
        with pytest.raises(InstanceNotEmpty):
            c.drop_instance(I1)
        with pytest.raises(IdentifierMissing):
            c.set_read_policy([(GlobalId.user(99), ReadPolicy.valid_from(Antichain.of(1)))])
        with pytest.raises(IdentifierMissing):
            c.acquire_read_holds([tid, GlobalId.user(99)])
        assert c.collection(tid).read_capabilities.counts() == [(0, 1)]  # all or nothing
        with pytest.raises(IdentifierMissing):
            c.prepare_export(GlobalId.user(40), GlobalId.user(99))
        token = c.prepare_export(GlobalId.user(40), tid)
        with pytest.raises(ExportInstanceMissing):
            await c.create_exports(
                [(token, ExportDescription(InstanceId(9), ParquetSinkConnection(str(tmp_path))))]
            )
        c.cancel_prepare_export(token)
        assert c.collection(tid).read_capabilities.counts() == [(0, 1)]
        with pytest.raises(IdentifierMissing, match="export identifier is not present: u40"):
            c.drop_sinks([GlobalId.user(40)])
        with pytest.raises(ReadOnly):
            await c.append([(tid, [((1, "a"), 0, 1)], Antichain.of(1))])
        c.allow_writes()
        with pytest.raises(InvalidUsage, match="is not a table"):
            await c.append([(GlobalId.user(11), [], Antichain.of(1))])
        with pytest.raises(InvalidUsage, match="appears twice"):
            await c.append([(tid, [], Antichain.of(1)), (tid, [], Antichain.of(2))])
        c.drop_tables([tid])
        with pytest.raises(IdentifierMissing):  # double drop
            c.drop_tables([tid])
        c.connect_replica(I1, ReplicaId(1), await env.start_replica(7201))
        second = await env.start_replica(7202)
        with pytest.raises(ReplicaExists):
            c.connect_replica(I1, ReplicaId(1), second)
        await c.shutdown()


async def test_collections_written_elsewhere_follow_their_shard() -> None:
    async with environment() as env:
        c = await env.controller()
        mv = GlobalId.user(5)
        desc = RelationDesc.of(("x", INT64, False))
        await c.create_collections([(mv, CollectionDescription(desc, OtherSource()))])
        import uuid

        from spate.repr.arrow import updates_to_table

        writer = env.client().open_writer(c.collection_metadata(mv).shard, desc)
        writer.compare_and_append(
            updates_to_table(desc, [((1,), 3, 1)]),
            expected_upper=Antichain.of(0),
            new_upper=Antichain.of(10),
            idempotency_token=uuid.uuid4(),
        )
        await pump_until(c, beyond(c, mv, 9))
        c.update_write_frontiers([(mv, Antichain.of(5))])  # a regression is ignored
        assert c.collection_frontiers(mv).upper == Antichain.of(10)
        assert await c.snapshot(mv, 9) == [((1,), 1)]
        await c.shutdown()


async def test_objects_move_when_their_replica_goes() -> None:
    async with environment() as env:
        c = await env.controller()
        c.create_instance(I1)
        c.connect_replica(I1, ReplicaId(5), await env.start_replica(7301))
        c.connect_replica(I1, ReplicaId(7), await env.start_replica(7302))
        collections = counter_ingestion(I1, 10, tick_interval_ms=10)
        source, export = collections[0][0], collections[1][0]
        await c.create_collections(collections)
        c.initialization_complete()
        c.allow_writes()
        await pump_until(c, beyond(c, export, 0))
        r5, r7 = env.replicas[7301][0], env.replicas[7302][0]
        assert source in r5.running() and source not in r7.running()  # the lowest id runs it
        c.drop_replica(I1, ReplicaId(5))
        await pump_until(c, lambda: source in r7.running())
        mark = c.collection_frontiers(export).upper.as_option()
        await pump_until(c, beyond(c, export, mark + 30))
        # A lower replica id takes the objects over; the old owner stops them.
        c.connect_replica(I1, ReplicaId(1), await env.start_replica(7303))
        r1 = env.replicas[7303][0]
        await pump_until(c, lambda: source in r1.running() and source not in r7.running())
        mark = c.collection_frontiers(export).upper.as_option()
        await pump_until(c, beyond(c, export, mark + 30))
        upper = c.collection_frontiers(export).upper.as_option()
        rows = dict(await c.snapshot(export, upper - 1))
        assert rows and all(n == 1 for n in rows.values())
        values = sorted(r[0] for r in rows)
        assert values == list(range(1, len(values) + 1))  # no gap, no duplicate
        await c.shutdown()
