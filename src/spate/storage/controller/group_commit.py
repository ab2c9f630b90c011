"""Group commit of table writes: every write pending when a commit starts goes into it.

Writers submit changes (validated once, as Arrow, before they are queued: a bad row fails its
own write and nothing else); a single committer takes **all writes pending** at that moment —
and the *advance* of every table (the tick), if one was asked for — chooses **one timestamp**
``ts`` from the timestamp oracle, and appends to **each table once**: one compare-and-append of
every change to that table at ``ts``, with the table's new upper ``ts + 1``. **Every** table is
appended, the ones no write of the group names with no updates: all tables move together, so a
dataflow or a read over a written table and an unwritten one can go to ``ts`` at once instead
of waiting for the next tick to move the unwritten one. Tables are appended
concurrently and independently (:meth:`~.table_writes.TableWrites.append_each`). Only when
every append of the group has returned does the committer tell the oracle that ``ts`` is
acknowledged (``apply_write``), and only then does each successful write return ``ts``: a write
returns after it is durable **and** visible to a following strict read at ``read_ts()``.

Writes that arrive while a group is being committed form the next group, so a busy table costs
one compare-and-append per commit rather than one per write, and an idle one adds no latency
(a write that finds the committer idle starts a group at once, after the writes submitted in
the same event-loop turn have joined it).

**Read-then-write writes** (a delete or update that must see the table's rows) carry a
*derive* function instead of changes: inside the commit, in submission order, it gets the
table's :class:`TableContents` — the contents as of every earlier write, including earlier
writes of the same group — and returns its changes, or raises to fail (alone). Nothing else
writes in between, exactly as under a write lock.

**The first read is an Arrow snapshot** (:mod:`.table_contents`): the rows a write names are
looked up in it at once while every row becomes a Python object on a worker thread, so the
first update of a large table costs a snapshot read and a join, not seconds of row objects. A
table of integer columns stays in that form, indexed by row hash: its rows never become
Python objects at all.

**The contents are kept, not re-read.** The committer is a table's only writer, so once it has
read a table's contents (at the first read-then-write) it keeps them, as of the table's upper,
and applies every change it commits to the table: later deletes and updates check their rows
against the kept contents without reading the table. The kept contents are used only while the
table's upper is the one they were kept at; a table written or advanced by anything else, an
append that failed, or a group that failed drops them, and the next read-then-write reads the
table again. (The cost is memory: the rows of each table that took a delete or update.)

Failure is per write: a write whose table was dropped, whose derive raised, or whose table's
append failed gets that exception; the other writes of the group still commit. An error of the
whole group (``ReadOnly``, ``ControllerFenced``) fails every write in it. A write that failed
changed nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

import pyarrow as pa

from spate.frontier.antichain import Antichain
from spate.ids import GlobalId
from spate.repr.arrow import table_to_rows
from spate.repr.desc import DIFF_COLUMN, RelationDesc
from spate.repr.types import Row
from spate.storage.controller.controller import StorageController
from spate.storage.controller.errors import IdentifierMissing
from spate.storage.controller.table_contents import TableContents as TableContents
from spate.storage.controller.tables import (
    TableUpdates,
    ValidatedChanges,
    trusted_changes,
)

_log: Final = logging.getLogger("spate.storage.controller.group_commit")


class Timestamps(Protocol):
    """The timestamp oracle, as the committer uses it."""

    def write_ts(self) -> int:
        """A fresh write timestamp, beyond every earlier one."""
        ...

    def apply_write(self, ts: int) -> None:
        """The write at ``ts`` is acknowledged: strict reads from now on observe it."""
        ...


Derive = Callable[[TableContents], Sequence[tuple[Row, int]]]
"""Changes computed from the table's contents inside the commit (raise to fail the write)."""


@dataclass(eq=False)
class _Write:
    id: GlobalId | None  # None: advance every table (the tick)
    changes: ValidatedChanges | None
    derive: Derive | None
    done: asyncio.Future[int]
    rows: Sequence[Row] | None = None
    """The rows ``derive`` counts (looked up at once), ``None``: any."""


