"""What the planner needs to know about the catalog: a small protocol the environment implements.

The planner never imports the environment: it asks a :class:`Catalog` for objects by name and
for the cluster names, and nothing else. :class:`MemoryCatalog` is a plain implementation for
planning without an environment (tests, benchmarks).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from spate.ids import GlobalId
from spate.repr.desc import RelationDesc

READABLE_KINDS = frozenset({"table", "source", "subsource", "view", "materialized view"})


@dataclass(frozen=True, slots=True)
class CatalogObject:
    """A named object: its kind (``table``, ``view``, ``materialized view``, ``index``,
    ``source``, ``subsource``, ``sink``, ``secret``, ``connection``), id and, when readable,
    schema. ``create_sql`` is the statement that created it, when it was created in SQL."""

    name: str
    kind: str
    id: GlobalId | None = None
    desc: RelationDesc | None = None
    create_sql: str | None = None
    on: str | None = None
    """For an index: the object it indexes; for a sink: the object it reads."""
    cluster: str | None = None
    key: tuple[str, ...] = ()
    """For an index: its key columns."""
    dependents: tuple[str, ...] = ()
    """The objects that read this one (what a DROP without CASCADE refuses on)."""
    types: tuple[str, ...] = ()
    """For a view made in SQL: the PostgreSQL type of each column (``int4``, ``float4``…),
    kept when it was created (empty: the stored types)."""

    @property
    def readable(self) -> bool:
        return self.kind in READABLE_KINDS and self.desc is not None


class Catalog(Protocol):
    """Lookups the planner makes; names are exact (case-sensitive)."""

    def lookup(self, name: str) -> CatalogObject | None: ...

    def objects(self) -> Sequence[CatalogObject]: ...

    def cluster_names(self) -> Sequence[str]: ...


@dataclass
class MemoryCatalog:
    """A catalog held in a dict (for planning without an environment)."""

    items: dict[str, CatalogObject] = field(default_factory=dict)
    clusters: list[str] = field(default_factory=lambda: ["default"])
    _next: int = 1

    def add(
        self, name: str, desc: RelationDesc | None, kind: str = "table", **extra: object
    ) -> CatalogObject:
        obj = CatalogObject(name, kind, GlobalId.user(self._next), desc, **extra)  # type: ignore[arg-type]
        self._next += 1
        self.items[name] = obj
        return obj

    def add_all(self, tables: Iterable[tuple[str, RelationDesc]]) -> None:
        for name, desc in tables:
            self.add(name, desc)

    def lookup(self, name: str) -> CatalogObject | None:
        return self.items.get(name)

    def objects(self) -> Sequence[CatalogObject]:
        return list(self.items.values())

    def cluster_names(self) -> Sequence[str]:
        return list(self.clusters)
