"""The rows of the ``pg_catalog`` and ``information_schema`` relations for a catalog
:class:`~.pg_catalog_snapshot.Snapshot`, as PostgreSQL 15 has them for the same objects (its
values for what spate has no notion of: no toast tables, no tablespaces, ``heap`` tables,
``btree`` indexes, one role owning everything).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

from spate.environment.pg_catalog import (
    DATABASE_OID,
    INFORMATION_SCHEMA,
    NAMESPACE_OIDS,
    PG_CATALOG,
    RELATIONS,
    ROLE_OID,
    ROW_TYPE_OFFSET,
    RULE_OID_BASE,
    CatalogRelation,
)
from spate.environment.pg_catalog_snapshot import (
    TYPE_OIDS,
    ColumnInfo,
    RelationInfo,
    Snapshot,
)
from spate.sql.pg_catalog_data import COLUMNS, DESCRIPTIONS, PROCS, SETTINGS, TYPES
from spate.sql.pg_catalog_oids import DEFINITIONS, relation_oid

Row = dict[str, Any]
_CLASS_OID: Final = 1259
_TYPE_COLUMNS: Final = tuple(c for c, _ in COLUMNS["pg_catalog.pg_type"])
_PROC_COLUMNS: Final = tuple(c for c, _ in COLUMNS["pg_catalog.pg_proc"])
_SETTING_COLUMNS: Final = tuple(c for c, _ in COLUMNS["pg_catalog.pg_settings"])
_TYPES_BY_OID: Final = {int(r[0]): dict(zip(_TYPE_COLUMNS, r, strict=True)) for r in TYPES}  # type: ignore[call-overload]
_TABLE_KINDS: Final = ("r", "p")


def rows(relation: CatalogRelation, snap: Snapshot) -> list[tuple[Any, ...]]:
    """The rows of ``relation`` for ``snap``, as tuples of its columns' values."""
    names = relation.desc.names
    return [tuple(r.get(n) for n in names) for r in _BUILDERS[relation.name](snap)]


# --- pg_catalog -------------------------------------------------------------------------------


def _namespaces(snap: Snapshot) -> Iterator[Row]:
    for name, oid in NAMESPACE_OIDS.items():
        yield {"oid": oid, "nspname": name, "nspowner": ROLE_OID, "nspacl": None}


def _classes(snap: Snapshot) -> Iterator[Row]:
    has_index = {i.on for i in snap.indexes}
    checks: dict[int, int] = {}
    for c in snap.constraints:
        if c.contype == "c":
            checks[c.on] = checks.get(c.on, 0) + 1
    for r in snap.relations:
        yield _class_row(
            r.oid, r.name, r.namespace_oid, r.relkind, len(r.columns),
            r.oid + ROW_TYPE_OFFSET if r.relkind != "i" else 0,
            hasindex=r.oid in has_index, checks=checks.get(r.oid, 0),
        )  # fmt: skip
    namespace = {r.oid: r.namespace_oid for r in snap.relations}
    for i in snap.indexes:
        yield _class_row(i.oid, i.name, namespace.get(i.on, 2200), "i", len(i.keys), 0)


def _class_row(
    oid: int, name: str, namespace: int, kind: str, natts: int, reltype: int,
    *, hasindex: bool = False, checks: int = 0,
) -> Row:  # fmt: skip
    return {
        "oid": oid, "relname": name, "relnamespace": namespace, "reltype": reltype,
        "reloftype": 0, "relowner": ROLE_OID, "relam": {"r": 2, "m": 2, "i": 403}.get(kind, 0),
        "relfilenode": oid if kind != "v" else 0, "reltablespace": 0,
        "relpages": int(kind == "i"), "reltuples": 0.0 if kind == "i" else -1.0,
        "relallvisible": 0, "reltoastrelid": 0, "relhasindex": hasindex,
        "relisshared": False, "relpersistence": "p", "relkind": kind, "relnatts": natts,
        "relchecks": checks, "relhasrules": kind == "v", "relhastriggers": False,
        "relhassubclass": False, "relrowsecurity": False, "relforcerowsecurity": False,
        "relispopulated": True, "relreplident": "d" if kind in ("r", "m") else "n",
        "relispartition": False, "relrewrite": 0,
        "relfrozenxid": int(kind not in ("v", "i")), "relminmxid": int(kind not in ("v", "i")),
        "relacl": None, "reloptions": None, "relpartbound": None,
    }  # fmt: skip


