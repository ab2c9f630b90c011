"""The ``spate_catalog`` relations without replicas: written by the storage controller's
collection manager, read like any collection (select, SQL, AS OF), refused as targets of DDL."""

from __future__ import annotations

import pytest

from spate.environment.api import Environment
from spate.errors import UsageError
from spate.repr import INT64, TEXT, RelationDesc

pytestmark = pytest.mark.timeout(300)


def test_objects_and_columns_describe_the_catalog(env: Environment) -> None:
    tid = env.create_table("bids", RelationDesc.of(("auction", INT64, False), ("who", TEXT)))
    objects = {r["name"]: r for r in env.select("spate_catalog.objects").to_pylist()}
    assert objects["bids"] == {"id": str(tid), "name": "bids", "type": "table", "cluster": None}
    assert objects["spate_catalog.frontiers"]["type"] == "source"
    cols = env.sql(
        f"SELECT name, position, type, nullable FROM spate_catalog.columns WHERE id = '{tid}'"
    )
    assert cols is not None
    assert sorted(cols.to_pylist(), key=lambda r: r["position"]) == [
        {"name": "auction", "position": 1, "type": "int64", "nullable": False},
        {"name": "who", "position": 2, "type": "text", "nullable": True},
    ]


def test_a_drop_shows_in_the_next_read_and_the_past_stays_readable(env: Environment) -> None:
    env.create_table("t", RelationDesc.of(("a", INT64, False)))
    before = env.select("spate_catalog.objects")
    assert "t" in before.column("name").to_pylist()
    frontiers = env.runtime.storage.collection_frontiers(
        env.runtime.catalog.get("spate_catalog.objects").id
    )
    then = frontiers.upper.as_option()
    assert then is not None
    env.drop("t")
    assert "t" not in env.select("spate_catalog.objects").column("name").to_pylist()
    # AS OF a time before the drop (the relation keeps RETAIN_HISTORY_MS of history)
    assert "t" in env.select("spate_catalog.objects", as_of=then - 1).column("name").to_pylist()


def test_every_collection_has_its_lag_in_a_plain_select(env: Environment) -> None:
    env.create_table("t", RelationDesc.of(("a", INT64, False)))
    env.insert("t", [(1,)])
    rows = env.sql("SELECT name, type, since, upper, lag_ms FROM spate_catalog.frontiers")
    assert rows is not None
    by_name = {r["name"]: r for r in rows.to_pylist()}
    assert {"t", "spate_catalog.objects", "spate_catalog.frontiers"} <= by_name.keys()
    t = by_name["t"]
    upper = env.runtime.storage.collection_frontiers(env.get("t").id).upper.as_option()
    assert upper is not None and t["upper"] is not None and t["upper"] <= upper
    assert t["since"] <= t["upper"]
    # the tables advance every second: lag is the wall clock minus the upper, a few seconds
    assert 0 <= t["lag_ms"] < 10_000


def test_system_relations_cannot_be_dropped_or_written(env: Environment) -> None:
    with pytest.raises(UsageError, match="system relation"):
        env.drop("spate_catalog.objects")
    with pytest.raises(UsageError):
        env.insert("spate_catalog.objects", [("x", "x", "table", None)])
    assert "spate_catalog.objects" in env.select("spate_catalog.objects").column("name").to_pylist()


def test_relations_survive_a_restart(tmp_path: object) -> None:
    from pathlib import Path

    data = Path(str(tmp_path)) / "data"
    with Environment.open(data) as env:
        env.create_table("t", RelationDesc.of(("a", INT64, False)))
        shard = env.runtime.storage.collection_metadata(
            env.runtime.catalog.get("spate_catalog.objects").id
        ).shard
        assert "t" in env.select("spate_catalog.objects").column("name").to_pylist()
    with Environment.open(data) as env:
        again = env.runtime.storage.collection_metadata(
            env.runtime.catalog.get("spate_catalog.objects").id
        ).shard
        assert again == shard
        names = env.select("spate_catalog.objects").column("name").to_pylist()
        assert names.count("t") == 1
