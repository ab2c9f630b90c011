"""Group commit of table writes: every write pending when a commit starts goes into it.

Writers submit changes (validated once, as Arrow, before they are queued: a bad row fails its
own write and nothing else); a single committer takes **all writes pending** at that moment —
and the *advance* of every table (the tick), if one was asked for — chooses **one timestamp**
``ts`` from the timestamp oracle, and appends to **each table once**: one compare-and-append of
every change to that table at ``ts``, with the table's new upper ``ts + 1``. **Every** table is
appended, the ones no write of the group names with no updates: all tables move together, so a
dataflow or a read over a written table and an unwritten one can go to ``ts`` at once instead
of waiting for the next tick to move the unwritten one. Tables are appended independently
(:meth:`~.table_writes.TableWrites.append_each`) and their new states commit with one batched
consensus compare-and-set: one transaction for the group, and no blob for an empty append. Only
when every append of the group has returned does the committer tell the oracle that ``ts`` is
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

**The committer keeps every table's contents** (:mod:`.table_contents`), as of the table's
upper, and adds each change it commits: inserts as the Arrow tables they arrive as (an integer
table's are indexed by row hash on a worker thread while the append is in flight), derived
changes as rows. A table the committer sees at upper 0 starts empty, so a table created and
written through it is **never read**: deletes and updates check their rows against the kept
contents. A table it did not see from the start (after a restart) is read once, in the
background, as of its upper before the first group that finds it (the one ``open`` commits);
the read starts once that group's append is done (or at once if a read-then-write of the group
needs it), its snapshot is added to the contents, which gather the writes committed
meanwhile, and only a read-then-write waits for it. A text, date or
timestamp table's rows are looked up in the Arrow form by a join until they are built into a
``Counter`` on a worker thread, which starts at its first read-then-write.

The kept contents are used only while the table's upper is the one they were kept at; a table
written or advanced by anything else, an append that failed, or a read that failed drops them,
and the table is read again (in the background). The cost is memory: every table's rows, as
Arrow (and as an index of integer columns, or a ``Counter`` once built).

**Unique keys**: a write to a table with PRIMARY KEY or UNIQUE constraints carries them, and
the committer checks them in submission order, against the contents as of every earlier write
(:mod:`.table_keys`): the contents keep a count of each key once asked, so the check is one
probe per key of the write, and a write that would give a key to two rows fails alone.

Failure is per write: a write whose table was dropped, whose derive raised, or whose table's
append failed gets that exception; the other writes of the group still commit. An error of the
whole group (``ReadOnly``, ``ControllerFenced``) fails every write in it. A write that failed
changed nothing.

**Transactions** (:meth:`GroupCommit.write_all`): the changes a transaction derives for
several tables commit together or not at all. A transaction is a group of its own: every part
is derived first (none changes the kept contents), and only if none raises are they appended,
all at one timestamp, as one group. A derive that raises fails the whole transaction and
nothing of it is written. The tables a transaction writes (when more than one) are appended in
one atomic call (the controller's durable intent, :mod:`.table_writes`): after a crash they
hold all of it or none; the group's other tables move on their own, as usual.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Protocol, runtime_checkable

import pyarrow as pa

from spate.frontier.antichain import Antichain
from spate.frontier.read_hold import ReadHold
from spate.ids import GlobalId
from spate.persist import latency_trace
from spate.repr.types import Row
from spate.storage.controller.controller import StorageController
from spate.storage.controller.errors import IdentifierMissing, InvalidUppers
from spate.storage.controller.table_contents import TableContents as TableContents
from spate.storage.controller.table_keys import UniqueKey, check_unique, key_deltas
from spate.storage.controller.table_writes import AppendOutcome
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


@runtime_checkable
class ReservesAhead(Protocol):
    """An oracle whose durable reservation of timestamps can be renewed ahead of need, off the
    event loop (:class:`~spate.environment.oracle.TimestampOracle`): the committer starts
    ``reserve_ahead`` on a worker thread when ``needs_reserve``, so that ``write_ts`` does not
    block the event loop on consensus I/O."""

    def needs_reserve(self) -> bool: ...

    def reserve_ahead(self) -> None: ...


Derive = Callable[[TableContents], Sequence[tuple[Row, int]]]
"""Changes computed from the table's contents inside the commit (raise to fail the write)."""
Part = tuple[GlobalId, Derive, Sequence[Row], Sequence[UniqueKey]]
"""One table's part of a transaction: its id, its derive, the rows the derive counts, the
table's unique keys (checked as for :meth:`GroupCommit.write`). A part that counts no rows
(only adds rows) MUST NOT look at the contents it is given: it is not made to wait for
them."""


