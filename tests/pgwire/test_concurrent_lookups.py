"""Concurrent lookups share reads (spate.environment.lookup_batch) and stay right: many
sessions' prepared lookups of an indexed table, read here or peeked from the replica, while
other sessions write to it and change the catalog."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from spate.config import with_overrides
from spate.environment.api import Environment
from spate.environment.lookup_batch import LookupBatcher, batcher_of
from spate.pgwire.environment import EnvironmentEngine
from spate.pgwire.server import ServerConfig, ServerThread
from spate.repr.desc import RelationDesc
from spate.repr.types import INT64, TEXT

# -- the batcher, on an event loop of its own -------------------------------------------------------


def test_lookups_made_while_a_read_is_in_flight_share_the_next_read() -> None:
    async def scenario() -> None:
        batcher = LookupBatcher()
        gate = asyncio.Event()
        seen: list[list[int]] = []

        async def read(values: list[int]) -> list[int]:
            seen.append(values)
            if len(seen) == 1:
                await gate.wait()  # the first read is in flight while the others arrive
            return values

        first = asyncio.ensure_future(batcher.read("k", [1], read))
        await asyncio.sleep(0.01)
        later = [asyncio.ensure_future(batcher.read("k", [v, 9], read)) for v in (2, 3, 2)]
        other = asyncio.ensure_future(batcher.read("other", [7], read))  # another key: at once
        await asyncio.sleep(0.01)
        assert seen == [[1], [7]]
        gate.set()
        assert await first == [1]
        assert [await f for f in later] == [[2, 9, 3]] * 3  # one read of the union
        assert await other == [7]
        assert batcher.reads == 3

    asyncio.run(scenario())


def test_a_failed_read_fails_its_lookups_and_a_canceled_one_leaves_the_rest() -> None:
    async def scenario() -> None:
        batcher = LookupBatcher()
        gate = asyncio.Event()

        async def failing(values: list[int]) -> list[int]:
            await gate.wait()
            raise ValueError(f"no {values}")

        a = asyncio.ensure_future(batcher.read("k", [1], failing))
        b = asyncio.ensure_future(batcher.read("k", [2], failing))
        await asyncio.sleep(0.01)
        b.cancel()  # b's lookup is canceled: the read goes on for a
        gate.set()
        with pytest.raises(ValueError, match=r"no \[1, 2\]"):
            await a
        with pytest.raises(asyncio.CancelledError):
            await b

        async def ok(values: list[int]) -> list[int]:
            return values

        assert await batcher.read("k", [3], ok) == [3]  # the key reads again afterwards

    asyncio.run(scenario())


# -- through the server, with a replica -------------------------------------------------------------

ROWS = 200


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Environment, str]]:
    env = Environment.open(Path(tmp_path_factory.mktemp("lookups")) / "data")
    server = None
    try:
        env.create_cluster("c", replicas=["r1"])
        env.create_table("items", RelationDesc.of(("id", INT64, False), ("v", TEXT)))
        env.insert("items", [(i, f"v{i}") for i in range(ROWS)])
        env.create_index("items_by_id", on="items", key=["id"], cluster="c")
        env.wait_hydrated(timeout=600)
        server = ServerThread(EnvironmentEngine(env), ServerConfig(port=0))
        yield env, f"host=127.0.0.1 port={server.port} user=t dbname=spate sslmode=disable"
    finally:
        if server is not None:
            server.close()
        env.close()


@pytest.mark.parametrize("route", ["here", "peek"])
def test_concurrent_lookups_under_writes_and_ddl_are_right(
    served: tuple[Environment, str], route: str, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    env, dsn = served
    rt = env.runtime
    if route == "peek":  # no read here: every lookup peeks the index on the replica
        monkeypatch.setattr(rt, "settings", with_overrides(rt.settings, small_read_updates=0))
    base = 1000 if route == "here" else 2000  # the keys this run inserts
    before = batcher_of(rt).reads
    errors: list[BaseException] = []
    lookups = 0
    lock = threading.Lock()
    stop = threading.Event()
    inserted: list[int] = []

    def session(i: int) -> None:
        nonlocal lookups
        rng = random.Random(seed + i)
        strict = i % 2 == 0  # half strict serializable, half serializable
        seen: set[int] = set()
        try:
            with psycopg.connect(dsn, autocommit=True) as c:
                if not strict:
                    c.execute("SET transaction_isolation = 'serializable'")
                for _ in range(40):
                    k = rng.randrange(ROWS) if rng.random() < 0.7 else base + rng.randrange(40)
                    got = c.execute("SELECT id, v FROM items WHERE id = %s", (k,), prepare=True)
                    rows = got.fetchall()
                    with lock:
                        lookups += 1
                    if k < ROWS:
                        assert rows == [(k, f"v{k}")], (k, rows)
                    else:
                        assert rows in ([], [(k, f"new{k}")]), (k, rows)
                        if strict:  # strict serializable: what a session saw stays
                            assert rows or k not in seen, (k, rows)
                        if rows:
                            seen.add(k)
        except BaseException as e:
            errors.append(e)

    def writer() -> None:
        try:
            with psycopg.connect(dsn, autocommit=True) as c:
                for j in range(40):
                    c.execute(f"INSERT INTO items VALUES ({base + j}, 'new{base + j}')")
                    inserted.append(base + j)
                    if j % 10 == 0:  # a catalog change: every kept plan is made again
                        c.execute(f"CREATE TABLE other_{route}_{j} (a bigint)")
                        c.execute(f"DROP TABLE other_{route}_{j}")
                    if stop.is_set():
                        return
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=session, args=(i,)) for i in range(8)]
    threads.append(threading.Thread(target=writer))
    for t in threads:
        t.start()
    for t in threads[:-1]:
        t.join(300)
    stop.set()
    threads[-1].join(300)
    assert not errors, errors[0]
    reads = batcher_of(rt).reads - before
    print(f"{route}: {lookups} lookups, {reads} reads")
    assert 0 < reads <= lookups
    with psycopg.connect(dsn, autocommit=True) as c:  # every acknowledged insert is seen
        for k in inserted:
            assert c.execute("SELECT v FROM items WHERE id = %s", (k,)).fetchall() == [(f"new{k}",)]


@pytest.mark.parametrize("isolation", ["serializable", "strict serializable"])
def test_repeated_lookups_read_no_consensus_and_see_every_acknowledged_write(
    served: tuple[Environment, str], monkeypatch: pytest.MonkeyPatch, isolation: str
) -> None:
    """A lookup read here whose shard state, seen last, is final at its timestamp is answered
    from it (no Consensus read); one at a timestamp past it (after a write) reads it again."""
    env, dsn = served
    rt = env.runtime
    shard = str(rt.storage.collection_metadata(rt.catalog.get("items").id).shard)
    consensus = rt.persist.consensus
    heads: list[str] = []
    real_head = consensus.head

    def head(key: str) -> object:
        if key == shard:
            heads.append(key)
        return real_head(key)

    monkeypatch.setattr(consensus, "head", head)
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute(f"SET transaction_isolation = '{isolation}'")
        sql = "SELECT id, v FROM items WHERE id = %s"
        for k in range(3):  # the first reads (and caches the contents by id)
            assert c.execute(sql, (k,), prepare=True).fetchall() == [(k, f"v{k}")]
        before = len(heads)
        lookups = 40
        for k in range(lookups):
            assert c.execute(sql, (k,), prepare=True).fetchall() == [(k, f"v{k}")]
        read = len(heads) - before
        print(f"{isolation}: {read} shard state reads for {lookups} lookups")
        # the upper moves on as time passes (a new state to read now and then), not per lookup
        assert read <= lookups // 4
        for j in range(3):  # written and acknowledged: the next lookup sees it
            k = 3000 + j + (100 if isolation == "serializable" else 0)
            c.execute(f"INSERT INTO items VALUES ({k}, 'w{k}')")
            if isolation == "strict serializable":
                assert c.execute(sql, (k,), prepare=True).fetchall() == [(k, f"w{k}")]


def test_lookups_of_a_materialized_view_in_error_fail_every_time(
    served: tuple[Environment, str],
) -> None:
    """A lookup of a materialized view is answered from memory only while its errors shard,
    seen last, holds no error: once the view is in error, every lookup fails as its errors
    shard says, even of a key whose row is fine."""
    _, dsn = served
    name = "in_error"
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("SET transaction_isolation = 'serializable'")
        c.execute(f"CREATE TABLE {name}_t (id bigint NOT NULL, d bigint NOT NULL)")
        c.execute(f"INSERT INTO {name}_t VALUES (1, 1), (2, 2)")
        c.execute(
            f"CREATE MATERIALIZED VIEW {name} IN CLUSTER c AS SELECT id, 10 / d AS q FROM {name}_t"
        )
        c.execute(f"CREATE INDEX {name}_by_id IN CLUSTER c ON {name} (id)")
        lookup = f"SELECT id, q FROM {name} WHERE id = %s"
        deadline = time.monotonic() + 120
        while True:  # the view answers once it has computed its contents
            try:
                got = c.execute(lookup, (1,), prepare=True).fetchall()
            except psycopg.errors.QueryCanceled:
                got = []
            if got or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert got == [(1, 10)]
        for _ in range(5):
            assert c.execute(lookup, (2,), prepare=True).fetchall() == [(2, 5)]
        c.execute(f"INSERT INTO {name}_t VALUES (3, 0)")
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # once the view has the error, every lookup fails
            try:
                c.execute(lookup, (2,), prepare=True).fetchall()
            except psycopg.errors.DivisionByZero:
                break
            time.sleep(0.1)
        else:
            raise AssertionError("the view's error never reached a lookup")
        for k in (1, 2, 3):
            with pytest.raises(psycopg.errors.DivisionByZero):
                c.execute(lookup, (k,), prepare=True)
        c.execute(f"DROP TABLE {name}_t CASCADE")
