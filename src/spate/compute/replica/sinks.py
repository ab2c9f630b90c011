"""Materialized views: a dataflow's output written to its persist shard, self-correcting.

A :class:`MaterializedViewSink` receives, after each step of its dataflow, the view's
consolidated updates of the step's interval ``[lower, upper)``; the first step's are the view's
contents at the dataflow's ``as_of`` (its snapshot), at time ``as_of``. It keeps them in a buffer
and writes with ``compare_and_append(expected_upper = shard upper, new_upper = computed upper)``.

**The shard always converges to the view.** A writer does not assume what the shard holds. Until
it knows, it is *unsynced*, and its first write is a **correction**: it reads every update the
shard holds (``S``, all below the shard upper ``U``) and writes, over ``[U, new upper)``,

    (the view's updates below the new upper, times advanced to ``max(U, as_of)``)
      − (``S``, at time ``max(U, as_of)``)

consolidated. After it, the shard's contents at every time from ``max(U, as_of)`` to the new
upper are exactly the view's, whatever the shard held before: the snapshot of a restarted
dataflow (as_of below, at, or beyond the shard's upper), stale rows a crash left behind, or the
writes of a lagging writer. Writing the view's plain updates is right only when the shard
already holds the view at ``U - 1`` — what a writer knows (*synced*) once

* its own write (a correction, or a plain write while synced) set the upper, or
* it observed that another writer set the upper to ``C > as_of``: every writer follows these
  rules and writes only once its computed upper is beyond its ``as_of``, so the shard holds
  the view at ``C - 1`` (dataflows are deterministic: every writer of a view computes the same
  updates at the same times).

So any number of restarted, duplicated or lagging writers converge: a sink never double-counts.
A synced writer that loses a race (**UpperMismatch(current)**) drops its updates below
``current`` and, if it computed beyond ``current``, writes the rest from ``current`` on. An
``Indeterminate`` failure is retried with the same idempotency token (a retry of an append that
did commit is a no-op success).

A writer writes nothing until its computed upper is beyond its ``as_of`` (its snapshot is
computed), so an upper set by a write is always beyond the writer's ``as_of``; the shard upper
of a restored view stays where it was until then. The times in ``[U, as_of)`` of a view restored
beyond its shard upper (its inputs were compacted past it) keep the old contents: they are not
computable any more.

Before ``AllowWrites`` (read-only mode) the sink computes but writes nothing; it observes the
shard's upper (another environment may be writing) and keeps its buffer from there on, so that
it can write at once when writes are allowed.

**Errors.** A view's sink has a second sink, for the view's errors shard
(:mod:`spate.persist.error_shard`), fed the dataflow's error updates of each step. A flush
writes the errors first, and the rows only up to the errors shard's upper, so that the rows'
upper is never ahead of the errors': a reader that sees the rows at ``t`` sees the errors there.

Methods are blocking (persist I/O) and serialised by a lock; the replica calls them on its
Spark worker thread right after a step.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

from spate.errors import Indeterminate, InvariantViolation
from spate.frontier.antichain import Antichain, Frontier
from spate.ids import GlobalId, IdGen, ShardId
from spate.persist.error_shard import error_updates
from spate.persist.state import Appended
from spate.persist.write import WriteHandle
from spate.repr.consolidate import advance_times, consolidate
from spate.repr.desc import DIFF_COLUMN, TIME_COLUMN

_log: Final = logging.getLogger("spate.compute.replica.sinks")

INDETERMINATE_RETRIES: Final = 8
READ_ONLY_REFRESH_S: Final = 0.5
"""How often a read-only sink reads the shard's upper (it learns what others wrote)."""
LOGGED_APPEND_ROWS: Final = 100_000
"""Appends at least this large are logged with their duration (a hydration's, mostly)."""


@dataclass
class SinkStats:
    appends: int = 0
    lost_races: int = 0
    rows_written: int = 0
    corrections: int = 0
    """Writes that read the shard's contents and wrote the difference (module docs)."""


