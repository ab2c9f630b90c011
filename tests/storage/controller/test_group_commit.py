"""Group commit of table writes, and the one truth of a table's upper.

In memory (persist and consensus), no replicas: every write pending when a commit starts goes
in one compare-and-append per table at one timestamp; the oracle acknowledges the timestamp
only after every append of the group, and a write returns only then; every table moves with
each group, written or not; a table's upper is the
storage controller's, applied when the append commits (no ``process`` needed); a write fails
alone (a bad derive, a dropped table), a whole-group error fails every write of the group.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import Counter

import pytest

from spate.frontier import Antichain
from spate.frontier.read_policy import ReadPolicy
from spate.ids import GlobalId
from spate.persist.consensus_mem import MemConsensus
from spate.repr.types import Row
from spate.storage.controller import StorageController
from spate.storage.controller.errors import IdentifierMissing, ReadOnly
from spate.storage.controller.group_commit import GroupCommit, TableContents
from spate.storage.controller.tables import ValidatedChanges, validate_changes
from tests.storage.controller._harness import TABLE_DESC, environment, table

U1, U2, U3 = GlobalId.user(1), GlobalId.user(2), GlobalId.user(3)


class Oracle:
    """A timestamp oracle that checks, when a write is acknowledged, that every table the
    storage controller knows is already written up to it (durable before visible)."""

    def __init__(self, storage: StorageController) -> None:
        self.storage = storage
        self.last = 100
        self.read = 0
        self.applied: list[int] = []

    def write_ts(self) -> int:
        self.last += 1
        return self.last

    def apply_write(self, ts: int) -> None:
        self.applied.append(ts)
        self.read = max(self.read, ts)


def changes(*rows: tuple[int, str], diff: int = 1) -> ValidatedChanges:
    return validate_changes(TABLE_DESC, [(r, diff) for r in rows], collection="t")


async def contents(c: StorageController, id: GlobalId) -> Counter[Row]:
    upper = c.collection_frontiers(id).upper.as_option()
    assert upper is not None
    return Counter({row: diff for row, diff in await c.snapshot(id, upper - 1)})


async def test_writes_pending_together_are_one_append_per_table_at_one_timestamp() -> None:
    async with environment() as env:
        c = await env.controller()
        await c.create_collections([table(1), table(2)])
        c.allow_writes()
        oracle = Oracle(c)
        commit = GroupCommit(c, oracle)
        calls: list[list[GlobalId]] = []
        append_each = c.tables.append_each

        async def counting(commands):  # type: ignore[no-untyped-def]
            calls.append([id for id, _u, _n in commands])
            return await append_each(commands)

        c.tables.append_each = counting  # type: ignore[method-assign]
        tss = await asyncio.gather(
            commit.write(U1, changes((1, "a"))),
            commit.write(U1, changes((2, "b"))),
            commit.write(U2, changes((3, "c"))),
        )
        assert len(set(tss)) == 1 and calls == [[U1, U2]] and commit.groups == 1
        ts = tss[0]
        assert oracle.applied == [ts]
        # The one truth: the controller's upper moved with the commit, no process() needed.
        assert c.collection_frontiers(U1).upper == Antichain.of(ts + 1)
        assert c.collection_frontiers(U2).upper == Antichain.of(ts + 1)
        assert await contents(c, U1) == Counter({(1, "a"): 1, (2, "b"): 1})
        # Writes submitted while a group commits form the next group.
        first = asyncio.ensure_future(commit.write(U1, changes((4, "d"))))
        while len(calls) < 2:  # the first group's append is under way
            await asyncio.sleep(0)
        rest = [commit.write(U1, changes((5 + i, "e"))) for i in range(3)]
        later = await asyncio.gather(first, *rest)
        assert later[0] < later[1] == later[2] == later[3]
        # Every group moves every table, the unwritten U2 too (with no updates).
        assert calls[1:] == [[U1, U2], [U1, U2]]
        assert c.collection_frontiers(U2).upper == Antichain.of(later[-1] + 1)
        assert await contents(c, U2) == Counter({(3, "c"): 1})
        await c.shutdown()


async def test_a_derived_write_sees_earlier_writes_and_fails_alone() -> None:
    async with environment() as env:
        c = await env.controller()
        await c.create_collections([table(1)])
        c.allow_writes()
        oracle = Oracle(c)
        commit = GroupCommit(c, oracle)
        await commit.write(U1, changes((1, "a"), (1, "a")))

        def delete_one(row: Row):  # type: ignore[no-untyped-def]
            def derive(now: TableContents) -> list[tuple[Row, int]]:
                if now.count(row) < 1:
                    raise KeyError(f"{row} not found")
                return [(row, -1)]

            return derive

        results = await asyncio.gather(
            commit.write(U1, changes((2, "b"))),
            commit.write_derived(U1, delete_one((2, "b"))),  # sees the insert before it
            commit.write_derived(U1, delete_one((3, "x"))),  # not there: fails alone
            commit.write_derived(U1, delete_one((1, "a"))),
            return_exceptions=True,
        )
        assert isinstance(results[2], KeyError)
        assert results[0] == results[1] == results[3]
        assert await contents(c, U1) == Counter({(1, "a"): 1})
        assert oracle.read == results[0]
        await c.shutdown()


async def test_a_dropped_table_fails_its_writes_and_a_read_only_controller_fails_the_group() -> (
    None
):
    async with environment() as env:
        c = await env.controller()
        await c.create_collections([table(1), table(2)])
        c.allow_writes()
        oracle = Oracle(c)
        commit = GroupCommit(c, oracle)
        c.drop_tables([U2])
        ok, gone = await asyncio.gather(
            commit.write(U1, changes((1, "a"))),
            commit.write(U2, changes((1, "a"))),
            return_exceptions=True,
        )
        assert isinstance(ok, int) and isinstance(gone, IdentifierMissing)
        assert oracle.applied == [ok]
        ro = await env.controller(read_only=True)
        commit_ro = GroupCommit(ro, Oracle(ro))
        with pytest.raises(ReadOnly):
            await commit_ro.write(U1, changes((2, "b")))
        await ro.shutdown()
        await c.shutdown()


async def test_advance_moves_every_table_and_the_read_timestamp() -> None:
    async with environment() as env:
        c = await env.controller()
        c.allow_writes()
        oracle = Oracle(c)
        commit = GroupCommit(c, oracle)
        ts = await commit.advance()  # no tables: the read timestamp still moves
        assert oracle.read == ts
        await c.create_collections([table(1), table(2)])
        ts = await commit.advance()
        for id in (U1, U2):
            assert c.collection_frontiers(id).upper == Antichain.of(ts + 1)
        assert oracle.read == ts
        await c.shutdown()


def delete_one(row: Row):  # type: ignore[no-untyped-def]
    def derive(now: TableContents) -> list[tuple[Row, int]]:
        if now.count(row) < 1:
            raise KeyError(f"{row} not found")
        return [(row, -1)]

    return derive


async def test_a_table_written_through_the_committer_is_never_read() -> None:
    """Its contents are kept from its first write on (inserts as Arrow, derived changes as
    rows): deletes and updates check against them, and the table is never read back."""
    async with environment() as env:
        c = await env.controller()
        await c.create_collections([table(1)])
        c.allow_writes()
        commit = GroupCommit(c, Oracle(c))
        await commit.write(U1, changes((1, "a"), (2, "b"), (3, "c")))
        await commit.write_derived(U1, delete_one((1, "a")))
        # Kept contents follow every commit: inserts, deletes, the tick.
        await commit.write(U1, changes((4, "d")))
        await commit.advance()
        await commit.write_derived(U1, delete_one((4, "d")))
        with pytest.raises(KeyError):
            await commit.write_derived(U1, delete_one((1, "a")))  # deleted already
        with pytest.raises(KeyError):
            await commit.write_derived(U1, delete_one((9, "z")))  # never there
        await commit.write_derived(U1, delete_one((2, "b")))
        assert commit.reads == 0
        assert await contents(c, U1) == Counter({(3, "c"): 1})
        await c.shutdown()


async def test_a_new_committer_reads_each_table_once_in_the_background() -> None:
    """After a restart the committer did not see the tables' writes: its first group starts
    reading each table without waiting for it; a read-then-write waits for that read, and
    sees the writes committed meanwhile too."""
    async with environment() as env:
        c = await env.controller()
        await c.create_collections([table(1), table(2)])
        c.allow_writes()
        oracle = Oracle(c)
        await GroupCommit(c, oracle).write(U1, changes((1, "a"), (2, "b")))
        commit = GroupCommit(c, oracle)  # as after a restart
        await commit.write(U1, changes((3, "c")))
        assert commit.reads == 2
        await commit.write(U1, changes((4, "d")))
        with pytest.raises(KeyError):
            await commit.write_derived(U1, delete_one((9, "z")))
        for row in [(1, "a"), (3, "c"), (4, "d")]:
            await commit.write_derived(U1, delete_one(row))
        with pytest.raises(KeyError):
            await commit.write_derived(U1, delete_one((1, "a")))
        await commit.write_derived(U2, lambda now: [((7, "x"), 1)])
        assert commit.reads == 2
        assert await contents(c, U1) == Counter({(2, "b"): 1})
        await c.shutdown()


async def test_a_restarted_committer_holds_a_table_until_its_background_read(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A table's since follows its upper: the read of its contents as of the upper before
    the first group holds the table, so the since does not pass it when that group appends
    (it was read at a time before the since, logged a warning and read again)."""
    async with environment() as env:
        c = await env.controller()
        await c.create_collections([table(1)])
        c.allow_writes()
        c.set_read_policy([(U1, ReadPolicy.lag_writes_by(1, 1))])
        oracle = Oracle(c)
        await GroupCommit(c, oracle).write(U1, changes((1, "a")))
        commit = GroupCommit(c, oracle)  # as after a restart
        await commit.write(U1, changes((2, "b")))
        await commit.write_derived(U1, delete_one((1, "a")))  # waits for the read
        assert commit.reads == 1
        assert [r.message for r in caplog.records if r.levelno >= logging.WARNING] == []
        assert await contents(c, U1) == Counter({(2, "b"): 1})
        await c.shutdown()