def _attributes(snap: Snapshot) -> Iterator[Row]:
    for r in snap.relations:
        for n, c in enumerate(r.columns, start=1):
            yield _attribute_row(r.oid, n, c)
    columns = {r.oid: r.columns for r in snap.relations}
    for i in snap.indexes:
        cols = columns.get(i.on, ())
        for n, k in enumerate(i.keys, start=1):
            if 0 < k <= len(cols):
                c = cols[k - 1]
                yield _attribute_row(
                    i.oid, n, ColumnInfo(c.name, c.type_name, c.typmod, False, None)
                )


def _attribute_row(rel: int, number: int, c: ColumnInfo) -> Row:
    t = _TYPES_BY_OID.get(c.type_oid, {})
    return {
        "attrelid": rel, "attname": c.name, "atttypid": c.type_oid, "attstattarget": -1,
        "attlen": t.get("typlen", -1), "attnum": number, "attndims": 0, "attcacheoff": -1,
        "atttypmod": c.typmod, "attbyval": t.get("typbyval", False),
        "attalign": t.get("typalign", "i"), "attstorage": t.get("typstorage", "x"),
        "attcompression": "", "attnotnull": c.not_null, "atthasdef": c.default is not None,
        "atthasmissing": False, "attidentity": "", "attgenerated": "", "attisdropped": False,
        "attislocal": True, "attinhcount": 0,
        "attcollation": 100 if c.type_name in ("text", "varchar", "bpchar") else 0,
        "attacl": None, "attoptions": None, "attfdwoptions": None, "attmissingval": None,
    }  # fmt: skip


def _types(snap: Snapshot) -> Iterator[Row]:
    yield from _TYPES_BY_OID.values()
    for r in snap.relations:
        if r.relkind == "i":
            continue
        row_type = r.oid + ROW_TYPE_OFFSET
        array = row_type + ROW_TYPE_OFFSET
        base = _TYPES_BY_OID[TYPE_OIDS["record"]]
        yield {
            **base, "oid": row_type, "typname": r.name, "typnamespace": r.namespace_oid,
            "typlen": -1, "typbyval": False, "typtype": "c", "typcategory": "C",
            "typispreferred": False, "typrelid": r.oid, "typarray": array,
            "typinput": "record_in", "typoutput": "record_out", "typreceive": "record_recv",
            "typsend": "record_send", "typalign": "d", "typstorage": "x",
        }  # fmt: skip
        yield {
            **_TYPES_BY_OID[TYPE_OIDS["_text"]], "oid": array, "typname": f"_{r.name}",
            "typnamespace": r.namespace_oid, "typelem": row_type, "typalign": "d",
            "typcollation": 0,
        }  # fmt: skip


def _indexes(snap: Snapshot) -> Iterator[Row]:
    for i in snap.indexes:
        n = len(i.keys)
        yield {
            "indexrelid": i.oid, "indrelid": i.on, "indnatts": n, "indnkeyatts": n,
            "indisunique": i.unique, "indnullsnotdistinct": False, "indisprimary": i.primary,
            "indisexclusion": False, "indimmediate": True, "indisclustered": False,
            "indisvalid": True, "indcheckxmin": False, "indisready": True, "indislive": True,
            "indisreplident": False, "indkey": " ".join(map(str, i.keys)),
            "indcollation": " ".join("0" for _ in i.keys),
            "indclass": " ".join("1978" for _ in i.keys),
            "indoption": " ".join("0" for _ in i.keys), "indexprs": None, "indpred": None,
        }  # fmt: skip


def _constraints(snap: Snapshot) -> Iterator[Row]:
    namespace = {r.oid: r.namespace_oid for r in snap.relations}
    for c in snap.constraints:
        yield {
            "oid": c.oid, "conname": c.name, "connamespace": namespace.get(c.on, 2200),
            "contype": c.contype, "condeferrable": False, "condeferred": False,
            "convalidated": True, "conrelid": c.on, "contypid": 0, "conindid": c.index,
            "conparentid": 0, "confrelid": 0, "confupdtype": " ", "confdeltype": " ",
            "confmatchtype": " ", "conislocal": True, "coninhcount": 0,
            "connoinherit": c.contype == "c" and False,
            "conkey": "{" + ",".join(map(str, c.keys)) + "}" if c.keys else None,
            "confkey": None, "conpfeqop": None, "conppeqop": None, "conffeqop": None,
            "confdelsetcols": None, "conexclop": None,
            "conbin": c.definition if c.contype == "c" else None,
        }  # fmt: skip


