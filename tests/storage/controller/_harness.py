"""A storage controller with in-memory persist and in-process replicas on an in-memory network."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from spate.clock import SystemClock
from spate.frontier import Antichain, Frontier
from spate.ids import GlobalId, InstanceId, ReplicaId, SeededIdGen, SystemIdGen
from spate.persist.client import PersistClient
from spate.persist.location import PersistLocation
from spate.protocol.memory import InMemoryTransport
from spate.protocol.secret import Secret
from spate.protocol.storage_desc import LoadGenerator, LoadGeneratorSource
from spate.repr.desc import RelationDesc
from spate.repr.types import INT64, TEXT
from spate.storage.controller import (
    CollectionDescription,
    IngestionExport,
    IngestionSource,
    StorageController,
    StorageReplicaLocation,
    TableSource,
)
from spate.storage.replica.server import ReplicaContext, StorageReplica
from spate.storage.sources.open import load_generator, progress_desc
from spate.storage.sources.stash import MemStash

SECRET = Secret("s" * 64)
TABLE_DESC = RelationDesc.of(("k", INT64, False), ("v", TEXT))


@dataclass
class Env:
    """Persist (in memory), a network, replicas, and a storage controller."""

    location: PersistLocation
    network: InMemoryTransport = field(default_factory=InMemoryTransport)
    replicas: dict[int, tuple[StorageReplica, Any]] = field(default_factory=dict)
    clients: list[PersistClient] = field(default_factory=list)

    def client(self) -> PersistClient:
        c = PersistClient(self.location, clock=SystemClock(), ids=SystemIdGen())
        self.clients.append(c)
        return c

    async def start_replica(self, port: int) -> StorageReplicaLocation:
        ctx = ReplicaContext(
            persist=self.client(),
            stash=MemStash(),
            clock=SystemClock(),
            ids=SystemIdGen(),
            sink_step_ms=20,
        )
        replica = StorageReplica(ctx)
        server = await self.network.serve(
            "127.0.0.1", port, role="storage", handler=replica.handle, secret=SECRET
        )
        self.replicas[port] = (replica, server)
        return StorageReplicaLocation("127.0.0.1", port, SECRET)

    async def stop_replica(self, port: int) -> None:
        replica, server = self.replicas.pop(port)
        await server.close()
        await replica.close()

    def opener(self) -> Callable[..., Any]:
        async def open(location: StorageReplicaLocation, epoch: int) -> Any:
            return await self.network.connect(
                location.host, location.port, role="storage", epoch=epoch, secret=location.secret
            )

        return open

    async def controller(self, *, epoch: int | None = None, **kw: Any) -> StorageController:
        c = StorageController(self.client(), open=self.opener(), maintenance_interval_ms=50, **kw)
        await c.open(epoch)
        return c

    async def close(self) -> None:
        for port in list(self.replicas):
            await self.stop_replica(port)


@asynccontextmanager
async def environment() -> AsyncIterator[Env]:
    env = Env(PersistLocation.memory(f"storage-{uuid.uuid4().hex}"))
    try:
        yield env
    finally:
        await env.close()


async def pump_until(
    controller: StorageController, pred: Callable[[], bool], timeout: float = 20.0
) -> None:
    """Run ready/process until ``pred()`` holds."""
    async with asyncio.timeout(timeout):
        while not pred():
            await controller.ready()
            await controller.process()


def table(id: int) -> tuple[GlobalId, CollectionDescription]:
    return GlobalId.user(id), CollectionDescription(TABLE_DESC, TableSource())


def counter_ingestion(
    instance: InstanceId, first: int, **kw: Any
) -> list[tuple[GlobalId, CollectionDescription]]:
    """A COUNTER ingestion ``u<first>`` with its export ``u<first+1>``."""
    source = LoadGeneratorSource(LoadGenerator.COUNTER, **kw)
    ingestion, export = GlobalId.user(first), GlobalId.user(first + 1)
    out_desc = load_generator(source).outputs["counter"]
    return [
        (
            ingestion,
            CollectionDescription(
                progress_desc(source),
                IngestionSource(instance, source, {export: "counter"}, timestamp_interval_ms=20),
            ),
        ),
        (export, CollectionDescription(out_desc, IngestionExport(ingestion, "counter"))),
    ]


def upper(c: StorageController, id: GlobalId) -> Frontier:
    return c.collection_frontiers(id).upper


def beyond(c: StorageController, id: GlobalId, t: int) -> Callable[[], bool]:
    def pred() -> bool:
        u = c.collection_frontiers(id).upper
        return u.is_empty() or u.as_option() > t  # type: ignore[operator]

    return pred


__all__ = ["Antichain", "ReplicaId", "SeededIdGen"]
