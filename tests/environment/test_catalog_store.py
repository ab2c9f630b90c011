"""The durable catalog as a log of changes: what a change costs does not grow with the catalog,
a reopened catalog is identical to the committed one, older data directories open, and the
epoch fences every write."""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from spate.environment.catalog import CatalogState, TableItem, ViewItem, dependencies
from spate.environment.catalog_store import (
    CATALOG_KEY,
    CatalogDocument,
    CatalogStore,
    EnvironmentFenced,
)
from spate.environment.definitions import SqlDefinition
from spate.ids import GlobalId
from spate.persist.consensus import Consensus
from spate.persist.consensus_mem import MemConsensus
from spate.persist.consensus_sqlite import SqliteConsensus
from spate.persist.document import DurableDocument
from spate.plan.builder import col
from spate.plan.relation import Get
from spate.repr import INT64, TEXT, RelationDesc
from tests._consensus import PassThroughConsensus

Change = Callable[[CatalogState | None], CatalogState]
DESC = RelationDesc.of(("k", INT64, False), ("v", INT64, False), ("s", TEXT))


class CountingConsensus(PassThroughConsensus):
    """A consensus that counts the bytes of every version written."""

    def __init__(self, inner: Consensus) -> None:
        super().__init__(inner)
        self.written: list[int] = []

    def compare_and_set(self, key: str, expected: int | None, data: bytes) -> bool:
        ok = self.inner.compare_and_set(key, expected, data)
        if ok:
            self.written.append(len(data))
        return ok


def _with_table(state: CatalogState | None) -> CatalogState:
    state = state or CatalogState()
    state, id = state.allocate_id()
    return state.add_item(TableItem("t", id, DESC))


def _add_view(name: str, bound: int) -> Change:
    def change(state: CatalogState | None) -> CatalogState:
        assert state is not None
        table = state.get("t")
        state, id = state.allocate_id()
        plan = Get(table.id, DESC).filter(col("v") > bound).project("k", "v")
        sql = SqlDefinition(f"CREATE VIEW {name} AS SELECT k, v FROM t WHERE v > {bound}", ())
        return state.add_item(ViewItem(name, id, plan), sql)

    return change


def _drop(name: str) -> Change:
    def change(state: CatalogState | None) -> CatalogState:
        assert state is not None
        return state.remove_items(frozenset({state.get(name).id}))

    return change


def _items(store: CatalogStore) -> list[str]:
    return [i.name for i in store.load() or CatalogState()]


def _reopened(consensus: Consensus) -> CatalogState | None:
    return CatalogStore(consensus).load()


