"""What the ``pg_catalog`` relations describe, taken from the environment's catalog at one
moment: every relation with its PostgreSQL column types, defaults, constraints, indexes,
comments and view texts (:class:`Snapshot`).

A snapshot is built from the catalog the planner sees (:class:`~.sql.EnvironmentCatalog`) and
the session's settings; :mod:`.pg_catalog_rows` turns it into each relation's rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from sqlglot import exp

from spate.environment.builtins import BUILTINS
from spate.environment.catalog import (
    CatalogState,
    IndexItem,
    MaterializedViewItem,
    TableItem,
    UniqueConstraint,
    ViewItem,
    dependencies,
)
from spate.environment.pg_catalog import (
    LISTED,
    NAMESPACE_OIDS,
    PG_CATALOG,
    user_oid,
)
from spate.repr.types import ScalarKind
from spate.sql.catalog import CatalogObject
from spate.sql.declared import column_defs, column_types
from spate.sql.pg_catalog_data import TYPES

TYPE_OIDS: Final[dict[str, int]] = {str(r[1]): int(r[0]) for r in TYPES}  # type: ignore[call-overload]
"""PostgreSQL's oid of each type spate has, by name (``int4`` → 23, ``_int4`` → 1007)."""
_RELKIND: Final = {
    "table": "r",
    "source": "r",
    "subsource": "r",
    "view": "v",
    "materialized view": "m",
    "index": "i",
}
_DECLARED: Final[dict[object, str]] = {
    exp.DataType.Type.SMALLINT: "int2",
    exp.DataType.Type.INT: "int4",
    exp.DataType.Type.BIGINT: "int8",
    exp.DataType.Type.FLOAT: "float4",
    exp.DataType.Type.DOUBLE: "float8",
    exp.DataType.Type.VARCHAR: "varchar",
    exp.DataType.Type.NVARCHAR: "varchar",
    exp.DataType.Type.CHAR: "bpchar",
    exp.DataType.Type.TEXT: "text",
    exp.DataType.Type.BOOLEAN: "bool",
    exp.DataType.Type.DATE: "date",
    exp.DataType.Type.TIMESTAMP: "timestamp",
    exp.DataType.Type.TIMESTAMPTZ: "timestamptz",
    exp.DataType.Type.JSONB: "jsonb",
    exp.DataType.Type.JSON: "json",
    exp.DataType.Type.VARBINARY: "bytea",
    exp.DataType.Type.INTERVAL: "interval",
    exp.DataType.Type.DECIMAL: "numeric",
}


@dataclass(frozen=True, slots=True)
class ColumnInfo:
    name: str
    type_name: str
    """PostgreSQL's name of its type (``int4``, ``varchar``, ``numeric``…)."""
    typmod: int
    not_null: bool
    default: str | None
    """The default's expression as ``pg_get_expr`` shows it (``0``, ``'x'::text``)."""
    comment: str | None = None

    @property
    def type_oid(self) -> int:
        return TYPE_OIDS.get(self.type_name, TYPE_OIDS["text"])


@dataclass(frozen=True, slots=True)
class IndexInfo:
    """An index as PostgreSQL has one: spate's indexes, and those PostgreSQL makes for a
    PRIMARY KEY or UNIQUE constraint."""

    oid: int
    name: str
    on: int
    """The oid of the relation it indexes."""
    keys: tuple[int, ...]
    """Column numbers (from 1) of its key."""
    unique: bool = False
    primary: bool = False
    comment: str | None = None


@dataclass(frozen=True, slots=True)
class ConstraintInfo:
    oid: int
    name: str
    on: int
    contype: str
    """``p``, ``u`` or ``c`` (PostgreSQL 15 keeps NOT NULL in ``pg_attribute`` only)."""
    keys: tuple[int, ...]
    index: int
    """The oid of its index (0 for a CHECK)."""
    definition: str
    """What ``pg_get_constraintdef`` shows: ``PRIMARY KEY (a)``, ``CHECK ((a > 0))``."""


