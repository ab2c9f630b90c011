"""A materialized view's computed updates, handed to subscribes on the same replica.

A subscribe of a materialized view imports the view's shard. Read through persist, each of its
steps waits for the view's step, then the sink's compare-and-append, then a listen that reads
consensus and the batch just written back. When the view's dataflow runs on the same replica,
the replica instead keeps a :class:`ViewFeed` per view shard (and one for its errors shard):
after each step of the view's dataflow it appends the step's updates of the view, the same
updates the view's sink is handed to write, and a subscribe-only dataflow importing the shard
reads its steps from the feed (:class:`~spate.compute.replica.inputs.ReplicaInputs`).

**What a feed holds.** A feed of shard ``S`` written by a sink with ``as_of = a`` that found
the shard's upper at ``U`` covers ``[lower, upper)`` with ``lower >= max(a, U) + 1`` and
``upper`` the dataflow's computed upper. For every time ``t`` in it, the feed's updates at
``t`` are the view's changes at ``t``. The shard holds the view at every time from
``max(a, U)`` on (the sink's guarantee, :mod:`~spate.compute.replica.sinks`: its first write
corrects at ``U`` whatever an earlier writer left below, stale rows included), so at ``t - 1``
and at ``t``, and its updates at ``t`` consolidate to the feed's, whoever wrote them (every
writer writes the view; dataflows are deterministic). A reader whose contents equal the
shard's below ``lower`` and who adds the feed's updates of ``[lower, upper)`` therefore holds
the shard's contents at every time below ``upper`` — before the shard's upper gets there. (The
times up to ``max(a, U)`` come from persist: after a restart, a subscribe reads the first
step's write back, then the feed.)

**What may read it.** Only dataflows whose exports are all subscribes: their output is a
stream to a client computed from the inputs' durable updates, and the view's updates at ``t``
follow from those alone. Indexes and materialized views keep reading durable shards only.

Retention: the updates below the shard's written upper are dropped (a reader that needs them
reads persist); the feed ends (``closed``) when its dataflow is dropped or fails, or its
upper becomes ``{}``. All methods run on the replica's Spark worker thread; the lock makes a
stray call from another thread safe.
"""

from __future__ import annotations

import threading

import pyarrow as pa
import pyarrow.compute as pc

from spate.frontier.antichain import Antichain, Frontier
from spate.repr.desc import TIME_COLUMN


class ViewFeed:
    """The computed updates of one view shard in ``[lower, upper)`` (module docs)."""

    __slots__ = ("_chunks", "_closed", "_lock", "_lower", "_upper")

    def __init__(self, *, lower: int) -> None:
        self._lock = threading.Lock()
        self._lower = lower
        self._upper = lower
        self._chunks: list[tuple[int, pa.Table]] = []
        """``(upper of the step, its updates at times >= lower)``, in step order."""
        self._closed = False

    @property
    def lower(self) -> int:
        return self._lower

    @property
    def upper(self) -> Frontier:
        """How far the feed's updates are complete (``{lower}`` when closed: it serves none)."""
        with self._lock:
            return Antichain.of(self._lower if self._closed else self._upper)

    @property
    def closed(self) -> bool:
        return self._closed

    def append(self, updates: pa.Table, *, upper: Frontier) -> None:
        """A step's updates of the view, with times from the previous upper below ``upper``."""
        with self._lock:
            if self._closed:
                return
            hi = upper.as_option()
            if hi is None:  # complete: the sink writes the rest; readers read it there
                self._close()
                return
            if hi <= self._upper:
                return
            if updates.num_rows:
                times = updates.column(TIME_COLUMN)
                kept = updates.filter(pc.greater_equal(times, self._lower))
                if kept.num_rows:
                    self._chunks.append((hi, kept))
            self._upper = hi

    def trim(self, written: Frontier) -> None:
        """The shard's upper is ``written``: forget the updates below it (persist has them)."""
        with self._lock:
            at = written.as_option()
            if self._closed or at is None or at <= self._lower:
                return
            self._lower = min(at, self._upper)
            self._chunks = [(hi, t) for hi, t in self._chunks if hi > self._lower]

    def covers(self, lower: int, upper: int) -> bool:
        """Whether :meth:`updates` can answer ``[lower, upper)``."""
        with self._lock:
            return not self._closed and self._lower <= lower and upper <= self._upper

    def updates(self, lower: int, upper: int) -> pa.Table | None:
        """The updates at times in ``[lower, upper)`` (``None``: none), which
        :meth:`covers` must have allowed."""
        with self._lock:
            if self._closed or lower < self._lower or upper > self._upper:
                raise ValueError(
                    f"the view feed covers [{self._lower}, {self._upper}), not [{lower}, {upper})"
                )
            parts = []
            prev = self._lower
            for hi, t in self._chunks:
                if hi > lower and prev < upper:
                    parts.append(t)
                prev = hi
        if not parts:
            return None
        table = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
        times = table.column(TIME_COLUMN)
        table = table.filter(pc.and_(pc.greater_equal(times, lower), pc.less(times, upper)))
        return table if table.num_rows else None

    def close(self) -> None:
        """The view's dataflow is gone: serve nothing more."""
        with self._lock:
            self._close()

    def _close(self) -> None:
        self._closed = True
        self._chunks = []
