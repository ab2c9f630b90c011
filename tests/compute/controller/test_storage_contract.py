"""The compute controller over the real storage controller (tables, in-memory persist): the
``StorageCollections`` contract as the storage controller implements it, not only by the test double."""

from __future__ import annotations

import pytest

from spate.compute.controller import CollectionMissing
from spate.frontier import Antichain, ReadPolicy
from spate.ids import GlobalId
from spate.protocol.compute import CreateDataflow, Frontiers, Schedule
from tests.storage.controller._harness import TABLE_DESC, beyond, environment, pump_until, table

from .harness import I1, R1, Harness, f, index_dataflow

IDX = GlobalId.user(50)


async def test_compute_dataflows_hold_real_storage_collections() -> None:
    async with environment() as env:
        storage = await env.controller()
        try:
            tid, desc = table(10)
            await storage.create_collections([(tid, desc)])
            await storage.append([(tid, [((1, "a"), 0, 1)], Antichain.of(5))])
            await pump_until(storage, beyond(storage, tid, 4))
            h = Harness(storage=storage)
            h.add_replica(R1)
            h.controller.create_dataflow(I1, index_dataflow(tid, IDX, 2))
            # The table's own policy would compact it as far as its upper allows.
            storage.set_read_policy([(tid, ReadPolicy.lag_writes_by(0, 1))])
            (create,) = h.replica(R1).of(CreateDataflow)
            src = create.dataflow.source_imports[0]  # type: ignore[attr-defined]
            assert src.shard == storage.collection_metadata(tid).shard
            assert src.desc == TABLE_DESC and src.upper == f(5)
            assert Schedule(IDX) in h.replica(R1).commands  # the table's upper 5 > as_of 2
            assert storage.collection_frontiers(tid).since.less_equal(f(2))

            with pytest.raises(CollectionMissing, match="u99"):
                h.controller.create_dataflow(
                    I1, index_dataflow(GlobalId.user(99), GlobalId.user(51), 2)
                )

            # The replica moves on; the dependency and input holds follow, and storage compacts.
            h.controller.set_read_policy(I1, [(IDX, ReadPolicy.lag_writes_by(0, 1))])
            h.respond(R1, Frontiers(IDX, f(4), f(4), f(4)))
            h.maintain()
            assert storage.collection_frontiers(tid).since == f(4)

            # Dropped and reported gone: compute holds nothing on the table any more.
            h.controller.drop_collections(I1, [IDX])
            empty = Antichain.empty()
            h.respond(R1, Frontiers(IDX, empty, empty, empty))
            h.maintain()
            assert IDX not in h.inst.collections
            await storage.append([(tid, [], Antichain.of(9))])
            await pump_until(storage, beyond(storage, tid, 8))
            assert storage.collection_frontiers(tid).since == f(9)
        finally:
            await storage.shutdown()
