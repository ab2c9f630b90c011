"""The planner's view of an environment's catalog (:class:`spate.sql.Catalog`): its objects
as the SQL planner sees them, the ``pg_catalog`` and ``information_schema`` relations first,
with what SQL keeps about them (:mod:`spate.environment.definitions`), all from one catalog
state."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from spate.environment import pg_catalog
from spate.environment.catalog import (
    IndexItem,
    MaterializedViewItem,
    SinkItem,
    SourceItem,
    SubsourceItem,
    item_desc,
    kind_of,
)
from spate.environment.clusters import cluster_names
from spate.sql.catalog import CatalogObject

if TYPE_CHECKING:
    from spate.environment.operations import EnvironmentOperations


class EnvironmentCatalog:
    """The planner's view of an environment's catalog (:class:`spate.sql.Catalog`)."""

    def __init__(self, env: EnvironmentOperations) -> None:
        self.state = env.runtime.catalog
        self.runtime = env.runtime

    def create_sql(self, name: str) -> str | None:
        """The statement that made object ``name`` (``None``: it was not made in SQL, or
        there is no such object)."""
        item = self.state.find(name)
        if item is not None:
            definition = self.state.definition(item.id)
            return definition.create_sql if definition is not None else None
        entry = self.state.secret(name) or self.state.connection(name)
        return entry.create_sql if entry is not None else None

    def _object(self, item: Any) -> CatalogObject:
        kind = kind_of(item)
        desc = item_desc(item) if not isinstance(item, IndexItem) else None
        on = cluster = None
        key: tuple[str, ...] = ()
        if isinstance(item, IndexItem):
            target = self.state.by_id(item.on)
            on, cluster = target.name, item.cluster
            target_desc = item_desc(target)
            if target_desc is not None:
                key = tuple(target_desc.names[k] for k in item.key)
        elif isinstance(item, MaterializedViewItem):
            cluster = item.cluster
        elif isinstance(item, SinkItem):
            on = self.state.by_id(item.from_id).name
        own_subsources = isinstance(item, SourceItem)
        dependents = tuple(
            d.name
            for d in self.state.dependents(item.id)
            if not (own_subsources and isinstance(d, SubsourceItem))
        )
        definition = self.state.definition(item.id)
        return CatalogObject(
            item.name,
            kind,
            item.id,
            desc,
            definition.create_sql if definition is not None else None,
            on,
            cluster,
            key,
            dependents,
            definition.types if definition is not None else (),
        )

    def lookup(self, name: str) -> CatalogObject | None:
        relation = pg_catalog.find(name)  # pg_catalog first, as PostgreSQL's search path
        if relation is not None:
            return relation.catalog_object()
        item = self.state.find(name)
        if item is not None:
            return self._object(item)
        secret = self.state.secret(name)
        if secret is not None:
            return CatalogObject(name, "secret", create_sql=secret.create_sql)
        connection = self.state.connection(name)
        if connection is not None:
            return CatalogObject(name, "connection", create_sql=connection.create_sql)
        return None

    def objects(self) -> Sequence[CatalogObject]:
        out = [self._object(i) for i in self.state]
        out += [CatalogObject(s.name, "secret") for s in self.state.secrets]
        out += [CatalogObject(c.name, "connection") for c in self.state.connections]
        return out

    def cluster_names(self) -> Sequence[str]:
        return cluster_names(self.runtime)
