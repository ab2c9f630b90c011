"""``compare_and_append_many``: compare-and-appends to several shards, one consensus commit.

Each request is exactly ``WriteHandle.compare_and_append`` of its own shard (same validation,
same result, same idempotency token semantics); what they share is the durable commit. The
calls write their batches' blobs (none for an empty append), compute every shard's new state
from the state its machine last saw, and write all of those states with ONE
``Consensus.compare_and_set_many`` — one transaction, one fsync, instead of one per shard.

A shard whose compare-and-set lost (its cached state was stale: someone else wrote), or whose
transition could not be decided on the cached state, or every shard when the batch itself failed,
then goes through the shard's lone write path (``Machine.apply``) with the blobs already written
and the same token: exactly what a lone append does after a lost or failed compare-and-set. After
an ``Indeterminate`` batch that path knows the write may have committed (a retry finds the token:
``deduplicated``, and the blobs are kept).

Durability: a shard's append is acknowledged only after the transaction holding its new state
committed; a crash before the commit leaves every shard of the batch untouched, a crash after it
leaves every shard that won appended (``persist.before_cas`` / ``persist.after_cas_before_ack``
and the consensus's own ``consensus.mid_batch_cas``).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from spate.errors import Determinate, Indeterminate
from spate.frontier.antichain import Frontier
from spate.persist.consensus import compare_and_set_many
from spate.persist.crash import crash_point
from spate.persist.machine import Applied, PreparedCas
from spate.persist.state import Appended, BatchPart, UpperMismatch
from spate.persist.write import WriteHandle

AppendManyOutcome = Appended | UpperMismatch | Exception
"""One request's result: what its ``compare_and_append`` returned, or the error it raised."""


@dataclass(frozen=True, slots=True)
class AppendRequest:
    """One shard's ``compare_and_append`` in a ``compare_and_append_many`` call."""

    handle: WriteHandle
    updates: pa.Table | None
    expected_upper: Frontier
    new_upper: Frontier
    idempotency_token: uuid.UUID


@dataclass(slots=True)
class _Pending:
    index: int
    request: AppendRequest
    parts: tuple[BatchPart, ...]
    prepared: PreparedCas[Appended | UpperMismatch] | None = None


def compare_and_append_many(requests: Sequence[AppendRequest]) -> list[AppendManyOutcome]:
    """Every request's ``compare_and_append`` with one batched commit (module docs); one
    outcome per request, in order. One request's error or lost race does not affect another's.

    Every handle MUST be a distinct shard's writer of one client (one Consensus); a shard twice
    raises ``ValueError`` before anything is written. Blocking.
    """
    handles = [r.handle for r in requests]
    if len({h.shard_id for h in handles}) != len(handles):
        raise ValueError("compare_and_append_many: a shard appears twice")
    consensus = {id(h._ctx.consensus): h._ctx.consensus for h in handles}
    if len(consensus) > 1:
        raise ValueError("compare_and_append_many: the handles use different consensus stores")
    out: list[AppendManyOutcome | None] = [None] * len(requests)
    pending: list[_Pending] = []
    tables: list[pa.Table | None] = []
    for i, r in enumerate(requests):
        try:
            tables.append(r.handle._prepare(r.updates, r.expected_upper, r.new_upper))
        except Exception as e:
            out[i] = e
            tables.append(None)
    with contextlib.ExitStack() as locks:
        for i in sorted(range(len(requests)), key=lambda i: str(handles[i].shard_id)):
            locks.enter_context(handles[i]._lock)
        # The blobs only under the handles' locks: a writer's GC (under its lock) deletes the
        # writer's blobs no state references, which a blob not yet committed is.
        for i, r in enumerate(requests):
            if out[i] is not None:
                continue
            try:
                pending.append(_Pending(i, r, r.handle._write_parts(tables[i], r.new_upper)))
            except Exception as e:
                out[i] = e
        for p in pending:
            r = p.request
            fn = r.handle._append_fn(p.parts, r.expected_upper, r.new_upper, r.idempotency_token)
            try:
                p.prepared = r.handle._ctx.machine.prepare(fn)
            except Exception:
                p.prepared = None  # decided by the lone path below
        batch = [p for p in pending if p.prepared is not None]
        won: set[int] = set()
        uncertain = False
        if batch:
            crash_point("persist.before_cas")
            ops = [p.prepared.op for p in batch if p.prepared is not None]
            try:
                oks = compare_and_set_many(next(iter(consensus.values())), ops)
            except (Determinate, Indeterminate) as e:
                uncertain = isinstance(e, Indeterminate)
            else:
                won = {p.index for p, ok in zip(batch, oks, strict=True) if ok}
        for p in pending:
            r = p.request
            h = r.handle
            machine = h._ctx.machine
            try:
                applied: Applied[Appended | UpperMismatch]
                if p.index in won and p.prepared is not None:
                    applied = machine.committed(p.prepared)
                else:
                    if p.prepared is not None and not uncertain:
                        machine.cas_mismatches += 1
                    fn = h._append_fn(p.parts, r.expected_upper, r.new_upper, r.idempotency_token)
                    applied = machine.apply(
                        fn,
                        crash_points=True,
                        refresh=p.prepared is not None,
                        maybe_committed=uncertain and p.prepared is not None,
                    )
                out[p.index] = h._finish(applied, p.parts, r.new_upper)
            except Exception as e:
                out[p.index] = e
    assert all(o is not None for o in out)
    return [o for o in out if o is not None]