def _attrdefs(snap: Snapshot) -> Iterator[Row]:
    for r in snap.relations:
        for n, c in enumerate(r.columns, start=1):
            if c.default is not None:
                oid = 5_000_000 + (r.oid % 100_000) * 1000 + n
                yield {"oid": oid, "adrelid": r.oid, "adnum": n, "adbin": c.default}


def _descriptions(snap: Snapshot) -> Iterator[Row]:
    for oid, classoid, sub, text in DESCRIPTIONS:  # PostgreSQL's, of its types and functions
        yield {"objoid": oid, "classoid": classoid, "objsubid": sub, "description": text}
    for r in snap.relations:
        if r.comment is not None:
            yield _description(r.oid, 0, r.comment)
        for n, c in enumerate(r.columns, start=1):
            if c.comment is not None:
                yield _description(r.oid, n, c.comment)
    for i in snap.indexes:
        if i.comment is not None:
            yield _description(i.oid, 0, i.comment)


def _description(oid: int, sub: int, text: str) -> Row:
    return {"objoid": oid, "classoid": _CLASS_OID, "objsubid": sub, "description": text}


def _procs(snap: Snapshot) -> Iterator[Row]:
    for r in PROCS:
        yield dict(zip(_PROC_COLUMNS, r, strict=True))


def _databases(snap: Snapshot) -> Iterator[Row]:
    yield {
        "oid": DATABASE_OID, "datname": snap.database, "datdba": ROLE_OID, "encoding": 6,
        "datlocprovider": "c", "datistemplate": False, "datallowconn": True,
        "datconnlimit": -1, "datfrozenxid": 716, "datminmxid": 1, "dattablespace": 1663,
        "datcollate": "C", "datctype": "C", "daticulocale": None, "datcollversion": None,
        "datacl": None,
    }  # fmt: skip


def _roles(snap: Snapshot) -> Iterator[Row]:
    yield {
        "rolname": snap.user, "rolsuper": True, "rolinherit": True, "rolcreaterole": True,
        "rolcreatedb": True, "rolcanlogin": True, "rolreplication": False, "rolconnlimit": -1,
        "rolpassword": "********", "rolvaliduntil": None, "rolbypassrls": True,
        "rolconfig": None, "oid": ROLE_OID,
    }  # fmt: skip


def _users(snap: Snapshot) -> Iterator[Row]:
    yield {
        "usename": snap.user, "usesysid": ROLE_OID, "usecreatedb": True, "usesuper": True,
        "userepl": False, "usebypassrls": True, "passwd": "********", "valuntil": None,
        "useconfig": None,
    }  # fmt: skip


def _settings(snap: Snapshot) -> Iterator[Row]:
    values = settings_of(snap.settings)
    for r in SETTINGS:
        row = dict(zip(_SETTING_COLUMNS, r, strict=True))
        value = values.get(str(row["name"]).lower())
        if value is not None:
            row["setting"] = value
            row["reset_val"] = value
            row["source"] = "session"
        yield row


def settings_of(settings: Mapping[str, str]) -> dict[str, str]:
    """A session's settings by lower-case name, with ``server_version_num`` derived from
    ``server_version``."""
    out = {k.lower(): v for k, v in settings.items()}
    out.setdefault("server_version", "15.0")
    out.setdefault("search_path", "public")
    out["server_version_num"] = version_num(out["server_version"])
    return out


def version_num(version: str) -> str:
    """``15.4`` → ``150004``, ``9.5.0`` → ``90500`` (PostgreSQL's ``server_version_num``)."""
    parts = [int(p) for p in version.split()[0].split(".") if p.isdigit()] + [0, 0]
    if parts[0] >= 10:
        return str(parts[0] * 10000 + parts[1])
    return str(parts[0] * 10000 + parts[1] * 100 + parts[2])


def _owned(snap: Snapshot, kinds: tuple[str, ...]) -> Iterator[RelationInfo]:
    return (r for r in snap.relations if r.relkind in kinds)


