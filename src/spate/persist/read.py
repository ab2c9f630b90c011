"""``ReadHandle``: a leased reader of a shard.

The reader is registered at the shard's since with a lease and a *seqno hold*: GC keeps every
state from that seqno on, so the blobs of any state the reader looks at stay readable. The hold
moves forward (and the lease is renewed) by :meth:`ReadHandle.downgrade_since` and
:meth:`ReadHandle.heartbeat`. **Consequently, paths returned by** :meth:`ReadHandle.live_batches`
**stay valid until this handle's next** ``downgrade_since``, ``heartbeat`` or ``expire`` (or its
lease runs out).

Reads:

* :meth:`snapshot` — the contents at ``as_of``: every update with time ``<= as_of``, times
  advanced to ``as_of``, consolidated. ``AsOfBeforeSince`` unless the reader's since is
  ``<= as_of``; waits (up to ``timeout``) while the upper is ``<= as_of``.
  :meth:`snapshot_updates` says how many updates it would read, from the state alone.
* :meth:`listen` / :meth:`listener` — the updates with times ``> as_of`` in time order of
  batches, at their own times (not consolidated), interleaved with progress frontiers. A
  snapshot and a listen at the same ``as_of`` together give the whole collection from
  ``as_of`` on. The reader's since MUST stay below the listen's frontier (else
  ``ListenCompactedPast``).
* :meth:`live_batches` — the verified Parquet files (explicit local paths, never a directory)
  whose updates at times ``<= as_of`` make up the contents at ``as_of`` (see
  :mod:`spate.persist.spark` for a Spark DataFrame of them). Copies staged from non-file blob
  stores are removed at the handle's next ``downgrade_since``, ``heartbeat`` or ``expire``.

Reads verify every part (P5): a corrupt part raises ``CorruptBatch`` and no rows are returned.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spate.frontier.antichain import Antichain, Frontier
from spate.ids import ReaderId, ShardId
from spate.persist._shard import ShardContext, upper_past, wait_for_upper_past
from spate.persist.batch import verify_part
from spate.persist.errors import AsOfBeforeSince, LeaseExpired, ListenCompactedPast
from spate.persist.gc import GcReport, collect_garbage, should_gc
from spate.persist.state import (
    HollowBatch,
    ShardState,
    downgrade_since,
    expire_leased_reader,
    heartbeat_leased_reader,
)
from spate.repr.arrow import updates_schema
from spate.repr.consolidate import accumulate_at, data_columns
from spate.repr.desc import DIFF_COLUMN, TIME_COLUMN, RelationDesc
from spate.repr.identity import normalize_table

_MAX_TIME: Final = 2**63 - 1


@dataclass(frozen=True, slots=True)
class ListenUpdates:
    """Updates of a listen: times ``>=`` the previous progress and ``<`` the next."""

    updates: pa.Table


@dataclass(frozen=True, slots=True)
class ListenProgress:
    """Every update at a time below ``upper`` has been reported."""

    upper: Frontier


ListenEvent = ListenUpdates | ListenProgress


@dataclass
class LiveBatches:
    """Local Parquet files holding a shard's updates for a read at ``as_of``.

    ``paths`` are explicit files (verified against their checksums). Updates in them may have
    times beyond ``as_of``; filter ``_time <= as_of``, advance to ``as_of`` and consolidate.
    Staged copies (for non-file blob stores) live in ``staged_dir`` until :meth:`cleanup`.
    """

    shard_id: ShardId
    as_of: int
    since: Frontier
    upper: Frontier
    desc: RelationDesc
    paths: tuple[str, ...]
    staged_dir: str | None = None
    _closed: bool = field(default=False, repr=False)

    def cleanup(self) -> None:
        if self.staged_dir is not None and not self._closed:
            shutil.rmtree(self.staged_dir, ignore_errors=True)
        self._closed = True

    def __enter__(self) -> LiveBatches:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()


def snapshot_of(tables: list[pa.Table], as_of: int, schema: pa.Schema) -> pa.Table:
    """Contents at ``as_of`` of ``tables``: data columns, ``_time = as_of``, ``_diff``."""
    if not tables:
        return schema.empty_table()
    table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
    acc = _distinct_at(table, as_of)
    if acc is None:
        acc = accumulate_at(table, as_of)
    times = pa.array(np.full(acc.num_rows, as_of, dtype=np.int64))
    idx = acc.schema.get_field_index(DIFF_COLUMN)
    out = acc.add_column(idx, pa.field(TIME_COLUMN, pa.int64(), nullable=False), times)
    return out.cast(schema)


def _distinct_at(table: pa.Table, as_of: int) -> pa.Table | None:
    """``accumulate_at(table, as_of)`` without its group-by when no two updates visible at
    ``as_of`` are of the same row — known when the first data column is an integer one
    without NULLs and without a value twice (checked on a sorted copy: milliseconds, where a
    hash of a million values takes a good part of a second): then each row's multiplicity is
    its one diff. That is the case of a table only inserted into (a load) and of a compacted
    one, keyed by its first column; a group-by over every column of a million distinct rows
    takes seconds. ``None``: not known, so consolidate."""
    data = data_columns(table)
    if not data or not pa.types.is_integer(table.schema.field(data[0]).type):
        return None
    times = table.column(TIME_COLUMN)
    if table.num_rows and pc.max(times).as_py() > as_of:
        table = table.filter(pc.less_equal(times, as_of))
    first = table.column(data[0])
    if first.null_count:
        return None
    keys = first.to_numpy()
    if len(keys) > 1 and not np.all(keys[1:] > keys[:-1]):  # not ascending: sort a copy
        keys = np.sort(keys)
        if np.any(keys[1:] == keys[:-1]):
            return None
    live = table.filter(pc.not_equal(table.column(DIFF_COLUMN), 0))
    return normalize_table(live.select([*data, DIFF_COLUMN]))  # floats as consolidation has them


def batches_for(state: ShardState, as_of: int) -> list[HollowBatch]:
    """The batches that may hold updates at times ``<= as_of``."""
    return [b for b in state.batches if b.parts and b.lower.less_equal(as_of)]


class ReadHandle:
    """A leased reader of one shard. Open with ``PersistClient.open_leased_reader``."""

    def __init__(
        self, ctx: ShardContext, reader_id: ReaderId, desc: RelationDesc, since: Frontier
    ) -> None:
        self._ctx = ctx
        self.reader_id = reader_id
        self.desc = desc
        self.schema = updates_schema(desc)
        self._since = since
        self._lock = threading.Lock()
        self._handed_out: list[LiveBatches] = []
        self._gc_lock = threading.Lock()
        self._gc_queued = False
        """A GC pass of this handle's is queued on the maintenance thread (:meth:`_maybe_gc`)."""

    @property
    def shard_id(self) -> ShardId:
        return self._ctx.shard_id

    @property
    def since(self) -> Frontier:
        """This reader's since (the shard's since is at or below it)."""
        return self._since

    def _release_handed_out(self) -> None:
        for live in self._handed_out:
            live.cleanup()
        self._handed_out.clear()

    # -- since and lease ------------------------------------------------------------------------

    def downgrade_since(self, new_since: Frontier) -> Frontier:
        """Let the since move forward to ``new_since`` (lower requests keep the current since).

        Also renews the lease and moves the seqno hold (see the module docs). Returns the
        reader's since.
        """
        if not isinstance(new_since, Antichain) or len(new_since) > 1:
            raise TypeError(f"new_since must be a frontier of at most one time, got {new_since!r}")
        ctx = self._ctx
        with self._lock:
            self._release_handed_out()
            applied = ctx.machine.apply(
                lambda s: downgrade_since(s, self.reader_id, new_since, now_ms=ctx.now_ms())
            )
            self._since = applied.result.since
            if applied.changed and ctx.config.maintenance:
                self._maybe_gc(applied.before, applied.state)
            return self._since

    def _maybe_gc(self, before: ShardState, after: ShardState) -> None:
        """GC after a since downgrade that made it worthwhile: on the client's maintenance
        thread when it has one (``background_maintenance``: the downgrading caller, a replica's
        step loop, does not wait for blob deletes and a consensus truncate), else inline. A
        pass already queued by this handle covers this one."""
        ctx = self._ctx
        if not should_gc(before, after, ctx.machine.changes_since_gc, ctx.config.gc_every):
            return
        from spate.persist.maintenance import run_maintenance

        pool = ctx.maintenance_pool
        if pool is None:
            run_maintenance(ctx, before, writer=None, schema=None)
            return
        with self._gc_lock:
            if self._gc_queued:
                return
            self._gc_queued = True

        def collect() -> None:
            with self._gc_lock:
                self._gc_queued = False
            run_maintenance(ctx, before, writer=None, schema=None)

        try:
            pool.submit(collect)
        except RuntimeError:  # the client is closing: the next pass collects
            with self._gc_lock:
                self._gc_queued = False

    def heartbeat(self) -> None:
        """Renew the lease and move the seqno hold (``LeaseExpired`` if already expired)."""
        ctx = self._ctx
        with self._lock:
            self._release_handed_out()
            ctx.machine.apply(
                lambda s: downgrade_since(
                    s, self.reader_id, Antichain.minimum(), now_ms=ctx.now_ms()
                )
            )

    def renew_lease(self) -> None:
        """Renew the lease only (the seqno hold stays, so handed-out paths stay valid)."""
        ctx = self._ctx
        with self._lock:
            ctx.machine.apply(
                lambda s: heartbeat_leased_reader(s, self.reader_id, now_ms=ctx.now_ms())
            )

    def expire(self) -> None:
        """Unregister this reader (its since no longer holds the shard's). Do not use it after."""
        with self._lock:
            self._release_handed_out()
            self._ctx.machine.apply(lambda s: expire_leased_reader(s, self.reader_id))

    def collect_garbage(self) -> GcReport:
        """Run one GC pass now (normally automatic)."""
        return collect_garbage(self._ctx, me=None)

    # -- reads ----------------------------------------------------------------------------------

    def _check_as_of(self, state: ShardState, as_of: int) -> None:
        if isinstance(as_of, bool) or not isinstance(as_of, int):
            raise TypeError(f"as_of must be an int timestamp, got {type(as_of).__name__}")
        sid = str(self.shard_id)
        if state.tombstone:
            raise AsOfBeforeSince(sid, as_of, state.since)
        reader = state.leased_readers.get(self.reader_id)
        if reader is None:
            raise LeaseExpired(sid, f"leased reader {self.reader_id}")
        if not reader.since.less_equal(as_of) or not state.since.less_equal(as_of):
            raise AsOfBeforeSince(sid, as_of, reader.since)

    def _readable_state(self, as_of: int, timeout: float | None) -> ShardState:
        state = self._ctx.machine.cached()
        try:
            self._check_as_of(state, as_of)
        except (AsOfBeforeSince, LeaseExpired):
            state = self._ctx.machine.fetch()
            self._check_as_of(state, as_of)
        if not upper_past(state, as_of):
            state = wait_for_upper_past(self._ctx, as_of, timeout=timeout)
        self._check_as_of(state, as_of)
        return state

    def snapshot_updates(self, as_of: int, *, timeout: float | None = None) -> int:
        """How many updates a :meth:`snapshot` at ``as_of`` reads (before consolidating them):
        known from the shard's state, without fetching a part. Waits like :meth:`snapshot`."""
        with self._lock:
            state = self._readable_state(as_of, timeout)
            return sum(b.num_updates for b in batches_for(state, as_of))

    def snapshot(self, as_of: int, *, timeout: float | None = None) -> pa.Table:
        """The consolidated contents at ``as_of`` (see the module docs)."""
        with self._lock:
            state = self._readable_state(as_of, timeout)
            parts = [p for b in batches_for(state, as_of) for p in b.parts]
            tables = self._ctx.fetch_parts(parts, self.schema)
        return snapshot_of(tables, as_of, self.schema)

    async def snapshot_async(self, as_of: int, *, timeout: float | None = None) -> pa.Table:
        return await asyncio.to_thread(self.snapshot, as_of, timeout=timeout)

    def live_batches(self, as_of: int, *, timeout: float | None = None) -> LiveBatches:
        """Verified local Parquet files for a read at ``as_of`` (see :class:`LiveBatches`)."""
        ctx = self._ctx
        with self._lock:
            state = self._readable_state(as_of, timeout)
            parts = [p for b in batches_for(state, as_of) for p in b.parts]
            staged: str | None = None
            paths: list[str] = []
            try:
                for part in parts:
                    data = verify_part(self._get(part.key), part, ctx.shard_id)
                    local = ctx.blob.local_path(part.key)
                    if local is None:
                        if staged is None:
                            staged = tempfile.mkdtemp(
                                prefix="spate-stage-", dir=ctx.config.staging_dir
                            )
                        local = os.path.join(staged, f"part-{len(paths):05d}.parquet")
                        with open(local, "wb") as f:
                            f.write(data)
                    paths.append(local)
            except BaseException:
                if staged is not None:
                    shutil.rmtree(staged, ignore_errors=True)
                raise
            live = LiveBatches(
                shard_id=ctx.shard_id,
                as_of=as_of,
                since=state.since,
                upper=state.upper,
                desc=self.desc,
                paths=tuple(paths),
                staged_dir=staged,
            )
            if staged is not None:
                self._handed_out.append(live)
        return live

    def _get(self, key: str) -> bytes | None:
        return self._ctx.retry(f"get {key}", lambda: self._ctx.blob.get(key))

    def listener(self, as_of: int) -> Listener:
        """A blocking listen from ``as_of`` (see :class:`Listener`)."""
        with self._lock:
            state = self._ctx.machine.fetch()
            self._check_as_of(state, as_of)
        return Listener(self, as_of)

    async def listen(self, as_of: int) -> AsyncIterator[ListenEvent]:
        """Updates at times ``> as_of`` and progress, as they become final (async)."""
        listener = await asyncio.to_thread(self.listener, as_of)
        cfg = self._ctx.config
        interval = cfg.poll_interval_s
        while not listener.done:
            events = await asyncio.to_thread(listener.poll_once)
            if not events:
                await asyncio.sleep(interval)
                interval = min(cfg.poll_max_s, interval * 2)
                continue
            interval = cfg.poll_interval_s
            for e in events:
                yield e

    async def subscribe(self, as_of: int) -> AsyncIterator[ListenEvent]:
        """The snapshot at ``as_of`` (as one ``ListenUpdates``), then ``listen(as_of)``."""
        snap = await self.snapshot_async(as_of)
        yield ListenUpdates(snap)
        async for e in self.listen(as_of):
            yield e

    def __repr__(self) -> str:
        return f"ReadHandle(shard={self.shard_id}, reader={self.reader_id}, since={self._since})"


