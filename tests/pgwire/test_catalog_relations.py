"""pg_catalog and information_schema through the wire, compared with PostgreSQL 15.

The same objects are made in spate (in ``public``: spate has one schema) and in a scratch schema
of the local PostgreSQL; the catalog queries clients send (dbt, pgjdbc's DatabaseMetaData,
psql, DBeaver, Grafana, Metabase) run on both through psycopg, and their answers, with object
ids masked and the schema name replaced, must be equal.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from spate.environment.api import Environment
from spate.pgwire.environment import EnvironmentEngine
from spate.pgwire.server import ServerConfig, ServerThread
from tests.pgwire._pg_scratch import pg_scratch

pytestmark = [pytest.mark.integration]

PG_URL = os.environ.get("SPATE_TEST_POSTGRES_URL")

DDL = [
    "CREATE TABLE items (id integer PRIMARY KEY, name varchar(20) NOT NULL DEFAULT 'x',"
    " price numeric(10,2), qty bigint, ok boolean, day date, note text,"
    " CONSTRAINT items_qty_check CHECK (qty > 0), UNIQUE (name))",
    "CREATE TABLE other_t (k bigint, v double precision)",
    "CREATE VIEW items_v AS SELECT id, note FROM items",
    "COMMENT ON TABLE items IS 'the items'",
    "COMMENT ON COLUMN items.price IS 'in euros'",
]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Environment]:
    e = Environment.open(tmp_path_factory.mktemp("catalog") / "data")
    try:
        for statement in DDL:
            e.sql(statement)  # type: ignore[attr-defined]
        yield e
    finally:
        e.close()


@pytest.fixture(scope="module")
def spate_dsn(env: Environment) -> Iterator[str]:
    s = ServerThread(EnvironmentEngine(env), ServerConfig(port=0))
    try:
        yield f"host=127.0.0.1 port={s.port} user=tester dbname=spate sslmode=disable"
    finally:
        s.close()


@pytest.fixture(scope="module")
def pg_schema() -> Iterator[str]:
    with pg_scratch(DDL, "cat") as schema:
        yield schema


def _run(dsn: str, sql: str, params: tuple[Any, ...] = (), search_path: str | None = None) -> Any:
    with psycopg.connect(dsn, autocommit=True) as conn:
        if search_path is not None:
            conn.execute(f"SET search_path = {search_path}")
        cur = conn.execute(sql, params or None)
        names = [d.name for d in cur.description or ()]
        types = [d.type_code for d in cur.description or ()]
        return names, types, cur.fetchall()


_OID_COLUMNS = re.compile(
    r"^(oid|.*relid|attrelid|adrelid|objoid|classoid|indexrelid|indrelid|conindid|conrelid|"
    r"connamespace|relnamespace|typnamespace|nspowner|relowner|typrelid|reltype|typarray|"
    r"relfilenode|typowner|datdba|proowner|pronamespace|relam|.*_oid|table_oid|tableoid|"
    r"typelem|atttypid)$",
    re.I,
)


def compare(spate_dsn: str, schema: str, sql: str, *, masked: tuple[str, ...] = ()) -> Any:
    """The rows of ``sql`` (``{schema}`` names the schema) on spate and PostgreSQL, with oid
    columns (and ``masked`` ones) masked; asserts they are equal and returns spate's."""
    ours = _run(spate_dsn, sql.format(schema="public"))
    theirs = _run(PG_URL or "", sql.format(schema=schema), search_path=f"{schema}, public")
    assert ours[0] == theirs[0], (ours[0], theirs[0])
    assert ours[1] == theirs[1], f"column types: {ours[1]} != {theirs[1]}"

    def norm(result: Any, schema_name: str) -> list[tuple[Any, ...]]:
        names = result[0]
        out = []
        for row in result[2]:
            vals = []
            for n, v in zip(names, row, strict=True):
                if _OID_COLUMNS.match(n) or n in masked:
                    v = "<oid>" if v is not None else None
                elif isinstance(v, str):
                    v = v.replace(schema_name, "<schema>")
                vals.append(v)
            out.append(tuple(vals))
        return sorted(out, key=repr)

    a, b = norm(ours, "public"), norm(theirs, schema)
    assert a == b, "\n".join(["spate:", *map(repr, a), "postgres:", *map(repr, b)])
    return ours


