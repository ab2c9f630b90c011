"""The CaS apply loop: turns pure :mod:`~spate.persist.state` transitions into durable changes.

``Machine.apply(fn)`` reads the shard's latest known state, computes ``fn(state)``, and — if the
transition changes anything — writes the new state at ``seqno + 1`` with
``Consensus.compare_and_set``. If the CaS loses (someone else wrote first) the machine fetches
the head and runs ``fn`` again on it. If Consensus fails (``Determinate`` or ``Indeterminate``)
the machine backs off, fetches, and runs ``fn`` again: transitions are written so that running
them on a state where their earlier attempt already committed is a no-op (the idempotency token
of an append, the opaque of a critical since…). After ``location_retries`` consecutive
failures the error reaches the caller — as ``Indeterminate`` if any CaS attempt may have
committed.

Every new state is checked against the shard invariants before it is written (P3).

Several shards commit with ONE consensus transaction through ``prepare`` (the transition on the
cached state: a new state and its compare-and-set, not yet written), a batched
``Consensus.compare_and_set_many`` by the caller, then ``committed`` for each op that won; an op
that lost (or a batch that failed) goes through ``apply`` as a lone write would
(``refresh=True``, ``maybe_committed`` if the batch was indeterminate).
"""

from __future__ import annotations

import dataclasses
import logging
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Generic, TypeVar

from spate.clock import Clock
from spate.errors import Determinate, Indeterminate, LocationError, SpateError
from spate.ids import ShardId
from spate.persist.config import PersistConfig
from spate.persist.consensus import CasOp, Consensus, next_seqno
from spate.persist.crash import crash_point
from spate.persist.state import Apply, ShardState, check_invariants
from spate.persist.state_codec import decode_state, encode_state

R = TypeVar("R")
T = TypeVar("T")

_log: Final = logging.getLogger("spate.persist.machine")

Sleep = Callable[[float], None]


@dataclass(frozen=True, slots=True)
class Applied(Generic[R]):
    """What ``apply`` did: the transition's result, the state it saw or wrote, and whether it
    wrote a new seqno."""

    result: R
    state: ShardState
    changed: bool
    before: ShardState
    uncertain: bool = False
    """Some CaS attempt of this call was indeterminate (it may have committed)."""


@dataclass(frozen=True, slots=True)
class PreparedCas(Generic[R]):
    """A transition computed on the cached state and ready to compare-and-set (``op``)."""

    result: R
    before: ShardState
    new: ShardState
    op: CasOp