class Listener:
    """A blocking listen: :meth:`poll_once` returns what became final since the last call.

    The frontier starts at ``as_of + 1``; each poll reports the updates with times in
    ``[frontier, upper)`` at their own times, then ``ListenProgress(upper)``. After the upper
    becomes ``{}`` the listener is ``done``.
    """

    def __init__(self, handle: ReadHandle, as_of: int) -> None:
        self._handle = handle
        self.as_of = as_of
        self.frontier: Frontier = Antichain.of(min(as_of + 1, _MAX_TIME))
        self.done = False

    def poll_once(self) -> list[ListenEvent]:
        """The events that are final now (empty if the upper has not moved)."""
        if self.done:
            return []
        h = self._handle
        ctx = h._ctx
        with h._lock:
            state = ctx.machine.fetch()
            sid = str(h.shard_id)
            if state.tombstone:
                raise AsOfBeforeSince(sid, self.as_of, state.since)
            if h.reader_id not in state.leased_readers:
                raise LeaseExpired(sid, f"leased reader {h.reader_id}")
            if not self.frontier.less_than(state.upper):
                return []
            (f,) = self.frontier.elements
            wanted: list[HollowBatch] = []
            for b in state.batches:
                if not b.parts or b.upper.less_equal(f) or not b.lower.less_than(state.upper):
                    continue
                if not (b.since.less_equal(b.lower) or b.since.less_than(self.frontier)):
                    raise ListenCompactedPast(sid, self.frontier, b.since)
                wanted.append(b)
            tables = ctx.fetch_parts([p for b in wanted for p in b.parts], h.schema)
        events: list[ListenEvent] = []
        if tables:
            table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
            times = table.column(TIME_COLUMN)
            mask = pc.greater_equal(times, f)
            if not state.upper.is_empty():
                mask = pc.and_(mask, pc.less(times, state.upper.elements[0]))
            table = table.filter(mask)
            if table.num_rows:
                events.append(ListenUpdates(table))
        events.append(ListenProgress(state.upper))
        self.frontier = state.upper
        self.done = state.upper.is_empty()
        return events

    def poll(self, *, timeout: float | None = None) -> list[ListenEvent]:
        """Block until something is final (or ``timeout`` seconds pass: then ``[]``)."""
        import time

        cfg = self._handle._ctx.config
        start = time.monotonic()
        interval = cfg.poll_interval_s
        while True:
            events = self.poll_once()
            if events or self.done:
                return events
            if timeout is not None and time.monotonic() - start >= timeout:
                return []
            self._handle._ctx.sleep(interval)
            interval = min(cfg.poll_max_s, interval * 2)