# --- dbt-postgres --------------------------------------------------------------------------


DBT_LIST_RELATIONS = """
select '{db}' as database, tablename as name, schemaname as schema, 'table' as type
from pg_tables where schemaname ilike '{schema}'
union all
select '{db}' as database, viewname as name, schemaname as schema, 'view' as type
from pg_views where schemaname ilike '{schema}'
union all
select '{db}' as database, matviewname as name, schemaname as schema, 'materialized_view' as type
from pg_matviews where schemaname ilike '{schema}'
"""


def test_dbt_list_relations(spate_dsn: str, pg_schema: str) -> None:
    sql = DBT_LIST_RELATIONS.replace("{db}", "db")
    got = compare(spate_dsn, pg_schema, sql)
    assert {(r[1], r[3]) for r in got[2]} == {
        ("items", "table"),
        ("other_t", "table"),
        ("items_v", "view"),
    }


DBT_DEPENDENCIES = """
select distinct
    dependent_namespace.nspname as dependent_schema,
    dependent_class.relname as dependent_name,
    referenced_namespace.nspname as referenced_schema,
    referenced_class.relname as referenced_name
from pg_class as dependent_class
join pg_namespace as dependent_namespace on dependent_namespace.oid = dependent_class.relnamespace
join pg_depend as dependent_depend on dependent_depend.refobjid = dependent_class.oid
    and dependent_depend.classid = 'pg_rewrite'::regclass
    and dependent_depend.refclassid = 'pg_class'::regclass
    and dependent_depend.deptype = 'i'
join pg_depend as joining_depend on joining_depend.objid = dependent_depend.objid
    and joining_depend.classid = 'pg_rewrite'::regclass
    and joining_depend.refclassid = 'pg_class'::regclass
    and joining_depend.refobjid != dependent_depend.refobjid
join pg_class as referenced_class on referenced_class.oid = joining_depend.refobjid
join pg_namespace as referenced_namespace on referenced_namespace.oid = referenced_class.relnamespace
    and referenced_namespace.nspname != 'information_schema'
    and referenced_namespace.nspname not like 'pg\\_%'
where dependent_namespace.nspname = '{schema}'
order by dependent_schema, dependent_name, referenced_schema, referenced_name
"""


def test_dbt_view_dependencies(spate_dsn: str, pg_schema: str) -> None:
    """dbt-postgres's dependency listing (``postgres__get_relations``): which view reads
    which relation, through each view's rule in pg_rewrite and pg_depend. dbt drops a
    replaced view's dependents from its cache by it (a materialized view over a replaced
    view is created again, not refreshed)."""
    got = compare(spate_dsn, pg_schema, DBT_DEPENDENCIES)
    assert [(r[1], r[3]) for r in got[2]] == [("items_v", "items")]


DBT_COLUMNS = """
select column_name, data_type, character_maximum_length, numeric_precision, numeric_scale
from information_schema.columns
where table_name = 'items' and table_schema = '{schema}'
order by ordinal_position
"""


def test_dbt_columns(spate_dsn: str, pg_schema: str) -> None:
    compare(spate_dsn, pg_schema, DBT_COLUMNS)


def test_information_schema_tables_and_constraints(spate_dsn: str, pg_schema: str) -> None:
    compare(
        spate_dsn,
        pg_schema,
        "select table_name, table_type, is_typed from information_schema.tables"
        " where table_schema = '{schema}'",
    )
    compare(
        spate_dsn,
        pg_schema,
        "select k.table_name, k.column_name, k.ordinal_position, c.constraint_type"
        " from information_schema.key_column_usage k join information_schema.table_constraints c"
        " on c.constraint_name = k.constraint_name and c.table_schema = k.table_schema"
        " where k.table_schema = '{schema}'",
    )
    compare(
        spate_dsn,
        pg_schema,
        "select table_name, column_name, ordinal_position, column_default, is_nullable,"
        " data_type, character_maximum_length, character_octet_length, numeric_precision,"
        " numeric_precision_radix, numeric_scale, datetime_precision, udt_name, is_identity"
        " from information_schema.columns where table_schema = '{schema}'",
    )


