"""PostgreSQL CDC through a real storage replica process, killed (-9) twice mid-stream.

Upstream: a snapshot of 200 rows, then 1,000 inserts, updates and deletes in small
transactions. The replica is killed twice while they stream. The export collection must equal
the upstream table at every time it binds (each bound state is a state the table had after
some transaction, in order), never hold a row twice, and end equal to the table.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections import Counter
from decimal import Decimal
from pathlib import Path

import psycopg
import pytest

from spate.ids import GlobalId, InstanceId, ReplicaId
from spate.persist.location import PersistLocation
from spate.protocol.secret import Secret
from spate.protocol.storage_desc import PostgresSource
from spate.repr.types import Row
from spate.storage.controller import (
    CollectionDescription,
    IngestionExport,
    IngestionSource,
    StorageController,
)
from spate.storage.sources.open import progress_desc
from spate.storage.sources.postgres.catalog import describe_source
from tests.storage.integration._history import (
    all_updates,
    binding_times,
    check_prefix_states,
    states_at,
)
from tests.storage.integration._procs import ReplicaProcess, persist_client, pumped, wait_for

pytestmark = [pytest.mark.integration]
I1 = InstanceId(1)


class Upstream:
    """The table as the test changes it, and its state after every transaction."""

    def __init__(self, url: str, name: str, rng: random.Random) -> None:
        self.conn = psycopg.connect(url, autocommit=True)
        self.name = name
        self.rng = rng
        self.rows: dict[int, Row] = {}
        self.states: list[Counter[Row]] = []
        self.done_ops = 0
        self.next_key = 0

    def row(self, key: int) -> Row:
        return (
            key,
            self.rng.choice(["a", "b", "c,d", 'q"t', ""]),
            Decimal(self.rng.randint(0, 99999)) / 100,
        )

    def insert(self, cur: psycopg.Cursor) -> None:  # type: ignore[type-arg]
        r = self.row(self.next_key)
        self.next_key += 1
        cur.execute(f"insert into {self.name} values (%s, %s, %s)", r)  # type: ignore[call-overload]
        self.rows[r[0]] = r  # type: ignore[index]

    def snapshot_rows(self, n: int) -> None:
        with self.conn.cursor() as cur:
            for _ in range(n):
                self.insert(cur)
        self.states.append(Counter(self.rows.values()))

    def run(self, n_ops: int) -> None:
        rng = self.rng
        while self.done_ops < n_ops:
            with self.conn.transaction(), self.conn.cursor() as cur:
                for _ in range(rng.randint(1, 4)):
                    op = rng.random()
                    if op < 0.4 or len(self.rows) < 10:
                        self.insert(cur)
                    elif op < 0.75:
                        k = rng.choice(list(self.rows))
                        new = self.row(k)
                        cur.execute(  # type: ignore[call-overload]
                            f"update {self.name} set v = %s, n = %s where id = %s",
                            (new[1], new[2], k),
                        )
                        self.rows[k] = new
                    else:
                        k = rng.choice(list(self.rows))
                        cur.execute(f"delete from {self.name} where id = %s", (k,))  # type: ignore[call-overload]
                        del self.rows[k]
                    self.done_ops += 1
            self.states.append(Counter(self.rows.values()))
            threading.Event().wait(rng.uniform(0.0, 0.02))


async def test_cdc_exactly_once_across_two_kill9(
    pg_logical_url: str, pg_name: str, pg_cleanup: list[str], tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    pg_cleanup.extend(
        [
            f"select pg_drop_replication_slot('{pg_name}') from pg_replication_slots "
            f"where slot_name = '{pg_name}'",
            f"drop publication if exists {pg_name}",
            f"drop table if exists {pg_name}",
        ]
    )
    up = Upstream(pg_logical_url, pg_name, rng)
    up.conn.execute(f"create table {pg_name} (id int primary key, v text, n numeric(10,2))")  # type: ignore[arg-type]
    up.conn.execute(f"alter table {pg_name} replica identity full")  # type: ignore[arg-type]
    up.snapshot_rows(200)
    up.conn.execute(f"create publication {pg_name} for table {pg_name}")  # type: ignore[arg-type]
    table = describe_source(pg_logical_url, publication=pg_name, slot=pg_name).tables[0]

    location = PersistLocation.embedded(tmp_path / "persist")
    replica = ReplicaProcess(location, tmp_path)
    replica.start()
    controller = StorageController(persist_client(location))
    await controller.open()
    try:
        controller.create_instance(I1)
        controller.connect_replica(I1, ReplicaId(1), replica.address)
        source = PostgresSource(Secret(pg_logical_url), pg_name, pg_name)
        ingestion, export = GlobalId.user(1), GlobalId.user(2)
        await controller.create_collections(
            [
                (
                    ingestion,
                    CollectionDescription(
                        progress_desc(source),
                        IngestionSource(I1, source, {export: table.output}, 50),
                    ),
                ),
                (
                    export,
                    CollectionDescription(table.desc, IngestionExport(ingestion, table.output)),
                ),
            ]
        )
        controller.initialization_complete()
        controller.allow_writes()
        async with pumped(controller) as c:
            await wait_for(
                lambda: (c.collection_frontiers(export).upper.as_option() or 0) > 0, what="snapshot"
            )
            ops = asyncio.create_task(asyncio.to_thread(up.run, 1000))
            kills = 0
            for at in (300, 650):
                await wait_for(lambda at=at: up.done_ops >= at, what=f"{at} ops")
                replica.kill9()
                kills += 1
                await asyncio.sleep(rng.uniform(0.1, 0.6))
                replica.start()
            await ops
            final = up.states[-1]

            async def caught_up() -> bool:
                u = c.collection_frontiers(export).upper.as_option()
                return (
                    u is not None
                    and u > 0
                    and Counter(dict(await c.snapshot(export, u - 1))) == final
                )

            for _ in range(600):
                if await caught_up():
                    break
                await asyncio.sleep(0.1)
            else:
                raise AssertionError("the collection never caught up with the upstream table")
        assert kills == 2 and replica.starts == 3
        client = persist_client(location)
        meta_export = controller.collection_metadata(export)
        meta_remap = controller.collection_metadata(ingestion)
        times = binding_times(client, meta_remap.shard, meta_remap.desc)
        updates = all_updates(client, meta_export.shard, meta_export.desc)
        observed = states_at(updates, times)
        indices = check_prefix_states(observed, up.states)
        assert observed[-1] == final and indices[-1] == len(up.states) - 1
        # Consolidated, every update retracts or inserts one row once.
        per_time: Counter[tuple[Row, int]] = Counter()
        for row, t, d in updates:
            per_time[(row, t)] += d
        assert all(d in (-1, 1) for d in per_time.values() if d)
        print(f"bindings={len(times)} upstream_states={len(up.states)} updates={len(updates)}")
    finally:
        await controller.shutdown()
        replica.stop()
        up.conn.close()
