"""What SQL keeps about objects lives in ``CatalogState`` (:mod:`spate.environment.definitions`):
the pure transitions add a definition with its item, drop it with its item, rename its text
(and its readers' texts) with its item, and keep secrets and connections in the items'
namespace. A catalog written before these fields existed still decodes. No I/O."""

from __future__ import annotations

import msgpack
import pytest

from spate.codec import decode, encode
from spate.environment.catalog import (
    CatalogState,
    HasDependents,
    NameExists,
    SinkItem,
    TableItem,
    UnknownName,
    ViewItem,
)
from spate.environment.catalog_store import CatalogDocument, decode_document
from spate.environment.definitions import (
    ConnectionEntry,
    Definition,
    SecretEntry,
    SqlDefinition,
)
from spate.errors import ConnectionInUse
from spate.ids import GlobalId
from spate.plan.relation import Get
from spate.protocol.secret import SecretRef
from spate.protocol.storage_desc import ParquetSinkConnection
from spate.repr import INT64, RelationDesc

DESC = RelationDesc.of(("a", INT64, False))


def _table_and_view() -> CatalogState:
    state, t = CatalogState().allocate_id()
    state = state.add_item(TableItem("t", t, DESC), SqlDefinition("CREATE TABLE t (a bigint)"))
    state, v = state.allocate_id()
    view = ViewItem("v", v, Get(t, DESC))
    return state.add_item(view, SqlDefinition("CREATE VIEW v AS SELECT a FROM t", ("int8",)))


def test_an_item_is_added_with_its_definition() -> None:
    state = _table_and_view()
    t, v = state.get("t").id, state.get("v").id
    assert state.definition(t) == Definition(t, "CREATE TABLE t (a bigint)")
    assert state.definition(v) == Definition(v, "CREATE VIEW v AS SELECT a FROM t", ("int8",))
    # an item made outside SQL has none
    state, u = state.allocate_id()
    state = state.add_item(TableItem("u", u, DESC))
    assert state.definition(u) is None


def test_a_removed_item_takes_its_definition_along() -> None:
    state = _table_and_view()
    v = state.get("v").id
    state = state.remove_items(frozenset({v}))
    assert state.definition(v) is None
    assert [d.create_sql for d in state.definitions] == ["CREATE TABLE t (a bigint)"]


def test_a_rename_rewrites_the_item_and_its_readers_texts_in_the_same_change() -> None:
    state = _table_and_view().rename_item("t", "t2")
    t, v = state.get("t2").id, state.get("v").id
    assert state.definition(t) == Definition(t, "CREATE TABLE t2 (a bigint)")
    assert state.definition(v) == Definition(v, "CREATE VIEW v AS SELECT a FROM t2", ("int8",))
    again = state.rename_item("v", "w")
    assert again.definition(v) == Definition(v, "CREATE VIEW w AS SELECT a FROM t2", ("int8",))


def test_secrets_and_connections_share_the_items_namespace() -> None:
    state = _table_and_view()
    secret = SecretEntry("s", "CREATE SECRET s AS '********'", SecretRef("s-1"))
    state = state.add_secret(secret)
    conn = ConnectionEntry("c", "CREATE CONNECTION c …", "postgres", (("host", "h"),), "s")
    state = state.add_connection(conn)
    assert (state.secret("s"), state.connection("c")) == (secret, conn)
    with pytest.raises(NameExists, match="table 't' already exists"):
        state.add_secret(SecretEntry("t", "", SecretRef("s-2")))
    with pytest.raises(NameExists, match="secret 's' already exists"):
        state.add_connection(ConnectionEntry("s", "", "postgres", ()))
    with pytest.raises(NameExists, match="connection 'c' already exists"):
        state.rename_item("t", "c")
    state2, id = state.allocate_id()
    with pytest.raises(NameExists, match="secret 's' already exists"):
        state2.add_item(TableItem("s", id, DESC))
    with pytest.raises(UnknownName, match="unknown secret 'nope'"):
        state.add_connection(ConnectionEntry("c2", "", "postgres", (), "nope"))