# --- the pg_catalog relations themselves ---------------------------------------------------


def test_pg_class_attribute_constraint_index(spate_dsn: str, pg_schema: str) -> None:
    compare(
        spate_dsn,
        pg_schema,
        "select c.relname, c.relkind, c.relnatts, c.relchecks, c.relhasindex, c.relpersistence,"
        " c.relispopulated from pg_class c join pg_namespace n on n.oid = c.relnamespace"
        " where n.nspname = '{schema}'",
    )
    compare(
        spate_dsn,
        pg_schema,
        "select c.relname, a.attname, a.attnum, a.atttypid::regtype::text as t, a.atttypmod,"
        " a.attnotnull, a.atthasdef, a.attlen, format_type(a.atttypid, a.atttypmod)"
        " from pg_attribute a join pg_class c on c.oid = a.attrelid"
        " join pg_namespace n on n.oid = c.relnamespace"
        " where n.nspname = '{schema}' and a.attnum > 0 and not a.attisdropped",
    )
    compare(
        spate_dsn,
        pg_schema,
        "select co.conname, co.contype, co.conkey, pg_get_constraintdef(co.oid),"
        " i.relname as index_name"
        " from pg_constraint co join pg_namespace n on n.oid = co.connamespace"
        " left join pg_class i on i.oid = co.conindid where n.nspname = '{schema}'",
    )
    compare(
        spate_dsn,
        pg_schema,
        "select t.relname, i.indisunique, i.indisprimary, i.indkey, i.indnatts,"
        " pg_get_indexdef(i.indexrelid) from pg_index i join pg_class t on t.oid = i.indrelid"
        " join pg_namespace n on n.oid = t.relnamespace where n.nspname = '{schema}'",
    )
    compare(
        spate_dsn,
        pg_schema,
        "select c.relname, d.objsubid, d.description from pg_description d"
        " join pg_class c on c.oid = d.objoid join pg_namespace n on n.oid = c.relnamespace"
        " where n.nspname = '{schema}'",
    )
    compare(
        spate_dsn,
        pg_schema,
        "select a.attname, pg_get_expr(d.adbin, d.adrelid) from pg_attrdef d"
        " join pg_attribute a on a.attrelid = d.adrelid and a.attnum = d.adnum"
        " where d.adrelid = '{schema}.items'::regclass",
    )


