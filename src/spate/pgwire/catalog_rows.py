"""The rows of the emulated catalog relations, built from the engine's relations.

Each row is a dict holding every catalog column that describes its object, under the names
PostgreSQL gives them (``relname``, ``nspname``, ``attname``, ``atttypid``…) plus the
information_schema names (``table_name``, ``column_name``…), so that a query joining
``pg_class``, ``pg_namespace`` and ``pg_attribute`` reads all it needs from one dict.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from spate.pgwire import catalog_indexes
from spate.pgwire import types as pgt
from spate.pgwire.engine import Relation
from spate.pgwire.lexer import depths

NAMESPACE_OIDS: Final = {
    "pg_catalog": 11,
    "public": 2200,
    "information_schema": 13000,
    "spate_catalog": 13001,  # spate's introspection relations
}
DATABASE_OID: Final = 16384
ROLE_OID: Final = 10
_RELKIND: Final = {
    "table": "r",
    "source": "r",
    "subsource": "r",
    "view": "v",
    "materialized view": "m",
    "index": "i",
}
_EMPTY: Final = frozenset(
    [
        "pg_index",
        "pg_constraint",
        "pg_inherits",
        "pg_policy",
        "pg_statistic_ext",
        "pg_publication",
        "pg_publication_rel",
        "pg_publication_namespace",
        "pg_trigger",
        "pg_rewrite",
        "pg_depend",
        "pg_attrdef",
        "pg_description",
        "pg_proc",
        "pg_cursors",
        "pg_sequence",
        "pg_extension",
        "pg_range",
        "pg_opclass",
        "pg_collation",
        "pg_tablespace",
        "pg_stat_user_tables",
        "pg_stat_activity",
        "pg_enum",
        "pg_foreign_table",
        "pg_partitioned_table",
        "pg_event_trigger",
        "pg_aggregate",
        "pg_operator",
        "pg_conversion",
        "pg_cast",
        "table_constraints",
        "key_column_usage",
        "referential_constraints",
    ]
)
OID_COLUMNS: Final = frozenset(
    [
        "oid",
        "relnamespace",
        "reltype",
        "relowner",
        "relam",
        "reltablespace",
        "attrelid",
        "atttypid",
        "typnamespace",
        "typrelid",
        "typelem",
        "typarray",
        "typbasetype",
        "nspowner",
        "datdba",
        "relfilenode",
        "reloftype",
        "reltoastrelid",
        "attcollation",
        "typcollation",
    ]
)

# --- rows -------------------------------------------------------------------------------------


def format_type(pg: pgt.PgType) -> str:
    names = {
        "int8": "bigint",
        "int4": "integer",
        "int2": "smallint",
        "float8": "double precision",
        "float4": "real",
        "bool": "boolean",
        "varchar": "character varying",
        "timestamp": "timestamp without time zone",
        "timestamptz": "timestamp with time zone",
        "time": "time without time zone",
        "_text": "text[]",
    }
    if pg.oid == 1700 and pg.typmod > 0:
        mod = pg.typmod - 4
        return f"numeric({mod >> 16},{mod & 0xFFFF})"
    return names.get(pg.name, pg.name)


def _class_row(r: Relation, user: str) -> dict[str, Any]:
    kind = _RELKIND.get(r.kind, "r")
    return {
        "oid": r.oid,
        "relname": r.name,
        "relnamespace": NAMESPACE_OIDS[r.namespace],
        "nspname": r.namespace,
        "relkind": kind,
        "relowner": ROLE_OID,
        "rolname": user,
        "usename": user,
        "relam": 0,
        "amname": "arrangement" if kind == "i" else None,
        "reltablespace": 0,
        "relchecks": 0,
        "relhasindex": False,
        "relhasrules": False,
        "relhastriggers": False,
        "relrowsecurity": False,
        "relforcerowsecurity": False,
        "relhasoids": False,
        "relispartition": False,
        "relpersistence": "p",
        "relreplident": "d",
        "reloftype": 0,
        "reltoastrelid": 0,
        "relnatts": len(r.schema),
        "reltuples": 0,
        "relpages": 0,
        "relacl": None,
        "reloptions": None,
        "relispopulated": True,
        "relfilenode": r.oid,
        "reltype": 0,
        "spckind": r.kind,
        "table_catalog": "spate",
        "table_schema": r.namespace,
        "table_name": r.name,
        "table_type": {"v": "VIEW", "m": "MATERIALIZED VIEW"}.get(kind, "BASE TABLE"),
        "schemaname": r.namespace,
        "tablename": r.name,
        "viewname": r.name,
        "matviewname": r.name,
        "tableowner": user,
        "viewowner": user,
        "matviewowner": user,
        "ispopulated": True,
        "hasindexes": False,
        "hasrules": False,
        "hastriggers": False,
        "rowsecurity": False,
        "definition": r.definition,
        "description": r.description,
    }


def _attribute_rows(r: Relation, user: str) -> list[dict[str, Any]]:
    base = _class_row(r, user)
    rows = []
    for i, f in enumerate(r.schema, start=1):
        pg = pgt.for_field(f)
        row = dict(base)
        row.update(
            attrelid=r.oid,
            attname=f.name,
            atttypid=pg.oid,
            atttypmod=pg.typmod,
            attnum=i,
            description=(r.column_descriptions[i - 1] if i <= len(r.column_descriptions) else None),
            attlen=pg.typlen,
            attnotnull=not f.nullable,
            attisdropped=False,
            atthasdef=False,
            attidentity="",
            attgenerated="",
            attcollation=0,
            collname=None,
            format_type=format_type(pg),
            typname=pg.name,
            column_name=f.name,
            ordinal_position=i,
            is_nullable="YES" if f.nullable else "NO",
            data_type=format_type(pg),
            udt_name=pg.name,
            column_default=None,
            character_maximum_length=None,
            numeric_precision=((pg.typmod - 4) >> 16) if pg.oid == 1700 and pg.typmod > 0 else None,
            numeric_scale=((pg.typmod - 4) & 0xFFFF) if pg.oid == 1700 and pg.typmod > 0 else None,
        )
        rows.append(row)
    return rows


def _namespace_rows(user: str) -> list[dict[str, Any]]:
    return [
        {
            "oid": oid,
            "nspname": name,
            "nspowner": ROLE_OID,
            "rolname": user,
            "nspacl": None,
            "schema_name": name,
            "catalog_name": "spate",
            "schema_owner": user,
            "description": None,
        }
        for name, oid in NAMESPACE_OIDS.items()
    ]


def _database_rows(vars: Mapping[str, str]) -> list[dict[str, Any]]:
    return [
        {
            "oid": DATABASE_OID,
            "datname": vars.get("database", "spate"),
            "datdba": ROLE_OID,
            "rolname": vars.get("user", ""),
            "encoding": 6,
            "datcollate": "C",
            "datctype": "C",
            "datistemplate": False,
            "datallowconn": True,
            "datacl": None,
            "daticulocale": None,
            "datlocprovider": "c",
            "description": None,
        }
    ]


def _role_rows(vars: Mapping[str, str]) -> list[dict[str, Any]]:
    user = vars.get("user", "")
    return [
        {
            "oid": ROLE_OID,
            "rolname": user,
            "usename": user,
            "usesysid": ROLE_OID,
            "rolsuper": False,
            "usesuper": False,
            "rolinherit": True,
            "rolcreaterole": False,
            "rolcreatedb": False,
            "rolcanlogin": True,
            "rolreplication": False,
            "rolbypassrls": False,
            "rolconnlimit": -1,
            "rolvaliduntil": None,
            "rolconfig": None,
            "memberof": None,
        }
    ]


def _type_rows() -> list[dict[str, Any]]:
    rows = []
    for t in [*pgt.SCALARS, *pgt.ARRAYS.values()]:
        rows.append(
            {
                "oid": t.oid,
                "typname": t.name,
                "typnamespace": NAMESPACE_OIDS["pg_catalog"],
                "nspname": "pg_catalog",
                "typlen": t.typlen,
                "typtype": "b",
                "typcategory": t.category,
                "typdelim": ",",
                "typarray": t.array_oid,
                "typelem": 0,
                "typrelid": 0,
                "typbasetype": 0,
                "typnotnull": False,
                "typtypmod": -1,
                "typinput": None,
                "typoutput": None,
                "format_type": format_type(t),
            }
        )
    return rows


def from_tables(from_clause: str) -> list[tuple[str, bool]]:
    """(table name, inner?) of each relation in a FROM clause, outside sub-selects."""
    depth = depths(from_clause)
    out = []
    for m in re.finditer(
        r"((?:LEFT|RIGHT|FULL)(?:\s+OUTER)?\s+JOIN|(?:INNER\s+|CROSS\s+)?JOIN|,|^)\s*"
        r"(?:LATERAL\s+)?((?:pg_catalog|information_schema)\s*\.\s*)?([A-Za-z_]\w*)",
        from_clause,
        re.I,
    ):
        if depth[m.start(3)] != 0:
            continue
        join = (m.group(1) or "").upper()
        schema = (m.group(2) or "").replace(" ", "").rstrip(".").lower()
        name = m.group(3).lower()
        qualified = f"{schema}.{name}" if schema == "information_schema" else name
        out.append((qualified, not join.startswith(("LEFT", "RIGHT", "FULL"))))
    return out


def _with_indexes(rows: list[dict[str, Any]], rels: Sequence[Relation]) -> list[dict[str, Any]]:
    indexed = {r.on for r in rels if r.kind == "index"}
    for row in rows:
        row["relhasindex"] = row["relname"] in indexed
        row["hasindexes"] = row["relhasindex"]
    return rows


def row_set(
    tables: list[tuple[str, bool]],
    relations: Callable[[], Sequence[Relation]],
    vars: Mapping[str, str],
    index_aliases: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    names = [t for t, _ in tables]
    user = vars.get("user", "")
    if index_aliases and "pg_index" in names:
        rels: Sequence[Relation] = [r for r in relations() if r.namespace == "public"]
        class_rows = {r.name: _class_row(r, user) for r in rels}
        if ("pg_index", True) in tables:
            return catalog_indexes.index_rows(rels, class_rows, index_aliases)
        rows = [class_rows[r.name] for r in rels]
        return catalog_indexes.with_tables(rows, rels, class_rows, index_aliases)
    for name, inner in tables:
        if inner and name.split(".")[-1] in _EMPTY:
            return []
    if any(n in ("pg_attribute", "information_schema.columns") for n in names):
        rels = relations()
        return _with_indexes([row for r in rels for row in _attribute_rows(r, user)], rels)
    if any(
        n
        in (
            "pg_class",
            "information_schema.tables",
            "information_schema.views",
            "pg_tables",
            "pg_views",
            "pg_matviews",
        )
        for n in names
    ):
        rels = relations()
        rows = _with_indexes([_class_row(r, user) for r in rels], rels)
        if "pg_views" in names or "information_schema.views" in names:
            rows = [r for r in rows if r["relkind"] == "v"]
        elif "pg_matviews" in names:
            rows = [r for r in rows if r["relkind"] == "m"]
        elif "pg_tables" in names:
            rows = [r for r in rows if r["relkind"] == "r"]
        return rows
    if any(n in ("pg_namespace", "information_schema.schemata") for n in names):
        return _namespace_rows(user)
    if "pg_database" in names:
        return _database_rows(vars)
    if any(n in ("pg_roles", "pg_user", "pg_authid", "pg_shadow") for n in names):
        return _role_rows(vars)
    if "pg_type" in names:
        return _type_rows()
    if "pg_am" in names:
        return [{"oid": 2, "amname": "heap", "amtype": "t"}]
    if "pg_settings" in names:
        return [{"name": k, "setting": v, "unit": None, "category": "", "short_desc": "",
                 "context": "user", "vartype": "string", "source": "default"}
                for k, v in sorted(vars.items())]  # fmt: skip
    return []