def test_a_secret_in_use_is_dropped_only_with_cascade() -> None:
    state = CatalogState().add_secret(SecretEntry("s", "", SecretRef("s-1")))
    state = state.add_connection(ConnectionEntry("c", "", "postgres", (), "s"))
    with pytest.raises(HasDependents, match='cannot drop secret "s": connection c uses it'):
        state.remove_secret("s")
    dropped = state.remove_secret("s", cascade=True)
    assert (dropped.secrets, dropped.connections) == ((), ())
    assert state.remove_connection("c").remove_secret("s").secrets == ()


def test_the_fields_round_trip_and_an_older_catalog_decodes_without_them() -> None:
    state = _table_and_view().add_secret(SecretEntry("s", "x", SecretRef("s-1")))
    state = state.add_connection(ConnectionEntry("c", "y", "kafka", (("broker", "b:1"),), "s"))
    doc = CatalogDocument(3, state)
    assert decode(encode(doc), CatalogDocument) == doc
    raw = msgpack.unpackb(encode(doc), raw=False, strict_map_key=False)
    fields = raw[2]["catalog"][2]
    for name in ("definitions", "secrets", "connections"):
        del fields[name]  # as a catalog written before them
    old = decode_document(msgpack.packb(raw, use_bin_type=True))
    assert old.catalog.items == state.items
    assert (old.catalog.definitions, old.catalog.secrets, old.catalog.connections) == ((), (), ())
    assert old.catalog.definition(GlobalId.user(1)) is None


def _sink_with_connection() -> CatalogState:
    state = _table_and_view().add_connection(ConnectionEntry("pg", "", "postgres", ()))
    state, id = state.allocate_id()
    sink = SinkItem("out", id, GlobalId.user(1), ParquetSinkConnection("/tmp/never-written"))
    create = "CREATE SINK out FROM t INTO POSTGRES CONNECTION pg (TABLE 'o')"
    return state.add_item(sink, SqlDefinition(create, connection="pg"))


def test_a_connection_a_sink_uses_is_not_dropped_until_the_sink_is() -> None:
    state = _sink_with_connection()
    with pytest.raises(ConnectionInUse, match='cannot drop connection "pg": out uses it') as e:
        state.remove_connection("pg")
    assert e.value.sqlstate == "2BP01"
    without = state.remove_items(frozenset({state.get("out").id}))
    assert without.remove_connection("pg").connections == ()


def test_a_secret_dropped_with_cascade_cannot_take_a_connection_in_use_along() -> None:
    state = CatalogState().add_secret(SecretEntry("s", "", SecretRef("s-1")))
    state = state.add_connection(ConnectionEntry("pg", "", "postgres", (), "s"))
    state, t = state.allocate_id()
    state = state.add_item(TableItem("t", t, DESC))
    state, id = state.allocate_id()
    sink = SinkItem("out", id, t, ParquetSinkConnection("/tmp/never-written"))
    state = state.add_item(sink, SqlDefinition("CREATE SINK out …", connection="pg"))
    with pytest.raises(ConnectionInUse):
        state.remove_secret("s", cascade=True)


def test_an_item_made_with_a_connection_that_is_gone_is_refused() -> None:
    state, id = _table_and_view().allocate_id()
    sink = SinkItem("out", id, GlobalId.user(1), ParquetSinkConnection("/tmp/never-written"))
    with pytest.raises(UnknownName, match="uses unknown connection 'pg'"):
        state.add_item(sink, SqlDefinition("CREATE SINK out …", connection="pg"))


def test_a_definition_keeps_its_connection_through_encoding_and_renames() -> None:
    state = _sink_with_connection()
    doc = CatalogDocument(3, state)
    assert decode(encode(doc), CatalogDocument) == doc
    renamed = state.rename_item("out", "out2")
    assert renamed.definition(renamed.get("out2").id).connection == "pg"  # type: ignore[union-attr]
    with pytest.raises(ConnectionInUse, match="out2 uses it"):
        renamed.remove_connection("pg")
