"""Writing materialized views' computed updates to their shards, off the step thread.

A step hands its sinks' updates to their buffers (:class:`~spate.compute.replica.sinks.
MaterializedViewSink.add`) and asks for a write here; the writes run on one thread of their
own, so the next step reads its inputs and computes while the previous step's compare-and-
append is under way (pipelining). Order is kept: a sink's buffer holds the steps' updates in
step order, and each write takes everything computed so far. The maintenance loop and
``EnableWrites`` write synchronously (:meth:`SinkWriter.flush`). Each shard upper written (the
view's errors shard's too) is also told to ``written`` (the replica's dataflows reading that
shard step without waiting for the next poll of the uppers).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Final

from spate.compute.replica.actions import Event, SinkProgress
from spate.compute.replica.metrics import ReplicaMetrics
from spate.compute.replica.sinks import MaterializedViewSink
from spate.frontier.antichain import Frontier
from spate.ids import GlobalId, ShardId

_log: Final = logging.getLogger("spate.compute.replica")


class SinkWriter:
    """The replica's sink writer thread (module docs)."""

    def __init__(
        self,
        name: str,
        metrics: ReplicaMetrics,
        post: Callable[[Event], None],
        written: Callable[[ShardId, Frontier], None],
    ) -> None:
        self.name = name
        self._metrics = metrics
        self._post = post
        self._written = written
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="spate-compute-sink")

    def flush_later(self, key: int, sinks: Mapping[GlobalId, MaterializedViewSink]) -> None:
        """Write ``sinks``' computed updates on the writer thread."""
        self._pool.submit(self.flush, key, dict(sinks)).add_done_callback(self._crashed)

    def _crashed(self, f: Future[None]) -> None:
        if f.exception() is not None:
            _log.error("replica=%s: a sink write crashed: %r", self.name, f.exception())

    def flush(self, key: int, sinks: Mapping[GlobalId, MaterializedViewSink]) -> None:
        """Write ``sinks``' computed updates now; report each shard's upper."""
        for id, sink in list(sinks.items()):
            before = (sink.stats.appends, sink.stats.lost_races)
            try:
                shard_upper = sink.flush()
            except Exception as e:
                _log.warning(
                    "replica=%s collection=%s: writing the materialized view failed (retried "
                    "after the next step): %s",
                    self.name,
                    id,
                    _short(e),
                )
                continue
            self._metrics.sink_appends.inc(sink.stats.appends - before[0])
            self._metrics.sink_lost_races.inc(sink.stats.lost_races - before[1])
            if sink.errors is not None:  # read with the rows: a reader needs both uppers
                self._written(sink.errors.shard_id, sink.errors.shard_upper)
            self._written(sink.shard_id, shard_upper)
            self._post(SinkProgress(key, id, shard_upper))

    def shutdown(self) -> None:
        """Wait for the writes asked for, then stop."""
        self._pool.shutdown(wait=True)


def _short(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    text = lines[0][:500] if lines else ""
    return f"{type(e).__name__}: {text}" if text else type(e).__name__
