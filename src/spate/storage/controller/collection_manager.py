"""Storage-managed collections: status histories, statistics, shard mapping, frontiers.

* **Append-only** collections (status histories) receive blind writes: rows are batched and
  appended at the current write time ``t = max(now, upper)`` with ``compare_and_append``; the
  upper of every registered collection is bumped on every :meth:`CollectionManager.tick`, even
  without rows. A lost race (someone else moved the upper) retries at the new upper: blind
  writes never fail on contention.
* **Differential** collections (statistics, shard mapping, frontiers) hold the *desired*
  contents in memory; each tick appends the difference between desired and what the shard holds
  at its upper minus one (read once when the collection is registered — this also resets a
  collection left behind by a previous controller to the desired state).

In read-only mode the manager keeps everything in memory and writes nothing (status rows are
kept until writes are allowed). All methods block (persist I/O): the controller runs ``tick``
in a thread.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from spate.clock import Clock
from spate.frontier.antichain import Antichain, Frontier
from spate.ids import GlobalId, IdGen, ShardId
from spate.persist.client import PersistClient
from spate.persist.state import UpperMismatch
from spate.persist.write import WriteHandle
from spate.repr.arrow import table_to_updates, updates_to_table
from spate.repr.desc import RelationDesc
from spate.repr.types import Row
from spate.storage.controller.introspection import APPEND_ONLY
from spate.storage.controller.types import IntrospectionKind

_log: Final = logging.getLogger("spate.storage.collection_manager")
_ATTEMPTS: Final = 5


@dataclass
class ManagedCollection:
    id: GlobalId
    kind: IntrospectionKind
    shard: ShardId
    desc: RelationDesc
    writer: WriteHandle | None = None
    pending: list[Row] = field(default_factory=list)
    written: Counter[Row] | None = None

    @property
    def append_only(self) -> bool:
        return self.kind in APPEND_ONLY


class CollectionManager:
    """Writes the storage-managed collections (see the module docs)."""

    def __init__(
        self, persist: PersistClient, clock: Clock, ids: IdGen, *, read_only: bool
    ) -> None:
        self._persist = persist
        self._clock = clock
        self._ids = ids
        self.read_only = read_only
        self._collections: dict[GlobalId, ManagedCollection] = {}
        self._desired: dict[IntrospectionKind, Counter[Row]] = {}
        self._pending_by_kind: dict[IntrospectionKind, list[Row]] = {}
        # ``tick`` runs in a thread, from the driver's maintenance and from an explicit refresh.
        self._writing = threading.Lock()
        self._closed = False

    def register(
        self, id: GlobalId, kind: IntrospectionKind, shard: ShardId, desc: RelationDesc
    ) -> None:
        c = ManagedCollection(id, kind, shard, desc)
        if c.append_only:
            c.pending.extend(self._pending_by_kind.get(kind, ()))
        self._collections[id] = c

    def unregister(self, id: GlobalId) -> None:
        c = self._collections.pop(id, None)
        if c is not None and c.writer is not None:
            try:
                c.writer.expire()
            except Exception:
                _log.debug(
                    "collection manager: expiring the writer of %s failed", id, exc_info=True
                )

    def kinds(self) -> set[IntrospectionKind]:
        return {c.kind for c in self._collections.values()}

    def append(self, kind: IntrospectionKind, rows: Iterable[Row]) -> None:
        """Queue rows for every append-only collection of ``kind``."""
        rows = list(rows)
        targets = [c for c in self._collections.values() if c.kind is kind]
        if not targets:
            # Kept (bounded) until a collection of the kind is registered.
            buf = self._pending_by_kind.setdefault(kind, [])
            buf.extend(rows)
            del buf[: max(0, len(buf) - 10_000)]
        for c in targets:
            c.pending.extend(rows)

    def set_desired(self, kind: IntrospectionKind, rows: Iterable[Row]) -> None:
        """The whole desired contents of the differential collections of ``kind``."""
        self._desired[kind] = Counter(rows)

    def desired(self, kind: IntrospectionKind) -> Counter[Row]:
        return Counter(self._desired.get(kind, Counter()))

    # -- writing --------------------------------------------------------------------------------

    def tick(self) -> dict[GlobalId, Frontier]:
        """Write every collection once; return the new uppers. No-op in read-only mode."""
        if self.read_only:
            return {}
        with self._writing:
            if self._closed:
                return {}
            return self._tick()

    def _tick(self) -> dict[GlobalId, Frontier]:
        out: dict[GlobalId, Frontier] = {}
        for c in list(self._collections.values()):
            try:
                upper = self._write(c)
            except Exception as e:  # one broken collection must not stop the others
                _log.warning("collection manager: writing %s failed: %s", c.id, e)
                continue
            if upper is not None:
                out[c.id] = upper
        return out

    def _open(self, c: ManagedCollection) -> WriteHandle:
        if c.writer is None:
            c.writer = self._persist.open_writer(c.shard, c.desc)
            c.writer.fetch_recent_upper()
        return c.writer

    def _current(self, c: ManagedCollection, writer: WriteHandle) -> Counter[Row]:
        upper = writer.upper.as_option()
        if upper is None or upper == 0:
            return Counter()
        reader = self._persist.open_leased_reader(c.shard, c.desc)
        try:
            out: Counter[Row] = Counter()
            for row, _t, diff in table_to_updates(reader.snapshot(upper - 1)):
                out[row] += diff
            return +out
        finally:
            reader.expire()

    def _write(self, c: ManagedCollection) -> Frontier | None:
        writer = self._open(c)
        if c.written is None and not c.append_only:
            c.written = self._current(c, writer)
        for _ in range(_ATTEMPTS):
            upper = writer.upper.as_option()
            if upper is None:
                return None
            time = max(self._clock.now_millis(), upper)
            # What is written is this snapshot of the desired rows (the event loop may state
            # new ones while this runs in a thread).
            desired = Counter(self._desired.get(c.kind, Counter()))
            if c.append_only:
                ups = [(row, time, 1) for row in c.pending]
            else:
                assert c.written is not None
                diff = Counter(desired)
                diff.subtract(c.written)
                ups = [(row, time, n) for row, n in diff.items() if n != 0]
            table = updates_to_table(c.desc, ups) if ups else None
            result = writer.compare_and_append(
                table,
                expected_upper=writer.upper,
                new_upper=Antichain.of(time + 1),
                idempotency_token=self._ids.uuid(),
            )
            if isinstance(result, UpperMismatch):
                if not c.append_only:
                    c.written = self._current(c, writer)
                continue
            if c.append_only:
                del c.pending[: len(ups)]
            else:
                c.written = desired
            return writer.upper
        _log.warning("collection manager: %s lost %d races in a row", c.id, _ATTEMPTS)
        return None

    def close(self) -> None:
        """Stop writing (waits for a write in progress in another thread to finish)."""
        with self._writing:
            self._closed = True
        for id in list(self._collections):
            self.unregister(id)
