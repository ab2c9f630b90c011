"""A source created at ``register_ts``: its collections start there, and what it finds first is
bound at that time, so every read at or after the creation sees it."""

from __future__ import annotations

import time

import pytest

from spate.ids import InstanceId, ReplicaId
from spate.storage.controller.errors import InvalidUsage
from tests.storage.controller._harness import beyond, counter_ingestion, environment, pump_until

I1 = InstanceId(1)


async def test_what_a_source_finds_first_is_bound_at_its_creation_time() -> None:
    async with environment() as env:
        c = await env.controller()
        c.create_instance(I1)
        c.initialization_complete()
        c.allow_writes()
        created = int(time.time() * 1000) - 60_000  # a minute ago: far from any step's clock
        collections = counter_ingestion(I1, 10, tick_interval_ms=10, rows_per_tick=3)
        (source, _), (export, _) = collections
        with pytest.raises(InvalidUsage, match="register_ts"):
            await c.create_collections(collections, register_ts=-1)
        await c.create_collections(collections, register_ts=created)
        for id in (source, export):
            assert c.collection_frontiers(id).upper.as_option() == created
        assert await c.snapshot(export, created - 1) == []  # nothing before the creation
        c.connect_replica(I1, ReplicaId(1), await env.start_replica(7301))
        await pump_until(c, beyond(c, export, created + 1))
        first = await c.snapshot(export, created)
        assert sum(n for _, n in first) >= 3  # the first poll's rows, at the creation time
        await c.shutdown()
