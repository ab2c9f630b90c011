"""Regenerate ``src/spate/sql/pg_catalog_data.py`` from a PostgreSQL 15 server.

The pg_catalog and information_schema relations spate serves have PostgreSQL's columns
(names and types), and the rows of ``pg_type``, ``pg_proc`` and ``pg_settings`` that describe
what spate has are PostgreSQL's own rows. They are read once from a real server by this script
and kept as data:

    python scripts/pg_catalog_data.py postgresql://postgres@127.0.0.1:5432/test
"""

from __future__ import annotations

import sys
from pathlib import Path

import psycopg

RELATIONS = {
    "pg_catalog": [
        "pg_class", "pg_namespace", "pg_attribute", "pg_type", "pg_index", "pg_constraint",
        "pg_attrdef", "pg_description", "pg_proc", "pg_database", "pg_roles", "pg_user",
        "pg_settings", "pg_tables", "pg_views", "pg_matviews", "pg_indexes", "pg_am",
        "pg_inherits", "pg_collation", "pg_extension", "pg_policy", "pg_statistic_ext",
        "pg_publication", "pg_publication_rel", "pg_publication_namespace", "pg_trigger",
        "pg_rewrite", "pg_partitioned_table", "pg_sequence", "pg_depend", "pg_tablespace",
        "pg_auth_members", "pg_shdescription", "pg_foreign_table", "pg_foreign_server",
        "pg_foreign_data_wrapper", "pg_opclass", "pg_enum", "pg_range", "pg_event_trigger",
        "pg_sequences", "pg_language", "pg_cast", "pg_operator", "pg_aggregate",
    ],
    "information_schema": [
        "tables", "columns", "views", "schemata", "table_constraints", "key_column_usage",
    ],
}  # fmt: skip
LATER = {"pg_catalog": ["pg_stat_user_tables"]}
"""Relations added after the first ones: numbered after them, so the ids (and oids) of the
relations before them stay as they were (views stored in catalogs read them by id)."""
TYPES = [
    "bool",
    "bytea",
    "char",
    "name",
    "int8",
    "int2",
    "int2vector",
    "int4",
    "regproc",
    "text",
    "oid",
    "xid",
    "oidvector",
    "json",
    "pg_node_tree",
    "float4",
    "float8",
    "varchar",
    "bpchar",
    "date",
    "time",
    "timestamp",
    "timestamptz",
    "interval",
    "numeric",
    "jsonb",
    "regclass",
    "regtype",
    "aclitem",
    "anyarray",
    "record",
]
ARRAYS = [
    "bool",
    "bytea",
    "char",
    "name",
    "int8",
    "int2",
    "int4",
    "text",
    "oid",
    "float4",
    "float8",
    "varchar",
    "date",
    "timestamp",
    "timestamptz",
    "interval",
    "numeric",
    "jsonb",
    "aclitem",
]
FUNCTIONS = [
    "abs",
    "age",
    "ascii",
    "btrim",
    "cbrt",
    "ceil",
    "ceiling",
    "chr",
    "concat",
    "concat_ws",
    "date_part",
    "date_trunc",
    "exp",
    "floor",
    "initcap",
    "justify_days",
    "justify_hours",
    "justify_interval",
    "left",
    "length",
    "ln",
    "log",
    "lower",
    "lpad",
    "ltrim",
    "make_date",
    "md5",
    "mod",
    "now",
    "octet_length",
    "pi",
    "position",
    "power",
    "repeat",
    "replace",
    "reverse",
    "right",
    "round",
    "rpad",
    "rtrim",
    "sign",
    "split_part",
    "sqrt",
    "starts_with",
    "strpos",
    "substr",
    "substring",
    "to_char",
    "translate",
    "trunc",
    "upper",
    "width_bucket",
    "count",
    "sum",
    "avg",
    "min",
    "max",
    "bool_and",
    "bool_or",
    "string_agg",
    "every",
    "quote_ident",
    "format_type",
    "pg_get_expr",
    "pg_get_indexdef",
    "pg_get_constraintdef",
    "pg_get_viewdef",
    "has_table_privilege",
    "has_schema_privilege",
    "has_database_privilege",
    "obj_description",
    "col_description",
    "shobj_description",
    "pg_table_is_visible",
    "pg_type_is_visible",
    "current_setting",
    "current_schema",
    "current_schemas",
    "current_database",
    "pg_get_userbyid",
    "version",
    "pg_backend_pid",
    "pg_encoding_to_char",
]
SETTINGS = [
    "server_version",
    "server_version_num",
    "server_encoding",
    "client_encoding",
    "DateStyle",
    "IntervalStyle",
    "TimeZone",
    "integer_datetimes",
    "standard_conforming_strings",
    "application_name",
    "is_superuser",
    "session_authorization",
    "transaction_isolation",
    "default_transaction_isolation",
    "search_path",
    "extra_float_digits",
    "max_identifier_length",
    "lc_collate",
    "lc_ctype",
    "statement_timeout",
    "max_index_keys",
    "block_size",
]


