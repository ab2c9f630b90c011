"""What every handle of one shard shares inside a client: stores, machine, config, caches."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

import pyarrow as pa

from spate.clock import Clock
from spate.ids import IdGen, ShardId
from spate.persist.batch import decode_part
from spate.persist.blob import Blob
from spate.persist.config import PersistConfig
from spate.persist.consensus import Consensus
from spate.persist.machine import Machine, Sleep
from spate.persist.part_cache import PartCache
from spate.persist.state import BatchPart, ShardState

T = TypeVar("T")

_log = logging.getLogger("spate.persist")

_PARALLEL_BYTES = 8 << 20


@dataclass
class GcCache:
    """Part keys of the consensus states this process has already decoded, by seqno."""

    keys: dict[int, frozenset[str]] = field(default_factory=dict)
    head: ShardState | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class ShardContext:
    shard_id: ShardId
    machine: Machine
    blob: Blob
    consensus: Consensus
    config: PersistConfig
    clock: Clock
    ids: IdGen
    sleep: Sleep
    pool: ThreadPoolExecutor
    maintenance_pool: ThreadPoolExecutor | None = None
    """Where writers run their maintenance (``None``: inline, after each append)."""
    gc_cache: GcCache = field(default_factory=GcCache)
    parts: PartCache = field(default_factory=lambda: PartCache(0))
    """Tables of the parts this client wrote (:mod:`.part_cache`), shared by its shards."""

    @property
    def prefix(self) -> str:
        return f"{self.shard_id}/"

    def retry(self, what: str, op: Callable[[], T]) -> T:
        return self.machine.retrying(what, op)

    def new_key(self, actor: str) -> str:
        """A fresh blob key for a part written by ``actor`` (a writer id)."""
        return f"{self.shard_id}/{actor}.{self.ids.uuid()}.parquet"

    def now_ms(self) -> int:
        return self.clock.now_millis()

    def fetch_part(self, part: BatchPart, schema: pa.Schema) -> pa.Table:
        data = self.retry(f"get {part.key}", lambda: self.blob.get(part.key))
        return decode_part(data, part, self.shard_id, schema)

    def fetch_parts(self, parts: list[BatchPart], schema: pa.Schema) -> list[pa.Table]:
        """Fetch and verify ``parts`` in parallel; any corrupt part raises ``CorruptBatch``."""
        # Threads pay off only for large parts (a hand-off costs ~ms on a busy 2-core box).
        if len(parts) <= 1 or sum(p.encoded_size for p in parts) < _PARALLEL_BYTES:
            return [self.fetch_part(p, schema) for p in parts]
        return list(self.pool.map(lambda p: self.fetch_part(p, schema), parts))

    def fetch_written(self, parts: list[BatchPart], schema: pa.Schema) -> list[pa.Table]:
        """``parts`` for a merge by their writer: the tables this client encoded into them
        where it kept them (:mod:`.part_cache`), the rest fetched and verified as by
        :meth:`fetch_parts`. Reads that serve rows to anyone use :meth:`fetch_parts`, which
        always verifies the blob."""
        kept = [self.parts.get(p, schema) for p in parts]
        missing = [p for p, t in zip(parts, kept, strict=True) if t is None]
        fetched = iter(self.fetch_parts(missing, schema))
        return [t if t is not None else next(fetched) for t in kept]

    def delete_quietly(self, keys: list[str]) -> None:
        """Best-effort delete of blobs nobody references (a failure leaves them to GC)."""
        for k in keys:
            try:
                self.blob.delete(k)
            except Exception as e:
                _log.debug("shard=%s could not delete %s now (GC will): %s", self.shard_id, k, e)


def actor_of(shard_id: ShardId, key: str) -> str | None:
    """The writer id that wrote blob ``key`` of ``shard_id`` (``None``: not a part key)."""
    prefix = f"{shard_id}/"
    if not key.startswith(prefix):
        return None
    name = key[len(prefix) :]
    actor, dot, _rest = name.partition(".")
    return actor if dot else None


def upper_past(state: ShardState, timestamp: int) -> bool:
    """Whether ``state``'s upper is beyond ``timestamp`` (so the shard is final up to it)."""
    return not state.upper.less_equal(timestamp)


def wait_for_upper_past(ctx: ShardContext, timestamp: int, *, timeout: float | None) -> ShardState:
    """Poll until the shard's upper is beyond ``timestamp``; raise ``UpperTimeout`` after
    ``timeout`` seconds of real time (``None``: wait forever)."""
    from spate.persist.errors import UpperTimeout

    state = ctx.machine.cached()
    if upper_past(state, timestamp):
        return state
    start = time.monotonic()
    interval = ctx.config.poll_interval_s
    while True:
        state = ctx.machine.fetch()
        if upper_past(state, timestamp):
            return state
        waited = time.monotonic() - start
        if timeout is not None and waited >= timeout:
            raise UpperTimeout(str(ctx.shard_id), timestamp, state.upper, timeout)
        delay = interval if timeout is None else min(interval, max(0.0, timeout - waited))
        ctx.sleep(delay)
        interval = min(ctx.config.poll_max_s, interval * 2)
