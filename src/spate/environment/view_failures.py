"""Reads that wait for a materialized view nobody computes any more fail at once.

A read waits for the uppers of what it reads to pass its timestamp. When the dataflow of a
materialized view it reads (directly, or through views and other materialized views) failed
for good on every replica of the view's cluster — Spark failing, an input that cannot be read;
not an evaluation error, which is data — that upper stops, and the read would wait out its
whole timeout. :func:`await_answer` waits for the answer and checks, a few times a second,
whether such a view failed (:meth:`ComputeController.collection_failure`); if one did, the read
fails with :class:`ViewFailed` naming the view and the failure.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Final, TypeVar

from spate.environment.catalog import MaterializedViewItem, dependencies
from spate.environment.runtime import Runtime
from spate.errors import ReadFailed, SpateError
from spate.ids import GlobalId

T = TypeVar("T")

POLL_S: Final = 0.25
"""How often a waiting read checks whether a view it reads failed."""


class ViewFailed(ReadFailed):
    """A read needs a materialized view whose dataflow failed for good on every replica of its
    cluster (the message names the view and says why); it fails at once instead of timing
    out. A replica that is rehydrated tries the view again."""


def failed_view(rt: Runtime, reads: Iterable[GlobalId]) -> str | None:
    """Why a read of ``reads`` cannot complete: a materialized view it depends on (transitively)
    is computed by no replica any more; ``None`` if there is none."""
    seen: set[GlobalId] = set()
    todo = list(reads)
    while todo:
        id = todo.pop()
        if id in seen:
            continue
        seen.add(id)
        item = rt.catalog.find_id(id)
        if item is None:
            continue
        if isinstance(item, MaterializedViewItem):
            failure = _failure(rt, item)
            if failure is not None:
                return f"materialized view {item.name} ({item.id}) failed: {failure}"
        todo.extend(dependencies(item))
    return None


def _failure(rt: Runtime, item: MaterializedViewItem) -> str | None:
    cluster = next((c for c in rt.catalog.clusters if c.name == item.cluster), None)
    if cluster is None:
        return None
    try:
        return rt.compute.collection_failure(cluster.instance, item.id)
    except SpateError:  # not (or no longer) on the instance: nothing to say
        return None


async def await_answer(
    rt: Runtime,
    future: asyncio.Future[T],
    timeout: float,
    reads: Iterable[GlobalId],
    *,
    what: str = "read",
) -> T:
    """``future``'s result within ``timeout`` (else ``TimeoutError``); :class:`ViewFailed`
    (and ``future`` cancelled) as soon as a view ``reads`` depends on failed (module docs),
    its message starting with ``what``. A subscribe waits for each batch this way. However the
    wait ends without the answer (the caller cancelled too), ``future`` is cancelled."""
    try:
        return await _await_answer(rt, future, timeout, list(reads), what)
    except BaseException:
        # a failure, a timeout, or the read itself cancelled (its client went away): the
        # answer is not wanted any more, and a peek's future cancelled frees the peek's hold,
        # so that its one-off dataflow can be dropped on the replicas at once
        future.cancel()
        raise


async def _await_answer(
    rt: Runtime, future: asyncio.Future[T], timeout: float, watched: list[GlobalId], what: str
) -> T:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        remaining = deadline - loop.time()
        if remaining <= 0:
            future.cancel()
            raise TimeoutError
        done, _ = await asyncio.wait({future}, timeout=min(POLL_S, remaining))
        if done:
            return future.result()
        failure = failed_view(rt, watched)
        if failure is not None:
            future.cancel()
            raise ViewFailed(f"{what} failed: {failure}")