class Machine:
    """The driver of one shard's state: cached head, CaS loop, retries with backoff.

    Thread-safe: concurrent ``apply`` calls race through Consensus like separate processes.
    """

    def __init__(
        self,
        shard_id: ShardId,
        consensus: Consensus,
        *,
        clock: Clock,
        config: PersistConfig,
        rng: random.Random,
        sleep: Sleep,
    ) -> None:
        self.shard_id = shard_id
        self.key = str(shard_id)
        self._consensus = consensus
        self._clock = clock
        self._config = config
        self._rng = rng
        self._sleep = sleep
        self._lock = threading.Lock()
        self._cached: tuple[int | None, ShardState] | None = None
        self.cas_attempts = 0
        self.cas_mismatches = 0
        self.changes_since_gc = 0

    # -- reading ------------------------------------------------------------------------------

    def _decode(self, seqno: int, data: bytes) -> ShardState:
        state = decode_state(data)
        if state.shard_id != self.shard_id or state.seqno != seqno:
            raise Determinate(
                f"consensus key {self.key} seqno {seqno} holds the state of shard "
                f"{state.shard_id} seqno {state.seqno}"
            )
        return state

    def _remember(self, expected: int | None, state: ShardState) -> None:
        with self._lock:
            if self._cached is None or (
                expected is not None and (self._cached[0] is None or expected > self._cached[0])
            ):
                self._cached = (expected, state)

    def _fetch_once(self) -> tuple[int | None, ShardState]:
        head = self._consensus.head(self.key)
        if head is None:
            return None, ShardState.initial(self.shard_id)
        with self._lock:
            cached = self._cached
        if cached is not None and cached[0] == head.seqno and cached[1].seqno == head.seqno:
            # a seqno holds one state for ever (compare-and-set): the one decoded already
            return head.seqno, cached[1]
        state = self._decode(head.seqno, head.data)
        self._remember(head.seqno, state)
        return head.seqno, state

    def retrying(self, what: str, op: Callable[[], T]) -> T:
        """Run ``op``, retrying Blob/Consensus failures with backoff (``location_retries``).

        Only for operations that are safe to repeat (reads, write-once blob sets, deletes).
        """
        failures = 0
        while True:
            try:
                return op()
            except LocationError as e:
                failures += 1
                if failures > self._config.location_retries:
                    raise
                _log.debug("shard=%s %s failed (%s); retrying", self.key, what, e)
                self._backoff(failures)

    def _backoff(self, failures: int) -> None:
        cfg = self._config
        delay = min(cfg.backoff_max_s, cfg.backoff_base_s * 2 ** (failures - 1))
        self._sleep(delay * (0.5 + self._rng.random() / 2))

    def fetch(self) -> ShardState:
        """The latest state in Consensus (retrying failures)."""
        return self.retrying("fetch", self._fetch_once)[1]

    def _fetch_after(self, maybe_committed: bool) -> tuple[int | None, ShardState]:
        """:meth:`fetch_with_seqno`; when a write of ours may have committed already, a
        failure to fetch is ``Indeterminate`` (the caller cannot know whether it landed)."""
        try:
            return self.fetch_with_seqno()
        except LocationError as e:
            if maybe_committed:
                raise Indeterminate(
                    f"shard {self.key}: a write may have committed, then: {e}"
                ) from e
            raise

    def fetch_with_seqno(self) -> tuple[int | None, ShardState]:
        return self.retrying("fetch", self._fetch_once)

    def seen(self) -> ShardState | None:
        """The latest state this process has seen (fetched or written), or ``None``; never
        reads Consensus. It MAY be stale, but it was the shard's state once: its contents at
        any time ``t`` with ``since <= t`` and ``t`` not beyond its upper are the shard's
        contents at ``t`` for ever (its parts may since have been compacted and deleted)."""
        with self._lock:
            cached = self._cached
        return None if cached is None else cached[1]

    def cached(self) -> ShardState:
        """The latest state this process has seen (fetched if none yet). May be stale."""
        with self._lock:
            cached = self._cached
        if cached is not None:
            return cached[1]
        return self.fetch()

    # -- writing ------------------------------------------------------------------------------

    def prepare(self, fn: Callable[[ShardState], Apply[R]]) -> PreparedCas[R] | None:
        """``fn`` on the cached state (fetched if none) as a compare-and-set to batch, or
        ``None`` when ``fn`` raises a ``SpateError`` or needs no write: then the caller MUST go
        through ``apply``, which decides on a fresh state. Writes nothing."""
        with self._lock:
            cached = self._cached
        expected, state = cached if cached is not None else self.fetch_with_seqno()
        try:
            out = fn(state)
        except SpateError:
            return None
        if out.state is None:
            return None
        new = self._next(out.state, expected, state)
        self.cas_attempts += 1
        return PreparedCas(out.result, state, new, CasOp(self.key, expected, encode_state(new)))

    def committed(self, prepared: PreparedCas[R]) -> Applied[R]:
        """``prepared``'s compare-and-set won: remember the new state."""
        self._remember(prepared.new.seqno, prepared.new)
        self.changes_since_gc += 1
        return Applied(prepared.result, prepared.new, True, prepared.before)

    def _next(self, new: ShardState, expected: int | None, state: ShardState) -> ShardState:
        out = dataclasses.replace(
            new,
            seqno=next_seqno(expected),
            walltime_ms=max(self._clock.now_millis(), state.walltime_ms),
        )
        check_invariants(state, out)
        return out

    def apply(
        self,
        fn: Callable[[ShardState], Apply[R]],
        *,
        crash_points: bool = False,
        refresh: bool = False,
        maybe_committed: bool = False,
    ) -> Applied[R]:
        """Run ``fn`` on the latest state until its result is written or needs no write.

        Usage errors raised by ``fn`` propagate unchanged (nothing was written). ``refresh``:
        start from a fetched state, not the cached one. ``maybe_committed``: an earlier
        attempt of this write (a batched compare-and-set) may have committed.
        """
        with self._lock:
            cached = self._cached
        if cached is not None and not refresh:
            (expected, state), fresh = cached, False
        else:
            (expected, state), fresh = self._fetch_after(maybe_committed), True
        failures = 0
        while True:
            # A cached state may be stale: an error or a "nothing to do" computed from it is
            # only trusted after a fresh fetch.
            try:
                out = fn(state)
            except SpateError:
                if fresh:
                    raise
                (expected, state), fresh = self.fetch_with_seqno(), True
                continue
            if out.state is None:
                if not fresh:
                    (expected, state), fresh = self.fetch_with_seqno(), True
                    continue
                return Applied(out.result, state, False, state, maybe_committed)
            new = self._next(out.state, expected, state)
            data = encode_state(new)
            if crash_points:
                crash_point("persist.before_cas")
            self.cas_attempts += 1
            try:
                ok = self._consensus.compare_and_set(self.key, expected, data)
            except (Determinate, Indeterminate) as e:
                failures += 1
                maybe_committed = maybe_committed or isinstance(e, Indeterminate)
                if failures > self._config.location_retries:
                    if maybe_committed and not isinstance(e, Indeterminate):
                        raise Indeterminate(
                            f"shard {self.key}: a write may have committed, then: {e}"
                        ) from e
                    raise
                self._backoff(failures)
                (expected, state), fresh = self._fetch_after(maybe_committed), True
                continue
            if ok:
                self._remember(new.seqno, new)
                self.changes_since_gc += 1
                return Applied(out.result, new, True, state, maybe_committed)
            self.cas_mismatches += 1
            (expected, state), fresh = self.fetch_with_seqno(), True
