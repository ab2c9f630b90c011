"""``PersistClient``: opens handles on shards of one :class:`PersistLocation`.

One client per process and location is enough: it opens the blob and consensus stores once,
keeps one :class:`~spate.persist.machine.Machine` (with the latest known state) per shard, and
shares a small thread pool for parallel blob fetches. All operations are blocking; asyncio
callers run them through ``asyncio.to_thread`` (handles also offer ``…_async`` helpers for
waiting).

Obligations of callers: open a writer/reader with the shard's ``RelationDesc`` (the first open
records it; a different one raises ``SchemaMismatch``); ``expire()`` leased handles on shutdown
(or let their lease run out); heartbeat leased handles more often than their lease; never lose
a critical reader id (controllers use :data:`~spate.ids.CONTROLLER_CRITICAL_SINCE`).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from spate.clock import Clock
from spate.ids import (
    CONTROLLER_CRITICAL_SINCE,
    CriticalReaderId,
    IdGen,
    ReaderId,
    ShardId,
    WriterId,
)
from spate.persist._shard import ShardContext
from spate.persist.config import PersistConfig
from spate.persist.gc import GcReport, collect_garbage
from spate.persist.location import Blob, Consensus, PersistLocation, open_blob, open_consensus
from spate.persist.machine import Machine, Sleep
from spate.persist.part_cache import PartCache
from spate.persist.read import ReadHandle
from spate.persist.since import SinceHandle, open_since_handle
from spate.persist.state import (
    ShardState,
    finalize,
    register_leased_reader,
    register_writer,
)
from spate.persist.write import WriteHandle
from spate.repr.desc import RelationDesc


class PersistClient:
    """Opens handles on the shards at ``location``."""

    def __init__(
        self,
        location: PersistLocation,
        *,
        clock: Clock,
        ids: IdGen,
        config: PersistConfig | None = None,
        sleep: Sleep = time.sleep,
    ) -> None:
        blob = open_blob(location.blob_uri)
        try:
            consensus = open_consensus(location.consensus_uri)
        except BaseException:
            blob.close()
            raise
        self._init(blob, consensus, location, clock, ids, config, sleep)

    @classmethod
    def from_stores(
        cls,
        blob: Blob,
        consensus: Consensus,
        *,
        clock: Clock,
        ids: IdGen,
        config: PersistConfig | None = None,
        sleep: Sleep = time.sleep,
    ) -> PersistClient:
        """A client over already-open stores (tests wrap them, e.g. in unreliable wrappers)."""
        self = cls.__new__(cls)
        self._init(blob, consensus, None, clock, ids, config, sleep)
        return self

    def _init(
        self,
        blob: Blob,
        consensus: Consensus,
        location: PersistLocation | None,
        clock: Clock,
        ids: IdGen,
        config: PersistConfig | None,
        sleep: Sleep,
    ) -> None:
        self.location = location
        self.blob = blob
        self.consensus = consensus
        self.config = config or PersistConfig()
        self._clock = clock
        self._ids = ids
        self._sleep = sleep
        self._rng = random.Random(ids.uuid().int)
        self._shards: dict[ShardId, ShardContext] = {}
        self._lock = threading.Lock()
        self.parts = PartCache(self.config.part_cache_bytes)
        """Tables of the parts written through this client (:mod:`.part_cache`)."""
        self._pool = ThreadPoolExecutor(
            max_workers=self.config.fetch_threads, thread_name_prefix="spate-persist-fetch"
        )
        self._maintenance_pool = (
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="spate-persist-maintenance")
            if self.config.maintenance and self.config.background_maintenance
            else None
        )

    def _ctx(self, shard_id: ShardId) -> ShardContext:
        if not isinstance(shard_id, ShardId):
            raise TypeError(f"shard_id must be a ShardId, got {type(shard_id).__name__}")
        with self._lock:
            ctx = self._shards.get(shard_id)
            if ctx is None:
                machine = Machine(
                    shard_id,
                    self.consensus,
                    clock=self._clock,
                    config=self.config,
                    rng=random.Random(self._rng.getrandbits(64)),
                    sleep=self._sleep,
                )
                ctx = ShardContext(
                    shard_id=shard_id,
                    machine=machine,
                    blob=self.blob,
                    consensus=self.consensus,
                    config=self.config,
                    clock=self._clock,
                    ids=self._ids,
                    sleep=self._sleep,
                    pool=self._pool,
                    maintenance_pool=self._maintenance_pool,
                    parts=self.parts,
                )
                self._shards[shard_id] = ctx
            return ctx

    # -- handles --------------------------------------------------------------------------------

    def open_writer(self, shard_id: ShardId, desc: RelationDesc) -> WriteHandle:
        """Register a new writer (fresh id, new lease) on ``shard_id``."""
        ctx = self._ctx(shard_id)
        writer_id = WriterId.new(self._ids)
        lease = self.config.writer_lease_ms
        applied = ctx.machine.apply(
            lambda s: register_writer(s, writer_id, now_ms=ctx.now_ms(), lease_ms=lease, desc=desc)
        )
        return WriteHandle(ctx, writer_id, desc, applied.result)

    def open_leased_reader(self, shard_id: ShardId, desc: RelationDesc) -> ReadHandle:
        """Register a new leased reader at the shard's current since."""
        ctx = self._ctx(shard_id)
        reader_id = ReaderId.new(self._ids)
        lease = self.config.reader_lease_ms
        applied = ctx.machine.apply(
            lambda s: register_leased_reader(
                s, reader_id, now_ms=ctx.now_ms(), lease_ms=lease, desc=desc
            )
        )
        return ReadHandle(ctx, reader_id, desc, applied.result.since)

    def open_critical_since(
        self,
        shard_id: ShardId,
        reader_id: CriticalReaderId = CONTROLLER_CRITICAL_SINCE,
        *,
        epoch: int | None = None,
    ) -> SinceHandle:
        """Open (registering if needed) the critical reader ``reader_id``.

        With ``epoch`` the handle claims the reader for that controller epoch (raising
        ``Fenced`` if a newer epoch holds it); see :mod:`spate.persist.since`.
        """
        return open_since_handle(self._ctx(shard_id), reader_id, epoch=epoch)

    # -- shard-level operations -----------------------------------------------------------------

    def change_probe(self) -> Callable[[], object] | None:
        """A cheap call whose value changes once another process committed to this location's
        consensus (SQLite: ``PRAGMA data_version``), or None where the store offers none. A
        watcher of uppers reads it every millisecond and fetches state only when it changed;
        it MUST still fetch now and then (this client's own commits do not change it)."""
        probe = getattr(self.consensus, "change_token", None)
        return probe if callable(probe) else None

    def fetch_state(self, shard_id: ShardId) -> ShardState:
        """The shard's latest state (for inspection; an unwritten shard's initial state)."""
        return self._ctx(shard_id).machine.fetch()

    def seen_state(self, shard_id: ShardId) -> ShardState | None:
        """The shard's latest state this client has seen, without reading Consensus (``None``
        when it has seen none); see :meth:`~spate.persist.machine.Machine.seen`."""
        return self._ctx(shard_id).machine.seen()

    def seen_states(self, shard_id: ShardId) -> Callable[[], ShardState | None]:
        """:meth:`seen_state` of the shard as a function of nothing, found once (the shard's
        machine lives as long as this client): for a caller that asks again and again."""
        return self._ctx(shard_id).machine.seen

    def is_finalized(self, shard_id: ShardId) -> bool:
        return self.fetch_state(shard_id).tombstone

    def finalize_shard(self, shard_id: ShardId) -> None:
        """Turn a shard with ``since == upper == {}`` into a tombstone and delete its data.

        Raises ``NotFinalizable`` otherwise. Idempotent.
        """
        ctx = self._ctx(shard_id)
        ctx.machine.apply(finalize)
        collect_garbage(ctx, me=None)

    def collect_garbage(self, shard_id: ShardId) -> GcReport:
        """Run one GC pass on ``shard_id`` now (normally automatic)."""
        return collect_garbage(self._ctx(shard_id), me=None)

    def list_shards(self) -> list[ShardId]:
        """Every shard with state in Consensus."""
        out = []
        for key in self.consensus.list_keys():
            try:
                out.append(ShardId.parse(key))
            except ValueError:
                continue
        return out

    def wait_for_maintenance(self) -> None:
        """Return once every background maintenance pass queued so far has run (tests and
        tools that inspect a shard's batches directly call it; reads never need to)."""
        if self._maintenance_pool is not None:
            self._maintenance_pool.submit(lambda: None).result()

    def close(self) -> None:
        if self._maintenance_pool is not None:
            self._maintenance_pool.shutdown(wait=True, cancel_futures=True)
        self._pool.shutdown(wait=True)
        self.consensus.close()
        self.blob.close()

    def __enter__(self) -> PersistClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PersistClient({self.location})"