class GroupCommit:
    """The group committer of one storage controller's tables (module docs). Event-loop
    thread only; ``window_s`` delays each group to gather more writes (0: none)."""

    def __init__(
        self, storage: StorageController, timestamps: Timestamps, *, window_s: float = 0.0
    ) -> None:
        self._storage = storage
        self._timestamps = timestamps
        self._window_s = window_s
        self._queue: list[_Write] = []
        self._kept: dict[GlobalId, tuple[int, TableContents]] = {}
        """Contents of tables as of their upper then (module docs)."""
        self.reads = 0
        """Times a table's contents were read from persist (for tests and benchmarks)."""
        self._task: asyncio.Task[None] | None = None
        self.groups = 0
        """Groups committed so far (for tests and benchmarks)."""

    # -- submitting -------------------------------------------------------------------------------

    async def write(self, id: GlobalId, changes: ValidatedChanges) -> int:
        """Append ``changes`` to table ``id``; return the timestamp once acknowledged."""
        return await self._submit(_Write(id, changes, None, self._future()))

    async def write_derived(
        self, id: GlobalId, derive: Derive, *, rows: Sequence[Row] | None = None
    ) -> int:
        """Append the changes ``derive`` computes from the table's contents (module docs);
        ``rows``: the only rows ``derive`` counts, if known."""
        return await self._submit(_Write(id, None, derive, self._future(), rows))

    async def advance(self) -> int:
        """Advance every table (and the read timestamp) to a fresh timestamp; return it."""
        return await self._submit(_Write(None, None, None, self._future()))

    def close(self) -> None:
        """Stop committing; writes not yet committed fail with ``CancelledError``."""
        if self._task is not None:
            self._task.cancel()
        for w in self._queue:
            w.done.cancel()
        self._queue = []
        self._kept.clear()

    def _future(self) -> asyncio.Future[int]:
        return asyncio.get_running_loop().create_future()

    async def _submit(self, write: _Write) -> int:
        self._queue.append(write)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="table group commit"
            )
        return await write.done

    # -- committing -------------------------------------------------------------------------------

    async def _run(self) -> None:
        while self._queue:
            await asyncio.sleep(self._window_s)  # writers of this turn (or window) join
            group, self._queue = self._queue, []
            try:
                await self._commit(group)
            except BaseException as e:
                for w in group:
                    _fail(w, e if isinstance(e, Exception) else asyncio.CancelledError())
                if not isinstance(e, Exception):
                    raise
            self.groups += 1

    async def _commit(self, group: list[_Write]) -> None:
        advance = [w for w in group if w.id is None]
        writes: dict[GlobalId, list[_Write]] = {}
        for w in group:
            if w.id is not None:
                writes.setdefault(w.id, []).append(w)
        live = set(self._table_ids())
        for id in [id for id in self._kept if id not in live]:
            del self._kept[id]
        for id in [id for id in writes if id not in live]:
            for w in writes.pop(id):
                _fail(w, IdentifierMissing(id, "table"))
        if not writes and not advance:
            return
        ids = sorted(live)  # every table moves with the group (module docs)
        ts = self._timestamps.write_ts()
        accepted: dict[GlobalId, list[_Write]] = {}
        commands: list[tuple[GlobalId, TableUpdates, Antichain[int]]] = []
        kept: dict[GlobalId, TableContents] = {}
        for id in ids:
            parts, accepted[id], contents = await self._table_changes(id, writes.get(id, []))
            if contents is not None:
                kept[id] = contents
            updates: TableUpdates = []
            if parts:
                table = pa.concat_tables([p.table for p in parts])
                updates = ValidatedChanges(table).at(ts)
            commands.append((id, updates, Antichain.of(ts + 1)))
        outcomes = await self._storage.tables.append_each(commands) if commands else []
        failed: BaseException | None = None
        for (id, _u, _n), outcome in zip(commands, outcomes, strict=True):
            upper = None if isinstance(outcome, BaseException) else outcome.as_option()
            if id in kept and upper == ts + 1:
                self._kept[id] = (upper, kept[id])
            if isinstance(outcome, BaseException):
                failed = failed or outcome
                _log.warning("table %s: group commit at %d failed: %s", id, ts, outcome)
                for w in accepted[id]:
                    _fail(w, outcome)
        done = [w for id in ids for w in accepted[id] if not w.done.done()]
        if done or (advance and failed is None):
            self._timestamps.apply_write(ts)
        for w in done:
            _succeed(w, ts)
        for w in advance:
            if failed is None:
                _succeed(w, ts)
            else:
                _fail(w, failed)

    def _table_ids(self) -> list[GlobalId]:
        return [id for id, s in self._storage.collections() if s.description.is_table]

    def _upper(self, id: GlobalId) -> int | None:
        return self._storage.collection_frontiers(id).upper.as_option()

    def _take_kept(self, id: GlobalId) -> TableContents | None:
        """The kept contents of the table if they are as of its upper now (module docs); they
        are kept again only once this group's append of the table commits."""
        kept = self._kept.pop(id, None)
        if kept is None or kept[0] != self._upper(id):
            return None
        return kept[1]

    async def _contents(self, id: GlobalId, desc: RelationDesc) -> TableContents:
        """The table's contents now: every committed write (nothing else writes meanwhile),
        as its snapshot; the rows are made Python objects in the background (not those of an
        indexed one: module docs)."""
        upper = self._upper(id)
        self.reads += 1
        if upper is None or upper == 0:
            return TableContents()
        snapshot = await self._storage.snapshot_table(id, upper - 1)
        contents = TableContents.of_snapshot(desc, snapshot)
        if not contents.settled and not contents.indexed:
            building = asyncio.get_running_loop().run_in_executor(None, contents.build)
            building.add_done_callback(_log_failure)
        return contents

    @staticmethod
    async def _ready_for(contents: TableContents, rows: Sequence[Row] | None) -> None:
        """``contents`` able to count ``rows`` (every row when ``None``) without blocking."""
        if contents.settle():
            return
        if rows is not None and contents.quick_lookup(len(rows)) and contents.prefetch(rows):
            return  # a few binary searches: not worth a thread hop
        if rows is not None and await asyncio.to_thread(contents.prefetch, rows):
            return
        await asyncio.to_thread(contents.build)
        contents.settle()

    async def _table_changes(
        self, id: GlobalId, writes: list[_Write]
    ) -> tuple[list[ValidatedChanges], list[_Write], TableContents | None]:
        """The changes of ``writes`` to table ``id`` in order (deriving where asked), the
        writes that produced them, and the table's contents after them if they are known."""
        parts: list[ValidatedChanges] = []
        accepted: list[_Write] = []
        contents = self._take_kept(id)
        desc = self._storage.collection(id).description.desc
        for w in writes:
            if w.derive is not None:
                if contents is None:  # read once, then catch up with this group's writes
                    contents = await self._contents(id, desc)
                    for p in parts:
                        contents.apply(_changes_of(desc, p))
                await self._ready_for(contents, w.rows)
                try:
                    changes = w.derive(contents)
                except Exception as e:
                    _fail(w, e)
                    continue
                contents.apply(changes)
                part = trusted_changes(desc, changes)
            else:
                assert w.changes is not None
                part = w.changes
                if contents is not None:
                    contents.apply(_changes_of(desc, part))
            parts.append(part)
            accepted.append(w)
        return parts, accepted, contents


def _changes_of(desc: RelationDesc, changes: ValidatedChanges) -> list[tuple[Row, int]]:
    rows = table_to_rows(changes.table, [c.name for c in desc.columns])
    diffs = changes.table.column(DIFF_COLUMN).to_pylist()
    return list(zip(rows, diffs, strict=True))


def _log_failure(f: asyncio.Future[None]) -> None:
    if not f.cancelled() and f.exception() is not None:
        _log.warning("building a table's rows failed: %r", f.exception())


def _succeed(w: _Write, ts: int) -> None:
    if not w.done.done():
        w.done.set_result(ts)


def _fail(w: _Write, error: BaseException) -> None:
    if not w.done.done():
        w.done.set_exception(error)
