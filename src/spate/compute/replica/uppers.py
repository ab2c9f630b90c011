"""Watching the uppers of persist shards: one poller for every shard the replica reads.

A replica steps a dataflow when its inputs' uppers advance. Rather than every dataflow polling
Consensus, :class:`ShardUppers` keeps the latest known upper of each *registered* shard and one
asyncio task (:meth:`ShardUppers.run`) refreshes them, off the event loop thread, about every
``min_interval`` seconds while shards move and backing off to ``max_interval`` while they are
quiet. Waiters (:meth:`wait_past`) and a change callback are woken when an upper advances.

With a *change probe* (:meth:`~spate.persist.client.PersistClient.change_probe`: a cheap
value that moves when another process commits to consensus, SQLite's ``data_version``),
the wait between polls is cut short: the probe is read every ``probe_interval`` seconds (and
``QUIET_PROBE_FACTOR`` times less often once no upper moved for ``QUIET_AFTER_S``) and a
poll starts as soon as it moved. A table written by the environment is then seen within about
a millisecond instead of up to ``max_interval`` later, while a quiet replica still reads no
shard state. With a probe the polls on the interval are a safety net only, at least
``probe_poll_interval`` apart: the probe does not see this process's commits, but those that
move an upper (a view's writes) are reported through :meth:`ShardUppers.observe`. (Without
this floor a replica stepping every few tens of milliseconds read every shard's state two or
three times a step, twice for nothing.) A shard registered without a known upper, and a
waiter, start a poll at once; a cancelled poller ends its probing wait at once.

Guarantees: a cached upper never regresses and is never ahead of the shard (it is a value the
shard had); registration is reference-counted and thread-safe (dataflows are built on the
Spark worker thread).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import Final, Protocol

from spate.frontier.antichain import Antichain, Frontier
from spate.ids import ShardId
from spate.persist import latency_trace

_log: Final = logging.getLogger("spate.compute.replica.uppers")
QUIET_AFTER_S: Final = 2.0
QUIET_PROBE_FACTOR: Final = 5


class UpperSource(Protocol):
    """Reads a shard's current upper (blocking): ``PersistClient.fetch_state(s).upper``."""

    def __call__(self, shard: ShardId) -> Frontier: ...