def _tables(snap: Snapshot) -> Iterator[Row]:
    indexed = {i.on for i in snap.indexes}
    for r in _owned(snap, _TABLE_KINDS):
        yield {
            "schemaname": r.namespace, "tablename": r.name, "tableowner": snap.user,
            "tablespace": None, "hasindexes": r.oid in indexed, "hasrules": False,
            "hastriggers": False, "rowsecurity": False,
        }  # fmt: skip


def _stat_user_tables(snap: Snapshot) -> Iterator[Row]:
    """A row per table outside pg_catalog and information_schema, with no statistics: spate
    counts no scans or tuples (every counter 0, every time NULL). Clients join it for a row
    estimate (Metabase's table sync)."""
    counters = (
        "seq_scan", "seq_tup_read", "idx_scan", "idx_tup_fetch", "n_tup_ins", "n_tup_upd",
        "n_tup_del", "n_tup_hot_upd", "n_live_tup", "n_dead_tup", "n_mod_since_analyze",
        "n_ins_since_vacuum", "vacuum_count", "autovacuum_count", "analyze_count",
        "autoanalyze_count",
    )  # fmt: skip
    for r in _owned(snap, _TABLE_KINDS):
        if r.namespace not in (PG_CATALOG, INFORMATION_SCHEMA):
            yield {"relid": r.oid, "schemaname": r.namespace, "relname": r.name} | dict.fromkeys(
                counters, 0
            )


def _views(snap: Snapshot) -> Iterator[Row]:
    for r in _owned(snap, ("v",)):
        yield {
            "schemaname": r.namespace,
            "viewname": r.name,
            "viewowner": snap.user,
            "definition": r.definition,
        }


def _matviews(snap: Snapshot) -> Iterator[Row]:
    indexed = {i.on for i in snap.indexes}
    for r in _owned(snap, ("m",)):
        yield {
            "schemaname": r.namespace, "matviewname": r.name, "matviewowner": snap.user,
            "tablespace": None, "hasindexes": r.oid in indexed, "ispopulated": True,
            "definition": r.definition,
        }  # fmt: skip


def _rewrites(snap: Snapshot) -> Iterator[Row]:
    """A view's ``_RETURN`` rule, as PostgreSQL keeps one per view and materialized view."""
    for r in _owned(snap, ("v", "m")):
        yield {
            "oid": RULE_OID_BASE + r.oid, "rulename": "_RETURN", "ev_class": r.oid,
            "ev_type": "1", "ev_enabled": "O", "is_instead": True, "ev_qual": "<>",
            "ev_action": None,
        }  # fmt: skip


def _depends(snap: Snapshot) -> Iterator[Row]:
    """What each view reads, as PostgreSQL records it: its rule depends internally (``i``)
    on the view and normally (``n``) on each relation the query reads (PostgreSQL adds a row
    per column read; one per relation says the same for the clients that ask, dbt's
    dependency listing among them). Dropping a relation drops these with it (CASCADE)."""
    rewrite, relation = relation_oid("pg_catalog.pg_rewrite"), relation_oid("pg_catalog.pg_class")
    for r in _owned(snap, ("v", "m")):
        rule = RULE_OID_BASE + r.oid
        for ref, kind in ((r.oid, "i"), *((read, "n") for read in r.reads)):
            yield {
                "classid": rewrite, "objid": rule, "objsubid": 0, "refclassid": relation,
                "refobjid": ref, "refobjsubid": 0, "deptype": kind,
            }  # fmt: skip


def _pg_indexes(snap: Snapshot) -> Iterator[Row]:
    by_oid = {r.oid: r for r in snap.relations}
    for i in snap.indexes:
        r = by_oid.get(i.on)
        if r is not None:
            yield {
                "schemaname": r.namespace, "tablename": r.name, "indexname": i.name,
                "tablespace": None, "indexdef": index_definition(snap, i.oid),
            }  # fmt: skip


def _am(snap: Snapshot) -> Iterator[Row]:
    yield {"oid": 2, "amname": "heap", "amhandler": "heap_tableam_handler", "amtype": "t"}
    yield {"oid": 403, "amname": "btree", "amhandler": "bthandler", "amtype": "i"}


