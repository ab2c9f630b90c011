"""``WriteHandle``: appends to a shard.

A writer is registered in the shard state with a lease; every append (even an empty one)
renews it, and :meth:`WriteHandle.heartbeat` renews it explicitly. A writer that stays silent
longer than its lease is expired by the next state change of anyone; its next call raises
``LeaseExpired``. :meth:`WriteHandle.expire` unregisters it on shutdown.

``compare_and_append(updates, *, expected_upper, new_upper, idempotency_token)`` atomically
checks ``shard upper == expected_upper``, adds the updates as one batch and sets the upper to
``new_upper``. It returns :class:`Appended` or :class:`UpperMismatch` (a value: another writer
won). Usage errors (nothing written): ``InvalidBounds`` (``new_upper < expected_upper``),
``UpdateNotBeyondLower`` (a time ``< expected_upper``), ``UpdateBeyondUpper`` (a time
``>= new_upper``), ``SchemaMismatch``. ``Indeterminate`` means it may or may not have committed:
retry with the **same** ``idempotency_token`` — if the first attempt committed, the retry is a
no-op success (``deduplicated=True``) even if the upper has moved on since; if it did not and
someone else advanced the upper, the retry returns ``UpperMismatch``.

The batch blob is durable before the CaS that references it; a CaS that loses deletes it.

A handle is not meant to be shared by concurrent callers; calls are serialised by a lock.

**Maintenance** (compaction and GC) follows a committed append. With
``PersistConfig.background_maintenance`` it runs on the client's maintenance thread after the
append has returned: appends in a row that find a pass still queued share it (it starts from
the oldest state they saw), and an append after which there is nothing to compact and no GC
due (``maintenance_due``, a look at the cached state) queues none. It runs only while the
writer is registered, because GC keeps the unreferenced blobs of registered writers only:
:meth:`WriteHandle.expire` waits for a running pass and drops a queued one before unregistering
the writer. Its GC, which deletes this writer's own unreferenced blobs, holds the handle's
lock, so no append of it is in flight.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections.abc import Callable
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

from spate.errors import Indeterminate, SchemaMismatch
from spate.frontier.antichain import Antichain, Frontier
from spate.ids import ShardId, WriterId
from spate.persist import latency_trace
from spate.persist._shard import ShardContext, wait_for_upper_past
from spate.persist.batch import encode_part, make_part
from spate.persist.crash import crash_point
from spate.persist.errors import (
    CorruptBatch,
    InvalidAppend,
    InvalidBounds,
    UpdateBeyondUpper,
    UpdateNotBeyondLower,
)
from spate.persist.gc import GcReport
from spate.persist.machine import Applied
from spate.persist.maintenance import maintenance_due, run_maintenance
from spate.persist.state import (
    Appended,
    Apply,
    BatchPart,
    HollowBatch,
    ShardState,
    UpperMismatch,
    compare_and_append,
    expire_writer,
    heartbeat_writer,
)
from spate.repr.arrow import updates_schema, validate_table
from spate.repr.desc import DIFF_COLUMN, TIME_COLUMN, RelationDesc

_log: Final = logging.getLogger("spate.persist.write")

__all__ = ["Appended", "UpperMismatch", "WriteHandle"]

_CONTENTS_ATTEMPTS: Final = 8
"""Reads of a shard's contents in a row that may find a part already collected."""


def _check_frontier(name: str, f: object) -> Frontier:
    if not isinstance(f, Antichain):
        raise TypeError(f"{name} must be an Antichain frontier, got {type(f).__name__}")
    if len(f) > 1:
        raise TypeError(f"{name} must be a frontier of at most one time, got {f}")
    return f


