"""The catalog functions and rewrites (spate.sql.catalog_functions) through Environment.sql:
each case once answered wrongly or not at all."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from spate.environment.api import Environment
from spate.environment.pg_catalog_rows import version_num
from spate.repr.desc import RelationDesc
from spate.repr.types import INT64, TEXT
from spate.sql.catalog_functions import _split_name


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Environment]:
    e = Environment.open(tmp_path_factory.mktemp("catalog_functions") / "data")
    try:
        e.sql("CREATE TABLE t (a integer PRIMARY KEY, b text)")  # type: ignore[attr-defined]
        e.create_table("made_in_python", RelationDesc.of(("k", INT64, False), ("v", TEXT)))
        yield e
    finally:
        e.close()


def rows(env: Environment, sql: str) -> list[tuple[Any, ...]]:
    table = env.sql(sql)  # type: ignore[attr-defined]
    return list(zip(*(c.to_pylist() for c in table.columns), strict=True))


def test_an_unqualified_argument_is_not_captured_by_the_function_s_own_relation(
    env: Environment,
) -> None:
    # oid::regtype reads pg_type itself: its "oid" is the outer t.oid, one row
    got = rows(env, "SELECT typname, oid::regtype::text FROM pg_type t WHERE t.oid = 23")
    assert got == [("int4", "integer")]


def test_no_relation_is_listed_as_a_type_of_its_own(env: Environment) -> None:
    assert rows(env, "SELECT count(*) FROM pg_type t JOIN pg_class c ON c.oid = t.oid") == [(0,)]
    got = rows(env, "SELECT typtype, typrelid = 't'::regclass FROM pg_type WHERE typname = 't'")
    assert got == [("c", True)]


def test_any_of_an_array_escape_and_array_agg(env: Environment) -> None:
    got = rows(env, "SELECT relname FROM pg_class WHERE relkind = ANY(ARRAY['r', 'v'])"
                    " AND relnamespace = 2200 AND relname = 't'")  # fmt: skip
    assert got == [("t",)]
    assert rows(env, "SELECT pg_catalog.version() LIKE 'PostgreSQL 15.%'") == [(True,)]
    assert env.sql("SELECT pg_catalog.version()").column_names == ["version"]  # type: ignore[attr-defined]
    got = rows(env, "SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg/_%' ESCAPE '/'"
                    " AND nspname LIKE 'p%'")  # fmt: skip
    assert got == [("public",)]
    got = rows(env, "SELECT array_agg(CAST(attname AS text) ORDER BY attnum) FROM pg_attribute"
                    " WHERE attrelid = 't'::regclass AND attnum > 0")  # fmt: skip
    assert got == [("{a,b}",)]


def test_array_to_string_of_array_agg_and_their_column_names(env: Environment) -> None:
    """dbt's query of a materialized view's indexes (``postgres__get_show_indexes_sql``):
    sqlglot reads ``array_to_string`` as a node of its own (it was an unknown function), and
    ``array_agg``'s column is named as in PostgreSQL."""
    sql = (
        "SELECT array_to_string(array_agg(CAST(attname AS text) ORDER BY attnum), ',')"
        " FROM pg_attribute WHERE attrelid = 't'::regclass AND attnum > 0"
    )
    assert rows(env, sql) == [("a,b",)]
    assert env.sql(sql).column_names == ["array_to_string"]  # type: ignore[attr-defined]
    sql = "SELECT array_agg(relname) FROM pg_class WHERE relname = 't'"
    assert env.sql(sql).column_names == ["array_agg"]  # type: ignore[attr-defined]
    got = rows(
        env,
        "SELECT i.relname, ix.indisunique, array_to_string(array_agg(a.attname), ',')"
        " FROM pg_index ix JOIN pg_class i ON i.oid = ix.indexrelid"
        " JOIN pg_class t ON t.oid = ix.indrelid"
        " JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = ANY(ix.indkey)"
        " WHERE t.relname = 't' GROUP BY 1, 2 ORDER BY 1, 2",
    )
    assert got == [("t_pkey", True, "a")]


def test_expandarray_gives_a_row_per_key(env: Environment) -> None:
    got = rows(
        env,
        "SELECT r.k FROM (SELECT (information_schema._pg_expandarray(i.indkey)).n AS n,"
        " information_schema._pg_expandarray(i.indkey) AS k FROM pg_index i"
        " WHERE i.indrelid = 't'::regclass) r WHERE r.n = 1",
    )
    assert got == [(1,)]


def test_names_and_versions() -> None:
    assert _split_name('public."My T"') == ["public", "My T"]
    assert _split_name("Public.T") == ["public", "t"]
    assert version_num("15.0") == "150000" and version_num("15.4") == "150004"
    assert version_num("9.5.0") == "90500"


def test_a_table_made_in_python_has_its_stored_types(env: Environment) -> None:
    got = rows(
        env,
        "SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull"
        " FROM pg_attribute a WHERE a.attrelid = 'made_in_python'::regclass AND a.attnum > 0"
        " ORDER BY a.attnum",
    )
    assert got == [("k", "bigint", True), ("v", "text", False)]