def _collations(snap: Snapshot) -> Iterator[Row]:
    yield {
        "oid": 100, "collname": "default", "collnamespace": 11, "collowner": ROLE_OID,
        "collprovider": "d", "collisdeterministic": True, "collencoding": -1,
    }  # fmt: skip


def _tablespaces(snap: Snapshot) -> Iterator[Row]:
    for oid, name in ((1663, "pg_default"), (1664, "pg_global")):
        yield {"oid": oid, "spcname": name, "spcowner": ROLE_OID}


def _languages(snap: Snapshot) -> Iterator[Row]:
    for oid, name, trusted in ((12, "internal", False), (13, "c", False), (14, "sql", True)):
        yield {
            "oid": oid, "lanname": name, "lanowner": ROLE_OID, "lanispl": False,
            "lanpltrusted": trusted, "lanplcallfoid": 0, "laninline": 0,
            "lanvalidator": {12: 2246, 13: 2247, 14: 2248}[oid],
        }  # fmt: skip


def _none(snap: Snapshot) -> Iterator[Row]:
    return iter(())


def index_definition(snap: Snapshot, oid: int) -> str | None:
    """``pg_get_indexdef``: ``CREATE [UNIQUE] INDEX i ON public.t USING btree (a, b)``."""
    by_oid = {r.oid: r for r in snap.relations}
    for i in snap.indexes:
        if i.oid == oid and i.on in by_oid:
            r = by_oid[i.on]
            cols = ", ".join(_quote(r.columns[k - 1].name) for k in i.keys if k <= len(r.columns))
            unique = "UNIQUE " if i.unique else ""
            return (
                f"CREATE {unique}INDEX {_quote(i.name)} ON {r.namespace}.{_quote(r.name)} "
                f"USING btree ({cols})"
            )
    return None


def _quote(name: str) -> str:
    if name.isidentifier() and name == name.lower() and name.isascii():
        return name
    return '"' + name.replace('"', '""') + '"'


def _definitions(snap: Snapshot) -> Iterator[Row]:
    by_oid = {r.oid: r for r in snap.relations}
    for i in snap.indexes:
        yield {"oid": i.oid, "objsubid": 0, "kind": "index",
               "definition": index_definition(snap, i.oid)}  # fmt: skip
        r = by_oid.get(i.on)
        for n, k in enumerate(i.keys, start=1):
            if r is not None and k <= len(r.columns):
                name = _quote(r.columns[k - 1].name)
                yield {"oid": i.oid, "objsubid": n, "kind": "index", "definition": name}
    for c in snap.constraints:
        yield {"oid": c.oid, "objsubid": 0, "kind": "constraint", "definition": c.definition}
        pretty = c.definition
        if c.contype == "c" and pretty.startswith("CHECK ((") and pretty.endswith("))"):
            pretty = "CHECK (" + pretty[len("CHECK ((") : -2] + ")"
        yield {"oid": c.oid, "objsubid": 1, "kind": "constraint", "definition": pretty}
    for r in snap.relations:
        if r.definition is not None:
            yield {"oid": r.oid, "objsubid": 0, "kind": "view", "definition": r.definition}


# --- information_schema -----------------------------------------------------------------------

_TABLE_TYPE: Final = {"r": "BASE TABLE", "v": "VIEW", "m": None}
_DATA_TYPES: Final = {
    "int2": "smallint", "int4": "integer", "int8": "bigint", "float4": "real",
    "float8": "double precision", "bool": "boolean", "varchar": "character varying",
    "bpchar": "character", "timestamp": "timestamp without time zone",
    "timestamptz": "timestamp with time zone", "time": "time without time zone",
}  # fmt: skip
_NUMERIC_PRECISION: Final = {"int2": 16, "int4": 32, "int8": 64, "float4": 24, "float8": 53}


def _is_tables(snap: Snapshot) -> Iterator[Row]:
    for r in snap.relations:
        table_type = _TABLE_TYPE.get(r.relkind)
        if table_type is None:
            continue  # PostgreSQL lists no materialized views (nor indexes) here
        yield {
            "table_catalog": snap.database, "table_schema": r.namespace, "table_name": r.name,
            "table_type": table_type, "self_referencing_column_name": None,
            "reference_generation": None, "user_defined_type_catalog": None,
            "user_defined_type_schema": None, "user_defined_type_name": None,
            "is_insertable_into": "YES" if r.relkind == "r" else "NO", "is_typed": "NO",
            "commit_action": None,
        }  # fmt: skip


