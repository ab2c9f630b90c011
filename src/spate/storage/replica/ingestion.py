"""Running one ingestion: reclocking a source into persist, exactly once.

The source's resume point is *bound* to timestamps in the ingestion's remap collection; the data
follows the bindings. Every step:

1. poll the source from the current point ``R`` for new updates up to ``R'``;
2. bind: ``compare_and_append`` the remap shard from its upper ``u`` to ``t + 1`` with the rows
   of ``R`` retracted and those of ``R'`` inserted at ``t = max(now, u)`` — **the commit
   point**: losing the race (another writer advanced the remap) means this runner's view is
   stale, and it rehydrates;
3. write each export: the updates of ``[R, R')`` for it at time ``t``, with persist's
   ``append(lower=u, upper=t+1)``, which is idempotent for identical data;
4. tell the source that ``R'`` is durable (``committed``): PostgreSQL advances its slot.

A step without new data still binds (the point is unchanged) so uppers follow the wall clock.
The first data (the point still at the source's minimum) is bound at the upper instead: the
controller creates a source's collections with their upper at the time of the creation, so a
snapshot is readable at every time from the source's creation on.

**Rehydration** (start, restart, lost race): every export whose upper ``u_e`` is behind the
remap's upper ``u_r`` is caught up by replaying the bindings in ``[u_e, u_r)``: for each binding
``(t, R_t)`` after ``R_{t-}``, ``reader.replay(R_{t-}, R_t)`` re-derives exactly the updates the
first run wrote (sources are deterministic), and they are appended at ``t``. So a crash at any
point leaves every export equal, at every time below its upper, to what an uninterrupted run
wrote: no duplicate, no gap. The remap history of ``[min u_e - 1, u_r)`` must still be readable;
the controller holds the remap collection's since at or below its exports' uppers minus one,
and the runner keeps a leased reader there too.

A source whose state is a function of its outputs (``RestoresFromOutputs``: an UPSERT Kafka
source's key state) is handed, before the replay, the exports' contents at ``min u_e - 1``,
where the remap binds the point the replay starts from; the runner keeps leased readers on
those exports at ``min u_e - 1`` as well, so that a restarted runner can read them there.

All methods block (persist and sources are synchronous); the replica runs them in threads.
Writes happen only in :meth:`rehydrate` and :meth:`step`, which the replica calls only after
``AllowWrites``.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Final

import pyarrow as pa

from spate.clock import Clock
from spate.errors import Indeterminate, InvariantViolation
from spate.frontier.antichain import Antichain, Frontier
from spate.ids import GlobalId, IdGen
from spate.persist.client import PersistClient
from spate.persist.errors import AsOfBeforeSince
from spate.persist.read import ListenUpdates, ReadHandle
from spate.persist.state import UpperMismatch
from spate.persist.write import WriteHandle
from spate.protocol.storage import SourceStatistics
from spate.protocol.storage_desc import IngestionDescription, SourceExport
from spate.repr.arrow import updates_to_table
from spate.repr.desc import DIFF_COLUMN, TIME_COLUMN
from spate.repr.types import Row
from spate.storage.replica.bindings import Binding, binding_history, contents_of, rows_of
from spate.storage.sources.source import (
    ReportsCoverage,
    ReportsFailedOutputs,
    RestoresFromOutputs,
    SourceChunk,
    SourceError,
    SourceReader,
)

_log: Final = logging.getLogger("spate.storage.ingestion")
_CAA_ATTEMPTS: Final = 8


@dataclass
class IngestionCounters:
    """Cumulative counts of one ingestion (reported as ``SourceStatistics``)."""

    messages_received: int = 0
    bytes_received: int = 0
    updates_staged: int = 0
    updates_committed: int = 0
    snapshot_committed: bool = False
    per_export: dict[GlobalId, int] = field(default_factory=dict)


def with_time(table: pa.Table, time: int, schema: pa.Schema) -> pa.Table:
    """A chunk table (data columns and ``_diff``) at ``time``, in the updates schema."""
    times = pa.repeat(pa.scalar(time, pa.int64()), table.num_rows)
    idx = table.schema.get_field_index(DIFF_COLUMN)
    out = table.add_column(idx, pa.field(TIME_COLUMN, pa.int64(), nullable=False), times)
    return out.cast(schema)


class IngestionRunner:
    """Reclocks one ingestion's source into its export shards (see the module docs)."""

    def __init__(
        self,
        id: GlobalId,
        description: IngestionDescription,
        *,
        reader: SourceReader[Any],
        persist: PersistClient,
        clock: Clock,
        ids: IdGen,
    ) -> None:
        remap = description.remap
        if remap.desc != reader.progress_desc:
            raise SourceError(
                f"ingestion {id}: remap collection {remap.id} has schema {remap.desc}, the "
                f"source records its progress as {reader.progress_desc}"
            )
        self.id = id
        self.description = description
        self._reader = reader
        self._persist = persist
        self._clock = clock
        self._ids = ids
        self._remap_writer: WriteHandle | None = None
        self._remap_reader: ReadHandle | None = None
        self._writers: dict[GlobalId, WriteHandle] = {}
        self._export_readers: dict[GlobalId, ReadHandle] = {}  # RestoresFromOutputs only
        self._point: Any = reader.minimum()
        self._upper: Frontier = Antichain.minimum()
        self._needs_rehydration = True
        self.counters = IngestionCounters()

    @property
    def reader(self) -> SourceReader[Any]:
        return self._reader

    # -- frontiers ------------------------------------------------------------------------------

    def collection_ids(self) -> tuple[GlobalId, ...]:
        return self.description.collection_ids(self.id)

    def read_uppers(self) -> dict[GlobalId, Frontier]:
        """The uppers of every collection of the ingestion, read from persist (no writes).

        The ingestion's own id reports the remap's upper when it is not the remap itself.
        """
        remap = self.description.remap
        out = {remap.id: self._persist.fetch_state(remap.shard).upper}
        for e in self.description.exports:
            out[e.id] = self._persist.fetch_state(e.shard).upper
        out.setdefault(self.id, out[remap.id])
        return out

    def uppers(self) -> dict[GlobalId, Frontier]:
        """The uppers as this runner last wrote them (``read_uppers`` before it ran)."""
        if self._remap_writer is None:
            return self.read_uppers()
        out = {self.description.remap.id: self._remap_writer.upper}
        for eid, w in self._writers.items():
            out[eid] = w.upper
        out.setdefault(self.id, self._remap_writer.upper)
        return out

    # -- opening and rehydration ----------------------------------------------------------------

    def _open(self) -> None:
        if self._remap_writer is not None:
            return
        remap = self.description.remap
        self._remap_writer = self._persist.open_writer(remap.shard, remap.desc)
        self._remap_reader = self._persist.open_leased_reader(remap.shard, remap.desc)
        for e in self.description.exports:
            self._writers[e.id] = self._persist.open_writer(e.shard, e.desc)
        if isinstance(self._reader, RestoresFromOutputs):
            for e in self.description.exports:
                self._export_readers[e.id] = self._persist.open_leased_reader(e.shard, e.desc)

    def rehydrate(self) -> None:
        """Catch every export up with the remap collection (see the module docs)."""
        self._open()
        assert self._remap_writer is not None and self._remap_reader is not None
        remap_upper = self._remap_writer.fetch_recent_upper()
        export_uppers = {eid: w.fetch_recent_upper() for eid, w in self._writers.items()}
        lowest = remap_upper
        for eid, u in export_uppers.items():
            if remap_upper.less_than(u):
                raise InvariantViolation(
                    f"ingestion {self.id}: export {eid} has upper {u}, beyond the remap "
                    f"collection's upper {remap_upper}: data without a binding"
                )
            lowest = lowest.meet(u)
        if remap_upper.is_empty():
            raise SourceError(f"ingestion {self.id}: its remap collection is closed")
        start, bindings = self._history(lowest, remap_upper)
        point = self._reader.point_from_rows(list(start))
        self._restore(point, lowest)
        for binding in bindings:
            target = self._reader.point_from_rows(list(binding.rows))
            chunk = self._reader.replay(point, target)
            for e in self.description.exports:
                writer = self._writers[e.id]
                if writer.upper.less_equal(binding.time):
                    self._append(e, writer, chunk, binding.time)
            point = target
        for w in self._writers.values():
            if w.upper.less_than(remap_upper):
                w.append(None, lower=w.upper, upper=remap_upper)
        self._point = point
        self._upper = remap_upper
        self._reader.committed(point)
        self.counters.snapshot_committed = self._point != self._reader.minimum()
        self._hold_remap()
        self._needs_rehydration = False

    def _restore(self, point: Any, lowest: Frontier) -> None:
        """Hand a reader whose state is a function of its outputs (``RestoresFromOutputs``)
        its exports' contents at ``point``: their contents at ``lowest - 1``, where the remap
        binds ``point``. Exports no longer readable there (their since is beyond) leave the
        reader to rebuild its state from upstream."""
        reader = self._reader
        if not isinstance(reader, RestoresFromOutputs) or not reader.needs_outputs(point):
            return
        t = lowest.as_option()
        if t is None or t == 0:
            return
        outputs: dict[str, pa.Table] = {}
        for e in self.description.exports:
            try:
                snapshot = self._export_readers[e.id].snapshot(t - 1)
            except AsOfBeforeSince:
                _log.info(
                    "ingestion %s: export %s is not readable at %d; its source rebuilds its "
                    "state from upstream",
                    self.id,
                    e.id,
                    t - 1,
                )
                return
            outputs[e.reference] = snapshot.drop_columns([TIME_COLUMN])
        if reader.restore(point, outputs):
            _log.info("ingestion %s: source state restored from its outputs at %d", self.id, t - 1)

    def _history(self, lowest: Frontier, upper: Frontier) -> tuple[tuple[Row, ...], list[Binding]]:
        """The remap contents at ``lowest - 1`` and the bindings in ``[lowest, upper)``."""
        assert self._remap_reader is not None
        lo = lowest.as_option()
        hi = upper.as_option()
        assert lo is not None and hi is not None
        if hi == 0:
            return (), []
        if lo == hi:
            return rows_of(contents_of(self._remap_reader.snapshot(hi - 1))), []
        as_of = max(lo - 1, 0)
        start = contents_of(self._remap_reader.snapshot(as_of)) if lo > 0 else Counter()
        listener = self._remap_reader.listener(as_of)
        tables: list[pa.Table] = []
        if lo == 0:  # a binding at time 0 is part of the history, not of the start
            tables.append(self._remap_reader.snapshot(0))
        while listener.frontier.less_than(upper):
            for event in listener.poll(timeout=30.0):
                if isinstance(event, ListenUpdates):
                    tables.append(event.updates)
        return rows_of(start), binding_history(start, tables, below=hi)

    def _hold_remap(self) -> None:
        """Keep the remap readable at every export's upper minus one, and, for a source that
        restores its state from its outputs, the exports too (so a restart can read them
        where it resumes)."""
        assert self._remap_reader is not None
        lowest = self._remap_writer.upper if self._remap_writer is not None else self._upper
        for w in self._writers.values():
            lowest = lowest.meet(w.upper)
        t = lowest.as_option()
        if t is not None and t > 0:
            self._remap_reader.downgrade_since(Antichain.of(t - 1))
            for r in self._export_readers.values():
                r.downgrade_since(Antichain.of(t - 1))

    def _append(
        self, export: SourceExport, writer: WriteHandle, chunk: SourceChunk[Any], time: int
    ) -> None:
        table = chunk.updates.get(export.reference)
        data = None
        if table is not None and table.num_rows:
            data = with_time(table, time, writer.schema)
        writer.append(data, lower=writer.upper, upper=Antichain.of(time + 1))
        n = 0 if data is None else data.num_rows
        self.counters.updates_committed += n
        self.counters.per_export[export.id] = self.counters.per_export.get(export.id, 0) + n

    # -- the steady state -----------------------------------------------------------------------

    @property
    def needs_rehydration(self) -> bool:
        return self._needs_rehydration

    def step(self) -> None:
        """Poll, bind and write once (see the module docs). Rehydrates first if needed."""
        try:
            if self._needs_rehydration:
                self.rehydrate()
            self._step()
        except BaseException:
            self._needs_rehydration = True
            raise

    def _step(self) -> None:
        assert self._remap_writer is not None
        now = self._clock.now_millis()
        upper = self._upper.as_option()
        assert upper is not None
        time = max(now, upper, 1)
        chunk = self._reader.poll(self._point, now_millis=now)
        if chunk is not None and upper > 0 and self._point == self._reader.minimum():
            # What the source finds first (a snapshot, the files present) is bound at the
            # upper its collections were created with: the time of the source's creation,
            # so that every read at or after that time sees it.
            time = upper
        new_point = self._point if chunk is None else chunk.upper
        if chunk is not None:
            self.counters.messages_received += chunk.num_updates()
            self.counters.bytes_received += chunk.num_bytes()
            self.counters.updates_staged += chunk.num_updates()
        remap_updates = self._remap_updates(self._point, new_point, time)
        new_upper = Antichain.of(time + 1)
        token = self._ids.uuid()
        result = None
        for attempt in range(_CAA_ATTEMPTS):
            try:
                result = self._remap_writer.compare_and_append(
                    remap_updates,
                    expected_upper=self._upper,
                    new_upper=new_upper,
                    idempotency_token=token,
                )
                break
            except Indeterminate:
                if attempt + 1 == _CAA_ATTEMPTS:
                    raise
        if isinstance(result, UpperMismatch):
            _log.info(
                "ingestion %s: remap upper moved to %s (expected %s); rehydrating",
                self.id,
                result.current,
                self._upper,
            )
            self._needs_rehydration = True
            return
        if chunk is not None:
            for e in self.description.exports:
                self._append(e, self._writers[e.id], chunk, time)
        else:
            for w in self._writers.values():
                w.append(None, lower=self._upper, upper=new_upper)
        self._point = new_point
        self._upper = new_upper
        self._reader.committed(new_point)
        if new_point != self._reader.minimum():
            self.counters.snapshot_committed = True
        self._hold_remap()

    def _remap_updates(self, old: Any, new: Any, time: int) -> pa.Table | None:
        if old == new:
            return None
        before = Counter(self._reader.progress_rows(old))
        after = Counter(self._reader.progress_rows(new))
        ups: list[tuple[Row, int, int]] = [(r, time, -n) for r, n in (before - after).items()]
        ups += [(r, time, n) for r, n in (after - before).items()]
        if not ups:
            return None
        return updates_to_table(self.description.remap.desc, ups)

    # -- reporting and shutdown -----------------------------------------------------------------

    def statistics(self) -> list[SourceStatistics]:
        c = self.counters
        offset = _offset(self._point)
        committed = offset
        if isinstance(self._reader, ReportsCoverage) and offset is not None:
            committed = max(offset, self._reader.covered_offset())
        out = [
            SourceStatistics(
                id=self.id,
                messages_received=c.messages_received,
                bytes_received=c.bytes_received,
                updates_staged=c.updates_staged,
                updates_committed=c.updates_committed,
                snapshot_committed=c.snapshot_committed,
                offset_known=committed,
                offset_committed=committed,
            )
        ]
        for e in self.description.exports:
            n = c.per_export.get(e.id, 0)
            out.append(
                SourceStatistics(
                    id=e.id,
                    updates_staged=n,
                    updates_committed=n,
                    snapshot_committed=c.snapshot_committed,
                )
            )
        return out

    def failed_exports(self) -> dict[GlobalId, str]:
        """The exports whose output stopped for good (a MySQL table changed upstream) as of
        the point written so far, with why; the source's other exports go on."""
        if self._needs_rehydration or not isinstance(self._reader, ReportsFailedOutputs):
            return {}
        failed = self._reader.failed_outputs(self._point)
        return {
            e.id: failed[e.reference] for e in self.description.exports if e.reference in failed
        }

    def close(self) -> None:
        """Release the persist handles (leases) and the source."""
        for h in [self._remap_writer, *self._writers.values()]:
            if h is not None:
                try:
                    h.expire()
                except Exception:  # a closing runner must not fail on a lost lease
                    _log.debug("ingestion %s: expiring a writer failed", self.id, exc_info=True)
        for r in [self._remap_reader, *self._export_readers.values()]:
            if r is None:
                continue
            try:
                r.expire()
            except Exception:
                _log.debug("ingestion %s: expiring a reader failed", self.id, exc_info=True)
        self._export_readers = {}
        self._remap_writer = None
        self._remap_reader = None
        self._writers = {}
        self._needs_rehydration = True
        self._reader.close()


def _offset(point: object) -> int | None:
    if isinstance(point, int):
        return point
    if isinstance(point, (frozenset, set)):
        return len(point)
    if isinstance(point, tuple) and all(isinstance(p, tuple) and len(p) == 2 for p in point):
        return sum(int(o) for _, o in point)  # Kafka: records read over all partitions
    return None