@dataclass(eq=False)
class _Write:
    id: GlobalId | None  # None: advance every table (the tick)
    changes: ValidatedChanges | None
    derive: Derive | None
    done: asyncio.Future[int]
    rows: Sequence[Row] | None = None
    """The rows ``derive`` counts (looked up at once), ``None``: any."""
    keys: Sequence[UniqueKey] = ()
    """The table's unique keys, checked in the commit (:mod:`.table_keys`)."""
    parts: Sequence[Part] | None = None
    """A transaction's parts (:meth:`GroupCommit.write_all`); ``id`` is then ``None``."""


@dataclass(eq=False)
class _Kept:
    """A table's contents as of its ``upper`` (module docs); ``loading``: the read of its
    snapshot, still to be added to them; ``read_at``: the upper as of which that read is due
    (not started yet: it starts once the group's append is done, or when a write needs it);
    ``hold``: a read hold on the table from when the contents were taken until that read is
    done, so that the table's since, which follows its upper, does not pass ``read_at``
    meanwhile."""

    upper: int | None
    contents: TableContents
    loading: asyncio.Task[None] | None = None
    read_at: int | None = None
    hold: ReadHold | None = None


class GroupCommit:
    """The group committer of one storage controller's tables (module docs). Event-loop
    thread only; ``window_s`` delays each group to gather more writes (0: none)."""

    def __init__(
        self, storage: StorageController, timestamps: Timestamps, *, window_s: float = 0.0
    ) -> None:
        self._storage = storage
        self._timestamps = timestamps
        self._reserves: ReservesAhead | None = (
            timestamps if isinstance(timestamps, ReservesAhead) else None
        )
        """The oracle, if it reserves ahead (checked once: a runtime protocol check walks the
        protocol's members, a fair part of a small group's own work)."""
        self._window_s = window_s
        self._queue: list[_Write] = []
        self._kept: dict[GlobalId, _Kept] = {}
        """Contents of tables as of their upper then (module docs)."""
        self.reads = 0
        """Times a table's contents were read from persist (for tests and benchmarks)."""
        self._task: asyncio.Task[None] | None = None
        self._reserving: asyncio.Future[None] | None = None
        """The oracle's reservation being renewed on a worker thread (:class:`ReservesAhead`)."""
        self.groups = 0
        """Groups committed so far (for tests and benchmarks)."""

    # -- submitting -------------------------------------------------------------------------------

    async def write(
        self, id: GlobalId, changes: ValidatedChanges, *, keys: Sequence[UniqueKey] = ()
    ) -> int:
        """Append ``changes`` to table ``id``; return the timestamp once acknowledged.
        ``keys``: the table's unique keys, which the write must keep unique."""
        return await self._submit(_Write(id, changes, None, self._future(), keys=keys))

    async def write_derived(
        self,
        id: GlobalId,
        derive: Derive,
        *,
        rows: Sequence[Row] | None = None,
        keys: Sequence[UniqueKey] = (),
    ) -> int:
        """Append the changes ``derive`` computes from the table's contents (module docs);
        ``rows``: the only rows ``derive`` counts, if known; ``keys`` as for :meth:`write`."""
        return await self._submit(_Write(id, None, derive, self._future(), rows, keys))

    async def write_all(self, parts: Sequence[Part]) -> int:
        """Append the changes each part derives to its table, all at one timestamp or none
        (module docs); return the timestamp once acknowledged."""
        return await self._submit(_Write(None, None, None, self._future(), parts=parts))

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
        for id in list(self._kept):
            self._drop(id)

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
            group, self._queue = _next_group(self._queue)
            try:
                if group[0].parts is not None:
                    await self._commit_all(group[0], group[0].parts)
                else:
                    await self._commit(group)
            except BaseException as e:
                for w in group:
                    _fail(w, e if isinstance(e, Exception) else asyncio.CancelledError())
                if not isinstance(e, Exception):
                    raise
            self.groups += 1

    async def _commit(self, group: list[_Write], *, atomic: bool = False) -> None:
        advance = [w for w in group if w.id is None]
        writes: dict[GlobalId, list[_Write]] = {}
        for w in group:
            if w.id is not None:
                writes.setdefault(w.id, []).append(w)
        live = set(self._table_ids())
        for id in [id for id in self._kept if id not in live]:
            self._drop(id)
        for id in [id for id in writes if id not in live]:
            for w in writes.pop(id):
                _fail(w, IdentifierMissing(id, "table"))
        if not writes and not advance:
            return
        ids = sorted(live)  # every table moves with the group (module docs)
        ts = self._timestamps.write_ts()
        latency_trace.mark("commit_start", "tables", ts)
        self._reserve_ahead()
        accepted: dict[GlobalId, list[_Write]] = {}
        commands: list[tuple[GlobalId, TableUpdates, Antichain[int]]] = []
        kept: dict[GlobalId, _Kept] = {}
        for id in ids:
            kept[id] = self._take_kept(id)
            parts, accepted[id] = await self._table_changes(id, kept[id], writes.get(id, []))
            updates: TableUpdates = []
            if parts:
                table = pa.concat_tables([p.table for p in parts])
                updates = ValidatedChanges(table).at(ts)
            commands.append((id, updates, Antichain.of(ts + 1)))
        # Index (or fold) what this group adds to each table's contents while it is written.
        ready = [k.contents for k in kept.values() if k.loading is None]
        appending = asyncio.ensure_future(self._append(commands, set(writes) if atomic else set()))
        if all(c.prepare_is_quick() for c in ready):  # a small group's: no thread trip for it
            try:
                await asyncio.sleep(0)  # the append's worker-thread trip starts first
            except BaseException:
                appending.cancel()
                raise
            prepared = _prepare(ready)
            outcomes = await appending
        else:
            outcomes, prepared = await asyncio.gather(appending, asyncio.to_thread(_prepare, ready))
        failed: BaseException | None = None
        for (id, _u, _n), outcome in zip(commands, outcomes, strict=True):
            upper = None if isinstance(outcome, BaseException) else outcome.as_option()
            loading = kept[id].loading
            if upper == ts + 1 and (loading is not None or prepared[kept[id].contents]):
                kept[id].upper = upper
                self._kept[id] = kept[id]
                if kept[id].read_at is not None:  # off the append's path (module docs)
                    self._start_read(id, kept[id])
            else:
                if loading is not None:
                    loading.cancel()
                hold = kept[id].hold
                if hold is not None:  # a read never started
                    hold.release()
            if isinstance(outcome, BaseException):
                failed = failed or outcome
                _log.warning("table %s: group commit at %d failed: %s", id, ts, outcome)
                for w in accepted[id]:
                    _fail(w, outcome)
        done = [w for id in ids for w in accepted[id] if not w.done.done()]
        if done or (advance and failed is None):
            self._timestamps.apply_write(ts)
            latency_trace.mark("acknowledged", "tables", ts)
        for w in done:
            _succeed(w, ts)
        for w in advance:
            if failed is None:
                _succeed(w, ts)
            else:
                _fail(w, failed)

    async def _commit_all(self, txn: _Write, parts: Sequence[Part]) -> None:
        """Commit a transaction, alone in its group (module docs)."""
        live = set(self._table_ids())
        missing = [id for id, _d, _r, _k in parts if id not in live]
        if missing:
            _fail(txn, IdentifierMissing(missing[0], "table"))
            return
        writes: list[_Write] = []
        for id, derive, rows, keys in parts:
            kept = self._take_kept(id)
            self._kept[id] = kept  # the commit below takes it again
            contents = kept.contents
            if rows or keys:  # a part that only adds rows to an unkeyed table does not wait
                contents = await self._loaded(id, kept, [])
            if rows:  # rows to count (keys are counted from the loaded contents as they are)
                await self._ready_for(contents, rows)
            try:
                changes = derive(contents)
                changed = trusted_changes(self._storage.collection(id).description.desc, changes)
                # Keys here, once, for every part before any is written: a part the commit
                # below refused would leave the others (it runs alone in its group, so the
                # contents cannot change before it).
                _check_keys(contents, keys, changed)
            except Exception as e:
                _fail(txn, e)
                return
            # Derived and checked once: the commit below appends ``changed`` as it is, and adds
            # it to the table's contents as Arrow (as an insert's), not as Python rows.
            writes.append(_Write(id, changed, None, self._future()))
        try:
            await self._commit(writes, atomic=True)
        finally:
            for w in writes:
                if not w.done.done():
                    w.done.cancel()
        failures = [w.done.exception() for w in writes if w.done.exception() is not None]
        if failures:
            error = failures[0]
            assert error is not None
            _fail(txn, error)
        else:
            _succeed(txn, max(w.done.result() for w in writes))

    async def _append(
        self, commands: list[tuple[GlobalId, TableUpdates, Antichain[int]]], together: set[GlobalId]
    ) -> list[AppendOutcome]:
        """Append each command (``append_each``); the tables of ``together`` (a transaction's,
        when more than one) in one atomic append through the controller's durable intent, so
        that a crash lands all of them or none (module docs)."""
        if len(together) < 2:
            return await self._storage.tables.append_each(commands)
        atomic = [c for c in commands if c[0] in together]
        rest = [c for c in commands if c[0] not in together]
        outcomes: dict[GlobalId, AppendOutcome] = {}
        try:
            await self._storage.tables.append(atomic)
            outcomes.update({id: new_upper for id, _u, new_upper in atomic})
        except InvalidUppers as e:  # nothing of the transaction was written
            outcomes.update({id: e for id, _u, _n in atomic})
        if rest:
            others = await self._storage.tables.append_each(rest)
            outcomes.update({id: o for (id, _u, _n), o in zip(rest, others, strict=True)})
        return [outcomes[id] for id, _u, _n in commands]

    def _reserve_ahead(self) -> None:
        """Renew the oracle's reservation on a worker thread when it runs low (ReservesAhead)."""
        oracle = self._reserves
        if oracle is None or not oracle.needs_reserve():
            return
        if self._reserving is not None and not self._reserving.done():
            return
        self._reserving = asyncio.ensure_future(asyncio.to_thread(oracle.reserve_ahead))
        self._reserving.add_done_callback(_log_reserve_failure)

    def _table_ids(self) -> list[GlobalId]:
        return [id for id, s in self._storage.collections() if s.description.is_table]

    def _upper(self, id: GlobalId) -> int | None:
        return self._storage.collection_frontiers(id).upper.as_option()

    def _drop(self, id: GlobalId) -> None:
        kept = self._kept.pop(id, None)
        if kept is not None and kept.loading is not None:
            kept.loading.cancel()

    def _take_kept(self, id: GlobalId) -> _Kept:
        """The table's contents as of its upper now (module docs): the kept ones if they are
        as of it (and their read did not fail), else new ones — empty for a table never
        written, else read in the background. They are kept again only once this group's
        append of the table commits."""
        kept = self._kept.pop(id, None)
        upper = self._upper(id)
        if kept is not None and kept.upper == upper:
            loading = kept.loading
            if loading is None or not loading.done():
                return kept
            if not loading.cancelled() and loading.exception() is None:
                kept.loading = None
                return kept
        elif kept is not None and kept.loading is not None:
            kept.loading.cancel()
        desc = self._storage.collection(id).description.desc
        contents = TableContents.empty(desc)
        if upper is None or upper == 0:
            return _Kept(upper, contents)
        (hold,) = self._storage.acquire_read_holds([id])
        return _Kept(upper, contents, read_at=upper, hold=hold)

    def _start_read(self, id: GlobalId, kept: _Kept) -> None:
        assert kept.read_at is not None
        self.reads += 1
        loading = asyncio.get_running_loop().create_task(
            self._load(id, kept.read_at, kept.contents), name=f"read table {id}"
        )
        loading.add_done_callback(_log_failure)
        hold, kept.hold = kept.hold, None
        if hold is not None:
            loading.add_done_callback(lambda _: hold.release())
        kept.loading, kept.read_at = loading, None

    async def _load(self, id: GlobalId, upper: int, contents: TableContents) -> None:
        """Add the table's snapshot as of ``upper`` to ``contents`` (which the committer
        keeps adding its later writes to meanwhile), indexed if it is an integer table."""
        snapshot = await self._storage.snapshot_table(id, upper - 1)
        index = await asyncio.to_thread(contents.index_of, snapshot)
        contents.add_base(snapshot, index)

    async def _loaded(
        self, id: GlobalId, kept: _Kept, parts: list[ValidatedChanges]
    ) -> TableContents:
        """The kept contents once their read is done; read again (now) if it failed, then
        caught up with ``parts``, this group's changes so far."""
        if kept.read_at is not None:
            self._start_read(id, kept)
        loading = kept.loading
        if loading is not None:
            try:
                await asyncio.shield(loading)
            except Exception as e:
                _log.warning("table %s: reading its contents failed (%r); reading again", id, e)
                upper = self._upper(id)
                assert upper is not None
                kept.contents = TableContents.empty(kept.contents.desc)
                kept.loading = None
                self.reads += 1
                await self._load(id, upper, kept.contents)
                for p in parts:
                    kept.contents.append(p.table)
            kept.loading = None
        return kept.contents

    async def _ready_for(self, contents: TableContents, rows: Sequence[Row] | None) -> None:
        """``contents`` able to count ``rows`` (every row when ``None``) without blocking."""
        if contents.settle():
            if contents.quick_lookup(0):
                return
            await asyncio.to_thread(contents.prepare)
            return
        if rows is not None and not contents.indexed and not contents.building:
            # A table of text, dates…: its rows become Python objects in the background.
            contents.building = True
            building = asyncio.get_running_loop().run_in_executor(None, contents.build)
            building.add_done_callback(_log_failure)
        if rows is not None and contents.quick_lookup(len(rows)) and contents.prefetch(rows):
            return  # a few binary searches: not worth a thread hop
        if rows is not None and await asyncio.to_thread(contents.prefetch, rows):
            return
        await asyncio.to_thread(contents.build)
        contents.settle()
        await asyncio.to_thread(contents.prepare)

    async def _table_changes(
        self, id: GlobalId, kept: _Kept, writes: list[_Write]
    ) -> tuple[list[ValidatedChanges], list[_Write]]:
        """The changes of ``writes`` to table ``id`` in order (deriving where asked), and the
        writes that produced them; each is added to the table's kept contents."""
        parts: list[ValidatedChanges] = []
        accepted: list[_Write] = []
        desc = self._storage.collection(id).description.desc
        for w in writes:
            if w.derive is not None:
                contents = await self._loaded(id, kept, parts)
                await self._ready_for(contents, w.rows)
                try:
                    changes = w.derive(contents)
                    part = trusted_changes(desc, changes)
                    _check_keys(contents, w.keys, part)
                except Exception as e:
                    _fail(w, e)
                    continue
                contents.apply(changes)
            else:
                assert w.changes is not None
                part = w.changes
                if w.keys:
                    contents = await self._loaded(id, kept, parts)
                    try:
                        _check_keys(contents, w.keys, part)
                    except Exception as e:
                        _fail(w, e)
                        continue
                kept.contents.append(part.table)
            parts.append(part)
            accepted.append(w)
        return parts, accepted


