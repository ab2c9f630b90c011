"""Table writes of the storage controller: ``append`` and ``append_table`` (spec §6.2).

Mixed into :class:`~spate.storage.controller.controller.StorageController`. Every call is
validated whole first (:mod:`.tables`), then, under one lock (calls are serialised):

* a call for **one table** is one compare-and-append on its shard — atomic by itself;
* a call for **several tables** goes through a durable intent (:mod:`.table_txn`): check
  every shard's upper, stage the data, commit the intent in consensus (the commit point),
  apply it to every shard idempotently, clear it lazily. A crash after the commit is finished
  by the next controller's ``open`` (or promotion) before anything else, so the call lands in
  every table exactly once or in none.

The expected upper of a table is the latest the controller knows: its write frontier, or what
its own last append left (so back-to-back appends need no ``process`` in between). A shard that
another writer moved gives ``InvalidUppers`` naming its current upper, and nothing is written.
A table writer whose lease ran out (an idle table) is replaced by a fresh one transparently.

Fencing: the intent's commit is a compare-and-set fenced by the controller epoch; a one-table
append checks the epoch (a read) right before its compare-and-append.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Final, TypeVar

from spate.frontier.antichain import Antichain, Frontier
from spate.ids import GlobalId, ShardId
from spate.persist.crash import crash_point
from spate.persist.errors import LeaseExpired
from spate.persist.state import UpperMismatch
from spate.persist.write import WriteHandle
from spate.repr.desc import RelationDesc
from spate.repr.types import Row
from spate.storage.controller.collections import CollectionState
from spate.storage.controller.driver import ControllerDriver, TableUppers
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


class TableWritesApi(ControllerDriver):
    """The table-writing methods of the storage controller (module docs)."""

    _txn: TableTxnLog
    _append_lock: asyncio.Lock
    _known_uppers: dict[GlobalId, Frontier]
    _unapplied: tuple[TableIntent, dict[GlobalId, RelationDesc]] | None
    _applied_token: uuid.UUID | None

    def _live(self, id: GlobalId) -> CollectionState:
        raise NotImplementedError

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
        if self._read_only:
            raise ReadOnly()
        seen: set[GlobalId] = set()
        for id, _updates, _new_upper in commands:
            if not self._live(id).description.is_table:
                raise InvalidUsage(f"{id} is not a table; only tables take appends")
            if id in seen:
                raise InvalidUsage(f"table {id} appears twice in one append")
            seen.add(id)
        async with self._append_lock:
            await self._finish_unapplied()
            prepared = [
                prepare_append(
                    id,
                    self._live(id).description.desc,
                    updates,
                    upper=self._table_upper(id),
                    new_upper=new_upper,
                )
                for id, updates, new_upper in commands
            ]
            if not prepared:
                return
            if len(prepared) == 1:
                results = [await asyncio.to_thread(self._append_one, prepared[0])]
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
        for id, state in self._caps.collections.items():
            if state.description.is_table and not state.dropped:
                ups = [(row, write_ts, 1) for row in rows.pop(id, [])]
                commands.append((id, ups, Antichain.of(advance_to)))
        for id in rows:
            self._live(id)
            raise InvalidUsage(f"{id} is not a table")
        await self.append(sorted(commands, key=lambda c: c[0]))

    # -- internals ------------------------------------------------------------------------------

    def _table_upper(self, id: GlobalId) -> Frontier:
        known = self._known_uppers.get(id)
        upper = self._caps.collections[id].write_frontier
        return upper if known is None else upper.join(known)

    def _report(self, results: Sequence[tuple[GlobalId, Frontier, bool]]) -> None:
        for id, upper, _ok in results:
            self._known_uppers[id] = upper
        self._inbox.append(TableUppers(tuple((id, upper) for id, upper, _ in results)))
        self._wakeup.set()
        failed = [(id, upper) for id, upper, ok in results if not ok]
        if failed:
            raise InvalidUppers(failed)

    def _with_writer(
        self, id: GlobalId, shard: ShardId, desc: RelationDesc, op: Callable[[WriteHandle], R]
    ) -> R:
        """Run ``op`` with the table's writer (blocking), replacing an expired one once."""
        for attempt in range(2):
            writer = self._table_writers.get(id)
            if writer is None or writer.shard_id != shard:
                writer = self._persist.open_writer(shard, desc)
                self._table_writers[id] = writer
            try:
                return op(writer)
            except LeaseExpired:
                self._table_writers.pop(id, None)
                if attempt:
                    raise
                _log.info("table %s: writer %s expired; opening a new one", id, writer.writer_id)
        raise AssertionError("unreachable")

    def _append_one(self, prepared: PreparedAppend) -> tuple[GlobalId, Frontier, bool]:
        """One table: a fenced compare-and-append (blocking)."""
        state = self._caps.collections[prepared.id]
        self._txn.check_epoch()
        token = self._ids.uuid()
        result = self._with_writer(
            prepared.id,
            state.shard,
            state.description.desc,
            lambda w: write_append(w, prepared, token),
        )
        if isinstance(result, UpperMismatch):
            return prepared.id, result.current, False
        return prepared.id, result.upper, True

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
            await asyncio.to_thread(self._txn.commit, intent, replaces=self._applied_token)
        except BaseException:
            await asyncio.to_thread(self._txn.discard, intent)
            raise
        self._applied_token = None
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
        self._applied_token = intent.token
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

    async def _recover_intent(
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

    async def _table_maintenance(self) -> None:
        """Finish an intent whose application failed; forget an applied one in consensus
        (off the append path). Skipped while an append runs."""
        if self._append_lock.locked() or self._read_only:
            return
        async with self._append_lock:
            await self._finish_unapplied()
            token = self._applied_token
            if token is not None:
                await asyncio.to_thread(self._txn.clear, token)
                self._applied_token = None