def _is_columns(snap: Snapshot) -> Iterator[Row]:
    for r in snap.relations:
        if r.relkind not in ("r", "v", "m"):
            continue
        for n, c in enumerate(r.columns, start=1):
            yield _is_column(snap, r, n, c)


def _is_column(snap: Snapshot, r: RelationInfo, n: int, c: ColumnInfo) -> Row:
    t = c.type_name
    array = t.startswith("_")
    data_type = "ARRAY" if array else _DATA_TYPES.get(t, t)
    if t == "char":
        data_type = '"char"'
    char_len = c.typmod - 4 if t in ("varchar", "bpchar") and c.typmod > 4 else None
    octets = (char_len * 4 if char_len is not None else 1073741824) if t in (
        "varchar", "bpchar", "text") else None  # fmt: skip
    precision = radix = scale = None
    if t in _NUMERIC_PRECISION:
        precision, radix = _NUMERIC_PRECISION[t], 2
        scale = 0 if t.startswith("int") else None
    elif t == "numeric":
        radix = 10
        if c.typmod >= 4:
            precision, scale = (c.typmod - 4) >> 16, (c.typmod - 4) & 0xFFFF
    datetime_precision = 6 if t in ("timestamp", "timestamptz", "time", "interval") else (
        0 if t == "date" else None)  # fmt: skip
    nullable = "NO" if c.not_null else "YES"
    return {
        "table_catalog": snap.database, "table_schema": r.namespace, "table_name": r.name,
        "column_name": c.name, "ordinal_position": n, "column_default": c.default,
        "is_nullable": nullable, "data_type": data_type, "character_maximum_length": char_len,
        "character_octet_length": octets, "numeric_precision": precision,
        "numeric_precision_radix": radix, "numeric_scale": scale,
        "datetime_precision": datetime_precision, "interval_type": None,
        "interval_precision": None, "character_set_catalog": None,
        "character_set_schema": None, "character_set_name": None,
        "collation_catalog": None, "collation_schema": None, "collation_name": None,
        "domain_catalog": None, "domain_schema": None, "domain_name": None,
        "udt_catalog": snap.database, "udt_schema": PG_CATALOG, "udt_name": t,
        "scope_catalog": None, "scope_schema": None, "scope_name": None,
        "maximum_cardinality": None, "dtd_identifier": str(n), "is_self_referencing": "NO",
        "is_identity": "NO", "identity_generation": None, "identity_start": None,
        "identity_increment": None, "identity_maximum": None, "identity_minimum": None,
        "identity_cycle": "NO", "is_generated": "NEVER", "generation_expression": None,
        "is_updatable": "YES" if r.relkind == "r" else "NO",
    }  # fmt: skip


def _is_views(snap: Snapshot) -> Iterator[Row]:
    for r in _owned(snap, ("v",)):
        yield {
            "table_catalog": snap.database, "table_schema": r.namespace, "table_name": r.name,
            "view_definition": r.definition, "check_option": "NONE", "is_updatable": "NO",
            "is_insertable_into": "NO", "is_trigger_updatable": "NO",
            "is_trigger_deletable": "NO", "is_trigger_insertable_into": "NO",
        }  # fmt: skip


def _is_schemata(snap: Snapshot) -> Iterator[Row]:
    for name in NAMESPACE_OIDS:
        yield {
            "catalog_name": snap.database, "schema_name": name, "schema_owner": snap.user,
            "default_character_set_catalog": None, "default_character_set_schema": None,
            "default_character_set_name": None, "sql_path": None,
        }  # fmt: skip


_CONSTRAINT_TYPE: Final = {"p": "PRIMARY KEY", "u": "UNIQUE", "c": "CHECK"}


