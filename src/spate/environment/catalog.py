"""The catalog: names → ids and definitions, durable in consensus.

A :class:`CatalogState` is an immutable value: clusters (compute instances and their replicas)
and items (tables, sources and their subsources, views, materialized views, indexes, sinks),
plus id counters, the items' comments, and what SQL keeps about them (their CREATE texts and
view column types, secrets and connections: :mod:`spate.environment.definitions`). Every
change is a pure function ``CatalogState -> CatalogState`` that validates first (unknown or
duplicate names, dependents) and is committed with one compare-and-set
(:class:`~spate.environment.durable.DurableDocument`), so the catalog is never half-changed.

Items refer to each other by ``GlobalId``: a plan reads ``Get(id, desc)``, an index names the id
it is ``on``. Names are unique across all items, secrets and connections; cluster names are a
separate namespace.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Final

from spate._decoders import ADDED
from spate.environment.builtins import IntrospectionItem, builtin, builtin_by_id
from spate.environment.catalog_index import CatalogIndex
from spate.environment.definitions import (
    ConnectionEntry,
    Definition,
    SecretEntry,
    SqlDefinition,
)
from spate.errors import CatalogError as CatalogError
from spate.errors import ConnectionInUse
from spate.errors import HasDependents as HasDependents
from spate.errors import InvalidName as InvalidName
from spate.errors import NameExists as NameExists
from spate.errors import UnknownName as UnknownName
from spate.ids import GlobalId, InstanceId, ReplicaId
from spate.plan.expr import ScalarExpr
from spate.plan.relation import RelationExpr
from spate.protocol.storage_desc import SinkConnection, SourceConnection
from spate.repr.desc import RelationDesc
from spate.sql.renaming import renamed_own, renamed_reference
from spate.wire import wire

DEFAULT_RETAIN_HISTORY_MS: Final = 1_000
_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


def check_name(name: str, what: str) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InvalidName(
            f"invalid {what} name {name!r}: a letter or '_', then letters, digits or '_' (max 63)"
        )
    return name


# --- items ------------------------------------------------------------------------------------


@wire("catalog.replica")
@dataclass(frozen=True, slots=True)
class ReplicaItem:
    name: str
    id: ReplicaId


@wire("catalog.cluster")
@dataclass(frozen=True, slots=True)
class ClusterItem:
    """A compute instance and its replicas (each a compute replica process)."""

    name: str
    instance: InstanceId
    replicas: tuple[ReplicaItem, ...] = ()

    def replica(self, name: str) -> ReplicaItem:
        for r in self.replicas:
            if r.name == name:
                return r
        known = ", ".join(r.name for r in self.replicas) or "-"
        raise UnknownName(f"cluster {self.name} has no replica {name!r}; replicas: {known}")


@wire("catalog.unique")
@dataclass(frozen=True, slots=True)
class UniqueConstraint:
    """A PRIMARY KEY (``primary``) or UNIQUE constraint of a table: no two rows have the same
    values in ``columns`` (rows with a NULL in them are never equal, as in PostgreSQL)."""

    name: str
    columns: tuple[str, ...]
    primary: bool = False


@wire("catalog.check")
@dataclass(frozen=True, slots=True)
class CheckConstraint:
    """A CHECK constraint: ``expr`` (over the table's columns) is not false for any row;
    ``text`` is how it was written."""

    name: str
    expr: ScalarExpr
    text: str


Constraint = UniqueConstraint | CheckConstraint


@wire("catalog.table")
@dataclass(frozen=True, slots=True)
class TableItem:
    name: str
    id: GlobalId
    desc: RelationDesc
    retain_history_ms: int = DEFAULT_RETAIN_HISTORY_MS
    constraints: tuple[Constraint, ...] = field(default=(), metadata={ADDED: True})
    """Enforced on every write (:mod:`spate.environment.tables`)."""
    webhook: bool = field(default=False, metadata={ADDED: True})
    """A webhook source (``CREATE SOURCE … FROM WEBHOOK``): a collection the environment
    writes with each accepted POST, like a table, but of kind ``source``: SQL neither writes
    nor drops it as a table."""

    @property
    def unique(self) -> tuple[UniqueConstraint, ...]:
        return tuple(c for c in self.constraints if isinstance(c, UniqueConstraint))

    @property
    def checks(self) -> tuple[CheckConstraint, ...]:
        return tuple(c for c in self.constraints if isinstance(c, CheckConstraint))


@wire("catalog.source")
@dataclass(frozen=True, slots=True)
class SourceItem:
    """An ingestion. Its data lands in its subsources (``SubsourceItem``)."""

    name: str
    id: GlobalId
    connection: SourceConnection
    desc: RelationDesc
    retain_history_ms: int = DEFAULT_RETAIN_HISTORY_MS


@wire("catalog.subsource")
@dataclass(frozen=True, slots=True)
class SubsourceItem:
    """One output collection of source ``source`` (``reference``: the upstream name)."""

    name: str
    id: GlobalId
    source: GlobalId
    reference: str
    desc: RelationDesc
    retain_history_ms: int = DEFAULT_RETAIN_HISTORY_MS


@wire("catalog.view")
@dataclass(frozen=True, slots=True)
class ViewItem:
    """A named plan, not materialized: inlined wherever it is used."""

    name: str
    id: GlobalId
    plan: RelationExpr


@wire("catalog.materialized_view")
@dataclass(frozen=True, slots=True)
class MaterializedViewItem:
    """A plan kept up to date by ``cluster`` and written to a persist shard."""

    name: str
    id: GlobalId
    plan: RelationExpr
    cluster: str
    retain_history_ms: int = DEFAULT_RETAIN_HISTORY_MS


@wire("catalog.index")
@dataclass(frozen=True, slots=True)
class IndexItem:
    """An arrangement of ``on`` keyed by columns ``key``, kept by ``cluster``'s replicas."""

    name: str
    id: GlobalId
    on: GlobalId
    key: tuple[int, ...]
    cluster: str
    retain_history_ms: int = DEFAULT_RETAIN_HISTORY_MS


@wire("catalog.sink")
@dataclass(frozen=True, slots=True)
class SinkItem:
    """Changes of ``from_id`` written to an external system."""

    name: str
    id: GlobalId
    from_id: GlobalId
    connection: SinkConnection


Item = (
    TableItem
    | SourceItem
    | SubsourceItem
    | ViewItem
    | MaterializedViewItem
    | IndexItem
    | SinkItem
    | IntrospectionItem
)
StoredItem = (
    TableItem | SourceItem | SubsourceItem | ViewItem | MaterializedViewItem | IndexItem | SinkItem
)
"""What the durable catalog holds (every item but the ``spate_catalog`` relations)."""
_KIND: Final[dict[type, str]] = {
    TableItem: "table",
    SourceItem: "source",
    SubsourceItem: "subsource",
    ViewItem: "view",
    MaterializedViewItem: "materialized view",
    IndexItem: "index",
    SinkItem: "sink",
    IntrospectionItem: "source",
}


def kind_of(item: Item) -> str:
    if isinstance(item, TableItem) and item.webhook:
        return "source"
    return _KIND[type(item)]


def item_desc(item: Item) -> RelationDesc | None:
    """The relation an item's name denotes when read (``None`` for sinks)."""
    if isinstance(item, (TableItem, SourceItem, SubsourceItem, IntrospectionItem)):
        return item.desc
    if isinstance(item, (ViewItem, MaterializedViewItem)):
        return item.plan.desc
    return None


def dependencies(item: Item) -> frozenset[GlobalId]:
    """The ids ``item`` reads."""
    if isinstance(item, (ViewItem, MaterializedViewItem)):
        return item.plan.depends_on()
    if isinstance(item, IndexItem):
        return frozenset({item.on})
    if isinstance(item, SinkItem):
        return frozenset({item.from_id})
    if isinstance(item, SubsourceItem):
        return frozenset({item.source})
    return frozenset()


@wire("catalog.comment")
@dataclass(frozen=True, slots=True)
class Comment:
    """``COMMENT ON``: the text of item ``id`` (``column`` ``None``) or of one of its columns
    (``column``: the column's position, from 0)."""

    id: GlobalId
    column: int | None
    text: str


def _constraint_renamed(item: StoredItem, index: IndexItem, old: str, new: str) -> StoredItem:
    if not isinstance(item, TableItem) or item.id != index.on:
        return item
    constraints = tuple(
        dataclasses.replace(c, name=new) if isinstance(c, UniqueConstraint) and c.name == old else c
        for c in item.constraints
    )
    return dataclasses.replace(item, constraints=constraints)


# --- state ------------------------------------------------------------------------------------


@wire("catalog.state")
@dataclass(frozen=True, slots=True)
class CatalogState:
    """Everything the environment needs to restore itself after a restart."""

    items: tuple[StoredItem, ...] = ()
    clusters: tuple[ClusterItem, ...] = ()
    next_id: int = 1
    next_instance: int = 1
    next_replica: int = 1
    comments: tuple[Comment, ...] = field(default=(), metadata={ADDED: True})
    """The ``COMMENT ON`` texts of items and their columns; they go with their item."""
    definitions: tuple[Definition, ...] = field(default=(), metadata={ADDED: True})
    """The SQL of the items made in SQL (:mod:`spate.environment.definitions`); they go with
    their item and are renamed with it."""
    secrets: tuple[SecretEntry, ...] = field(default=(), metadata={ADDED: True})
    """The secrets made in SQL (their values are in the secrets directory)."""
    connections: tuple[ConnectionEntry, ...] = field(default=(), metadata={ADDED: True})
    """The connections made in SQL."""
    _index: CatalogIndex[StoredItem, Definition] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    """The lookups (:mod:`spate.environment.catalog_index`): derived from the previous
    state's by the transitions that say what they changed, else built when first needed.
    Not stored (not an ``__init__`` field)."""

    def _lookups(self) -> CatalogIndex[StoredItem, Definition]:
        index = self._index
        if index is None:
            index = CatalogIndex(self.items, self.definitions, dependencies)
            object.__setattr__(self, "_index", index)
        return index

    def _derived(
        self,
        *,
        added: tuple[StoredItem, ...] = (),
        removed: tuple[StoredItem, ...] = (),
        definitions_added: tuple[Definition, ...] = (),
        definitions_removed: tuple[GlobalId, ...] = (),
        **changes: object,
    ) -> CatalogState:
        """``dataclasses.replace(self, **changes)`` with its lookups derived from these, given
        what changed: ``removed`` items removed and ``added`` ones appended (or put back in
        the place of a removed one with their id), likewise the definitions."""
        new = dataclasses.replace(self, **changes)  # type: ignore[arg-type]
        if self._index is not None:
            index = self._index
            if added or removed or definitions_added or definitions_removed:
                index = index.changed(
                    added=added,
                    removed=removed,
                    definitions_added=definitions_added,
                    definitions_removed=definitions_removed,
                )
            object.__setattr__(new, "_index", index)
        return new

    # -- lookups ----------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[StoredItem]:
        return iter(self.items)

    def get(self, name: str) -> Item:
        item = self._lookups().item_named(name)
        if item is not None:
            return item
        system = builtin(name)
        if system is not None:
            return system
        known = ", ".join(sorted(i.name for i in self.items)) or "-"
        raise UnknownName(f"unknown object {name!r}; objects: {known}")

    def find(self, name: str) -> Item | None:
        return self._lookups().item_named(name) or builtin(name)

    def find_id(self, id: GlobalId) -> Item | None:
        return self._lookups().item(id) or builtin_by_id(id)

    def by_id(self, id: GlobalId) -> Item:
        item = self._lookups().item(id)
        if item is not None:
            return item
        system = builtin_by_id(id)
        if system is not None:
            return system
        raise UnknownName(f"no catalog object has id {id}")

    def cluster(self, name: str) -> ClusterItem:
        for c in self.clusters:
            if c.name == name:
                return c
        known = ", ".join(c.name for c in self.clusters) or "-"
        raise UnknownName(f"unknown cluster {name!r}; clusters: {known}")

    def dependents(self, id: GlobalId) -> list[Item]:
        """Items that read ``id`` directly (in catalog order)."""
        return list(self._lookups().readers(id))

    def transitive_dependents(self, id: GlobalId) -> list[Item]:
        """Items that read ``id`` directly or indirectly, dependents after what they read."""
        out: list[Item] = []
        seen: set[GlobalId] = set()
        frontier = [id]
        while frontier:
            current = frontier.pop()
            for dep in self.dependents(current):
                if dep.id not in seen:
                    seen.add(dep.id)
                    out.append(dep)
                    frontier.append(dep.id)
        return sorted(out, key=lambda i: i.id)

    def objects_on(self, cluster: str) -> list[Item]:
        return [
            i
            for i in self.items
            if isinstance(i, (MaterializedViewItem, IndexItem)) and i.cluster == cluster
        ]

    # -- transitions (pure; validate first) -------------------------------------------------------

    def allocate_id(self) -> tuple[CatalogState, GlobalId]:
        return self._derived(next_id=self.next_id + 1), GlobalId.user(self.next_id)

    def ids_beyond(self, id: GlobalId) -> CatalogState:
        """The id counter moved beyond ``id`` (an id allocated earlier), if it is not yet."""
        return self._derived(next_id=max(self.next_id, id.value + 1))

    def with_stand_in(self, item: StoredItem) -> CatalogState:
        """``item`` appended unvalidated: a stand-in that later statements of a DDL block are
        planned against (:mod:`spate.environment.sql_ddl_block`), never committed."""
        if self.find(item.name) is not None:
            return dataclasses.replace(self, items=(*self.items, item))
        return self._derived(items=(*self.items, item), added=(item,))

    def add_item(self, item: StoredItem, sql: SqlDefinition | None = None) -> CatalogState:
        """``item`` added (with its SQL ``sql``, when made in SQL)."""
        check_name(item.name, kind_of(item))
        self._check_free(item.name)
        lookups = self._lookups()
        for dep in dependencies(item):
            if lookups.item(dep) is None and builtin_by_id(dep) is None:
                raise UnknownName(f"{kind_of(item)} {item.name!r} reads unknown id {dep}")
        if isinstance(item, (MaterializedViewItem, IndexItem)):
            self.cluster(item.cluster)
        if sql is None:
            return self._derived(items=(*self.items, item), added=(item,))
        if sql.connection is not None and self.connection(sql.connection) is None:
            raise UnknownName(
                f"{kind_of(item)} {item.name!r} uses unknown connection {sql.connection!r}"
            )
        definition = Definition(item.id, sql.create_sql, sql.types, sql.connection)
        return self._derived(
            items=(*self.items, item),
            definitions=(*self.definitions, definition),
            added=(item,),
            definitions_added=(definition,),
        )

    def _check_free(self, name: str) -> None:
        """Raise ``NameExists`` if an item, secret or connection is named ``name`` (they share
        one namespace, as Materialize's catalog items do)."""
        kind = self.kind_named(name)
        if kind is not None:
            raise NameExists(f"{kind} {name!r} already exists")

    def kind_named(self, name: str) -> str | None:
        """The kind of the item, secret or connection named ``name`` (``None``: none)."""
        item = self.find(name)
        if item is not None:
            return kind_of(item)
        if self.secret(name) is not None:
            return "secret"
        if self.connection(name) is not None:
            return "connection"
        return None

    def replace_item(self, item: StoredItem) -> CatalogState:
        self.get(item.name)
        return dataclasses.replace(
            self, items=tuple(item if i.name == item.name else i for i in self.items)
        )

    def remove_items(self, ids: frozenset[GlobalId]) -> CatalogState:
        """The items ``ids`` removed, with their comments and definitions."""
        lookups = self._lookups()
        doomed = tuple(i for i in map(lookups.item, ids) if i is not None)
        gone = set(map(id, doomed))  # by identity: cheaper than hashing every item's id
        definitions = [lookups.definition(i.id) for i in doomed]
        gone_definitions = {id(d) for d in definitions if d is not None}
        return self._derived(
            items=tuple(i for i in self.items if id(i) not in gone),
            comments=tuple(c for c in self.comments if c.id not in ids),
            definitions=tuple(d for d in self.definitions if id(d) not in gone_definitions),
            removed=doomed,
            definitions_removed=tuple(d.id for d in definitions if d is not None),
        )

    def rename_item(self, name: str, new: str) -> CatalogState:
        """``name`` renamed ``new``: items read each other by id, so every dependent keeps
        reading it. A unique index takes its table's constraint of the same name along, as
        PostgreSQL renames an index's constraint with it. The kept SQL texts follow: the
        item's own CREATE text names it ``new``, and so do those of the items that read it
        (:mod:`spate.sql.renaming`)."""
        found = self.get(name)
        item = next((i for i in self.items if i.id == found.id), None)
        if item is None:
            raise InvalidName(f"{name} is a system relation: it cannot be renamed")
        check_name(new, kind_of(item))
        self._check_free(new)
        renamed = dataclasses.replace(item, name=new)
        items = tuple(renamed if i.id == item.id else i for i in self.items)
        if isinstance(item, IndexItem):
            items = tuple(_constraint_renamed(i, item, name, new) for i in items)
        readers = {d.id for d in self.dependents(item.id)}
        definitions = tuple(
            dataclasses.replace(d, create_sql=renamed_own(d.create_sql, name, new))
            if d.id == item.id
            else dataclasses.replace(d, create_sql=renamed_reference(d.create_sql, name, new))
            if d.id in readers
            else d
            for d in self.definitions
        )
        return dataclasses.replace(self, items=items, definitions=definitions)

    # -- what SQL keeps (:mod:`spate.environment.definitions`) ------------------------------------

    def definition(self, id: GlobalId) -> Definition | None:
        """The SQL item ``id`` was made with (``None``: not made in SQL)."""
        return self._lookups().definition(id)

    def set_definition(self, id: GlobalId, sql: SqlDefinition | None) -> CatalogState:
        """Item ``id``'s definition set to ``sql`` (``None``: removed)."""
        if self._lookups().item(id) is None:
            raise UnknownName(f"no catalog object has id {id}")
        kept = tuple(d for d in self.definitions if d.id != id)
        added = (
            (Definition(id, sql.create_sql, sql.types, sql.connection),) if sql is not None else ()
        )
        return dataclasses.replace(self, definitions=kept + added)

    def secret(self, name: str) -> SecretEntry | None:
        return next((s for s in self.secrets if s.name == name), None)

    def connection(self, name: str) -> ConnectionEntry | None:
        return next((c for c in self.connections if c.name == name), None)

    def add_secret(self, entry: SecretEntry) -> CatalogState:
        check_name(entry.name, "secret")
        self._check_free(entry.name)
        return self._derived(secrets=(*self.secrets, entry))

    def add_connection(self, entry: ConnectionEntry) -> CatalogState:
        """``entry`` added; the secret it names must exist."""
        check_name(entry.name, "connection")
        self._check_free(entry.name)
        if entry.secret is not None and self.secret(entry.secret) is None:
            raise UnknownName(f"connection {entry.name!r} uses unknown secret {entry.secret!r}")
        return self._derived(connections=(*self.connections, entry))

    def remove_secret(self, name: str, *, cascade: bool = False) -> CatalogState:
        """Secret ``name`` removed; the connections that use it too with ``cascade``, else
        they refuse it (``HasDependents``)."""
        if self.secret(name) is None:
            raise UnknownName(f"unknown secret {name!r}")
        users = [c.name for c in self.connections if c.secret == name]
        if users and not cascade:
            raise HasDependents(
                f'cannot drop secret "{name}": connection {", ".join(users)} uses it'
            )
        for user in users:  # the connections go too: not while a source or sink uses one
            self._check_unused(user)
        return dataclasses.replace(
            self,
            secrets=tuple(s for s in self.secrets if s.name != name),
            connections=tuple(c for c in self.connections if c.secret != name),
        )

    def remove_connection(self, name: str) -> CatalogState:
        """Connection ``name`` removed; refused (``ConnectionInUse``) while a source or sink
        made with it exists."""
        if self.connection(name) is None:
            raise UnknownName(f"unknown connection {name!r}")
        self._check_unused(name)
        return dataclasses.replace(
            self, connections=tuple(c for c in self.connections if c.name != name)
        )

    def _check_unused(self, connection: str) -> None:
        users = [self.by_id(d.id).name for d in self.definitions if d.connection == connection]
        if users:
            raise ConnectionInUse(
                f'cannot drop connection "{connection}": {", ".join(sorted(users))}'
                f" {'uses' if len(users) == 1 else 'use'} it"
            )

    def comment(self, id: GlobalId, column: int | None) -> str | None:
        return next((c.text for c in self.comments if c.id == id and c.column == column), None)

    def set_comment(self, id: GlobalId, column: int | None, text: str | None) -> CatalogState:
        """Item ``id``'s (or its column's) comment set to ``text`` (``None``: removed)."""
        self.by_id(id)
        kept = tuple(c for c in self.comments if (c.id, c.column) != (id, column))
        added = (Comment(id, column, text),) if text is not None else ()
        return self._derived(comments=kept + added)

    def add_cluster(self, name: str) -> tuple[CatalogState, ClusterItem]:
        check_name(name, "cluster")
        if any(c.name == name for c in self.clusters):
            raise NameExists(f"cluster {name!r} already exists")
        cluster = ClusterItem(name, InstanceId(self.next_instance))
        state = self._derived(
            clusters=(*self.clusters, cluster), next_instance=self.next_instance + 1
        )
        return state, cluster

    def add_replica(self, cluster: str, name: str) -> tuple[CatalogState, ReplicaItem]:
        check_name(name, "replica")
        c = self.cluster(cluster)
        if any(r.name == name for r in c.replicas):
            raise NameExists(f"cluster {cluster} already has a replica {name!r}")
        replica = ReplicaItem(name, ReplicaId(self.next_replica))
        updated = dataclasses.replace(c, replicas=(*c.replicas, replica))
        state = self._derived(
            clusters=tuple(updated if x.name == cluster else x for x in self.clusters),
            next_replica=self.next_replica + 1,
        )
        return state, replica

    def remove_replica(self, cluster: str, name: str) -> CatalogState:
        c = self.cluster(cluster)
        c.replica(name)
        updated = dataclasses.replace(c, replicas=tuple(r for r in c.replicas if r.name != name))
        return self._derived(
            clusters=tuple(updated if x.name == cluster else x for x in self.clusters)
        )

    def remove_cluster(self, name: str) -> CatalogState:
        self.cluster(name)
        users = self.objects_on(name)
        if users:
            raise HasDependents(
                f"cluster {name} still maintains: {', '.join(i.name for i in users)}"
            )
        return self._derived(clusters=tuple(c for c in self.clusters if c.name != name))
