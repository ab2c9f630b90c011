"""Peeks on persist (the fast path): read a shard at a time, no dataflow involved.

``read_persist_peek`` registers a short-lived leased reader, takes the snapshot at the peek's
timestamp (the contents at that time, consolidated), expires the reader, and applies the
finishing (order by, offset, limit, projection — the same code as index peeks,
:func:`spate.render.peek.finish`). The caller has already waited for the shard's upper to pass
the timestamp. A view in error at the timestamp (its errors shard,
:mod:`spate.persist.error_shard`, is not empty there) fails the peek with the first error. A
timestamp below the shard's since is ``AsOfBeforeSince`` (its message names the
shard, the since and the time); rows with a negative multiplicity are an error, never an answer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

from spate.compute.replica.inputs import InputUnavailable
from spate.compute.replica.metrics import ReplicaMetrics
from spate.compute.replica.uppers import ShardUppers
from spate.compute.replica.view_errors import Running, check_view
from spate.errors import EvaluationFailed
from spate.persist.client import PersistClient
from spate.persist.error_shard import errors_at
from spate.protocol.compute import Peek, PersistTarget
from spate.repr.desc import DIFF_COLUMN, TIME_COLUMN

SNAPSHOT_TIMEOUT_S: Final = 30.0


class PersistPeekError(Exception):
    """A persist peek that cannot be answered with rows (the message is the answer)."""


async def serve_persist_peek(
    persist: PersistClient | None,
    uppers: ShardUppers,
    running: Iterable[Running],
    peek: Peek,
    metrics: ReplicaMetrics,
) -> pa.Table:
    """Answer ``peek`` (a ``PersistTarget`` peek) once its shard's upper passes its timestamp,
    unless the view's writer on this replica has errors at that time."""
    target = peek.target
    assert isinstance(target, PersistTarget)
    if persist is None:
        raise InputUnavailable(
            f"peek of {target.id} on persist: this replica has no persist location"
        )
    await uppers.wait_past(target.shard, peek.timestamp)
    check_view(running, target.id, peek.timestamp)
    # the errors shard's answer (a view written on any cluster, before any restart)
    found = await asyncio.to_thread(errors_at, persist, target.shard, peek.timestamp)
    if found:
        what = f"materialized view {target.id}"
        raise EvaluationFailed.of_record(what, found[0][0], sum(n for _, n in found))
    started = time.perf_counter()
    rows = await asyncio.to_thread(read_persist_peek, persist, peek)
    metrics.peek_seconds("persist", time.perf_counter() - started)
    return rows


def read_persist_peek(persist: PersistClient, peek: Peek) -> pa.Table:
    """The finished rows of ``peek`` (a ``PersistTarget`` peek); raises on failure."""
    from spate.render.layout import col_name  # type: ignore[import-not-found,unused-ignore]
    from spate.render.peek import finish, name_result  # type: ignore[import-not-found,unused-ignore]

    target = peek.target
    assert isinstance(target, PersistTarget)
    if peek.literal_constraints is not None:
        raise PersistPeekError(
            f"peek of {target.id} on persist (shard {target.shard}): literal constraints need "
            "an index; peek an index of the collection instead"
        )
    desc = target.desc
    peek.finishing.validate(desc.arity)
    reader = persist.open_leased_reader(target.shard, desc)
    try:
        snapshot = reader.snapshot(peek.timestamp, timeout=SNAPSHOT_TIMEOUT_S)
    finally:
        reader.expire()
    diffs = snapshot.column(DIFF_COLUMN)
    if snapshot.num_rows and pc.min(diffs).as_py() < 0:
        raise PersistPeekError(
            f"collection {target.id} (shard {target.shard}) at {peek.timestamp}: a row has a "
            "negative multiplicity (retractions of rows that were never inserted)"
        )
    data = [c for c in snapshot.column_names if c not in (TIME_COLUMN, DIFF_COLUMN)]
    positional = pa.Table.from_arrays(
        [snapshot.column(c) for c in data] + [diffs],
        names=[col_name(i) for i in range(len(data))] + [DIFF_COLUMN],
    )
    return name_result(finish(positional, peek.finishing, desc.arity), peek.result_desc)