async def test_kept_contents_are_dropped_when_the_table_moves_otherwise_or_an_append_fails() -> (
    None
):
    async with environment() as env:
        c = await env.controller()
        await c.create_collections([table(1)])
        c.allow_writes()
        oracle = Oracle(c)
        commit = GroupCommit(c, oracle)
        await commit.write(U1, changes((1, "a")))
        await commit.write_derived(U1, delete_one((1, "a")))
        # Another writer of the table (the controller's own append, not the committer).
        upper = c.tables.upper(U1).as_option()
        assert upper is not None
        await c.tables.append([(U1, [((5, "e"), upper, 1)], Antichain.of(upper + 1))])
        oracle.last = upper  # the other writer's timestamp came from the oracle too
        await commit.write_derived(U1, delete_one((5, "e")))  # seen: the table is read again
        assert commit.reads == 1
        # A failed append drops them too: the next read-then-write reads the table.
        append_each = c.tables.append_each

        async def failing(commands):  # type: ignore[no-untyped-def]
            return [RuntimeError("blob store down") for _ in commands]

        c.tables.append_each = failing  # type: ignore[method-assign]
        with pytest.raises(RuntimeError):
            await commit.write(U1, changes((6, "f")))
        c.tables.append_each = append_each  # type: ignore[method-assign]
        with pytest.raises(KeyError):
            await commit.write_derived(U1, delete_one((6, "f")))
        assert commit.reads == 2
        assert await contents(c, U1) == Counter()
        await c.shutdown()


