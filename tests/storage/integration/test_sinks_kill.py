"""Sinks through a real storage replica process, killed (-9) twice while they run.

A COUNTER ingestion (newest 50 values) feeds a Parquet directory sink and a PostgreSQL upsert
sink. After two kill -9s and restarts, each sink equals the collection at the sink's frontier,
and holds nothing twice.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from pathlib import Path

import psycopg
import pytest

from spate.frontier import Antichain
from spate.ids import GlobalId, InstanceId, ReplicaId
from spate.persist.location import PersistLocation
from spate.protocol.secret import Secret
from spate.protocol.storage_desc import (
    LoadGenerator,
    LoadGeneratorSource,
    ParquetSinkConnection,
    PostgresSinkConnection,
    PostgresSinkMode,
)
from spate.repr.arrow import table_to_updates
from spate.repr.types import Row
from spate.storage.controller import (
    CollectionDescription,
    ExportDescription,
    IngestionExport,
    IngestionSource,
    StorageController,
)
from spate.storage.sinks.parquet_dir import read_committed
from spate.storage.sources.open import load_generator, progress_desc
from tests.storage.integration._history import all_updates
from tests.storage.integration._procs import ReplicaProcess, persist_client, pumped, wait_for

pytestmark = [pytest.mark.integration]
I1 = InstanceId(1)


async def test_sinks_exactly_once_across_two_kill9(
    postgres_url: str, pg_name: str, tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    location = PersistLocation.embedded(tmp_path / "persist")
    replica = ReplicaProcess(location, tmp_path)
    replica.start()
    controller = StorageController(persist_client(location))
    await controller.open()
    pg = psycopg.connect(postgres_url, autocommit=True)
    try:
        controller.create_instance(I1)
        controller.connect_replica(I1, ReplicaId(1), replica.address)
        source = LoadGeneratorSource(
            LoadGenerator.COUNTER, tick_interval_ms=20, rows_per_tick=3, max_cardinality=50
        )
        ingestion, export = GlobalId.user(1), GlobalId.user(2)
        desc = load_generator(source).outputs["counter"]
        await controller.create_collections(
            [
                (
                    ingestion,
                    CollectionDescription(
                        progress_desc(source), IngestionSource(I1, source, {export: "counter"}, 50)
                    ),
                ),
                (export, CollectionDescription(desc, IngestionExport(ingestion, "counter"))),
            ]
        )
        controller.initialization_complete()
        controller.allow_writes()
        parquet_sink, pg_sink = GlobalId.user(10), GlobalId.user(11)
        out = tmp_path / "sink"
        async with pumped(controller) as c:
            await wait_for(lambda: (c.collection_frontiers(export).upper.as_option() or 0) > 0)
            t1 = c.prepare_export(parquet_sink, export)
            t2 = c.prepare_export(pg_sink, export)
            await c.create_exports(
                [
                    (t1, ExportDescription(I1, ParquetSinkConnection(str(out)))),
                    (
                        t2,
                        ExportDescription(
                            I1,
                            PostgresSinkConnection(
                                Secret(postgres_url),
                                pg_name,
                                PostgresSinkMode.UPSERT,
                                ("counter",),
                                progress_table=f"{pg_name}_progress",
                            ),
                        ),
                    ),
                ]
            )
            for _ in range(2):
                await wait_for(
                    lambda: (c.export(pg_sink).write_frontier.as_option() or 0) > 0, what="pg sink"
                )
                await asyncio.sleep(rng.uniform(0.3, 1.5))
                replica.kill9()
                await asyncio.sleep(rng.uniform(0.1, 0.5))
                replica.start()
            mark = c.collection_frontiers(export).upper.as_option() or 0
            await wait_for(
                lambda: all(
                    (c.export(s).write_frontier.as_option() or 0) > mark
                    for s in (parquet_sink, pg_sink)
                ),
                what="both sinks past the kills",
            )
        client = persist_client(location)
        meta = controller.collection_metadata(export)
        updates = all_updates(client, meta.shard, meta.desc)

        def collection_at(t: int) -> Counter[Row]:
            acc: Counter[Row] = Counter()
            for row, time, d in updates:
                if time <= t:
                    acc[row] += d
            return +acc

        # The Parquet directory: its committed files accumulate to the collection at its
        # frontier, and past the snapshot they hold exactly the collection's updates.
        sink = read_committed(out, desc, sink=str(parquet_sink))
        frontier = sink.upper.as_option()
        assert frontier is not None and frontier > mark
        written = table_to_updates(sink.updates)
        acc: Counter[Row] = Counter()
        for row, _t, d in written:
            acc[row] += d
        assert +acc == collection_at(frontier - 1)
        assert all(n == 1 for n in (+acc).values())
        as_of = controller.export(parquet_sink).as_of.as_option()
        assert as_of is not None

        def consolidated(ups: list[tuple[Row, int, int]]) -> Counter[tuple[Row, int]]:
            out: Counter[tuple[Row, int]] = Counter()
            for row, t, d in ups:
                if as_of < t < frontier:
                    out[(row, t)] += d
            return Counter({k: v for k, v in out.items() if v})

        assert consolidated(written) == consolidated(updates)
        # The PostgreSQL table, read in one transaction with its progress row.
        with pg.transaction():
            (pg_upper,) = pg.execute(  # type: ignore[misc]
                f"select upper from {pg_name}_progress where sink_id = %s",  # type: ignore[arg-type]
                (f"{pg_sink}/{controller.collection_metadata(export).shard}",),
            ).fetchone()
            rows = Counter(pg.execute(f"select counter from {pg_name}").fetchall())  # type: ignore[arg-type]
        assert pg_upper is not None and pg_upper > mark
        assert rows == collection_at(pg_upper - 1)
        assert controller.export(pg_sink).write_frontier.less_equal(Antichain.of(pg_upper))
        print(f"parquet frontier={frontier} pg frontier={pg_upper} rows={sum(rows.values())}")
    finally:
        await controller.shutdown()
        replica.stop()
        pg.execute(f"drop table if exists {pg_name}, {pg_name}_progress")  # type: ignore[arg-type]
        pg.close()