class WriteHandle:
    """A registered writer of one shard. Open with ``PersistClient.open_writer``."""

    def __init__(
        self, ctx: ShardContext, writer_id: WriterId, desc: RelationDesc, upper: Frontier
    ) -> None:
        self._ctx = ctx
        self.writer_id = writer_id
        self.desc = desc
        self.schema = updates_schema(desc)
        self._upper = upper
        self._lock = threading.Lock()
        self._maintaining = threading.Lock()
        self._maintaining_queue = threading.Lock()
        """Held while a maintenance pass runs."""
        self._queued: ShardState | None = None
        """The state before the oldest append a queued background pass covers."""
        self._expired = False

    @property
    def shard_id(self) -> ShardId:
        return self._ctx.shard_id

    @property
    def upper(self) -> Frontier:
        """This handle's view of the upper (at most the shard's; refreshed by every write)."""
        return self._upper

    def fetch_recent_upper(self) -> Frontier:
        """The shard's upper, read from Consensus now (not linearized with other writes)."""
        state = self._ctx.machine.fetch()
        self._upper = self._upper.join(state.upper)
        return state.upper

    def contents(self, expected_upper: Frontier) -> tuple[Frontier, pa.Table | None]:
        """Every update the shard holds (all below its upper), read now, if its upper is
        ``expected_upper``; else ``None`` (nothing fetched). Returns the upper too.

        A self-correcting writer (:mod:`spate.compute.replica.sinks`) subtracts them from what
        it computed. No read hold is needed: every update below the upper is in the state's
        batches, whatever the since. A part that compaction replaced and GC deleted between
        fetching the state and the part is a missing blob that the next state no longer
        references: read again from that state (a missing blob still referenced is
        ``CorruptBatch``)."""
        ctx = self._ctx
        for _ in range(_CONTENTS_ATTEMPTS):
            state = ctx.machine.fetch()
            if state.upper != expected_upper:
                self._upper = self._upper.join(state.upper)
                return state.upper, None
            parts = [p for b in state.batches for p in b.parts]
            try:
                tables = ctx.fetch_parts(parts, self.schema)
            except CorruptBatch as e:
                if e.key in ctx.machine.fetch().part_keys():
                    raise
                continue
            self._upper = self._upper.join(state.upper)
            if not tables:
                return state.upper, self.schema.empty_table()
            return state.upper, pa.concat_tables(tables)
        raise Indeterminate(
            f"shard {self.shard_id}: its batches changed under {_CONTENTS_ATTEMPTS} reads of "
            "its contents in a row"
        )

    # -- validation -----------------------------------------------------------------------------

    def _prepare(
        self, updates: pa.Table | None, lower: Frontier, upper: Frontier
    ) -> pa.Table | None:
        sid = str(self.shard_id)
        lower = _check_frontier("expected_upper (lower)", lower)
        upper = _check_frontier("new_upper", upper)
        if not lower.less_equal(upper):
            raise InvalidBounds(sid, lower, upper)
        if updates is None:
            return None
        if not isinstance(updates, pa.Table):
            raise TypeError(f"updates must be a pyarrow Table, got {type(updates).__name__}")
        for name in (TIME_COLUMN, DIFF_COLUMN):
            if name not in updates.column_names:
                raise SchemaMismatch(f"shard {sid}", None, name, "int64", "no such column")
        table = validate_table(self.desc, updates, collection=f"shard {sid}")
        if table.num_rows == 0:
            return None
        bounds = pc.min_max(table.column(TIME_COLUMN))
        tmin, tmax = bounds["min"].as_py(), bounds["max"].as_py()
        if tmin < 0 or not lower.less_equal(tmin):
            raise UpdateNotBeyondLower(f"shard {sid}", tmin, lower)
        if upper.less_equal(tmax):
            raise UpdateBeyondUpper(f"shard {sid}", tmax, upper)
        return table.cast(self.schema)

    def _write_part(self, table: pa.Table) -> BatchPart:
        ctx = self._ctx
        data = encode_part(table, ctx.shard_id, zstd_level=ctx.config.zstd_level)
        key = ctx.new_key(str(self.writer_id))
        ctx.retry(f"set {key}", lambda: ctx.blob.set(key, data))
        crash_point("persist.after_blob_set")
        ctx.parts.put(key, table)
        return make_part(key, data, table.num_rows)

    # -- writing --------------------------------------------------------------------------------

    def compare_and_append(
        self,
        updates: pa.Table | None,
        *,
        expected_upper: Frontier,
        new_upper: Frontier,
        idempotency_token: uuid.UUID,
    ) -> Appended | UpperMismatch:
        """See the module docs. ``updates`` has ``updates_schema(desc)`` (or is ``None``)."""
        if not isinstance(idempotency_token, uuid.UUID):
            raise TypeError(
                f"idempotency_token must be a uuid.UUID, got {type(idempotency_token).__name__}"
            )
        table = self._prepare(updates, expected_upper, new_upper)
        with self._lock:
            return self._compare_and_append(table, expected_upper, new_upper, idempotency_token)

    def _compare_and_append(
        self,
        table: pa.Table | None,
        expected_upper: Frontier,
        new_upper: Frontier,
        token: uuid.UUID,
    ) -> Appended | UpperMismatch:
        parts = self._write_parts(table, new_upper)
        fn = self._append_fn(parts, expected_upper, new_upper, token)
        return self._finish(self._ctx.machine.apply(fn, crash_points=True), parts, new_upper)

    def _write_parts(self, table: pa.Table | None, new_upper: Frontier) -> tuple[BatchPart, ...]:
        """The batch's blob (none for an empty append), durable when this returns."""
        shard = self._ctx.shard_id
        latency_trace.mark("append_start", shard, _value(new_upper))
        parts = (self._write_part(table),) if table is not None else ()
        latency_trace.mark("blob_written", shard, _value(new_upper))
        return parts

    def _append_fn(
        self,
        parts: tuple[BatchPart, ...],
        expected_upper: Frontier,
        new_upper: Frontier,
        token: uuid.UUID,
    ) -> Callable[[ShardState], Apply[Appended | UpperMismatch]]:
        """The transition that appends ``parts`` as one batch ``[expected_upper, new_upper)``."""
        ctx = self._ctx
        batch = HollowBatch(
            lower=expected_upper, upper=new_upper, since=Antichain.minimum(), parts=parts
        )
        writer_id = self.writer_id
        return lambda s: compare_and_append(
            s, writer_id=writer_id, batch=batch, token=token, now_ms=ctx.now_ms()
        )

    def _finish(
        self,
        applied: Applied[Appended | UpperMismatch],
        parts: tuple[BatchPart, ...],
        new_upper: Frontier,
    ) -> Appended | UpperMismatch:
        """What follows an append's compare-and-set: drop blobs proven unreferenced, learn the
        upper, queue maintenance."""
        ctx = self._ctx
        result = applied.result
        if isinstance(result, UpperMismatch):
            # Proven not committed (see state.compare_and_append): the blobs are ours to drop.
            ctx.delete_quietly([p.key for p in parts])
            self._upper = self._upper.join(result.current)
            return result
        if result.deduplicated and not applied.uncertain:
            # An earlier call committed; this call's blobs were never referenced.
            ctx.delete_quietly([p.key for p in parts])
        crash_point("persist.after_cas_before_ack")
        latency_trace.mark("cas_done", ctx.shard_id, _value(new_upper))
        self._upper = self._upper.join(result.upper)
        if applied.changed and ctx.config.maintenance:
            self._after_append(applied.before)
        return result

    def _after_append(self, before: ShardState) -> None:
        """Maintenance after an append from ``before`` (module docs)."""
        pool = self._ctx.maintenance_pool
        if pool is None:  # inline, under the handle's lock as the append
            run_maintenance(self._ctx, before, writer=str(self.writer_id), schema=self.schema)
            return
        if not maintenance_due(self._ctx, before, compacts=True):
            return  # most small appends: no thread woken, competing with the append's caller
        with self._maintaining_queue:
            if self._queued is not None:
                return  # the queued pass starts from an older state: it covers this append
            self._queued = before
        try:
            pool.submit(self._maintain_queued)
        except RuntimeError:  # the client is closing: the next writer's maintenance retries
            with self._maintaining_queue:
                self._queued = None

    def _maintain_queued(self) -> None:
        with self._maintaining:
            with self._maintaining_queue:
                before, self._queued = self._queued, None
            if before is None or self._expired:
                return
            run_maintenance(
                self._ctx,
                before,
                writer=str(self.writer_id),
                schema=self.schema,
                gc_guard=self._lock,  # GC as this writer: none of its appends in flight
            )

    def append(self, updates: pa.Table | None, *, lower: Frontier, upper: Frontier) -> Appended:
        """Append data that several replicated writers may write identically.

        If the shard's upper is ``current``: ``current == lower`` appends; ``lower < current <
        upper`` trims the updates to times ``>= current`` and appends those; ``current >=
        upper`` is a no-op success (someone wrote it); ``current < lower`` raises
        ``InvalidAppend`` (the batch would leave a gap). ``Indeterminate`` is retried
        internally with the same idempotency token.
        """
        table = self._prepare(updates, lower, upper)
        token = self._ctx.ids.uuid()
        sid = str(self.shard_id)
        attempts = 0
        with self._lock:
            expected = lower
            while True:
                try:
                    result = self._compare_and_append(table, expected, upper, token)
                except Indeterminate:
                    attempts += 1
                    if attempts > self._ctx.config.location_retries:
                        raise
                    continue
                if isinstance(result, Appended):
                    return result
                current = result.current
                if upper.less_equal(current):
                    return Appended(current, deduplicated=True)
                if current.less_than(lower):
                    raise InvalidAppend(
                        f"shard {sid}: append [{lower}, {upper}) is beyond the shard's upper "
                        f"{current}: it would leave a gap"
                    )
                expected = current
                if table is not None:
                    (t,) = current.elements
                    table = table.filter(pc.greater_equal(table.column(TIME_COLUMN), t))
                    if table.num_rows == 0:
                        table = None

    # -- lease ----------------------------------------------------------------------------------

    def heartbeat(self) -> None:
        """Renew the lease (``LeaseExpired`` if the writer was already expired)."""
        ctx = self._ctx
        with self._lock:
            ctx.machine.apply(lambda s: heartbeat_writer(s, self.writer_id, now_ms=ctx.now_ms()))

    def expire(self) -> None:
        """Unregister this writer (after its maintenance: module docs). The handle must not
        be used afterwards."""
        self._expired = True  # a pass that has not started yet does nothing
        with self._maintaining:  # wait for a running one (lock order: before _lock)
            pass
        with self._lock:
            self._ctx.machine.apply(lambda s: expire_writer(s, self.writer_id))

    def maintenance(self) -> GcReport | None:
        """Compact and collect garbage now (normally automatic after writes)."""
        with self._maintaining, self._lock:
            before = self._ctx.machine.cached()
            self._ctx.machine.changes_since_gc = self._ctx.config.gc_every
            return run_maintenance(
                self._ctx, before, writer=str(self.writer_id), schema=self.schema
            )

    # -- waiting --------------------------------------------------------------------------------

    def wait_for_upper_past(self, timestamp: int, *, timeout: float | None = None) -> Frontier:
        """Block until the shard's upper is beyond ``timestamp``; return it."""
        state = wait_for_upper_past(self._ctx, timestamp, timeout=timeout)
        self._upper = self._upper.join(state.upper)
        return state.upper

    async def wait_for_upper_past_async(
        self, timestamp: int, *, timeout: float | None = None
    ) -> Frontier:
        """``wait_for_upper_past`` without blocking the event loop."""
        return await asyncio.to_thread(self.wait_for_upper_past, timestamp, timeout=timeout)

    def __repr__(self) -> str:
        return f"WriteHandle(shard={self.shard_id}, writer={self.writer_id}, upper={self._upper})"


def _value(upper: Frontier) -> int:
    """An upper as one number for a latency mark (-1: empty)."""
    option = upper.as_option()
    return -1 if option is None else option