def _is_table_constraints(snap: Snapshot) -> Iterator[Row]:
    by_oid = {r.oid: r for r in snap.relations}
    for c in snap.constraints:
        r = by_oid[c.on]
        yield {
            "constraint_catalog": snap.database, "constraint_schema": r.namespace,
            "constraint_name": c.name, "table_catalog": snap.database,
            "table_schema": r.namespace, "table_name": r.name,
            "constraint_type": _CONSTRAINT_TYPE[c.contype], "is_deferrable": "NO",
            "initially_deferred": "NO", "enforced": "YES",
            "nulls_distinct": None if c.contype == "c" else "YES",
        }  # fmt: skip
    for r in snap.relations:  # PostgreSQL lists each NOT NULL as a CHECK constraint here
        if r.relkind != "r" or r.namespace != "public":
            continue
        for n, col in enumerate(r.columns, start=1):
            if col.not_null:
                yield {
                    "constraint_catalog": snap.database, "constraint_schema": r.namespace,
                    "constraint_name": f"{2200}_{r.oid}_{n}_not_null",
                    "table_catalog": snap.database, "table_schema": r.namespace,
                    "table_name": r.name, "constraint_type": "CHECK", "is_deferrable": "NO",
                    "initially_deferred": "NO", "enforced": "YES", "nulls_distinct": None,
                }  # fmt: skip


def _is_key_column_usage(snap: Snapshot) -> Iterator[Row]:
    by_oid = {r.oid: r for r in snap.relations}
    for c in snap.constraints:
        if c.contype not in ("p", "u"):
            continue
        r = by_oid[c.on]
        for pos, k in enumerate(c.keys, start=1):
            yield {
                "constraint_catalog": snap.database, "constraint_schema": r.namespace,
                "constraint_name": c.name, "table_catalog": snap.database,
                "table_schema": r.namespace, "table_name": r.name,
                "column_name": r.columns[k - 1].name, "ordinal_position": pos,
                "position_in_unique_constraint": None,
            }  # fmt: skip


_BUILDERS: Final[dict[str, Callable[[Snapshot], Iterator[Row]]]] = {
    "pg_catalog.pg_namespace": _namespaces,
    "pg_catalog.pg_class": _classes,
    "pg_catalog.pg_attribute": _attributes,
    "pg_catalog.pg_type": _types,
    "pg_catalog.pg_index": _indexes,
    "pg_catalog.pg_constraint": _constraints,
    "pg_catalog.pg_attrdef": _attrdefs,
    "pg_catalog.pg_description": _descriptions,
    "pg_catalog.pg_proc": _procs,
    "pg_catalog.pg_database": _databases,
    "pg_catalog.pg_roles": _roles,
    "pg_catalog.pg_user": _users,
    "pg_catalog.pg_settings": _settings,
    "pg_catalog.pg_tables": _tables,
    "pg_catalog.pg_views": _views,
    "pg_catalog.pg_matviews": _matviews,
    "pg_catalog.pg_indexes": _pg_indexes,
    "pg_catalog.pg_am": _am,
    "pg_catalog.pg_inherits": _none,
    "pg_catalog.pg_collation": _collations,
    "pg_catalog.pg_extension": _none,
    "pg_catalog.pg_rewrite": _rewrites,
    "pg_catalog.pg_stat_user_tables": _stat_user_tables,
    "pg_catalog.pg_depend": _depends,
    **{
        f"pg_catalog.{name}": _none
        for name in (
            "pg_policy",
            "pg_statistic_ext",
            "pg_publication",
            "pg_publication_rel",
            "pg_publication_namespace",
            "pg_trigger",
            "pg_partitioned_table",
            "pg_sequence",
            "pg_auth_members",
            "pg_shdescription",
            "pg_foreign_table",
            "pg_foreign_server",
            "pg_foreign_data_wrapper",
            "pg_opclass",
            "pg_enum",
            "pg_range",
            "pg_event_trigger",
            "pg_sequences",
            "pg_cast",
            "pg_operator",
            "pg_aggregate",
        )
    },
    "pg_catalog.pg_tablespace": _tablespaces,
    "pg_catalog.pg_language": _languages,
    f"{INFORMATION_SCHEMA}.tables": _is_tables,
    f"{INFORMATION_SCHEMA}.columns": _is_columns,
    f"{INFORMATION_SCHEMA}.views": _is_views,
    f"{INFORMATION_SCHEMA}.schemata": _is_schemata,
    f"{INFORMATION_SCHEMA}.table_constraints": _is_table_constraints,
    f"{INFORMATION_SCHEMA}.key_column_usage": _is_key_column_usage,
    DEFINITIONS: _definitions,
}
assert set(_BUILDERS) == {r.name for r in RELATIONS}