@pytest.mark.parametrize("restarted", [False, True])
async def test_a_first_update_looks_its_rows_up_in_the_snapshot(restarted: bool) -> None:
    """An update naming its rows is checked against the table's snapshot (the rows are built
    meanwhile); later ones in the same group and the next see its changes. The snapshot is
    the committer's own writes (never read back) or, after a restart, what it read."""
    async with environment() as env:
        c = await env.controller()
        await c.create_collections([table(1)])
        c.allow_writes()
        oracle = Oracle(c)
        commit = GroupCommit(c, oracle)
        await commit.write(U1, changes(*[(i, "a") for i in range(100)]))
        if restarted:
            commit = GroupCommit(c, oracle)

        def replace(old: Row, new: Row):  # type: ignore[no-untyped-def]
            def derive(now: TableContents) -> list[tuple[Row, int]]:
                if now.count(old) < 1:
                    raise KeyError(f"{old} not found")
                return [(old, -1), (new, 1)]

            return derive

        results = await asyncio.gather(
            commit.write_derived(U1, replace((1, "a"), (1, "b")), rows=[(1, "a")]),
            commit.write_derived(U1, replace((1, "a"), (1, "c")), rows=[(1, "a")]),  # gone
            commit.write_derived(U1, replace((1, "b"), (1, "d")), rows=[(1, "b")]),
            return_exceptions=True,
        )
        assert isinstance(results[1], KeyError) and results[0] == results[2]
        with pytest.raises(KeyError):
            await commit.write_derived(U1, replace((1, "b"), (2, "x")), rows=[(1, "b")])
        await commit.write_derived(U1, replace((1, "d"), (1, "e")), rows=[(1, "d")])
        assert commit.reads == int(restarted)
        want = Counter({(i, "a"): 1 for i in range(100) if i != 1}) + Counter({(1, "e"): 1})
        assert await contents(c, U1) == want
        await c.shutdown()


