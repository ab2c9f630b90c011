"""Wrongly typed arguments are refused before anything is durable: the call raises a
``SpateError`` naming what was wrong, and the data directory still opens with the same
contents afterwards."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from spate.environment.api import Environment
from spate.errors import SpateError
from spate.repr import INT64, TEXT, RelationDesc
from spate.repr.desc import Column

DESC = RelationDesc.of(("k", INT64, False), ("v", TEXT))


@pytest.mark.parametrize(
    "desc",
    [{"a": "int64"}, None, [("a", INT64)], "a int64"],
    ids=["dict", "none", "list", "str"],
)
def test_create_table_refuses_a_desc_that_is_not_a_relation_desc(tmp_path: Path, desc: Any) -> None:
    data = tmp_path / "data"
    with Environment.open(data) as env:
        env.create_table("ok", DESC)
        with pytest.raises(SpateError, match="RelationDesc") as e:
            env.create_table("t", desc)
        assert isinstance(e.value, TypeError)
        assert env.names() == ["ok"]
    with Environment.open(data) as env:
        assert env.names() == ["ok"]


@pytest.mark.parametrize("nullable", ["no", 0, None])
def test_a_column_with_a_non_bool_nullable_is_refused(nullable: Any) -> None:
    with pytest.raises(SpateError, match="nullable"):
        Column("a", INT64, nullable)


@pytest.mark.parametrize("ms", [1.5, True, "100", None, -1])
def test_set_retain_history_refuses_a_non_integer_or_negative_duration(
    tmp_path: Path, ms: Any
) -> None:
    data = tmp_path / "data"
    with Environment.open(data) as env:
        env.create_table("t", DESC)
        env.insert("t", [(1, "a")])
        with pytest.raises(SpateError, match="retain history"):
            env.set_retain_history("t", ms)
    with Environment.open(data) as env:
        assert env.names() == ["t"]
        assert env.select("t").num_rows == 1


@pytest.mark.parametrize(
    "call",
    [
        lambda env: env.create_view("v", {"not": "a plan"}),
        lambda env: env.create_materialized_view("v", None),
        lambda env: env.create_table(7, DESC),
        lambda env: env.drop(None),
        lambda env: env.create_index("i", on="t", key="k"),
        lambda env: env.create_source("s", "postgres://x"),
        lambda env: env.create_sink("s", from_="t", connection="postgres://x"),
    ],
    ids=["view", "mv", "table-name", "drop", "index-key-str", "source", "sink"],
)
def test_other_wrongly_typed_arguments_are_refused_and_change_nothing(
    tmp_path: Path, call: Any
) -> None:
    data = tmp_path / "data"
    with Environment.open(data) as env:
        env.create_table("t", DESC)
        with pytest.raises(SpateError):
            call(env)
        assert env.names() == ["t"]
    with Environment.open(data) as env:
        assert env.names() == ["t"]


def test_a_value_that_would_not_read_back_is_never_committed(tmp_path: Path) -> None:
    """The last line of defence: whatever slips past argument checks cannot be stored in a
    form that would make the catalog unreadable."""
    import dataclasses

    from spate.environment.catalog import TableItem
    from spate.persist.document import UndecodableValue

    data = tmp_path / "data"
    with Environment.open(data) as env:
        env.create_table("t", DESC)
        rt = env.runtime
        item = rt.catalog.get("t")
        assert isinstance(item, TableItem)
        bad = dataclasses.replace(item, retain_history_ms=1.5)  # type: ignore[arg-type]
        with pytest.raises(UndecodableValue, match="environment/catalog"):
            rt.commit(lambda s: s.replace_item(bad))
    with Environment.open(data) as env:
        assert env.names() == ["t"]


def test_an_unreadable_catalog_entry_is_named_and_can_be_repaired(tmp_path: Path) -> None:
    """A catalog entry that cannot be decoded (as earlier versions could commit) is reported by
    name, by open and by the offline status, and removing it repairs the data directory."""
    import msgpack

    from spate.environment.catalog_store import (
        CATALOG_KEY,
        CatalogUnreadable,
        drop_unreadable_entries,
    )
    from spate.environment.inspect import inspect_environment
    from spate.persist.consensus_sqlite import SqliteConsensus

    data = tmp_path / "data"
    with Environment.open(data) as env:
        env.create_table("good", DESC)
        env.insert("good", [(1, "kept")])
        env.create_table("bad", DESC)
    consensus = SqliteConsensus(data / "consensus.db")
    head = consensus.head(CATALOG_KEY)
    assert head is not None
    raw = msgpack.unpackb(head.data, raw=False, strict_map_key=False)
    for item in raw[2]["catalog"][2]["items"]:
        if item[2]["name"] == "bad":
            item[2]["desc"] = {"a": "int64"}  # what create_table(name, dict) used to store
    assert consensus.compare_and_set(CATALOG_KEY, head.seqno, msgpack.packb(raw))
    consensus.close()

    with pytest.raises(CatalogUnreadable, match=r"table 'bad'.*drop_unreadable_entries") as e:
        Environment.open(data)
    assert [u.name for u in e.value.entries] == ["bad"]
    status = inspect_environment(data)
    assert any("'bad'" in p for p in status.problems)
    assert drop_unreadable_entries(data, ["good"]) == []  # readable entries are never removed
    assert drop_unreadable_entries(data, ["bad"]) == ["bad"]
    with Environment.open(data) as env:
        assert env.names() == ["good"]
        assert env.select("good").to_pylist() == [{"k": 1, "v": "kept"}]
