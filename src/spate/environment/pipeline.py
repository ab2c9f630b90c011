"""Pipelined table writes: a caller submits writes without waiting for each acknowledgement.

``env.insert`` (``update``, ``delete``) returns once its write is durable and visible, so a
caller writing in a loop pays one group commit per call. A :class:`WritePipeline` (from
``env.pipeline()``) submits each write and returns a :class:`PendingWrite` at once; the writes
a caller submits while a group is being committed join the next group together, so successive
writes share commits instead of waiting for each other.

Guarantees, the same as for the plain calls, one write at a time:

* **Order.** The writes of one pipeline (from one thread) take effect in the order they were
  submitted: each is committed at a timestamp no earlier than the one before, and a delete or
  update checks its rows against the table after every earlier write of the pipeline (an
  update of a row inserted just before, in the same pipeline, finds it).
* **Durability at acknowledgement.** A :class:`PendingWrite` completes (``result()`` returns
  its :class:`~spate.environment.write_result.WriteResult`) only once the write is durable and
  every read that starts afterwards observes it. Until then it may still fail.
* **Failure is per write.** A write that fails (a row that does not fit, rows not found)
  changes nothing, and raises from its ``result()``; later writes of the pipeline are still
  carried out. :meth:`WritePipeline.wait` raises the first failure after waiting for all.

Leaving the ``with`` block waits for every write submitted in it.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Coroutine, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from spate.environment import tables
from spate.environment.runtime import Runtime
from spate.environment.write_result import WriteResult
from spate.errors import CallTimeout
from spate.repr.types import Datum

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

T = TypeVar("T")
Start = Callable[[Coroutine[Any, Any, T]], "concurrent.futures.Future[T]"]


class PendingWrite:
    """A submitted table write: :meth:`result` waits for its acknowledgement."""

    def __init__(self, future: concurrent.futures.Future[WriteResult]) -> None:
        self._future = future

    def done(self) -> bool:
        """Whether the write was acknowledged or failed."""
        return self._future.done()

    def result(self, timeout: float | None = 300.0) -> WriteResult:
        """The write's result once it is durable and visible; raises the write's error, or
        :class:`~spate.errors.CallTimeout` if it is not acknowledged within ``timeout`` s
        (it may still be later)."""
        try:
            return self._future.result(timeout)
        except concurrent.futures.TimeoutError:
            raise CallTimeout(
                f"the write was not acknowledged within {timeout} s (it may still be)"
            ) from None


class WritePipeline:
    """Table writes submitted without waiting (module docs). Use ``env.pipeline()``.

    Example::

        with env.pipeline() as p:
            for new, pairs in steps:
                p.insert("bids", new)
                p.update("bids", pairs)
        # here every write above is durable and visible (or the first failure was raised)
    """

    def __init__(self, runtime: Runtime, start: Start[Any]) -> None:
        self._rt = runtime
        self._start = start
        self._pending: list[PendingWrite] = []

    def insert(
        self, name: str, rows: Sequence[Sequence[Datum]] | pa.Table | pd.DataFrame
    ) -> PendingWrite:
        """Submit ``env.insert(name, rows)``."""
        rows, count = tables.insertable(name, rows)
        return self._submit(_result(tables.insert(self._rt, name, rows), count))

    def update(
        self, name: str, changes: Sequence[tuple[Sequence[Datum], Sequence[Datum]]]
    ) -> PendingWrite:
        """Submit ``env.update(name, changes)``."""
        changes = tables.as_list(changes, f"the (old, new) pairs to update in {name}")
        return self._submit(_result(tables.update(self._rt, name, changes), len(changes)))

    def delete(
        self,
        name: str,
        rows: Sequence[Sequence[Datum]] | None = None,
        *,
        where: Mapping[str, Datum] | None = None,
    ) -> PendingWrite:
        """Submit ``env.delete(name, rows, where=where)``."""
        if rows is not None:
            rows = tables.as_list(rows, f"the rows {name} should lose")
        return self._submit(_deleted(tables.delete(self._rt, name, rows, where=where)))

    def wait(self, timeout: float | None = 300.0) -> list[WriteResult]:
        """Wait for every write submitted so far; their results in order. Raises the first
        failure (after every write has completed)."""
        pending, self._pending = self._pending, []
        concurrent.futures.wait([p._future for p in pending], timeout)
        return [p.result(0 if timeout is not None else None) for p in pending]

    def _submit(self, coro: Coroutine[Any, Any, WriteResult]) -> PendingWrite:
        pending = PendingWrite(self._start(coro))
        self._pending.append(pending)
        return pending

    def __enter__(self) -> WritePipeline:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None:
            self.wait()
        else:  # the block failed: let its writes finish, report the block's error
            concurrent.futures.wait([p._future for p in self._pending], 300.0)


async def _result(write: Coroutine[Any, Any, int], rows: int) -> WriteResult:
    return WriteResult(timestamp=await write, rows=rows)


async def _deleted(write: Coroutine[Any, Any, tuple[int, int]]) -> WriteResult:
    timestamp, rows = await write
    return WriteResult(timestamp=timestamp, rows=rows)