@dataclass(frozen=True, slots=True)
class RelationInfo:
    oid: int
    name: str
    namespace: str
    relkind: str
    columns: tuple[ColumnInfo, ...] = ()
    comment: str | None = None
    definition: str | None = None
    """A view's query (``pg_get_viewdef``, ``pg_views.definition``)."""
    reads: tuple[int, ...] = ()
    """A view's (or materialized view's) inputs: the oids of the relations its query reads
    (``pg_depend`` through its rule, as PostgreSQL records a view's dependencies)."""

    @property
    def namespace_oid(self) -> int:
        return NAMESPACE_OIDS[self.namespace]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The catalog as the pg_catalog relations show it (module docs)."""

    relations: tuple[RelationInfo, ...]
    indexes: tuple[IndexInfo, ...]
    constraints: tuple[ConstraintInfo, ...]
    user: str = "spate"
    database: str = "spate"
    settings: Mapping[str, str] = field(default_factory=dict)


def build(
    objects: list[CatalogObject],
    state: CatalogState,
    settings: Mapping[str, str],
) -> Snapshot:
    """The snapshot of the catalog ``objects`` (what the planner sees), ``state`` (comments,
    constraints, indexes) and the session's ``settings`` (``user``, ``database``, GUCs)."""
    relations: list[RelationInfo] = []
    indexes: list[IndexInfo] = []
    constraints: list[ConstraintInfo] = []
    by_name = {o.name: o for o in objects}
    for rel in LISTED:
        cols = tuple(
            ColumnInfo(c.name, t, -1, False, None)
            for c, t in zip(rel.desc.columns, rel.types, strict=True)
        )
        relations.append(RelationInfo(rel.oid, rel.relname, rel.schema, rel.relkind, cols))
    for b in BUILTINS:
        schema, _, name = b.name.partition(".")
        cols = tuple(_stored_column(c.name, c.type.kind, c.nullable) for c in b.desc.columns)
        relations.append(RelationInfo(user_oid(b.id), name, schema, "r", cols))
    for obj in objects:
        if obj.id is None or obj.kind not in _RELKIND or obj.kind == "index":
            continue
        item = state.find_id(obj.id)
        oid = user_oid(obj.id)
        cols = _columns(obj, state)
        definition = (
            _view_query(obj.create_sql) if obj.kind in ("view", "materialized view") else None
        )
        comment = state.comment(obj.id, None)
        reads: tuple[int, ...] = ()
        if isinstance(item, (ViewItem, MaterializedViewItem)):
            reads = tuple(sorted(user_oid(d) for d in dependencies(item) if d.kind == "u"))
        relations.append(
            RelationInfo(
                oid, obj.name, "public", _RELKIND[obj.kind], cols, comment, definition, reads
            )
        )
        if isinstance(item, TableItem):
            found = _constraints(item, oid, cols)
            constraints += [c for c, _ in found]
            indexes += [i for _, i in found if i is not None]
    for item in state:
        if isinstance(item, IndexItem):
            target = state.find_id(item.on)
            if target is None or target.name not in by_name:
                continue
            keys = tuple(k + 1 for k in item.key)
            comment = state.comment(item.id, None)
            indexes.append(
                IndexInfo(user_oid(item.id), item.name, user_oid(item.on), keys, comment=comment)
            )
    user = settings.get("user") or settings.get("session_authorization") or "spate"
    database = settings.get("database") or "spate"
    return Snapshot(
        tuple(relations), tuple(indexes), tuple(constraints), user, database, dict(settings)
    )


def _stored_column(name: str, kind: ScalarKind, nullable: bool) -> ColumnInfo:
    type_name = {
        ScalarKind.BOOL: "bool", ScalarKind.INT64: "int8", ScalarKind.FLOAT64: "float8",
        ScalarKind.NUMERIC: "numeric", ScalarKind.TEXT: "text", ScalarKind.BYTES: "bytea",
        ScalarKind.DATE: "date", ScalarKind.TIMESTAMP: "timestamp", ScalarKind.JSONB: "jsonb",
        ScalarKind.INTERVAL: "interval",
    }[kind]  # fmt: skip
    return ColumnInfo(name, type_name, -1, not nullable, None)


