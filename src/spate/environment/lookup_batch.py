"""Concurrent index lookups share one read: lookups of the same collection at the same
timestamp, made while one such read is in flight, are answered together by the next one.

Many sessions looking up keys of one indexed collection (``SELECT … WHERE id = $1``) each
needed a read of their own: a worker thread's round trip and the shard's state for a read here,
or a peek for an index on a replica. A :class:`LookupBatcher` runs at most one read per *batch
key* at a time (the collection or index, the timestamp, and what else decides the read); the
lookups that arrive meanwhile wait for the next, which reads the union of their key values,
and each applies its own plan to the rows read (the plan keeps exactly the rows it would have
kept from a read of its own keys: the union's rows are a superset, each row of it as
it is in the collection at that timestamp). A lone lookup is read at once, as before.

Every lookup in a batch holds its inputs at the batch's timestamp itself (it chose that
timestamp, with its holds, before joining), so the shared read is at a time each of them may
read at. A lookup canceled while it waits leaves the batch; the read goes on for the others.
The batcher lives on the environment's event loop and is used from it only.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Final, Generic, TypeVar

from spate.environment.runtime import Runtime
from spate.persist.client import PersistClient

V = TypeVar("V")
R = TypeVar("R")


@dataclass
class _Batch(Generic[V, R]):
    run: Callable[[list[V]], Awaitable[R]]
    future: asyncio.Future[R]
    values: list[V] = field(default_factory=list)


class LookupBatcher:
    """One read per batch key at a time; lookups arriving meanwhile share the next."""

    def __init__(self) -> None:
        self._pending: dict[Hashable, _Batch[object, object]] = {}
        self._busy: set[Hashable] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.reads = 0
        """Reads made (for tests and metrics: fewer than the lookups when they were shared)."""

    async def read(
        self,
        key: Hashable,
        values: Sequence[V],
        run: Callable[[list[V]], Awaitable[R]],
    ) -> R:
        """The result of ``run(values of the batch)`` for the batch of ``key`` this lookup
        joins: every lookup with ``key`` MUST pass a ``run`` that reads the same collection at
        the same time the same way (only the values differ)."""
        batch = self._pending.get(key)
        if batch is None:
            loop = asyncio.get_running_loop()
            batch = _Batch(run, loop.create_future())  # type: ignore[arg-type]
            batch.future.add_done_callback(_retrieve)
            self._pending[key] = batch
            if key not in self._busy:
                self._start(key)
        batch.values.extend(values)
        return await asyncio.shield(batch.future)  # type: ignore[arg-type]

    def _start(self, key: Hashable) -> None:
        self._busy.add(key)
        # on the loop's next turn: the lookups already queued on the loop join this batch
        asyncio.get_running_loop().call_soon(self._spawn, key)

    def _spawn(self, key: Hashable) -> None:
        task = asyncio.ensure_future(self._run(key))
        self._tasks.add(task)  # held until done (the loop keeps only a weak reference)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, key: Hashable) -> None:
        batch = self._pending.pop(key)
        self.reads += 1
        try:
            result = await batch.run(list(dict.fromkeys(batch.values)))
        except BaseException as e:  # every lookup of the batch fails as the read did
            if not batch.future.done():
                batch.future.set_exception(e)
            if not isinstance(e, Exception):
                raise
        else:
            if not batch.future.done():
                batch.future.set_result(result)
        finally:
            self._busy.discard(key)
            if key in self._pending:  # gathered while this one read: it reads now
                self._start(key)


def _retrieve(future: asyncio.Future[object]) -> None:
    """Mark a batch's failure as seen (its lookups may all have been canceled)."""
    if not future.cancelled():
        future.exception()


_BATCHERS: Final[weakref.WeakKeyDictionary[PersistClient, LookupBatcher]] = (
    weakref.WeakKeyDictionary()
)
"""One batcher per environment (per persist client: a runtime is not hashable)."""


def batcher_of(rt: Runtime) -> LookupBatcher:
    """The environment's batcher (made on first use, on its event loop)."""
    found = _BATCHERS.get(rt.persist)
    if found is None:
        found = _BATCHERS[rt.persist] = LookupBatcher()
    return found