class MaterializedViewSink:
    """Writes the view ``id`` to the shard behind ``writer`` (module docs)."""

    def __init__(
        self,
        id: GlobalId,
        writer: WriteHandle,
        *,
        as_of: int,
        ids: IdGen,
        errors: MaterializedViewSink | None = None,
    ) -> None:
        self.id = id
        self.errors = errors
        """The sink of the view's errors shard (module docs)."""
        self._writer = writer
        self._ids = ids
        self._lock = threading.Lock()
        self._buffer: list[pa.Table] = []
        self._as_of = as_of
        self._computed: Frontier = Antichain.of(as_of)
        self._shard_upper: Frontier = writer.upper
        self._synced = False
        """Whether the shard is known to hold the view at its upper - 1 (module docs)."""
        self._writes = False
        self._closed = False
        self._last_refresh = 0.0
        self.stats = SinkStats()

    @property
    def shard_id(self) -> ShardId:
        return self._writer.shard_id

    @property
    def shard_upper(self) -> Frontier:
        """The shard's upper as last observed (never ahead of the shard)."""
        return self._shard_upper

    @property
    def computed_upper(self) -> Frontier:
        return self._computed

    @property
    def synced(self) -> bool:
        """Whether the next write is the view's plain updates (else a correction)."""
        return self._synced

    @property
    def writes_allowed(self) -> bool:
        return self._writes

    def allow_writes(self) -> None:
        if self.errors is not None:
            self.errors.allow_writes()
        self._writes = True

    def add(self, updates: pa.Table, *, upper: Frontier, errors: pa.Table | None = None) -> None:
        """The view's updates up to ``upper`` (times from the previous upper on), and the
        dataflow's error updates of the same interval (record, time, diff)."""
        if self.errors is not None:
            table = pa.table({}) if errors is None else error_updates(*errors.columns)
            self.errors.add(table, upper=upper)
        with self._lock:
            if not self._computed.less_equal(upper):
                raise ValueError(
                    f"materialized view {self.id}: step upper {upper} is below {self._computed}"
                )
            if updates.num_rows:
                self._buffer.append(updates)
            self._computed = upper

    def flush(self) -> Frontier:
        """Write what is computed (or, read-only, observe the shard); return the shard upper.
        The errors first: the rows are written only up to the errors shard's upper."""
        limit: Frontier | None = None
        if self.errors is not None:
            limit = self.errors.flush()
        with self._lock:
            if self._closed:
                return self._shard_upper
            if not self._writes:
                now = time.monotonic()
                if now - self._last_refresh >= READ_ONLY_REFRESH_S:
                    self._last_refresh = now
                    self._observe(self._writer.fetch_recent_upper())
                return self._shard_upper
            target = self._computed if limit is None else self._computed.meet(limit)
            if target.less_equal(self._as_of):
                return self._shard_upper  # the snapshot is not computed yet (module docs)
            while self._shard_upper.less_than(target) and not self._shard_upper.is_empty():
                self._append_once(target)
            return self._shard_upper

    def _observe(self, upper: Frontier) -> None:
        """Another writer set the shard's upper to ``upper``. Beyond the ``as_of``, the shard
        holds the view there: forget buffered updates below it (module docs)."""
        if not self._shard_upper.less_than(upper):
            return
        self._shard_upper = upper
        if not upper.less_equal(self._as_of):
            self._synced = True
            self._observe_written(upper)

    def _plain(self, lower: int, new_upper: Frontier) -> pa.Table | None:
        """The buffered updates of ``[lower, new upper)``: those below ``lower`` the shard
        holds already, and those from the new upper on are written next time."""
        if not self._buffer:
            return None
        table = pa.concat_tables(self._buffer)
        times = table.column(TIME_COLUMN)
        keep = pc.greater_equal(times, lower)
        if not new_upper.is_empty():
            keep = pc.and_(keep, pc.less(times, new_upper.elements[0]))
        table = table.filter(keep)
        return table if table.num_rows else None

    def _correction(self, lower: int, new_upper: Frontier, held: pa.Table) -> pa.Table | None:
        """The view below the new upper minus ``held`` (what the shard holds), at times from
        ``max(lower, as_of)`` on (module docs)."""
        at = max(lower, self._as_of)
        schema = self._writer.schema
        desired = [b.cast(schema) for b in self._buffer]
        if desired and not new_upper.is_empty():
            bound = new_upper.elements[0]
            desired = [b.filter(pc.less(b.column(TIME_COLUMN), bound)) for b in desired]
        if not held.num_rows and lower <= self._as_of:
            # An empty shard (a new view): the view's updates as they are (each step's are
            # consolidated, and none is below the lower): no group-by over the whole snapshot.
            table = pa.concat_tables(desired) if desired else None
            return table if table is not None and table.num_rows else None
        if held.num_rows:
            idx = schema.get_field_index(DIFF_COLUMN)
            negated = held.set_column(idx, schema.field(idx), pc.negate(held.column(idx)))
            desired.append(negated)
        if not desired:
            return None
        table = consolidate(advance_times(pa.concat_tables(desired), at))
        return table if table.num_rows else None

    def _append_once(self, new_upper: Frontier) -> None:
        expected = self._shard_upper
        (lower,) = expected.elements
        if self._synced:
            table = self._plain(lower, new_upper)
        else:
            held_upper, held = self._writer.contents(expected)
            if held is None:  # another writer wrote since we last looked
                self._check_not_regressed(expected, held_upper)
                self.stats.lost_races += 1
                self._observe(held_upper)
                return
            table = self._correction(lower, new_upper, held)
            self.stats.corrections += 1
        token = self._ids.uuid()
        started = time.perf_counter()
        for attempt in range(INDETERMINATE_RETRIES + 1):
            try:
                result = self._writer.compare_and_append(
                    table, expected_upper=expected, new_upper=new_upper, idempotency_token=token
                )
                break
            except Indeterminate as e:
                if attempt == INDETERMINATE_RETRIES:
                    raise
                _log.info("collection=%s: append indeterminate (%s); retrying", self.id, e)
        if isinstance(result, Appended):
            if table is not None and table.num_rows >= LOGGED_APPEND_ROWS:
                _log.info(
                    "collection=%s: %d updates appended in %.2f s",
                    self.id,
                    table.num_rows,
                    time.perf_counter() - started,
                )
            self.stats.appends += 1
            self.stats.rows_written += 0 if table is None else table.num_rows
            self._shard_upper = result.upper
            self._synced = True
            self._observe_written(result.upper)
            return
        self._check_not_regressed(expected, result.current)
        self.stats.lost_races += 1
        _log.debug(
            "collection=%s: another writer advanced the shard to %s (expected %s)",
            self.id,
            result.current,
            expected,
        )
        self._observe(result.current)

    def _check_not_regressed(self, expected: Frontier, current: Frontier) -> None:
        if not expected.less_than(current):
            raise InvariantViolation(
                f"materialized view {self.id}: shard upper {current} is not beyond the "
                f"upper {expected} observed before (a shard upper regressed)"
            )

    def _observe_written(self, upper: Frontier) -> None:
        """The shard holds what we computed below ``upper``: keep only the updates after it."""
        t = upper.as_option()
        if t is None:
            self._buffer = []
            return
        kept = [b.filter(pc.greater_equal(b.column(TIME_COLUMN), t)) for b in self._buffer]
        self._buffer = [b for b in kept if b.num_rows]

    def renew_lease(self) -> None:
        """Keep the writer registered while the view has nothing to write (a heartbeat)."""
        if self.errors is not None:
            self.errors.renew_lease()
        with self._lock:
            if not self._closed:
                self._writer.heartbeat()

    def close(self) -> None:
        """Stop writing and unregister the writer."""
        if self.errors is not None:
            self.errors.close()
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._buffer = []
            try:
                self._writer.expire()
            except Exception as e:
                _log.info("collection=%s: expiring the writer failed: %s", self.id, e)
