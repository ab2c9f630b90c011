"""The ``pg_catalog`` and ``information_schema`` relations: spate's catalog as PostgreSQL shows
its own, for the clients that read it (psql, JDBC, dbt, BI tools).

Each relation has PostgreSQL 15's columns, names and types
(:mod:`.pg_catalog_data`), and is planned like any relation: a query may join, union, filter
and aggregate them with anything SQL allows. Their contents are not stored: a read of them is
evaluated in this process on a snapshot of the catalog taken when the read runs
(:mod:`.pg_catalog_reads`, rows from :mod:`.pg_catalog_rows`).

Unqualified names resolve in ``pg_catalog`` first, as PostgreSQL's search path does
(``pg_class`` is ``pg_catalog.pg_class`` even beside a user's ``pg_class``);
``information_schema`` relations are named with their schema.

Object ids: the catalog relations have PostgreSQL's oids where PostgreSQL's are fixed
(``pg_class`` is 1259), types and functions have PostgreSQL's oids, a user object ``u<n>`` is
``20000 + n``; every oid is below 2^32 and stable across restarts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from spate.ids import GlobalId
from spate.repr.desc import RelationDesc
from spate.repr.types import BOOL, FLOAT64, INT64, TEXT, TIMESTAMP, ScalarType
from spate.sql.catalog import CatalogObject
from spate.sql.pg_catalog_data import COLUMNS, LATER_COLUMNS
from spate.sql.pg_catalog_oids import DEFINITIONS, NAMES, relation_oid

PG_CATALOG: Final = "pg_catalog"
INFORMATION_SCHEMA: Final = "information_schema"
NAMESPACE_OIDS: Final = {
    PG_CATALOG: 11,
    "public": 2200,
    INFORMATION_SCHEMA: 13207,
    "spate_catalog": 14999,
}
"""The schemas and their oids (PostgreSQL's for ``pg_catalog`` and ``public``)."""
USER_OID_BASE: Final = 20000
"""A user object ``u<n>`` has oid ``USER_OID_BASE + n`` (as pgwire has always reported)."""
SYSTEM_OID_BASE: Final = 15000
"""A ``spate_catalog`` relation ``s<n>`` has oid ``SYSTEM_OID_BASE + n``."""
RULE_OID_BASE: Final = 1_000_000
"""A view's (or materialized view's) rule in ``pg_rewrite`` has oid ``RULE_OID_BASE`` plus
the view's oid."""
ROLE_OID: Final = 10
DATABASE_OID: Final = 16384
ROW_TYPE_OFFSET: Final = 1_000_000
"""A relation's row type has oid ``relation oid + ROW_TYPE_OFFSET``; its array type that plus
``ROW_TYPE_OFFSET`` again."""
_VIEWS: Final = frozenset(
    {
        "pg_roles",
        "pg_user",
        "pg_settings",
        "pg_tables",
        "pg_views",
        "pg_matviews",
        "pg_indexes",
        "pg_sequences",
        "pg_stat_user_tables",
    }
)
_ID_BASE: Final = 1_000_000
"""Catalog relations have system ids ``s1000001``…, far above ``spate_catalog``'s."""

_SCALARS: Final[dict[str, ScalarType]] = {
    "oid": INT64, "int2": INT64, "int4": INT64, "int8": INT64, "xid": INT64,
    "float4": FLOAT64, "float8": FLOAT64, "bool": BOOL, "timestamptz": TIMESTAMP,
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class CatalogRelation:
    """One relation of ``pg_catalog`` or ``information_schema``: its qualified name, its id in
    plans (never stored), its oid, kind (``r`` or ``v``, as PostgreSQL's) and columns."""

    name: str
    id: GlobalId
    oid: int
    relkind: str
    desc: RelationDesc
    types: tuple[str, ...]
    """The PostgreSQL type name of each column (``oid``, ``name``, ``_text``…)."""

    @property
    def schema(self) -> str:
        return self.name.partition(".")[0]

    @property
    def relname(self) -> str:
        return self.name.partition(".")[2]

    def catalog_object(self) -> CatalogObject:
        return CatalogObject(self.name, "source", self.id, self.desc, types=self.types)


def _relation(n: int, name: str, columns: tuple[tuple[str, str], ...]) -> CatalogRelation:
    schema, _, rel = name.partition(".")
    desc = RelationDesc.of(*((c, _SCALARS.get(t, TEXT), True) for c, t in columns))
    types = tuple(t for _, t in columns)
    oid = relation_oid(name)
    assert oid is not None
    kind = "v" if schema == INFORMATION_SCHEMA or rel in _VIEWS else "r"
    return CatalogRelation(name, GlobalId.system(_ID_BASE + n), oid, kind, desc, types)


_DEFINITION_COLUMNS: Final = (
    ("oid", "oid"),
    ("objsubid", "int4"),
    ("kind", "text"),
    ("definition", "text"),
)

RELATIONS: Final[tuple[CatalogRelation, ...]] = tuple(
    _relation(n, name, COLUMNS.get(name) or LATER_COLUMNS.get(name, _DEFINITION_COLUMNS))
    for n, name in enumerate(NAMES, start=1)
)
LISTED: Final = tuple(r for r in RELATIONS if r.name != DEFINITIONS)
"""The relations ``pg_class`` lists (all but :data:`DEFINITIONS`)."""
_BY_NAME: Final = {r.name: r for r in RELATIONS}
_BY_ID: Final = {r.id: r for r in RELATIONS}


def find(name: str) -> CatalogRelation | None:
    """The relation ``name`` names: ``pg_catalog.x``, ``information_schema.x``, or an
    unqualified ``x`` of ``pg_catalog`` (searched first, as PostgreSQL does)."""
    found = _BY_NAME.get(name)
    if found is None and "." not in name:
        found = _BY_NAME.get(f"{PG_CATALOG}.{name}")
    return found


def by_id(id: GlobalId) -> CatalogRelation | None:
    return _BY_ID.get(id)


def is_catalog_id(id: GlobalId) -> bool:
    return id in _BY_ID


def user_oid(id: GlobalId) -> int:
    """The oid of a catalog item (``u<n>`` or a ``spate_catalog`` relation ``s<n>``)."""
    return (USER_OID_BASE if id.kind == "u" else SYSTEM_OID_BASE) + id.value