async def test_write_all_commits_a_transaction_alone_atomically_or_not_at_all() -> None:
    async with environment() as env:
        c = await env.controller()
        await c.create_collections([table(1), table(2), table(3)])
        c.allow_writes()
        oracle = Oracle(c)
        commit = GroupCommit(c, oracle)
        await commit.write(U1, changes((1, "a")))
        atomic: list[list[GlobalId]] = []
        append = c.tables.append

        async def counting(commands):  # type: ignore[no-untyped-def]
            atomic.append([id for id, _u, _n in commands])
            return await append(commands)

        c.tables.append = counting  # type: ignore[method-assign]

        def constant(*pairs: tuple[Row, int]):  # type: ignore[no-untyped-def]
            return lambda _now: list(pairs)

        def missing(_now: TableContents) -> list[tuple[Row, int]]:
            raise KeyError("not there")

        plain = asyncio.ensure_future(commit.write(U1, changes((5, "p"))))
        both = [(U1, constant(((1, "a"), -1), ((2, "b"), 1)), [(1, "a")], ()),
                (U2, constant(((3, "c"), 1)), [], ())]  # fmt: skip
        results = await asyncio.gather(
            commit.write_all(both),
            commit.write_all([(U2, constant(((4, "d"), 1)), [], ()), (U1, missing, [], ())]),
            return_exceptions=True,
        )
        assert isinstance(results[1], KeyError)  # one part failed: nothing of it written
        ts = results[0]
        assert isinstance(ts, int) and ts > await plain  # a group of its own
        assert atomic == [[U1, U2]]  # the written tables in one atomic append; U3 apart
        assert await contents(c, U1) == Counter({(2, "b"): 1, (5, "p"): 1})
        assert await contents(c, U2) == Counter({(3, "c"): 1})
        assert oracle.read == ts
        assert c.collection_frontiers(U3).upper == Antichain.of(ts + 1)
        await c.shutdown()


class ReservingOracle(Oracle):
    """An oracle whose reservation runs low after every timestamp (``ReservesAhead``): records
    the threads ``reserve_ahead`` ran on."""

    def __init__(self, storage: StorageController) -> None:
        super().__init__(storage)
        self.threads: list[int] = []

    def needs_reserve(self) -> bool:
        return True

    def reserve_ahead(self) -> None:
        self.threads.append(threading.get_ident())


async def test_the_oracle_reservation_is_renewed_off_the_event_loop() -> None:
    async with environment() as env:
        c = await env.controller()
        await c.create_collections([table(1)])
        c.allow_writes()
        oracle = ReservingOracle(c)
        commit = GroupCommit(c, oracle)
        for i in range(3):
            await commit.write(U1, changes((i, "a")))
        await asyncio.sleep(0.05)  # the last renewal, started after the last group's ts
        assert oracle.threads and threading.get_ident() not in oracle.threads
        commit.close()


async def test_a_group_commits_every_table_with_one_consensus_transaction() -> None:
    async with environment() as env:
        c = await env.controller()
        await c.create_collections([table(1), table(2), table(3)])
        c.allow_writes()
        commit = GroupCommit(c, Oracle(c))
        await commit.write(U1, changes((0, "warm")))  # every table has its writer now
        consensus = c.tables._persist.consensus
        assert isinstance(consensus, MemConsensus)
        blob = c.tables._persist.blob
        shards = {id: c.tables._caps.collections[id].shard for id in (U1, U2, U3)}
        blobs = {id: len(list(blob.list_keys(f"{s}/"))) for id, s in shards.items()}
        commits = consensus.commits
        ts = await commit.write(U1, changes((1, "a")))
        assert consensus.commits == commits + 1
        for id in (U1, U2, U3):
            assert c.collection_frontiers(id).upper == Antichain.of(ts + 1)
        after = {id: len(list(blob.list_keys(f"{s}/"))) for id, s in shards.items()}
        assert after[U2] == blobs[U2] and after[U3] == blobs[U3]  # empty appends: no blob
        assert await contents(c, U1) == Counter({(0, "warm"): 1, (1, "a"): 1})
        await c.shutdown()
