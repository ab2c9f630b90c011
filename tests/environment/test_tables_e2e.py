"""The Environment with tables only (no replicas): writes, reads, restart, bad input."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from spate.environment.api import Environment
from spate.environment.catalog import HasDependents, NameExists, UnknownName
from spate.environment.tables import RowsNotFound
from spate.errors import ReadBeforeSince, SchemaMismatch, UsageError
from spate.plan.builder import col
from spate.repr import INT64, TEXT, RelationDesc

BIDS = RelationDesc.of(("auction", INT64, False), ("price", INT64, False), ("who", TEXT))


def rows(env: Environment, name: str) -> Counter:
    table = env.select(name)
    return Counter(tuple(r.values()) for r in table.to_pylist())


def test_writes_are_visible_to_the_next_read(env: Environment) -> None:
    env.create_table("bids", BIDS)
    assert rows(env, "bids") == Counter()
    t1 = env.insert("bids", [(1, 10, "ann"), (1, 25, None), (2, 7, "bo")]).timestamp
    assert rows(env, "bids") == Counter({(1, 10, "ann"): 1, (1, 25, None): 1, (2, 7, "bo"): 1})
    assert env.delete("bids", [(1, 25, None)]).rows == 1
    t2 = env.update("bids", [((2, 7, "bo"), (2, 8, "bo"))]).timestamp
    assert t2 > t1
    assert rows(env, "bids") == Counter({(1, 10, "ann"): 1, (2, 8, "bo"): 1})
    assert env.delete("bids", where={"auction": 1}).rows == 1
    assert rows(env, "bids") == Counter({(2, 8, "bo"): 1})
    # Reads at an earlier time see the earlier contents (within the retained history).
    assert Counter(tuple(r.values()) for r in env.select("bids", as_of=t1).to_pylist()) == Counter(
        {(1, 10, "ann"): 1, (1, 25, None): 1, (2, 7, "bo"): 1}
    )


def test_bad_input_is_refused_and_changes_nothing(env: Environment) -> None:
    env.create_table("bids", BIDS)
    env.insert("bids", [(1, 10, "ann")])
    with pytest.raises(
        SchemaMismatch,
        match=r"collection bids \(u1\), row 1, column 'price': expected int64, got str 'x'",
    ):
        env.insert("bids", [(2, 5, None), (3, "x", None)])
    with pytest.raises(RowsNotFound, match=r"table bids: 1 row\(s\) not found: \(9, 9, None\)"):
        env.delete("bids", [(1, 10, "ann"), (9, 9, None)])
    with pytest.raises(UnknownName, match="unknown object 'nope'; objects: bids"):
        env.insert("nope", [(1, 1, None)])
    with pytest.raises(NameExists, match="table 'bids' already exists"):
        env.create_table("bids", BIDS)
    env.set_retain_history("bids", 0)
    env.insert("bids", [(5, 5, None)])
    with pytest.raises(ReadBeforeSince, match=r"read of bids at 0 is before its since"):
        env.select("bids", as_of=0)
    assert rows(env, "bids")[(1, 10, "ann")] == 1
    assert sum(rows(env, "bids").values()) == 2  # (1,10,ann) and (5,5)


def test_views_dependents_and_drop(env: Environment) -> None:
    env.create_table("bids", BIDS)
    env.create_view("big", env.get("bids").filter(col("price") > 10))
    with pytest.raises(HasDependents, match="cannot drop table bids: view big depend"):
        env.drop("bids")
    assert env.names() == ["bids", "big"]
    assert env.drop("bids", cascade=True) == ["big", "bids"]
    assert env.names() == []
    with pytest.raises(UsageError):
        env.select("big")


def test_reopen_restores_catalog_and_data(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Environment.open(data) as env:
        env.create_table("bids", BIDS)
        acked = env.insert("bids", [(1, 10, "ann"), (2, 20, None)]).timestamp
        env.delete("bids", [(2, 20, None)])
        epoch = env.runtime.epoch
    with Environment.open(data) as env:
        assert env.runtime.epoch == epoch + 1
        assert env.names() == ["bids"]
        assert rows(env, "bids") == Counter({(1, 10, "ann"): 1})
        assert env.insert("bids", [(3, 30, None)]).timestamp > acked
        assert sum(rows(env, "bids").values()) == 2


def test_tables_written_here_are_never_read_back_and_read_once_after_a_restart(
    tmp_path: Path,
) -> None:
    """Deletes and updates check their rows against what the environment itself wrote (an
    Arrow insert included): no table is read back. After a restart each table is read once,
    in the background, and a delete of a row that is not there is still refused."""
    ints = RelationDesc.of(("id", INT64, False), ("price", INT64, False))
    data = tmp_path / "data"
    with Environment.open(data) as env:
        env.create_table("bids", BIDS)
        env.create_table("ints", ints)
        env.insert("ints", pa.table({"id": list(range(1000)), "price": [7] * 1000}))
        env.insert("bids", pa.table({"auction": [1, 2], "price": [10, 20], "who": ["a", None]}))
        env.update("ints", [((5, 7), (5, 8))])
        env.update("bids", [((1, 10, "a"), (1, 11, "a"))])
        for name, row in [("ints", (5, 7)), ("bids", (1, 10, "a")), ("ints", (1000, 7))]:
            with pytest.raises(RowsNotFound):
                env.delete(name, [row])
        assert env.delete("ints", [(5, 8), (6, 7)]).rows == 2
        assert env.delete("bids", where={"auction": 2}).rows == 1
        assert env.runtime.commits.reads == 0
    with Environment.open(data) as env:
        for name, row in [("ints", (5, 8)), ("bids", (2, 20, None))]:
            with pytest.raises(RowsNotFound):
                env.delete(name, [row])
        env.update("ints", [((7, 7), (7, 9))])
        assert env.delete("bids", [(1, 11, "a")]).rows == 1
        assert env.runtime.commits.reads == 2
        assert rows(env, "bids") == Counter()
        assert sum(rows(env, "ints").values()) == 998
        assert rows(env, "ints")[(7, 9)] == 1


def test_offline_status_reads_without_fencing(tmp_path: Path) -> None:
    from spate.environment.inspect import inspect_environment

    data = tmp_path / "data"
    with Environment.open(data) as env:
        env.create_table("bids", BIDS)
        env.insert("bids", [(1, 10, "ann")])
        epoch = env.runtime.epoch
        offline = inspect_environment(data)
        # Reading status did not take a new epoch: the running environment keeps writing.
        env.insert("bids", [(2, 20, None)])
        assert sum(rows(env, "bids").values()) == 2
    (bids,) = offline.collections
    assert (bids.name, bids.kind, bids.since.is_empty()) == ("bids", "table", False)
    assert offline.epoch == epoch
    assert bids.upper.as_option() is not None and bids.upper.as_option() > 0


def test_a_materialized_view_is_created_while_its_inputs_compact(tmp_path: Path) -> None:
    """The view's as_of is chosen under read holds on its inputs. Creating the view awaits the
    storage controller (here made slow, as under load: a Spark driver starting on the same
    cores); meanwhile the table tick moves the table's upper and, by its read policy, its
    since past the frontiers the as_of was chosen from. Without the holds the dataflow failed
    with ``DataflowSinceViolation``."""
    with Environment.open(tmp_path / "data") as env:
        env.create_cluster("c", replicas=0)  # the controllers' checks only: no Spark driver
        env.create_table("bids", BIDS)
        env.insert("bids", [(1, 10, "ann")])
        env.set_retain_history("bids", 0)
        storage = env.runtime.storage
        create = storage.create_collections

        async def slow_create(collections: Any) -> None:
            await asyncio.sleep(2.5)  # more than two table ticks
            await create(collections)

        storage.create_collections = slow_create  # type: ignore[method-assign]
        env.create_materialized_view("top", env.get("bids").filter(col("price") > 0), cluster="c")
        storage.create_collections = create  # type: ignore[method-assign]
        assert env.status().collection("top").since.as_option() is not None


def test_a_view_created_right_after_a_write_starts_at_that_write(tmp_path: Path) -> None:
    """The as_of of a view over a table counts the table's last acknowledged write, which the
    storage controller may not have processed yet: the view starts at the write, not at 0
    (where it would hold the table's since back until it hydrated)."""
    with Environment.open(tmp_path / "data") as env:
        env.create_cluster("c", replicas=0)
        env.create_table("bids", BIDS)
        storage = env.runtime.storage
        process = storage.process

        async def later() -> Any:  # the controller loop has not got to the write yet
            await asyncio.sleep(0.05)
            return None

        for i in range(3):
            storage.process = later  # type: ignore[method-assign]
            try:
                ts = env.insert("bids", [(i, 10, "ann")]).timestamp
                env.create_materialized_view(f"v{i}", env.get("bids"), cluster="c")
            finally:
                storage.process = process  # type: ignore[method-assign]
            since = env.status().collection(f"v{i}").since.as_option()
            assert since is not None and since >= ts, (since, ts)