def test_namespace_star_and_functions(spate_dsn: str, pg_schema: str) -> None:
    names, _, rows = _run(spate_dsn, "SELECT n.* FROM pg_namespace n WHERE n.nspname = 'public'")
    assert names == ["oid", "nspname", "nspowner", "nspacl"]
    assert rows[0][1] == "public"
    compare(
        spate_dsn,
        pg_schema,
        "select quote_ident('abc'), quote_ident('Abc'), quote_ident('select'),"
        " quote_ident('a\"b'), format_type(23, -1), format_type(1043, 24),"
        " format_type(1700, 655366), format_type(1007, null), format_type(1184, null),"
        " 'integer'::regtype::text, pg_table_is_visible('{schema}.items'::regclass),"
        " has_table_privilege('{schema}.items', 'SELECT'), current_setting('standard_conforming_strings')",
    )
    _, _, rows = _run(
        spate_dsn,
        "SELECT current_setting('server_version_num'), current_setting('server_version')",
    )
    num, version = rows[0]
    assert int(num) >= 90000 and version.split(".")[0] == str(int(num) // 10000)
    _, _, rows = _run(spate_dsn, "SHOW server_version_num")
    assert rows == [(num,)]


def test_relname_like_and_namespace_filters(spate_dsn: str, pg_schema: str) -> None:
    compare(
        spate_dsn,
        pg_schema,
        "select relname from pg_class where relname like 'item%'"
        " and relnamespace = (select oid from pg_namespace where nspname = '{schema}')",
    )


def test_an_unknown_catalog_relation_fails_instead_of_answering_partially(
    spate_dsn: str,
) -> None:
    with pytest.raises(psycopg.errors.UndefinedTable, match="pg_foo"):
        _run(spate_dsn, "SELECT * FROM pg_catalog.pg_foo")
    with pytest.raises(psycopg.Error, match="set_config"):
        _run(spate_dsn, "SELECT set_config('search_path', 'x', false)")


# --- DBeaver and Grafana ---------------------------------------------------------------------


def test_dbeaver_namespace_table_and_type_queries(spate_dsn: str, pg_schema: str) -> None:
    compare(
        spate_dsn,
        pg_schema,
        "SELECT n.oid,n.*,d.description FROM pg_catalog.pg_namespace n"
        " LEFT OUTER JOIN pg_catalog.pg_description d ON d.objoid=n.oid AND d.objsubid=0"
        " AND d.classoid='pg_namespace'::regclass WHERE nspname = '{schema}'",
    )
    compare(
        spate_dsn,
        pg_schema,
        "select c.oid,c.*,d.description,pg_catalog.pg_get_expr(c.relpartbound, c.oid)"
        " as partition_expr, pg_catalog.pg_get_partkeydef(c.oid) as partition_key"
        " from pg_catalog.pg_class c left outer join pg_catalog.pg_description d"
        " on d.objoid=c.oid and d.objsubid=0 and d.classoid='pg_class'::regclass"
        " where c.relnamespace=(select oid from pg_catalog.pg_namespace"
        " where nspname = '{schema}') and c.relkind not in ('i','I','c')",
        masked=("relfrozenxid", "relminmxid"),
    )
    # the types query: no relation is a type of its own (it once listed every relation)
    dbeaver_types = (
        "SELECT t.oid,t.*,c.relkind,format_type(nullif(t.typbasetype, 0), t.typtypmod)"
        " as base_type_name, d.description FROM pg_catalog.pg_type t"
        " LEFT OUTER JOIN pg_catalog.pg_type et ON et.oid=t.typelem"
        " LEFT OUTER JOIN pg_catalog.pg_class c ON c.oid=t.typrelid"
        " LEFT OUTER JOIN pg_catalog.pg_description d ON t.oid=d.objoid"
        " WHERE t.typname IS NOT NULL AND (c.relkind IS NULL OR c.relkind = 'c')"
        " AND (et.typcategory IS NULL OR et.typcategory <> 'C')"
    )
    compare(
        spate_dsn,
        pg_schema,
        dbeaver_types
        + " AND t.typnamespace = (select oid from pg_namespace where nspname = '{schema}')",
    )
    compare(
        spate_dsn,
        pg_schema,
        dbeaver_types + " AND t.typnamespace = 11 AND t.typname IN ('int4', 'text', 'varchar',"
        " 'numeric', 'bool', 'timestamp', 'name', '_int4', 'jsonb')",
    )


_SEARCH_PATH_SCHEMAS = """quote_ident(table_schema) IN (
      SELECT CASE WHEN trim(s[i]) = '"$user"' THEN user ELSE trim(s[i]) END
      FROM generate_series(
          array_lower(string_to_array(current_setting('search_path'),','),1),
          array_upper(string_to_array(current_setting('search_path'),','),1)
        ) as i,
        string_to_array(current_setting('search_path'),',') s
    )"""
GRAFANA_TABLES = f"""SELECT
    CASE WHEN {_SEARCH_PATH_SCHEMAS}
      THEN quote_ident(table_name)
      ELSE quote_ident(table_schema) || '.' || quote_ident(table_name)
    END AS "table"
    FROM information_schema.tables
    WHERE quote_ident(table_schema) NOT IN ('information_schema', 'pg_catalog',
      '_timescaledb_cache', '_timescaledb_catalog', '_timescaledb_internal',
      '_timescaledb_config', 'timescaledb_information', 'timescaledb_experimental')
    ORDER BY CASE WHEN {_SEARCH_PATH_SCHEMAS} THEN 0 ELSE 1 END, 1"""
"""Grafana's table listing without a schema (its PostgreSQL data source's query builder): the
tables on the search path by name first, then the others qualified by their schema."""


def test_grafana_lists_tables_on_the_search_path_first(spate_dsn: str, pg_schema: str) -> None:
    ours = _run(spate_dsn, GRAFANA_TABLES)
    theirs = _run(PG_URL or "", GRAFANA_TABLES, search_path=pg_schema)
    assert ours[:2] == theirs[:2]  # the column's name and type

    def on_path(rows: list[tuple[Any, ...]]) -> list[str]:
        names = [str(r[0]) for r in rows]
        first = [n for n in names if "." not in n]
        assert names[: len(first)] == first, names  # the search path's tables come first
        return first

    assert on_path(ours[2]) == on_path(theirs[2]) == ["items", "items_v", "other_t"]
    assert ("spate_catalog.replicas",) in ours[2]


def test_grafana_queries(spate_dsn: str, pg_schema: str) -> None:
    compare(
        spate_dsn, pg_schema, "SELECT current_setting('server_version_num')::int/100 as version"
    )
    compare(
        spate_dsn, pg_schema, "SELECT extversion FROM pg_extension WHERE extname = 'timescaledb'"
    )
    compare(
        spate_dsn,
        pg_schema,
        'SELECT quote_ident(table_name) AS "table" FROM information_schema.tables'
        " WHERE quote_ident(table_schema) = '{schema}' ORDER BY 1",
    )
    _, _, rows = _run(
        spate_dsn,
        'SELECT schema_name AS "name" FROM information_schema.schemata'
        " WHERE schema_name NOT IN ('information_schema', 'pg_catalog', 'pg_toast')"
        " ORDER BY schema_name",
    )
    assert rows == [("public",), ("spate_catalog",)]


def test_object_ids_shown_as_text_as_postgres_shows_them(spate_dsn: str, pg_schema: str) -> None:
    """psql casts to ``pg_catalog.regtype`` and then ``pg_catalog.text`` (``\\d+`` of a typed
    table); the invalid object id 0 is ``-``."""
    compare(
        spate_dsn,
        pg_schema,
        "SELECT 0::regtype::text AS t0, 0::regclass::text AS c0,"
        " 23::pg_catalog.regtype::pg_catalog.text AS t23, 'items'::regclass::text AS c,"
        " 'items'::pg_catalog.regclass::pg_catalog.text AS qc",
    )


# --- Metabase ----------------------------------------------------------------------------------
# The queries Metabase's PostgreSQL driver sends when it syncs a database (its table list, the
# fields of its tables and materialized views, foreign keys, the first column of each index),
# as its SQL builder renders them.

METABASE_TABLES = """SELECT n.nspname AS schema, c.relname AS name,
  CASE c.relkind WHEN 'r' THEN 'TABLE' WHEN 'p' THEN 'PARTITIONED TABLE' WHEN 'v' THEN 'VIEW'
    WHEN 'f' THEN 'FOREIGN TABLE' WHEN 'm' THEN 'MATERIALIZED VIEW' ELSE NULL END AS type,
  d.description AS description, stat.n_live_tup AS estimated_row_count
FROM pg_catalog.pg_class AS c
INNER JOIN pg_catalog.pg_namespace AS n ON c.relnamespace = n.oid
LEFT JOIN pg_catalog.pg_description AS d
  ON (c.oid = d.objoid) AND (d.objsubid = 0) AND (d.classoid = 'pg_class'::regclass)
LEFT JOIN pg_stat_user_tables AS stat
  ON (n.nspname = stat.schemaname) AND (c.relname = stat.relname)
WHERE (c.relnamespace = n.oid) AND (n.nspname !~ '^pg_') AND (n.nspname <> 'information_schema')
  AND c.relkind in ('r', 'p', 'v', 'f', 'm') AND (n.nspname IN ('{schema}'))
ORDER BY type ASC, schema ASC, name ASC"""

METABASE_FIELDS = """SELECT c.column_name AS name,
  CASE WHEN c.udt_schema IN ('public', 'pg_catalog') THEN FORMAT('%s', c.udt_name)
    ELSE FORMAT('"%s"."%s"', c.udt_schema, c.udt_name) END AS "database-type",
  c.ordinal_position - 1 AS "database-position", c.table_schema AS "table-schema",
  c.table_name AS "table-name", pk.column_name IS NOT NULL AS "pk?",
  COL_DESCRIPTION(CAST(CAST(FORMAT('%I.%I', CAST(c.table_schema AS TEXT),
    CAST(c.table_name AS TEXT)) AS REGCLASS) AS OID), c.ordinal_position) AS "field-comment",
  ((column_default IS NULL) OR (LOWER(column_default) = 'null')) AND (is_nullable = 'NO')
    AND NOT (((column_default IS NOT NULL) AND (column_default LIKE '%nextval(%'))
    OR (is_identity <> 'NO')) AS "database-required",
  ((column_default IS NOT NULL) AND (column_default LIKE '%nextval(%'))
    OR (is_identity <> 'NO') AS "database-is-auto-increment"
FROM information_schema.columns AS c
LEFT JOIN (SELECT tc.table_schema, tc.table_name, kc.column_name
  FROM information_schema.table_constraints AS tc
  INNER JOIN information_schema.key_column_usage AS kc
    ON (tc.constraint_name = kc.constraint_name) AND (tc.table_schema = kc.table_schema)
    AND (tc.table_name = kc.table_name)
  WHERE tc.constraint_type = 'PRIMARY KEY') AS pk
  ON (c.table_schema = pk.table_schema) AND (c.table_name = pk.table_name)
  AND (c.column_name = pk.column_name)
WHERE c.table_schema !~ '^information_schema|catalog_history|pg_'
  AND (c.table_schema IN ('{schema}'))
UNION ALL
SELECT pa.attname AS name,
  CASE WHEN ptn.nspname IN ('public', 'pg_catalog') THEN FORMAT('%s', pt.typname)
    ELSE FORMAT('"%s"."%s"', ptn.nspname, pt.typname) END AS "database-type",
  pa.attnum - 1 AS "database-position", pn.nspname AS "table-schema",
  pc.relname AS "table-name", FALSE AS "pk?", NULL AS "field-comment",
  FALSE AS "database-required", FALSE AS "database-is-auto-increment"
FROM pg_catalog.pg_class AS pc
INNER JOIN pg_catalog.pg_namespace AS pn ON pn.oid = pc.relnamespace
INNER JOIN pg_catalog.pg_attribute AS pa ON pa.attrelid = pc.oid
INNER JOIN pg_catalog.pg_type AS pt ON pt.oid = pa.atttypid
INNER JOIN pg_catalog.pg_namespace AS ptn ON ptn.oid = pt.typnamespace
WHERE (pc.relkind = 'm') AND (pa.attnum >= 1) AND (pn.nspname IN ('{schema}'))
ORDER BY "table-schema" ASC, "table-name" ASC, "database-position" ASC"""

METABASE_FKS = """SELECT fk_ns.nspname AS "fk-table-schema", fk_table.relname AS "fk-table-name",
  fk_column.attname AS "fk-column-name", pk_ns.nspname AS "pk-table-schema",
  pk_table.relname AS "pk-table-name", pk_column.attname AS "pk-column-name"
FROM pg_constraint AS c
INNER JOIN pg_class AS fk_table ON c.conrelid = fk_table.oid
INNER JOIN pg_namespace AS fk_ns ON c.connamespace = fk_ns.oid
INNER JOIN pg_attribute AS fk_column ON c.conrelid = fk_column.attrelid
INNER JOIN pg_class AS pk_table ON c.confrelid = pk_table.oid
INNER JOIN pg_namespace AS pk_ns ON pk_table.relnamespace = pk_ns.oid
INNER JOIN pg_attribute AS pk_column ON c.confrelid = pk_column.attrelid
WHERE (fk_ns.nspname !~ '^information_schema|catalog_history|pg_') AND (c.contype = 'f'::char)
  AND (fk_column.attnum = ANY(c.conkey)) AND (pk_column.attnum = ANY(c.confkey))
  AND (fk_ns.nspname IN ('{schema}'))
ORDER BY "fk-table-schema" ASC, "fk-table-name" ASC"""

METABASE_INDEXES = """SELECT tmp."table-schema", tmp."table-name",
  TRIM(BOTH '"' FROM PG_CATALOG.PG_GET_INDEXDEF(tmp.ci_oid, tmp.pos, FALSE)) AS "field-name"
FROM (SELECT n.nspname AS "table-schema", ct.relname AS "table-name", ci.oid AS ci_oid,
    (information_schema._pg_expandarray(i.indkey)).n AS pos
  FROM pg_catalog.pg_class AS ct
  INNER JOIN pg_catalog.pg_namespace AS n ON ct.relnamespace = n.oid
  INNER JOIN pg_catalog.pg_index AS i ON ct.oid = i.indrelid
  INNER JOIN pg_catalog.pg_class AS ci ON ci.oid = i.indexrelid
  WHERE (PG_CATALOG.PG_GET_EXPR(i.indpred, i.indrelid) IS NULL)
    AND n.nspname !~ '^information_schema|catalog_history|pg_'
    AND (n.nspname IN ('{schema}'))) AS tmp
WHERE tmp.pos = 1"""


@pytest.mark.parametrize(
    "query", ["tables", "fields", "fks", "indexes"], ids=["tables", "fields", "fks", "indexes"]
)
def test_metabase_sync_queries(spate_dsn: str, pg_schema: str, query: str) -> None:
    sql = {
        "tables": METABASE_TABLES,
        "fields": METABASE_FIELDS,
        "fks": METABASE_FKS,
        "indexes": METABASE_INDEXES,
    }[query]
    # (PostgreSQL's row estimate is its statistics' guess: masked)
    got = compare(spate_dsn, pg_schema, sql, masked=("estimated_row_count",))
    if query == "tables":
        assert [r[1] for r in got[2]] == ["items", "other_t", "items_v"]
    if query == "indexes":
        assert sorted(r[2] for r in got[2]) == ["id", "name"]


def test_format_and_names_cast_to_regclass_at_run_time(spate_dsn: str, pg_schema: str) -> None:
    """``format`` with ``%s``, ``%I``, ``%L`` and ``%%`` (NULLs included), a name built by it
    cast to ``regclass``, and ``'f'::char`` against a ``"char"`` column, as PostgreSQL answers."""
    compare(
        spate_dsn,
        pg_schema,
        "SELECT format('%s.%I|%L|%%|%L|%s', 'a', 'My T', 'it''s', NULL, NULL) AS f,"
        " format('%I.%I', '{schema}', 'items')::regclass::oid"
        " = '{schema}.items'::regclass::oid AS same,"
        " (SELECT count(*) FROM pg_constraint WHERE contype = 'p'::char"
        " AND conrelid = '{schema}.items'::regclass) AS primary_keys",
    )


def test_result_columns_of_casts_named_as_postgres_names_them(
    spate_dsn: str, pg_schema: str
) -> None:
    """A cast to ``regclass``, ``regtype``, ``regnamespace`` or ``oid`` is named after what it
    casts when that is a column (``c.oid::regclass`` is ``oid``), else after its type
    (``'items'::regclass`` is ``regclass``), as is a cast of a function call (``count(*)::int``
    is ``count``); the values as PostgreSQL's. (Their types are not compared: spate sends such
    columns as text and bigint.)"""
    sql = (
        "SELECT c.oid::regclass, c.relnamespace::regnamespace, c.reltype::regtype,"
        " (c.oid::regclass)::text, c.oid::regclass AS named, 'items'::regclass,"
        " 'int4'::regtype, 'int4'::regtype::oid, relkind::\"char\", upper(c.relname)::text,"
        " (c.relname::text)::varchar, CASE WHEN true THEN 1 END::text, count(*)::int"
        " FROM pg_class c WHERE c.oid = '{schema}.items'::regclass"
        " GROUP BY c.oid, c.relnamespace, c.reltype, c.relkind, c.relname"
    )
    ours = _run(spate_dsn, sql.format(schema="public"))
    theirs = _run(PG_URL or "", sql.format(schema=pg_schema), search_path=f"{pg_schema}, public")
    assert ours[0] == theirs[0] == [
        "oid", "relnamespace", "reltype", "oid", "named", "regclass", "regtype", "oid",
        "relkind", "upper", "relname", "text", "count",
    ]  # fmt: skip
    normalized = [str(v).replace(pg_schema, "public") for v in theirs[2][0]]
    assert [str(v) for v in ours[2][0]] == normalized