def main(url: str) -> None:
    with psycopg.connect(url) as conn:
        columns: dict[str, tuple[tuple[str, str], ...]] = {}
        later: dict[str, tuple[tuple[str, str], ...]] = {}
        for schema, names, into in [
            *((s, n, columns) for s, n in RELATIONS.items()),
            *((s, n, later) for s, n in LATER.items()),
        ]:
            for name in names:
                rows = conn.execute(
                    "SELECT a.attname, CASE WHEN t.typtype = 'd' THEN bt.typname ELSE t.typname"
                    " END FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
                    " JOIN pg_namespace n ON n.oid = c.relnamespace"
                    " JOIN pg_type t ON t.oid = a.atttypid"
                    " LEFT JOIN pg_type bt ON bt.oid = t.typbasetype"
                    " WHERE n.nspname = %s AND c.relname = %s AND a.attnum > 0"
                    " AND NOT a.attisdropped ORDER BY a.attnum",
                    (schema, name),
                ).fetchall()
                into[f"{schema}.{name}"] = tuple((str(a), str(b)) for a, b in rows)
        names = TYPES + ["_" + a for a in ARRAYS]
        types = _rows(
            conn,
            "SELECT * FROM pg_type WHERE typname = ANY(%s) AND typnamespace = 11 ORDER BY oid",
            names,
        )
        procs = _rows(
            conn,
            "SELECT * FROM pg_proc WHERE proname = ANY(%s) AND pronamespace = 11 ORDER BY oid",
            FUNCTIONS,
        )
        descriptions = _rows(
            conn,
            "SELECT d.* FROM pg_description d WHERE d.objoid = ANY(%s::oid[])"
            " AND d.classoid IN ('pg_type'::regclass, 'pg_proc'::regclass)"
            " ORDER BY d.objoid, d.classoid, d.objsubid",
            [str(r[0]) for r in types + procs],  # type: ignore[list-item]
        )
        settings = _rows(
            conn, "SELECT * FROM pg_settings WHERE name = ANY(%s) ORDER BY name", SETTINGS
        )
    out = Path(__file__).parent.parent / "src/spate/sql/pg_catalog_data.py"
    text = (
        '"""PostgreSQL 15\'s columns of the pg_catalog and information_schema relations spate\n'
        "serves, and its rows of ``pg_type``, ``pg_proc``, ``pg_settings`` and ``pg_description``\n"
        "for what spate has\n"
        "(generated by ``scripts/pg_catalog_data.py`` from a PostgreSQL 15 server; do not edit).\n"
        '"""\n\n# fmt: off\n# ruff: noqa: E501\nfrom __future__ import annotations\n\n'
        "from typing import Final\n\n"
        f"COLUMNS: Final[dict[str, tuple[tuple[str, str], ...]]] = {_lines(columns.items())}\n\n"
        "LATER_COLUMNS: Final[dict[str, tuple[tuple[str, str], ...]]] = "
        f"{_lines(later.items())}\n\n"
        f"TYPES: Final[tuple[tuple[object, ...], ...]] = {_lines(types)}\n\n"
        f"PROCS: Final[tuple[tuple[object, ...], ...]] = {_lines(procs)}\n\n"
        f"SETTINGS: Final[tuple[tuple[object, ...], ...]] = {_lines(settings)}\n\n"
        f"DESCRIPTIONS: Final[tuple[tuple[object, ...], ...]] = {_lines(descriptions)}\n"
    )
    out.write_text(text)


def _lines(rows: object) -> str:
    items = list(rows)  # type: ignore[call-overload]
    if (
        items
        and isinstance(items[0], tuple)
        and len(items[0]) == 2
        and isinstance(items[0][1], tuple)
    ):
        body = "".join(f"    {k!r}: {v!r},\n" for k, v in items)
        return "{\n" + body + "}"
    return "(\n" + "".join(f"    {r!r},\n" for r in items) + ")"


def _rows(conn: psycopg.Connection, sql: str, arg: list[str]) -> tuple[tuple[object, ...], ...]:
    cur = conn.cursor()
    cur.execute(sql.replace("SELECT *", "SELECT *", 1), (arg,))
    out = []
    for row in cur.fetchall():
        out.append(tuple(_plain(v) for v in row))
    return tuple(out)


def _plain(v: object) -> object:
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v
    if isinstance(v, list):
        return "{" + ",".join(str(x) for x in v) + "}"
    return str(v)


if __name__ == "__main__":
    main(sys.argv[1])
