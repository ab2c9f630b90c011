"""Garbage collection: delete blobs no state can reference any more, truncate old states.

Let ``seqno_since`` be the oldest seqno a leased reader still holds (or the head's seqno). Every
state from ``seqno_since`` on may still be read, so its blobs are *live*. GC then:

1. lists the shard's blob keys (before reading any state, see 4);
2. reads the states in Consensus (decoding each seqno once per process);
3. deletes the *retired* blobs — referenced by some state below ``seqno_since`` and by none at
   or above it — then truncates Consensus below ``seqno_since``. A blob is therefore deleted
   only after the state that stopped referencing it is committed and no reader can need an
   older state. Blob keys are never reused, so nothing can reference a retired blob again;
4. deletes *orphans* — listed blobs that no remaining state references, written by a writer
   that is no longer registered in the head (it can never commit again: an unregistered
   writer's append raises ``LeaseExpired``) or by the writer running this GC (which has no
   write in flight while it collects). Listing before reading the head makes this safe: a blob
   listed was written by a writer registered before the head was read.

A crash at any step leaves work that the next GC redoes (deletes are idempotent). On a file
blob, GC also removes temporary files older than an hour (writes killed before their rename).
"""

from __future__ import annotations

from dataclasses import dataclass

from spate.persist._shard import ShardContext, actor_of
from spate.persist.blob_file import FileBlob
from spate.persist.crash import crash_point
from spate.persist.state import ShardState
from spate.persist.state_codec import decode_state

_SCAN_LIMIT = 256
TEMP_MAX_AGE_S = 3600.0
"""A file blob's temporary file this old belongs to a write that died; GC removes it."""


@dataclass(frozen=True, slots=True)
class GcReport:
    """What one GC pass did."""

    seqno_since: int
    retired_deleted: int
    orphans_deleted: int
    bytes_deleted: int
    states_truncated: int


def should_gc(before: ShardState, after: ShardState, changes_since_gc: int, every: int) -> bool:
    """Whether a transition from ``before`` to ``after`` made GC worth running now."""
    if after.tombstone:
        return True
    retire = after.last_retire_seqno
    if retire and before.seqno_since() < retire <= after.seqno_since():
        return True
    return changes_since_gc >= every


def _scan_new(ctx: ShardContext) -> ShardState | None:
    cache = ctx.gc_cache
    start = max(cache.keys) + 1 if cache.keys else 0
    key = ctx.machine.key
    head = cache.head
    while True:
        entries = ctx.retry(
            "gc scan",
            lambda s=start: ctx.consensus.scan(key, s, _SCAN_LIMIT),  # type: ignore[misc]
        )
        for e in entries:
            state = decode_state(e.data)
            cache.keys[e.seqno] = state.part_keys()
            head = state
        if len(entries) < _SCAN_LIMIT:
            break
        start = entries[-1].seqno + 1
    cache.head = head
    return head


def collect_garbage(ctx: ShardContext, *, me: str | None) -> GcReport:
    """One GC pass over the shard (see the module docs). ``me``: the writer running it."""
    cache = ctx.gc_cache
    with cache.lock:
        listed = ctx.retry("gc list", lambda: list(ctx.blob.list_keys(ctx.prefix)))
        head = _scan_new(ctx)
        if head is None:
            return GcReport(0, 0, 0, 0, 0)
        since = head.seqno_since()
        live: set[str] = set()
        old: set[str] = set()
        for seqno, keys in cache.keys.items():
            (live if seqno >= since else old).update(keys)
        retired = sorted(old - live)
        deleted_bytes = 0
        for i, k in enumerate(retired):
            size = ctx.retry(f"gc delete {k}", lambda k=k: ctx.blob.delete(k))  # type: ignore[misc]
            deleted_bytes += size or 0
            if i == 0 and len(retired) > 1:
                crash_point("gc.mid_physical_delete")
        truncated = 0
        if any(s < since for s in cache.keys):
            truncated = ctx.retry(
                "gc truncate", lambda: ctx.consensus.truncate(ctx.machine.key, since)
            )
            crash_point("gc.after_logical_delete")
            for s in [s for s in cache.keys if s < since]:
                del cache.keys[s]
        registered = {str(w) for w in head.writers}
        orphans = 0
        for k, _size in listed:
            if k in live or k in old:
                continue
            actor = actor_of(ctx.shard_id, k)
            if actor is None or (actor != me and actor in registered):
                continue
            size = ctx.retry(f"gc delete {k}", lambda k=k: ctx.blob.delete(k))  # type: ignore[misc]
            if size is not None:
                orphans += 1
                deleted_bytes += size
        if isinstance(ctx.blob, FileBlob):
            # Temporary files of writes that were killed mid-way (never valid keys).
            ctx.blob.sweep_temp(TEMP_MAX_AGE_S, prefix=ctx.prefix)
        ctx.machine.changes_since_gc = 0
        return GcReport(since, len(retired), orphans, deleted_bytes, truncated)
