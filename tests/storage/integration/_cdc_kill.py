"""Change data capture through a real storage replica process killed (-9) twice mid-stream:
the harness the PostgreSQL and the MySQL kill tests share.

The upstream (the test's) changes its table from a thread while the replica ingests it; the
replica is killed after ``kill_at`` of its operations and started again. Then the export must
catch up with the table, equal it at every time it binds (each bound state one the table had,
in order), and hold no row twice.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from spate.ids import GlobalId, InstanceId, ReplicaId
from spate.persist.location import PersistLocation
from spate.protocol.storage_desc import SourceConnection
from spate.repr.desc import RelationDesc
from spate.repr.types import Row
from spate.storage.controller import (
    CollectionDescription,
    IngestionExport,
    IngestionSource,
    StorageController,
)
from spate.storage.sources.open import progress_desc
from tests.storage.integration._history import (
    all_updates,
    binding_times,
    check_prefix_states,
    states_at,
)
from tests.storage.integration._procs import ReplicaProcess, persist_client, pumped, wait_for

I1 = InstanceId(1)


class Upstream(Protocol):
    states: list[Counter[Row]]
    """The table's state after every transaction, in order."""
    done_ops: int

    def run(self, n: int) -> None:
        """Make ``n`` changes (inserts, updates, deletes) in small transactions."""


async def ingest_through_two_kills(
    tmp_path: Path,
    source: SourceConnection,
    output: str,
    desc: RelationDesc,
    up: Upstream,
    rng: random.Random,
    *,
    final: Callable[[], Counter[Row]] | None = None,
    ops: int = 1000,
    kill_at: tuple[int, ...] = (300, 650),
) -> None:
    """Ingest ``source`` (its table ``output`` of ``desc``) while ``up`` makes ``ops``
    changes, killing the replica after each of ``kill_at``; check the export (module docs).
    ``final``: the table as read upstream at the end (default: ``up``'s last state)."""
    location = PersistLocation.embedded(tmp_path / "persist")
    replica = ReplicaProcess(location, tmp_path)
    replica.start()
    controller = StorageController(persist_client(location))
    await controller.open()
    try:
        controller.create_instance(I1)
        controller.connect_replica(I1, ReplicaId(1), replica.address)
        ingestion, export = GlobalId.user(1), GlobalId.user(2)
        await controller.create_collections(
            [
                (
                    ingestion,
                    CollectionDescription(
                        progress_desc(source), IngestionSource(I1, source, {export: output}, 50)
                    ),
                ),
                (export, CollectionDescription(desc, IngestionExport(ingestion, output))),
            ]
        )
        controller.initialization_complete()
        controller.allow_writes()
        async with pumped(controller) as c:
            await wait_for(
                lambda: (c.collection_frontiers(export).upper.as_option() or 0) > 0, what="snapshot"
            )
            changes = asyncio.create_task(asyncio.to_thread(up.run, ops))
            kills = 0
            for at in kill_at:
                await wait_for(lambda at=at: up.done_ops >= at, what=f"{at} ops")
                replica.kill9()
                kills += 1
                await asyncio.sleep(rng.uniform(0.1, 0.6))
                replica.start()
            await changes
            last = final() if final is not None else up.states[-1]
            assert last == up.states[-1]

            async def caught_up() -> bool:
                u = c.collection_frontiers(export).upper.as_option()
                return (
                    u is not None
                    and u > 0
                    and Counter(dict(await c.snapshot(export, u - 1))) == last
                )

            for _ in range(600):
                if await caught_up():
                    break
                await asyncio.sleep(0.1)
            else:
                raise AssertionError("the collection never caught up with the upstream table")
        assert kills == len(kill_at) and replica.starts == len(kill_at) + 1
        client = persist_client(location)
        meta_export = controller.collection_metadata(export)
        meta_remap = controller.collection_metadata(ingestion)
        times = binding_times(client, meta_remap.shard, meta_remap.desc)
        updates = all_updates(client, meta_export.shard, meta_export.desc)
        observed = states_at(updates, times)
        indices = check_prefix_states(observed, up.states)
        assert observed[-1] == last and indices[-1] == len(up.states) - 1
        # Consolidated, every update retracts or inserts one row once.
        per_time: Counter[tuple[Row, int]] = Counter()
        for row, t, d in updates:
            per_time[(row, t)] += d
        assert all(d in (-1, 1) for d in per_time.values() if d)
        print(f"bindings={len(times)} upstream_states={len(up.states)} updates={len(updates)}")
    finally:
        await controller.shutdown()
        replica.stop()
