"""Table writes of the storage controller: ``append``, ``append_table`` and ``append_each``.

:class:`TableWrites` is a part the storage controller owns (``controller.tables``). Every call
is validated whole first (:mod:`.tables`), then, under one lock (calls are serialised):

* a call for **one table** is one compare-and-append on its shard — atomic by itself;
* a call for **several tables** goes through a durable intent (:mod:`.table_txn`): check
  every shard's upper, stage the data, commit the intent in consensus (the commit point),
  apply it to every shard idempotently, clear it lazily. A crash after the commit is finished
  by the next controller's ``open`` (or promotion) before anything else, so the call lands in
  every table exactly once or in none.

``append_each`` is the group commit's primitive: one compare-and-append per table, each table
on its own (one table's failure does not undo another's), all of them committed with one
batched consensus compare-and-set (:mod:`spate.persist.write_many`: one transaction, one fsync
for the group, not one per table).

**One truth for a table's upper.** The expected upper of a table is its write frontier in the
controller's :class:`~.collections.Capabilities`, and nothing else: the controller is a table's
only writer, and every append that commits (or finds a shard moved) applies the new upper to the
capabilities *synchronously*, before the call returns, so a caller that asks
``collection_frontiers`` right after sees it. A shard that another writer moved gives
``InvalidUppers`` naming its current upper, and nothing is written. A table writer whose lease
ran out (an idle table) is replaced by a fresh one transparently.

Fencing: the intent's commit is a compare-and-set fenced by the controller epoch; a one-table
append checks the epoch (a read) right before its compare-and-append.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Final, TypeVar

from spate.frontier.antichain import Antichain, Frontier
from spate.ids import GlobalId, IdGen, ShardId
from spate.persist.client import PersistClient
from spate.persist.crash import crash_point
from spate.persist.errors import LeaseExpired
from spate.persist.state import UpperMismatch
from spate.persist.write import WriteHandle
from spate.persist.write_many import AppendRequest, compare_and_append_many
from spate.repr.desc import RelationDesc
from spate.repr.types import Row
from spate.storage.controller.collections import Capabilities, CollectionState
from spate.storage.controller.errors import InvalidUppers, InvalidUsage, ReadOnly
from spate.storage.controller.table_txn import IntentWrite, StagedWrite, TableIntent, TableTxnLog
from spate.storage.controller.tables import (
    PreparedAppend,
    TableUpdates,
    prepare_append,
    write_append,
)

_log: Final = logging.getLogger("spate.storage.controller")

R = TypeVar("R")

AppendOutcome = Frontier | BaseException
"""What ``append_each`` says of one table: its new upper, or why its append failed."""


class TableWrites:
    """The table writes of one storage controller (module docs). Event-loop thread only.

    ``live(id)`` is the controller's lookup of a live collection (``IdentifierMissing``
    otherwise); ``on_uppers`` is how a committed append reaches the controller's state: it MUST
    apply the uppers to ``caps`` synchronously (and may note them for ``process``).
    """

    def __init__(
        self,
        persist: PersistClient,
        txn: TableTxnLog,
        caps: Capabilities,
        *,
        ids: IdGen,
        live: Callable[[GlobalId], CollectionState],
        on_uppers: Callable[[Sequence[tuple[GlobalId, Frontier]]], None],
    ) -> None:
        self._persist = persist
        self._txn = txn
        self._caps = caps
        self._ids = ids
        self._live = live
        self._on_uppers = on_uppers
        self.read_only = True
        self._lock = asyncio.Lock()
        self._writers: dict[GlobalId, WriteHandle] = {}
        self._unapplied: tuple[TableIntent, dict[GlobalId, RelationDesc]] | None = None
        self.applied_token: uuid.UUID | None = None
        """The last intent this controller applied (cleared lazily from consensus)."""

    @property
    def txn(self) -> TableTxnLog:
        return self._txn

    def upper(self, id: GlobalId) -> Frontier:
        """The table's upper: its write frontier (the one truth, module docs)."""
        return self._caps.collections[id].write_frontier

    # -- public API -----------------------------------------------------------------------------

    async def append(self, commands: Sequence[tuple[GlobalId, TableUpdates, Frontier]]) -> None:
        """Append to tables: ``[(id, updates, new_upper)]``, all or nothing (module docs).

        Raises ``UpdateBeyondUpper`` / ``UpdateNotBeyondLower`` / ``SchemaMismatch`` /
        ``IdentifierMissing`` / ``InvalidUsage`` before writing anything, ``ReadOnly`` in
        read-only mode, ``ControllerFenced`` once a newer controller opened the metadata, and
        ``InvalidUppers`` naming each table whose shard another writer moved (then nothing was
        written). Success is followed by a frontier update through ``ready``/``process``.

        Any other error after the commit point (a persist failure that outlasted its retries)
        leaves the call committed but not yet in every table: the next ``append``, maintenance
        or controller finishes it — the caller MUST NOT write the same data again.
        """
        self._check_tables([id for id, _u, _n in commands])
        async with self._lock:
            await self._finish_unapplied()
            prepared = self._prepare(commands)
            if not prepared:
                return
            if len(prepared) == 1:
                results = [await asyncio.to_thread(self._append_one, prepared[0], self._ids.uuid())]
            else:
                results = await self._append_atomic(prepared)
        self._report(results)

    async def append_table(
        self, write_ts: int, advance_to: int, tables: Sequence[tuple[GlobalId, Sequence[Row]]]
    ) -> None:
        """Insert rows into tables at ``write_ts`` and advance every live table to
        ``advance_to`` (the current Materialize shape of ``append``), atomically."""
        if advance_to <= write_ts:
            raise InvalidUsage(f"advance_to {advance_to} must be beyond write_ts {write_ts}")
        rows = dict(tables)
        commands: list[tuple[GlobalId, TableUpdates, Frontier]] = []
        for id, state in sorted(self._caps.collections.items()):
            if state.description.is_table and not state.dropped:
                ups = [(row, write_ts, 1) for row in rows.pop(id, [])]
                commands.append((id, ups, Antichain.of(advance_to)))
        for id in rows:
            self._live(id)
            raise InvalidUsage(f"{id} is not a table")
        await self.append(commands)

    async def append_each(
        self, commands: Sequence[tuple[GlobalId, TableUpdates, Frontier]]
    ) -> list[AppendOutcome]:
        """Append to each table on its own: one compare-and-append per table, all committed with
        one batched consensus compare-and-set, under one fencing check. Returns, per command,
        the table's new upper or the exception its append raised (``InvalidUppers`` if its
        shard moved); tables that failed are left as they were, the others are written.
        Validation errors of any command raise before anything is written (as ``append``); so
        do ``ReadOnly`` and ``ControllerFenced``."""
        self._check_tables([id for id, _u, _n in commands])
        async with self._lock:
            await self._finish_unapplied()
            prepared = self._prepare(commands)
            if not prepared:
                return []
            tokens = [self._ids.uuid() for _ in prepared]
            outcomes = await asyncio.to_thread(self._fenced_append_many, prepared, tokens)
        results = [o for o in outcomes if isinstance(o, tuple)]
        self._on_uppers([(id, upper) for id, upper, _ok in results])
        out: list[AppendOutcome] = []
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                out.append(outcome)
            else:
                id, upper, ok = outcome
                out.append(upper if ok else InvalidUppers([(id, upper)]))
        return out

    # -- internals ------------------------------------------------------------------------------

    def _check_tables(self, ids: Sequence[GlobalId]) -> None:
        if self.read_only:
            raise ReadOnly()
        seen: set[GlobalId] = set()
        for id in ids:
            if not self._live(id).description.is_table:
                raise InvalidUsage(f"{id} is not a table; only tables take appends")
            if id in seen:
                raise InvalidUsage(f"table {id} appears twice in one append")
            seen.add(id)

    def _prepare(
        self, commands: Sequence[tuple[GlobalId, TableUpdates, Frontier]]
    ) -> list[PreparedAppend]:
        return [
            prepare_append(
                id,
                self._live(id).description.desc,
                updates,
                upper=self.upper(id),
                new_upper=new_upper,
            )
            for id, updates, new_upper in commands
        ]

    def _report(self, results: Sequence[tuple[GlobalId, Frontier, bool]]) -> None:
        self._on_uppers([(id, upper) for id, upper, _ok in results])
        failed = [(id, upper) for id, upper, ok in results if not ok]
        if failed:
            raise InvalidUppers(failed)

    def _with_writer(
        self, id: GlobalId, shard: ShardId, desc: RelationDesc, op: Callable[[WriteHandle], R]
    ) -> R:
        """Run ``op`` with the table's writer (blocking), replacing an expired one once."""
        for attempt in range(2):
            writer = self._writers.get(id)
            if writer is None or writer.shard_id != shard:
                writer = self._persist.open_writer(shard, desc)
                self._writers[id] = writer
            try:
                return op(writer)
            except LeaseExpired:
                self._writers.pop(id, None)
                if attempt:
                    raise
                _log.info("table %s: writer %s expired; opening a new one", id, writer.writer_id)
        raise AssertionError("unreachable")

    def _append_one(
        self, prepared: PreparedAppend, token: uuid.UUID, *, fenced: bool = False
    ) -> tuple[GlobalId, Frontier, bool]:
        """One table: a fenced compare-and-append (blocking). ``fenced``: the caller checked
        the epoch already."""
        state = self._caps.collections[prepared.id]
        if not fenced:
            self._txn.check_epoch()
        result = self._with_writer(
            prepared.id,
            state.shard,
            state.description.desc,
            lambda w: write_append(w, prepared, token),
        )
        if isinstance(result, UpperMismatch):
            return prepared.id, result.current, False
        return prepared.id, result.upper, True

    def _fenced_append_many(
        self, prepared: Sequence[PreparedAppend], tokens: Sequence[uuid.UUID]
    ) -> list[tuple[GlobalId, Frontier, bool] | BaseException]:
        """The epoch check, then :meth:`_append_many` (blocking): one worker-thread trip for
        both, since a write waits for each trip (``ControllerFenced`` before anything is
        written, as before)."""
        self._txn.check_epoch()
        return self._append_many(prepared, tokens)

    def _append_many(
        self, prepared: Sequence[PreparedAppend], tokens: Sequence[uuid.UUID]
    ) -> list[tuple[GlobalId, Frontier, bool] | BaseException]:
        """Several tables, each on its own, one batched commit (blocking; the caller checked
        the epoch). A table whose writer expired is appended alone with a fresh writer."""
        requests: list[AppendRequest] = []
        out: list[tuple[GlobalId, Frontier, bool] | BaseException | None] = []
        for p, token in zip(prepared, tokens, strict=True):
            state = self._caps.collections[p.id]
            try:
                writer = self._writers.get(p.id)
                if writer is None or writer.shard_id != state.shard:
                    writer = self._persist.open_writer(state.shard, state.description.desc)
                    self._writers[p.id] = writer
            except Exception as e:
                out.append(e)
                continue
            out.append(None)
            requests.append(AppendRequest(writer, p.table, p.expected_upper, p.new_upper, token))
        results = iter(compare_and_append_many(requests))
        final: list[tuple[GlobalId, Frontier, bool] | BaseException] = []
        for p, token, o in zip(prepared, tokens, out, strict=True):
            if o is not None:
                final.append(o)
                continue
            r = next(results)
            if isinstance(r, LeaseExpired):  # nothing written: again alone, with a new writer
                self._writers.pop(p.id, None)
                try:
                    final.append(self._append_one(p, token, fenced=True))
                except Exception as e:
                    final.append(e)
            elif isinstance(r, BaseException):
                final.append(r)
            elif isinstance(r, UpperMismatch):
                final.append((p.id, r.current, False))
            else:
                final.append((p.id, r.upper, True))
        return final

    async def _append_atomic(
        self, prepared: Sequence[PreparedAppend]
    ) -> list[tuple[GlobalId, Frontier, bool]]:
        """Several tables: check, stage, commit the intent, apply it (module docs)."""
        states = {p.id: self._caps.collections[p.id] for p in prepared}
        descs = {id: s.description.desc for id, s in states.items()}

        def current(p: PreparedAppend) -> Frontier:
            s = states[p.id]
            return self._with_writer(p.id, s.shard, descs[p.id], lambda w: w.fetch_recent_upper())

        uppers = await asyncio.gather(*(asyncio.to_thread(current, p) for p in prepared))
        if any(u != p.expected_upper for p, u in zip(prepared, uppers, strict=True)):
            return [(p.id, u, u == p.expected_upper) for p, u in zip(prepared, uppers, strict=True)]
        writes = [
            StagedWrite(p.id, states[p.id].shard, p.expected_upper, p.new_upper, p.table)
            for p in prepared
        ]
        intent = await asyncio.to_thread(self._txn.stage, self._ids.uuid(), writes)
        crash_point("storage.append.before_intent")
        try:
            await asyncio.to_thread(self._txn.commit, intent, replaces=self.applied_token)
        except BaseException:
            await asyncio.to_thread(self._txn.discard, intent)
            raise
        self.applied_token = None
        self._unapplied = (intent, descs)
        crash_point("storage.append.after_intent")
        results = await self._apply_intent(intent, descs, fresh=True)
        return [(id, upper, True) for id, upper in results]

    async def _apply_intent(
        self, intent: TableIntent, descs: Mapping[GlobalId, RelationDesc], *, fresh: bool
    ) -> list[tuple[GlobalId, Frontier]]:
        """Write every table of a committed intent (idempotent); then it may be cleared.

        ``fresh``: just committed by this controller from checked uppers, so no table can be
        written yet. Otherwise (recovery) a table already at its upper is skipped without
        reading its data (staged blobs of applied intents may be gone)."""
        outcomes = await asyncio.gather(
            *(
                asyncio.to_thread(self._apply_write, w, descs, fresh)
                for w in intent.writes
                if w.id in descs
            ),
            return_exceptions=True,
        )
        results: list[tuple[GlobalId, Frontier]] = []
        for outcome in outcomes:  # every thread is done: no write of this intent is in flight
            if isinstance(outcome, BaseException):
                raise outcome
            results.append(outcome)
        crash_point("storage.append.after_apply")
        self._unapplied = None
        self.applied_token = intent.token
        await asyncio.to_thread(self._txn.discard, intent)
        return results

    def _apply_write(
        self, write: IntentWrite, descs: Mapping[GlobalId, RelationDesc], fresh: bool
    ) -> tuple[GlobalId, Frontier]:
        desc = descs[write.id]

        def apply(w: WriteHandle) -> Frontier:
            if not fresh:
                current = w.fetch_recent_upper()
                if write.upper.less_equal(current):
                    return current
            updates = self._txn.updates(write)
            done = w.append(updates, lower=write.lower, upper=write.upper)
            if done.deduplicated and fresh:
                _log.error(
                    "table %s: shard %s was already at %s when its committed write [%s, %s) "
                    "was applied: another writer writes this table's shard",
                    write.id,
                    write.shard,
                    done.upper,
                    write.lower,
                    write.upper,
                )
            return done.upper

        upper = self._with_writer(write.id, write.shard, desc, apply)
        crash_point("storage.append.after_shard")
        return write.id, upper

    async def _finish_unapplied(self) -> None:
        """Finish an intent of this controller whose application failed earlier."""
        if self._unapplied is None:
            return
        intent, descs = self._unapplied
        results = await self._apply_intent(intent, descs, fresh=False)
        self._report([(id, upper, True) for id, upper in results])

    async def recover_intent(
        self, intent: TableIntent | None, descs: Mapping[GlobalId, RelationDesc]
    ) -> None:
        """At ``open``/promotion: sweep staged leftovers, finish the pending intent."""
        await asyncio.to_thread(self._txn.sweep, intent)
        if intent is None:
            return
        live = {w.id: descs[w.id] for w in intent.writes if w.id in descs}
        self._unapplied = (intent, live)
        results = await self._apply_intent(intent, live, fresh=False)
        _log.info("finished table write %s left pending: %s", intent.token, results)

    async def maintain(self) -> None:
        """Finish an intent whose application failed; forget an applied one in consensus
        (off the append path). Skipped while an append runs."""
        if self._lock.locked() or self.read_only:
            return
        async with self._lock:
            await self._finish_unapplied()
            token = self.applied_token
            if token is not None:
                await asyncio.to_thread(self._txn.clear, token)
                self.applied_token = None

    async def forget(self, id: GlobalId) -> None:
        """The table is gone: release its writer."""
        writer = self._writers.pop(id, None)
        if writer is not None:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(writer.expire)

    async def shutdown(self) -> None:
        """Release every table writer."""
        for id in list(self._writers):
            await self.forget(id)
