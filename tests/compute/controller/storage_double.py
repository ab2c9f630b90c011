"""A test double of the storage side (``StorageCollections``) for compute controller tests.

It keeps, per storage collection, a ``MutableAntichain`` of read capabilities: one *implied*
capability that the test moves with :meth:`FakeStorage.allow_compaction` (standing in for the
storage controller's read policy) plus every hold handed out. Hold changes are applied
synchronously and checked (a negative count or a capability added below the since raises,
failing the test). ``since`` = frontier of the capabilities; ``upper`` moves with
:meth:`FakeStorage.advance_upper` and never regresses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from spate.compute.controller.storage import StorageCollectionMetadata, StorageFrontiers
from spate.frontier import Antichain, ChangeBatch, Frontier, MutableAntichain, ReadHold
from spate.ids import GlobalId, SeededIdGen, ShardId
from spate.repr.desc import RelationDesc


class StorageCollectionUnknown(KeyError):
    pass


@dataclass
class _Collection:
    meta: StorageCollectionMetadata
    caps: MutableAntichain[int]
    implied: Frontier
    upper: Frontier
    holds_issued: int = 0
    changes: list[ChangeBatch[int]] = field(default_factory=list)


class FakeStorage:
    def __init__(self, seed: int = 0) -> None:
        self._ids = SeededIdGen(seed)
        self.collections: dict[GlobalId, _Collection] = {}

    def add_collection(
        self, id: GlobalId, desc: RelationDesc, *, since: int = 0, upper: int = 0
    ) -> None:
        caps: MutableAntichain[int] = MutableAntichain([(since, 1)])
        meta = StorageCollectionMetadata(id, ShardId.new(self._ids), desc)
        self.collections[id] = _Collection(meta, caps, Antichain.of(since), Antichain.of(upper))

    # -- test controls -------------------------------------------------------------------------

    def advance_upper(self, id: GlobalId, upper: int | None) -> None:
        c = self.collections[id]
        new = Antichain.empty() if upper is None else Antichain.of(upper)
        assert c.upper.less_equal(new), f"storage upper of {id} cannot regress"
        c.upper = new

    def allow_compaction(self, id: GlobalId, since: int | None) -> None:
        """Move the storage-side implied capability (what a read policy would do)."""
        c = self.collections[id]
        new = Antichain.empty() if since is None else Antichain.of(since)
        assert c.implied.less_equal(new)
        changes: ChangeBatch[int] = ChangeBatch()
        for t in c.implied:
            changes.update(t, -1)
        for t in new:
            changes.update(t, 1)
        c.implied = new
        c.caps.update_iter(changes)

    def since(self, id: GlobalId) -> Frontier:
        return self.collections[id].caps.frontier()

    def hold_counts(self, id: GlobalId) -> list[tuple[int, int]]:
        """Every capability of ``id`` except the implied one: ``(time, count)``."""
        c = self.collections[id]
        counts = dict(c.caps.counts())
        for t in c.implied:
            counts[t] -= 1
        return sorted((t, n) for t, n in counts.items() if n)

    # -- StorageCollections ---------------------------------------------------------------------

    def acquire_read_holds(self, ids: Sequence[GlobalId]) -> list[ReadHold]:
        for id in ids:
            if id not in self.collections:
                raise StorageCollectionUnknown(id)
        holds = []
        for id in ids:
            c = self.collections[id]
            since = c.caps.frontier()
            c.caps.update_iter([(t, 1) for t in since])
            c.holds_issued += 1
            holds.append(ReadHold(id, since, self._changes))
        return holds

    def collection_frontiers(self, id: GlobalId) -> StorageFrontiers:
        c = self.collections.get(id)
        if c is None:
            raise StorageCollectionUnknown(id)
        return StorageFrontiers(since=c.caps.frontier(), upper=c.upper)

    def collection_metadata(self, id: GlobalId) -> StorageCollectionMetadata:
        c = self.collections.get(id)
        if c is None:
            raise StorageCollectionUnknown(id)
        return c.meta

    def _changes(self, id: GlobalId, changes: ChangeBatch[int]) -> None:
        c = self.collections[id]
        c.changes.append(changes.copy())
        c.caps.update_iter(changes)
