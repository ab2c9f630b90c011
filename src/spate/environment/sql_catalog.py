"""The planner's view of an environment's catalog (:class:`spate.sql.Catalog`): its objects
as the SQL planner sees them, the ``pg_catalog`` and ``information_schema`` relations first."""

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
from spate.environment.sql_state import Definitions
from spate.sql.catalog import CatalogObject

if TYPE_CHECKING:
    from spate.environment.operations import EnvironmentOperations


class EnvironmentCatalog:
    """The planner's view of an environment's catalog (:class:`spate.sql.Catalog`)."""

    def __init__(self, env: EnvironmentOperations, sql: Definitions) -> None:
        self.state = env.runtime.catalog
        self.runtime = env.runtime
        self.sql = sql
        self.definitions = sql.items

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
        return CatalogObject(
            item.name,
            kind,
            item.id,
            desc,
            self.definitions.get(item.name),
            on,
            cluster,
            key,
            dependents,
            tuple(self.sql.types.get(item.name, ())),
        )

    def lookup(self, name: str) -> CatalogObject | None:
        relation = pg_catalog.find(name)  # pg_catalog first, as PostgreSQL's search path
        if relation is not None:
            return relation.catalog_object()
        item = self.state.find(name)
        if item is not None:
            return self._object(item)
        if name in self.sql.secrets:
            return CatalogObject(name, "secret", create_sql=self.definitions.get(name))
        if name in self.sql.connections:
            return CatalogObject(name, "connection", create_sql=self.definitions.get(name))
        return None

    def objects(self) -> Sequence[CatalogObject]:
        out = [self._object(i) for i in self.state]
        out += [CatalogObject(n, "secret") for n in self.sql.secrets]
        out += [CatalogObject(n, "connection") for n in self.sql.connections]
        return out

    def cluster_names(self) -> Sequence[str]:
        return cluster_names(self.runtime)
