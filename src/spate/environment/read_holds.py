"""Read holds of a read transaction block: every collection and index held at one timestamp.

A SQL read block reads every object at the timestamp chosen at its first read (see
:mod:`spate.environment.sql_block`). Objects keep only a short history (``RETAIN HISTORY``,
1 s by default), so the block holds them back, as Materialize does: at its first read it takes
a read hold at that timestamp on every storage collection (tables, sources, materialized views)
and every index, and gives them up when the block ends. Objects created later are not held.

The holds are taken and given up on the environment's event loop. A block dropped without an
end (a client connection that went away) gives them up when it is garbage collected.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, Final

from spate.environment.catalog import IndexItem
from spate.environment.runtime import Runtime
from spate.frontier.antichain import Antichain
from spate.frontier.read_hold import ReadHold

_log: Final = logging.getLogger("spate.environment")

Run = Callable[[Coroutine[Any, Any, Any]], Any]


class ReadHolds:
    """Holds at ``timestamp`` on everything readable, until :meth:`release` (module docs)."""

    def __init__(self, runtime: Runtime, run: Run, start: Run, timestamp: int) -> None:
        self.timestamp = timestamp
        self._holds: list[ReadHold] = run(_acquire(runtime, timestamp))
        self._finalizer = weakref.finalize(self, _release_later, start, self._holds)

    def release(self) -> None:
        """Give every hold up (idempotent)."""
        self._finalizer()


async def _acquire(rt: Runtime, ts: int) -> list[ReadHold]:
    ids = [id for id, _state in rt.storage.collections()]
    holds = list(rt.storage.acquire_read_holds(ids))
    for item in rt.catalog:
        if isinstance(item, IndexItem):
            try:
                holds.append(rt.compute.acquire_read_hold(rt.instance_of(item.cluster), item.id))
            except Exception as e:  # an index of a cluster going away: not held
                _log.debug("no read hold on index %s: %r", item.name, e)
    for hold in holds:
        if hold.since.less_equal(Antichain.of(ts)):
            hold.try_downgrade(Antichain.of(ts))
    return holds


def _release_later(start: Run, holds: list[ReadHold]) -> None:
    try:
        start(_release(holds))
    except Exception as e:  # the environment is closed: nothing is held any more
        _log.debug("read holds not released: %r", e)


async def _release(holds: list[ReadHold]) -> None:
    for hold in holds:
        try:
            hold.release()
        except Exception as e:  # a collection dropped meanwhile
            _log.debug("releasing a read hold on %s: %r", hold.id, e)