class ShardUppers:
    """The latest known upper per registered shard (module docs)."""

    def __init__(
        self,
        fetch: UpperSource,
        *,
        on_change: Callable[[], None] | None = None,
        min_interval: float = 0.01,
        max_interval: float = 0.05,
        probe: Callable[[], object] | None = None,
        probe_interval: float = 0.001,
        probe_poll_interval: float = 0.25,
    ) -> None:
        self._fetch = fetch
        self._on_change = on_change
        self._probe = probe
        self._probe_interval = probe_interval
        self._probe_poll = probe_poll_interval
        """With a probe: the least time between polls the probe did not ask for."""
        self._last_change = time.monotonic()
        self._kicked = threading.Event()
        """Set with ``_kick``: ends a probing wait (which runs on a worker thread)."""
        self._min = min_interval
        self._max = max_interval
        self._lock = threading.Lock()
        self._uppers: dict[ShardId, Frontier] = {}
        self._refs: dict[ShardId, int] = {}
        self._waiters: list[tuple[ShardId, int, asyncio.Future[Frontier]]] = []
        self._kick = asyncio.Event()

    # -- registration (any thread) -----------------------------------------------------------

    def register(self, shard: ShardId, upper: Frontier | None = None) -> None:
        """Watch ``shard`` (reference-counted); ``upper`` seeds the cache if known, else the
        shard is read at the next poll, which a probing poller starts at once."""
        with self._lock:
            self._refs[shard] = self._refs.get(shard, 0) + 1
            if upper is not None:
                self._advance(shard, upper)
                return
            new = shard not in self._uppers
            self._uppers.setdefault(shard, Antichain.minimum())
        if new:
            self._kicked.set()  # (ends a probe's wait; thread-safe)

    def unregister(self, shard: ShardId) -> None:
        with self._lock:
            n = self._refs.get(shard, 0) - 1
            if n > 0:
                self._refs[shard] = n
            else:
                self._refs.pop(shard, None)
                self._uppers.pop(shard, None)

    def upper(self, shard: ShardId) -> Frontier:
        """The latest known upper (``{0}`` for a shard never seen)."""
        with self._lock:
            return self._uppers.get(shard, Antichain.minimum())

    def observe(self, shard: ShardId, upper: Frontier) -> bool:
        """Record an upper learnt elsewhere (a write of ours); True if it advanced."""
        with self._lock:
            return self._advance(shard, upper)

    def notify(self) -> None:
        """Wake the waiters and the change callback after :meth:`observe` advanced an upper
        (event loop thread): a dataflow reading a shard this replica wrote steps at once,
        without waiting for the next poll."""
        self._wake_waiters()
        if self._on_change is not None:
            self._on_change()

    def _advance(self, shard: ShardId, upper: Frontier) -> bool:
        old = self._uppers.get(shard)
        if old is not None and not old.less_than(upper):
            return False
        if shard in self._refs or old is not None:
            self._uppers[shard] = upper
        return True

    # -- waiting (event loop) ----------------------------------------------------------------

    async def wait_past(self, shard: ShardId, timestamp: int) -> Frontier:
        """Wait until ``shard``'s upper is beyond ``timestamp`` (registers it meanwhile)."""
        self.register(shard)
        try:
            upper = self.upper(shard)
            if not upper.less_equal(timestamp):
                return upper
            fut: asyncio.Future[Frontier] = asyncio.get_running_loop().create_future()
            self._waiters.append((shard, timestamp, fut))
            self._kick.set()
            self._kicked.set()
            return await fut
        finally:
            self._waiters = [w for w in self._waiters if not w[2].done()]
            self.unregister(shard)

    def _wake_waiters(self) -> None:
        keep = []
        for shard, ts, fut in self._waiters:
            if fut.done():
                continue
            upper = self.upper(shard)
            if not upper.less_equal(ts):
                fut.set_result(upper)
            else:
                keep.append((shard, ts, fut))
        self._waiters = keep

    # -- polling -----------------------------------------------------------------------------

    def _poll_once(self, loop: asyncio.AbstractEventLoop | None = None) -> bool:
        """Read every registered shard's upper (a worker thread). The first upper that moved
        wakes the waiters and the change callback on ``loop`` at once, before the remaining
        shards are read (a dataflow whose inputs are all read steps meanwhile)."""
        with self._lock:
            shards = list(self._refs)
        changed = False
        for shard in shards:
            try:
                upper = self._fetch(shard)
            except Exception as e:  # a failing store must not stop the watcher
                _log.warning("shard=%s: reading the upper failed: %s", shard, e)
                continue
            with self._lock:
                advanced = shard in self._refs and self._advance(shard, upper)
            if advanced:
                latency_trace.mark("upper_polled", shard, upper.as_option() or -1)
                if loop is not None:
                    loop.call_soon_threadsafe(self.notify)
            changed |= advanced
        return changed

    def _probe_wait(self, interval: float) -> bool:
        """Wait up to ``interval`` seconds, reading the probe; True if it moved or a waiter
        kicked (worker thread). A failing probe is waited out (the poll reports the store)."""
        assert self._probe is not None
        now = time.monotonic()
        deadline = now + interval
        every = self._probe_interval
        if now - self._last_change > QUIET_AFTER_S:
            every *= QUIET_PROBE_FACTOR
        try:
            base = self._probe()
            while time.monotonic() < deadline:
                if self._kicked.wait(every):
                    return True
                if self._probe() != base:
                    return True
        except Exception as e:
            _log.debug("reading the change probe failed: %s", e)
            self._kicked.wait(max(0.0, deadline - time.monotonic()))
        return False

    def _probe_then_poll(
        self, interval: float, loop: asyncio.AbstractEventLoop
    ) -> tuple[bool, bool]:
        """Wait on the probe (:meth:`_probe_wait`), then poll at once on the same worker
        thread, without a round trip through the event loop between the two; whether the
        probe moved (or a waiter kicked), and whether an upper moved."""
        moved = self._probe_wait(interval)
        # Cleared before the poll, not after: a kick during the poll (a shard registered, a
        # waiter) ends the next wait at once rather than waiting out the floor.
        self._kicked.clear()
        return moved, self._poll_once(loop)

    async def run(self) -> None:
        """Poll until cancelled."""
        loop = asyncio.get_running_loop()
        try:
            await self._run(loop)
        finally:  # a probing wait on a worker thread ends now, not at its deadline
            self._kicked.set()

    async def _run(self, loop: asyncio.AbstractEventLoop) -> None:
        interval = self._min
        changed = await asyncio.to_thread(self._poll_once, loop)
        while True:
            if changed:
                interval = self._min
                self._last_change = time.monotonic()
                self._wake_waiters()
                if self._on_change is not None:
                    self._on_change()
            else:
                interval = min(self._max, interval * 2)
            self._kick.clear()
            if self._probe is not None:
                wait = max(interval, self._probe_poll)
                moved, changed = await asyncio.to_thread(self._probe_then_poll, wait, loop)
                if moved:
                    interval = self._min
                continue
            try:
                await asyncio.wait_for(self._kick.wait(), interval)
                interval = self._min
            except TimeoutError:
                pass
            changed = await asyncio.to_thread(self._poll_once, loop)
