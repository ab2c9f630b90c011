"""Opening and closing an environment (async; runs on the environment's event loop).

Open, in order:

1. the data directory and its secret; persist where the settings say (default: SQLite
   consensus and file blobs under the data directory);
2. the next **epoch** (durable; it fences an older environment still running on the same data);
3. the **timestamp oracle** and the **catalog** (both in consensus);
4. the **storage controller** at that epoch: it restores every collection and export from its
   own durable metadata; collections the catalog no longer names are finalized;
5. the **compute controller** on top of it, then the **orchestrator**: every cluster's replicas
   are ensured (a replica that survived a previous environment is adopted and reconciles), the
   storage replica if sources or sinks exist;
6. read policies, then the dataflows of every materialized view and index at as_ofs that
   resume where their data stops;
7. the ``spate_catalog`` relations (see :mod:`.builtins`) are created or adopted, and the
   storage controller starts writing them;
8. the controller loop and the table tick start.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from spate.clock import Clock, SystemClock
from spate.compute.controller.controller import ComputeController
from spate.compute.controller.replica_client import ClientConnector, transport_opener
from spate.config import Settings
from spate.controller import Controller
from spate.environment import clusters, definitions_migration, introspection, objects, tables
from spate.environment.builtins import BUILTINS
from spate.environment.catalog import SinkItem, SourceItem, ViewItem
from spate.environment.catalog_store import CatalogStore
from spate.environment.durable import DurableDocument
from spate.environment.oracle import TimestampOracle
from spate.environment.runtime import STORAGE_INSTANCE, Runtime
from spate.environment.services import layout_of
from spate.environment.webhook import legacy
from spate.errors import SpateError
from spate.ids import IdGen, SystemIdGen
from spate.orchestrator.process import ProcessOrchestrator
from spate.orchestrator.supervisor import Supervisor
from spate.persist.client import PersistClient
from spate.protocol.transport import TcpTransport
from spate.storage.controller.controller import StorageController
from spate.tasks import cancel_and_wait
from spate.wire import wire

_log: Final = logging.getLogger("spate.environment")


@wire("environment.epoch")
@dataclass(frozen=True, slots=True)
class EpochState:
    epoch: int


async def open_runtime(
    data_dir: Path,
    *,
    settings: Settings,
    clock: Clock | None = None,
    ids: IdGen | None = None,
    orchestrator: Supervisor | None = None,
) -> Runtime:
    clock = clock or SystemClock()
    ids = ids or SystemIdGen()
    layout = layout_of(Path(data_dir), settings)
    layout.ensure()
    persist = await asyncio.to_thread(PersistClient, layout.location(), clock=clock, ids=ids)
    consensus = persist.consensus
    epoch_doc = DurableDocument(consensus, "environment/epoch", EpochState)
    epoch = (
        await asyncio.to_thread(
            epoch_doc.update, lambda s: EpochState(1 if s is None else s.epoch + 1)
        )
    ).epoch
    oracle = await asyncio.to_thread(TimestampOracle, consensus, clock)
    catalog_doc = CatalogStore(consensus, epoch)
    catalog = await asyncio.to_thread(catalog_doc.claim)
    storage = StorageController(persist, clock=clock, ids=ids)
    await storage.open(epoch)
    secret = layout.secret()
    compute = ComputeController(
        storage,
        connector=ClientConnector(transport_opener(TcpTransport(), secret=secret)),
        clock=clock,
        ids=ids,
        epoch=epoch,
    )
    rt = Runtime(
        layout=layout,
        settings=settings,
        clock=clock,
        ids=ids,
        persist=persist,
        oracle=oracle,
        catalog_doc=catalog_doc,
        catalog=catalog,
        storage=storage,
        compute=compute,
        controller=Controller(storage, compute),
        orchestrator=orchestrator or ProcessOrchestrator(layout.data_dir),
        epoch=epoch,
    )
    definitions_migration.migrate(rt)  # the SQL definitions file of an older version
    legacy.mark_webhook_sources(rt)  # webhook sources an older version kept as tables
    catalog = rt.catalog
    # The catalog names every collection the environment keeps: one it does not name was
    # created by a call that failed (or crashed) before committing it, and is finalized.
    keep = [i.id for i in catalog if not isinstance(i, (ViewItem, SinkItem))]
    keep += [b.id for b in BUILTINS]
    finalized = await storage.migrate_collections(keep, finalize_unknown=True)
    if finalized:
        _log.info("finalized %d shard(s) no catalog object names", len(finalized))
    storage.create_instance(STORAGE_INSTANCE)
    if any(isinstance(i, (SourceItem, SinkItem)) for i in catalog):
        await clusters.ensure_storage_replica(rt)
    await clusters.restore_clusters(rt)
    await objects.restore(rt)
    storage.initialization_complete()
    compute.initialization_complete()
    await storage.reconcile_state()
    await introspection.install(rt)
    await tables.advance_tables(rt)
    return rt


class Background:
    """The tasks that keep an open environment moving."""

    def __init__(self, rt: Runtime) -> None:
        self._tasks = [
            asyncio.create_task(rt.controller.run(), name="controller"),
            asyncio.create_task(
                tables.tick_forever(rt, rt.settings.table_tick_ms / 1000), name="table-tick"
            ),
        ]
        for task in self._tasks:
            task.add_done_callback(self._died)

    @staticmethod
    def _died(task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            _log.error("environment task %s died", task.get_name(), exc_info=task.exception())

    def failure(self) -> BaseException | None:
        for task in self._tasks:
            if task.done() and not task.cancelled() and task.exception() is not None:
                return task.exception()
        return None

    async def stop(self) -> None:
        await cancel_and_wait(self._tasks)


async def close_runtime(rt: Runtime, *, stop_replicas: bool) -> None:
    rt.compute.shutdown()
    await rt.storage.shutdown()
    await rt.orchestrator.close(stop_services=stop_replicas)
    try:  # the next open then reads the catalog as one version
        await asyncio.to_thread(rt.catalog_doc.compact)
    except SpateError as e:  # fenced, or consensus unreachable: the changes are durable anyway
        _log.info("catalog not compacted at close: %s", e)
    await asyncio.to_thread(rt.persist.close)