def test_bytes_written_per_change_do_not_grow_with_the_catalog() -> None:
    """Each CREATE/DROP VIEW at 1,600 items writes what it does at 100; all the versions
    written to grow the catalog to 1,600 items total a few times its size (whole-catalog writes
    would total ~800 times it)."""
    consensus = CountingConsensus(MemConsensus())
    store = CatalogStore(consensus, epoch=1)
    store.claim()
    store.update(_with_table)
    rounds: dict[int, list[int]] = {}
    for size in (100, 1_600):
        for n in range(len(_items(store)), size):
            store.update(_add_view(f"keep_{n}", n))
        before = len(consensus.written)
        for _ in range(20):  # a fixed name and text: every round changes the same
            store.update(_add_view("v", 7))
            store.update(_drop("v"))
        rounds[size] = sorted(consensus.written[before:])
    store.compact()
    whole = len(consensus.inner.head(CATALOG_KEY).data)  # type: ignore[union-attr]
    assert whole > 100_000
    # the rounds' writes are the same change at both sizes, but for snapshots among them
    small, large = rounds[100], rounds[1_600]
    assert large[len(large) // 2] <= 1.1 * small[len(small) // 2] < 2_000
    assert len([b for b in large if b > 10 * small[0]]) <= 1
    assert sum(consensus.written) < 5 * whole
    assert _reopened(consensus) == store.load()


def test_a_reopened_catalog_is_identical_at_every_version(tmp_path: Path) -> None:
    """Seeded random changes (views, drops, renames, comments, clusters), across several
    snapshots: a fresh store reads exactly the committed state after each, and a second store
    that follows along reads it from the new versions only."""
    seed = int(os.environ.get("SPATE_CATALOG_SEED", random.randrange(2**32)))
    print(f"seed {seed} (replay: SPATE_CATALOG_SEED={seed})")
    rng = random.Random(seed)
    consensus = CountingConsensus(SqliteConsensus(tmp_path / "c.db"))
    store = CatalogStore(consensus, epoch=1)
    store.claim()
    store.update(_with_table)
    follower = CatalogStore(consensus)
    names: list[str] = []
    for step in range(400):
        state = store.load()
        assert state is not None
        roll = rng.random()
        if roll < 0.5 or not names:
            name = f"v{step}"
            committed = store.update(_add_view(name, step))
            names.append(name)
        elif roll < 0.75:
            committed = store.update(_drop(names.pop(rng.randrange(len(names)))))
        elif roll < 0.85:
            old = names.pop(rng.randrange(len(names)))
            names.append(f"r{step}")
            committed = store.update(lambda s, o=old, n=names[-1]: s.rename_item(o, n))  # type: ignore[misc]
        elif roll < 0.95:
            id = state.get(rng.choice(names)).id
            text = None if rng.random() < 0.3 else f"note {step}"
            committed = store.update(lambda s, i=id, t=text: s.set_comment(i, None, t))  # type: ignore[misc]
        else:
            committed = store.update(lambda s, n=f"c{step}": s.add_cluster(n)[0])  # type: ignore[misc]
        assert follower.load() == committed
        if step % 25 == 0:
            assert _reopened(consensus) == committed
            table = committed.get("t").id  # the derived lookups answer what a scan would
            assert committed.dependents(table) == [
                i for i in committed.items if table in dependencies(i)
            ]
            assert all(committed.get(i.name) is i for i in committed.items)
    assert _reopened(consensus) == store.load()
    assert len(consensus.written) > 400  # one version per change


def test_a_catalog_written_whole_by_an_older_version_opens_and_then_changes(
    tmp_path: Path,
) -> None:
    consensus = SqliteConsensus(tmp_path / "c.db")
    old = DurableDocument(consensus, CATALOG_KEY, CatalogDocument)
    for epoch in (1, 2, 3):  # several whole versions, as older versions kept them
        old.update(lambda doc, e=epoch: CatalogDocument(e, _with_table(None)))  # type: ignore[misc]
    expected = _with_table(None)
    assert _reopened(consensus) == expected
    store = CatalogStore(consensus, epoch=4)
    assert store.claim() == expected
    committed = store.update(_add_view("v", 1))
    assert _reopened(consensus) == committed
    assert [i.name for i in committed] == ["t", "v"]


def test_a_newer_epoch_fences_every_write_and_changes_nothing(tmp_path: Path) -> None:
    consensus = SqliteConsensus(tmp_path / "c.db")
    first = CatalogStore(consensus, epoch=1)
    first.claim()
    first.update(_with_table)
    first.update(_add_view("a", 1))
    second = CatalogStore(consensus, epoch=2)
    assert [i.name for i in second.claim()] == ["t", "a"]
    with pytest.raises(EnvironmentFenced, match=r"epoch 1\) was fenced by a newer one \(epoch 2"):
        first.update(_add_view("b", 2))
    with pytest.raises(EnvironmentFenced, match="opening the environment"):
        first.claim()
    second.update(_drop("a"))
    assert _items(CatalogStore(consensus)) == ["t"]


def test_lookups_do_not_scan_the_catalog(monkeypatch: pytest.MonkeyPatch) -> None:
    """At 1,600 views, a CREATE VIEW / lookup / dependents / DROP VIEW round reads the plans
    of the items it changes only (the index is derived from the previous state's), and the
    lookups answer what a scan of the items would."""
    from spate.plan.relation import RelationExpr

    state = _with_table(None)
    for n in range(1_600):
        state = _add_view(f"keep_{n}", n)(state)
    table = state.get("t").id
    assert [i.name for i in state.dependents(table)] == [f"keep_{n}" for n in range(1_600)]
    calls = 0
    depends_on = RelationExpr.depends_on

    def counted(self: RelationExpr) -> frozenset[GlobalId]:
        nonlocal calls
        calls += 1
        return depends_on(self)

    monkeypatch.setattr(RelationExpr, "depends_on", counted)
    for r in range(20):
        state = _add_view("v", r)(state)
        view = state.get("v")
        assert state.by_id(view.id) is view and state.definition(view.id) is not None
        assert state.dependents(table)[-1] is view
        state = _drop("v")(state)
        assert state.find("v") is None
    assert calls <= 20 * 4
    monkeypatch.undo()
    for id in (table, state.get("keep_7").id):
        assert state.dependents(id) == [i for i in state.items if id in dependencies(i)]
    assert len(state.definitions) == 1_600


def test_the_paths_ddl_takes_keep_the_lookups_derived(monkeypatch: pytest.MonkeyPatch) -> None:
    """An item added with an id allocated earlier (``with_id``) and a DDL block's stand-in
    derive the next state's lookups from the previous state's instead of building them again."""
    from spate.environment import catalog_index
    from spate.environment.objects import with_id

    state = _with_table(None)
    table = state.get("t")  # built once
    builds = 0
    init = catalog_index.CatalogIndex.__init__

    def counted(self: object, *args: object) -> None:
        nonlocal builds
        builds += 1
        init(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(catalog_index.CatalogIndex, "__init__", counted)
    _, id = state.allocate_id()
    plan = Get(table.id, DESC).project("k")
    state = with_id(state, ViewItem("v", id, plan), SqlDefinition("CREATE VIEW v AS ...", ()))
    assert state.get("v").id == id and state.next_id == id.value + 1
    state, stand_in = state.allocate_id()
    state = state.with_stand_in(ViewItem("w", stand_in, plan))
    assert [i.name for i in state.dependents(table.id)] == ["v", "w"]
    assert builds == 0


def test_an_item_put_back_in_its_place_is_read_in_catalog_order() -> None:
    """``CatalogIndex.changed`` with an item removed and added again (a replacement) keeps it
    in its place among the readers, as the catalog does."""
    state = _with_table(None)
    for n in range(3):
        state = _add_view(f"v{n}", n)(state)
    table = state.get("t").id
    index = state._lookups()
    first = state.get("v0")
    assert isinstance(first, ViewItem)
    again = ViewItem("v0", first.id, first.plan.project("k"))
    changed = index.changed(removed=(first,), added=(again,))
    assert [i.name for i in changed.readers(table)] == ["v0", "v1", "v2"]
    assert changed.readers(table)[0] is again
    assert [i.name for i in index.readers(table)] == ["v0", "v1", "v2"]  # unchanged