def _check_keys(contents: TableContents, keys: Sequence[UniqueKey], part: ValidatedChanges) -> None:
    """Raise ``UniqueViolation`` if ``part`` would give a key of ``keys`` to two rows."""
    for key in keys:
        check_unique(key, contents.key_counts(key.columns), key_deltas(part.table, key.columns))


def _prepare(contents: Sequence[TableContents]) -> dict[TableContents, bool]:
    """:meth:`TableContents.prepare` of each (blocking); whether it worked."""
    out: dict[TableContents, bool] = {}
    for c in contents:
        try:
            c.prepare()
            out[c] = True
        except Exception as e:  # the contents are dropped: read again when needed
            _log.warning("preparing a table's contents failed: %r", e)
            out[c] = False
    return out


def _next_group(queue: list[_Write]) -> tuple[list[_Write], list[_Write]]:
    """The next group and what waits for the one after: a transaction is a group of its own,
    other writes gather up to the next transaction."""
    if queue[0].parts is not None:
        return queue[:1], queue[1:]
    n = next((i for i, w in enumerate(queue) if w.parts is not None), len(queue))
    return queue[:n], queue[n:]


def _log_failure(f: asyncio.Future[None]) -> None:
    if not f.cancelled() and f.exception() is not None:
        _log.warning("building or reading a table's contents failed: %r", f.exception())


def _log_reserve_failure(f: asyncio.Future[None]) -> None:
    if not f.cancelled() and f.exception() is not None:  # write_ts reserves itself then
        _log.warning("renewing the timestamp reservation failed: %r", f.exception())


def _succeed(w: _Write, ts: int) -> None:
    if not w.done.done():
        w.done.set_result(ts)


def _fail(w: _Write, error: BaseException) -> None:
    if not w.done.done():
        w.done.set_exception(error)