def _columns(obj: CatalogObject, state: CatalogState) -> tuple[ColumnInfo, ...]:
    assert obj.desc is not None and obj.id is not None
    declared = {}  # a table made in Python has no CREATE text: its stored types
    if obj.kind == "table" and obj.create_sql:
        declared = {c.name: c for c in column_defs(obj.create_sql)}
    types = column_types(obj)
    out = []
    for i, (c, t) in enumerate(zip(obj.desc.columns, types, strict=True)):
        name, typmod = t.name, -1
        if t.name == "numeric" and c.type.precision is not None and c.type.scale is not None:
            typmod = ((c.type.precision << 16) | c.type.scale) + 4
        default = None
        d = declared.get(c.name)
        if d is not None:
            name, typmod = _declared_type(d, name, typmod)
            default = _default(d, name)
        comment = state.comment(obj.id, i)
        not_null = not c.nullable and obj.kind == "table"  # a view's columns: never NOT NULL
        out.append(ColumnInfo(c.name, name, typmod, not_null, default, comment))
    return tuple(out)


def _declared_type(d: exp.ColumnDef, name: str, typmod: int) -> tuple[str, int]:
    kind = d.args.get("kind")
    if not isinstance(kind, exp.DataType):
        return name, typmod
    declared = _DECLARED.get(kind.this)
    if declared is None:
        return name, typmod
    params = []
    for p in kind.expressions:
        try:
            params.append(int(p.name))
        except ValueError:
            return declared, -1
    if declared in ("varchar", "bpchar"):
        return declared, params[0] + 4 if params else (-1 if declared == "varchar" else 5)
    if declared == "numeric":
        if not params:
            return declared, -1
        return declared, ((params[0] << 16) | (params[1] if len(params) > 1 else 0)) + 4
    if declared == "float4" and params:
        return ("float4" if params[0] <= 24 else "float8"), -1
    return declared, -1


_CAST_NAMES: Final = {"text": "text", "varchar": "character varying", "bpchar": "bpchar"}


def _default(d: exp.ColumnDef, type_name: str) -> str | None:
    for c in d.args.get("constraints") or ():
        kind = c.args.get("kind") if isinstance(c, exp.ColumnConstraint) else None
        if isinstance(kind, exp.DefaultColumnConstraint):
            value = kind.this
            text = str(value.sql(dialect="postgres"))
            if isinstance(value, exp.Literal) and value.is_string:
                return f"{text}::{_CAST_NAMES.get(type_name, type_name)}"
            if isinstance(value, (exp.CurrentTimestamp,)):
                return "now()"
            return text
    return None


def _constraints(
    item: TableItem, oid: int, cols: tuple[ColumnInfo, ...]
) -> list[tuple[ConstraintInfo, IndexInfo | None]]:
    number = {c.name: i + 1 for i, c in enumerate(cols)}
    out: list[tuple[ConstraintInfo, IndexInfo | None]] = []
    for k, c in enumerate(item.constraints, start=1):
        con_oid = 3_000_000 + item.id.value * 100 + k
        if isinstance(c, UniqueConstraint):
            keys = tuple(number[n] for n in c.columns)
            index_oid = 4_000_000 + item.id.value * 100 + k
            index = IndexInfo(index_oid, c.name, oid, keys, unique=True, primary=c.primary)
            word = "PRIMARY KEY" if c.primary else "UNIQUE"
            text = f"{word} ({', '.join(_quote(n) for n in c.columns)})"
            contype = "p" if c.primary else "u"
            out.append(
                (ConstraintInfo(con_oid, c.name, oid, contype, keys, index_oid, text), index)
            )
        else:
            read = tuple(sorted(number[n] for n in number if _mentions(c.text, n)))
            text = f"CHECK (({c.text}))"
            out.append((ConstraintInfo(con_oid, c.name, oid, "c", read, 0, text), None))
    return out


def _mentions(text: str, column: str) -> bool:
    import re

    return re.search(rf'(?<![\w"]){re.escape(column)}(?![\w"])', text) is not None


def _quote(name: str) -> str:
    if name.isidentifier() and name == name.lower() and name.isascii():
        return name
    return '"' + name.replace('"', '""') + '"'


def _view_query(create_sql: str | None) -> str | None:
    """The query of a ``CREATE [MATERIALIZED] VIEW`` text, as ``pg_get_viewdef`` shows it (not
    PostgreSQL's reformatted text: the query as it was written)."""
    if not create_sql:
        return None
    import sqlglot

    try:
        node = sqlglot.parse_one(create_sql, read="postgres")
    except Exception:
        return None
    query = node.expression if isinstance(node, exp.Create) else None
    if query is None:
        return None
    return " " + str(query.sql(dialect="postgres", pretty=True)) + ";"


__all__ = ["PG_CATALOG", "Snapshot", "build"]
