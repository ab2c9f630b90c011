"""Materialized views: a dataflow's output written to its persist shard, exactly once.

A :class:`MaterializedViewSink` receives, after each step of its dataflow, the view's
consolidated updates of the step's interval ``[lower, upper)``. It keeps them in a buffer that
covers ``[shard upper, computed upper)`` and writes that buffer with
``compare_and_append(expected_upper = shard upper, new_upper = computed upper)``:

* **Appended**: the shard now holds the view up to the computed upper; the buffer empties.
* **UpperMismatch(current)**: another writer (a replica running the same view) won. Its data
  for ``[shard upper, current)`` is the same view — dataflows are deterministic and updates
  are consolidated per time — so the sink drops its own updates below ``current`` and, if it
  computed beyond ``current``, writes the rest from ``current`` on. The losers observe the new
  upper and carry on; every interval is written exactly once, so the shard always equals the
  view (no duplicated and no missing update).
* An ``Indeterminate`` failure is retried with the same idempotency token (a retry of an
  append that did commit is a no-op success).

Before ``AllowWrites`` (read-only mode) the sink computes but writes nothing; it observes the
shard's upper (another environment may be writing) and keeps its buffer from there on, so that
it can write at once when writes are allowed. The first write of a new view whose shard upper
is below the view's ``as_of`` covers ``[shard upper, computed upper)`` (the view holds nothing
before its ``as_of``).

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
from spate.repr.desc import TIME_COLUMN

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
        self._computed: Frontier = Antichain.of(as_of)
        self._shard_upper: Frontier = writer.upper
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
            while self._shard_upper.less_than(target) and not self._shard_upper.is_empty():
                self._append_once(target)
            return self._shard_upper

    def _observe(self, upper: Frontier) -> None:
        """The shard has (at least) ``upper``: forget buffered updates below it."""
        if not self._shard_upper.less_than(upper):
            return
        self._shard_upper = upper
        self._observe_written(upper)

    def _append_once(self, new_upper: Frontier) -> None:
        expected = self._shard_upper
        table = pa.concat_tables(self._buffer) if self._buffer else None
        (lower,) = expected.elements
        if table is not None:
            # Updates the shard already holds (another writer got there first) are not ours to
            # write again, and those from the new upper on are written next time.
            times = table.column(TIME_COLUMN)
            keep = pc.greater_equal(times, lower)
            if not new_upper.is_empty():
                keep = pc.and_(keep, pc.less(times, new_upper.elements[0]))
            table = table.filter(keep)
            if table.num_rows == 0:
                table = None
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
            self._observe_written(result.upper)
            return
        if not expected.less_than(result.current):
            raise InvariantViolation(
                f"materialized view {self.id}: shard upper {result.current} is not beyond the "
                f"upper {expected} observed before (a shard upper regressed)"
            )
        self.stats.lost_races += 1
        _log.debug(
            "collection=%s: another writer advanced the shard to %s (expected %s)",
            self.id,
            result.current,
            expected,
        )
        self._observe(result.current)

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
