"""The DDL statements of one transaction block, carried out together at COMMIT.

A DDL block holds one DDL statement of any kind first (after statements that change nothing,
such as a ``DROP … IF EXISTS`` of what is not there), then any number of statements that are
*pure catalog changes*: ``ALTER … RENAME TO``, ``ALTER … OWNER TO``, ``COMMENT ON``, and
``CREATE VIEW`` of a view that is not materialized (and replaces nothing). These change only the
catalog, so they are composed into one function of the catalog state and committed with one
compare-and-set (:meth:`~spate.environment.runtime.Runtime.commit`), with what SQL keeps about
them (a view's CREATE text and column types, the texts a rename rewrites): all of them or none.
That is what dbt sends::

    BEGIN;
    CREATE VIEW m__dbt_tmp AS …;              -- or CREATE TABLE m__dbt_tmp AS …
    ALTER VIEW m RENAME TO m__dbt_backup;
    ALTER VIEW m__dbt_tmp RENAME TO m;
    COMMIT;

Each statement of the block is planned against the catalog as the statements before it leave
it (:func:`pending`), so the second rename above sees ``m`` free. At COMMIT the pure changes
are checked once more against the current catalog (as the first statement will leave it),
then the first statement is carried out (a table, materialized view or index has storage and
dataflows: its own commit), then the pure changes in one commit. A statement that needs more
than the catalog (creating a table, a materialized view, an index, a drop) can only be the
first of its block.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from spate.environment.catalog import (
    CatalogState,
    IndexItem,
    MaterializedViewItem,
    StoredItem,
    TableItem,
    ViewItem,
    item_desc,
)
from spate.environment.definitions import SqlDefinition
from spate.ids import GlobalId
from spate.sql import statements as st
from spate.sql.errors import SqlError

Change = Callable[[CatalogState], CatalogState]
Creating = st.CreateView | st.CreateTable | st.CreateTableAs


def is_noop(stmt: st.Statement) -> bool:
    """Whether ``stmt`` changes nothing: ``ALTER … IF EXISTS`` or ``DROP … IF EXISTS`` of what
    is not there, ``ALTER … OWNER TO``."""
    return isinstance(stmt, st.NoChange) or (isinstance(stmt, st.DropObjects) and not stmt.names)


def is_pure(stmt: st.Statement) -> bool:
    """Whether ``stmt`` changes nothing but the catalog (it may follow another DDL statement in
    a block)."""
    if isinstance(stmt, (st.RenameObject, st.CommentOn)) or is_noop(stmt):
        return True
    return isinstance(stmt, st.CreateView) and not stmt.materialized and not stmt.replace


def change_of(stmt: st.Statement) -> Change:
    """``stmt`` as a function of the catalog state: exact for the pure statements, a stand-in
    for the others (what planning the statements after it needs to see: the names it creates
    or drops, with ids of their own)."""
    match stmt:
        case st.RenameObject():
            return lambda s: s.rename_item(stmt.name, stmt.new)
        case st.CommentOn():
            return lambda s: _comment(s, stmt)
        case st.CreateView() if not stmt.materialized:
            return lambda s: _add(
                s,
                lambda id: ViewItem(stmt.name, id, stmt.plan),
                stmt,
                SqlDefinition(stmt.sql, stmt.types),
            )
        case st.CreateView():
            return lambda s: _add(
                s,
                lambda id: MaterializedViewItem(stmt.name, id, stmt.plan, stmt.cluster or ""),
                stmt,
            )
        case st.CreateTable() | st.CreateTableAs():
            return lambda s: _add(s, lambda id: TableItem(stmt.name, id, stmt.desc), stmt)
        case st.CreateIndex():
            return lambda s: _index(s, stmt)
        case st.DropObjects():
            return lambda s: _drop(s, stmt.names)
    return lambda s: s


def _add(
    state: CatalogState,
    make: Callable[[GlobalId], StoredItem],
    stmt: Creating,
    definition: SqlDefinition | None = None,
) -> CatalogState:
    """``state`` with the item ``make`` makes with a new id; with a ``definition``: the real
    creation (validated, the definition kept with it), else a stand-in (which skips what it
    cannot know, such as a default cluster)."""
    if stmt.if_not_exists and state.find(stmt.name) is not None:
        return state
    state, id = state.allocate_id()
    item = make(id)
    if definition is not None:
        return state.add_item(item, definition)
    return state.with_stand_in(item)


def _index(state: CatalogState, stmt: st.CreateIndex) -> CatalogState:
    if stmt.if_not_exists and state.find(stmt.name) is not None:
        return state
    on = state.get(stmt.on)
    desc = item_desc(on)
    key = tuple(desc.names.index(k) for k in stmt.key) if desc is not None else ()
    state, id = state.allocate_id()
    item = IndexItem(stmt.name, id, on.id, key, stmt.cluster or "")
    return state.with_stand_in(item)


def _drop(state: CatalogState, names: Sequence[str]) -> CatalogState:
    ids = set()
    for name in names:
        item = state.find(name)
        if item is not None:
            ids.add(item.id)
            ids.update(d.id for d in state.transitive_dependents(item.id))
    return state.remove_items(frozenset(ids))


def _comment(state: CatalogState, stmt: st.CommentOn) -> CatalogState:
    item = state.get(stmt.name)
    column = None
    if stmt.column is not None:
        desc = item_desc(item)
        assert desc is not None
        column = desc.names.index(stmt.column)
    return state.set_comment(item.id, column, stmt.text)


def check_reads(stmt: st.Statement, committed: CatalogState) -> None:
    """Refuse a view of the block that reads an object the block creates: its plan holds the
    id that object had in :func:`pending`, which the real creation at COMMIT may not give it."""
    if isinstance(stmt, st.CreateView):
        created = [i for i in stmt.plan.depends_on() if committed.find_id(i) is None]
        if created:
            raise SqlError(
                f'view "{stmt.name}" reads an object created in the same transaction block, '
                "which is not supported: COMMIT the block first",
                sqlstate="0A000",
            )


def pending(state: CatalogState, statements: Sequence[st.Statement]) -> CatalogState:
    """The catalog as ``statements`` (those a block holds so far) will leave it: what the
    next statement of the block is planned against."""
    for stmt in statements:
        state = change_of(stmt)(state)
    return state


def combined(pure: Sequence[st.Statement], after_first: CatalogState) -> Change:
    """One catalog change doing every statement of ``pure`` in order (the kept texts of the
    views it creates and of the objects it renames with them), checked against
    ``after_first``: raises if any of them no longer applies."""
    changes = [change_of(s) for s in pure]

    def change(s: CatalogState) -> CatalogState:
        for c in changes:
            s = c(s)
        return s

    change(after_first)
    return change
