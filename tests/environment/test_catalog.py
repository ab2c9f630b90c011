"""The catalog: validated pure transitions, lookups, durable round trip."""

from __future__ import annotations

from pathlib import Path

import pytest

from spate.environment.catalog import (
    CatalogState,
    HasDependents,
    IndexItem,
    InvalidName,
    MaterializedViewItem,
    NameExists,
    TableItem,
    UnknownName,
    ViewItem,
)
from spate.environment.durable import DurableDocument
from spate.persist.location import open_consensus
from spate.plan.builder import col
from spate.plan.relation import Get
from spate.repr import INT64, TEXT, RelationDesc

BIDS = RelationDesc.of(("auction", INT64, False), ("price", INT64, False), ("who", TEXT))


def populated() -> CatalogState:
    state = CatalogState()
    state, _ = state.add_cluster("c1")
    state, _ = state.add_replica("c1", "r1")
    state, bids_id = state.allocate_id()
    state = state.add_item(TableItem("bids", bids_id, BIDS))
    state, view_id = state.allocate_id()
    bids = Get(bids_id, BIDS)
    state = state.add_item(ViewItem("big", view_id, bids.filter(col("price") > 10)))
    state, mv_id = state.allocate_id()
    state = state.add_item(
        MaterializedViewItem("mv", mv_id, Get(view_id, bids.desc).project("auction"), "c1")
    )
    state, idx_id = state.allocate_id()
    return state.add_item(IndexItem("mv_idx", idx_id, mv_id, (0,), "c1"))


def test_lookups_and_dependents() -> None:
    state = populated()
    bids = state.get("bids")
    assert bids.id.is_user()
    assert [i.name for i in state.dependents(bids.id)] == ["big"]
    assert [i.name for i in state.transitive_dependents(bids.id)] == ["big", "mv", "mv_idx"]
    assert state.by_id(state.get("mv").id).name == "mv"
    assert [i.name for i in state.objects_on("c1")] == ["mv", "mv_idx"]
    assert state.cluster("c1").replica("r1").id.value == 1


def test_bad_changes_are_refused_with_clear_messages_and_change_nothing() -> None:
    state = populated()
    with pytest.raises(NameExists, match="table 'bids' already exists"):
        state.add_item(TableItem("bids", state.allocate_id()[1], BIDS))
    with pytest.raises(UnknownName, match="unknown object 'nope'; objects: bids, big, mv, mv_idx"):
        state.get("nope")
    with pytest.raises(InvalidName, match="invalid table name '1x'"):
        state.add_item(TableItem("1x", state.allocate_id()[1], BIDS))
    with pytest.raises(UnknownName, match="unknown cluster 'c9'; clusters: c1"):
        state.add_item(IndexItem("i2", state.allocate_id()[1], state.get("bids").id, (0,), "c9"))
    with pytest.raises(HasDependents, match="cluster c1 still maintains: mv, mv_idx"):
        state.remove_cluster("c1")
    with pytest.raises(NameExists, match="cluster c1 already has a replica 'r1'"):
        state.add_replica("c1", "r1")
    assert state == populated()


def test_catalog_round_trips_through_consensus(tmp_path: Path) -> None:
    consensus = open_consensus(f"sqlite:///{tmp_path}/c.db")
    doc = DurableDocument(consensus, "environment/catalog", CatalogState)
    committed = doc.update(lambda current: populated())
    again = DurableDocument(consensus, "environment/catalog", CatalogState).load()
    assert again == committed
    assert again is not None and again.get("mv").plan == committed.get("mv").plan  # type: ignore[union-attr]
