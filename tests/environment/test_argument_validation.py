"""Wrongly typed arguments are refused before anything is durable: the call raises a
``SpateError`` naming what was wrong, and the data directory still opens with the same
contents afterwards."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from spate.environment.api import Environment
from spate.errors import InvalidArgument, InvalidArgumentValue, SpateError
from spate.repr import FLOAT64, INT64, TEXT, RelationDesc
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


FDESC = RelationDesc.of(("k", INT64, False), ("v", TEXT), ("f", FLOAT64))


def test_select_pandas_refuses_an_unknown_keyword_naming_it(env: Environment) -> None:
    env.create_table("t", DESC)
    with pytest.raises(InvalidArgument, match="'ordr_by'") as e:
        env.select_pandas("t", ordr_by=["k"])
    assert isinstance(e.value, TypeError)
    assert "order_by" in str(e.value)  # the keywords it takes are listed


@pytest.mark.parametrize(
    "where", [{"k": "1"}, {"k": 1.5}, {"v": 7}, {"k": None}], ids=["str", "float", "int", "null"]
)
def test_delete_where_with_a_value_that_does_not_fit_its_column_is_refused(
    env: Environment, where: dict[str, Any]
) -> None:
    env.create_table("t", FDESC)
    env.insert("t", [(1, "a", 1.0)])
    column = next(iter(where))
    with pytest.raises(SpateError, match=f"column {column}|{column}"):
        env.delete("t", where=where)
    assert env.select("t").to_pylist() == [{"k": 1, "v": "a", "f": 1.0}]


def test_delete_where_refuses_a_column_name_that_is_not_a_string(env: Environment) -> None:
    env.create_table("t", FDESC)
    with pytest.raises(InvalidArgument, match="where"):
        env.delete("t", where={1: 1})


def test_delete_where_matches_nan_and_minus_zero_as_postgresql_does(env: Environment) -> None:
    env.create_table("t", FDESC)
    env.insert("t", [(1, "a", float("nan")), (2, "b", 0.0), (3, "c", 1.0)])
    assert env.delete("t", where={"f": float("nan")}).rows == 1
    assert env.delete("t", where={"f": -0.0}).rows == 1
    assert env.delete("t", where={"k": 3, "f": 1}).rows == 1  # an int fits a float column
    assert env.select("t").num_rows == 0


def _counter() -> Any:
    from spate.sources import LoadGenerator, LoadGeneratorSource

    return LoadGeneratorSource(LoadGenerator.COUNTER)


@pytest.mark.parametrize(
    "call",
    [
        lambda env: env.add_replica("c", "r9", address=5),
        lambda env: env.create_source("s", _counter(), names=["s_counter"]),
        lambda env: env.create_source("s", _counter(), names={"counter": 5}),
        lambda env: env.create_source("s", _counter(), names={"nope": "x"}),
        lambda env: env.create_source("s", _counter(), tables=["public.t"]),
        lambda env: env.create_source("s", _counter(), tables="public.t"),
        lambda env: env.create_source("s", _counter(), desc=DESC),
        lambda env: env.select("t", timeout="1"),
        lambda env: next(iter(env.subscribe("t", timeout="1"))),
        lambda env: next(iter(env.subscribe("t", with_snapshot="no"))),
        lambda env: env.sql(5),
        lambda env: env.sql_session().sql(b"SELECT 1"),
        lambda env: env.wait_hydrated(timeout="1"),
        lambda env: env.wait_hydrated(progress=5),
        lambda env: env.close(stop_replicas="no"),
        lambda env: env.close(timeout="1"),
    ],
    ids=[
        "replica-address",
        "source-names-list",
        "source-names-value",
        "source-names-unknown-output",
        "source-tables-not-postgres",
        "source-tables-str",
        "source-desc-not-files",
        "select-timeout",
        "subscribe-timeout",
        "subscribe-with-snapshot",
        "sql-text",
        "session-sql-text",
        "wait-hydrated-timeout",
        "wait-hydrated-progress",
        "close-stop-replicas",
        "close-timeout",
    ],
)
def test_more_wrongly_typed_arguments_raise_a_spate_error_and_change_nothing(
    tmp_path: Path, call: Any
) -> None:
    data = tmp_path / "data"
    with Environment.open(data) as env:
        env.create_table("t", DESC)
        env.create_cluster("c", replicas=0)
        with pytest.raises(SpateError):
            call(env)
        assert env.names() == ["t"]
        assert [c.name for c in env.runtime.catalog.clusters] == ["c"]
        assert env.runtime.catalog.cluster("c").replicas == ()


@pytest.mark.parametrize(
    "kwargs",
    [{"settings": "x"}, {"timeout": "1"}, {"timeout": 0}, {"spark_master": 5}],
    ids=["settings", "timeout-str", "timeout-zero", "spark-master"],
)
def test_open_refuses_wrongly_typed_arguments(tmp_path: Path, kwargs: dict[str, Any]) -> None:
    with pytest.raises((InvalidArgument, InvalidArgumentValue)):
        Environment.open(tmp_path / "data", **kwargs)
    assert not (tmp_path / "data").exists()


def test_open_refuses_a_data_dir_that_is_not_a_path() -> None:
    with pytest.raises(InvalidArgument, match="data_dir"):
        Environment.open(5)  # type: ignore[arg-type]


@pytest.mark.parametrize("read", [None, "SELECT 1", lambda: None], ids=["none", "text", "function"])
def test_start_read_refuses_what_is_not_a_read_coroutine(tmp_path: Path, read: Any) -> None:
    with (
        Environment.open(tmp_path / "data") as env,
        pytest.raises(InvalidArgument, match="start_read takes a read coroutine"),
    ):
        env.start_read(read)
