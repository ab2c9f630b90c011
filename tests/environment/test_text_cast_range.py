"""Text casts out of the type's range fail with 22003 as in PostgreSQL (they used to give 22P02,
invalid input, or no error at all for ``integer``, ``smallint`` and ``double precision``), in
a constant (cast at planning) and on a column (cast when evaluated). PostgreSQL is the oracle.
No replica runs here; the dataflow path is in ``test_view_errors_e2e``."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from spate.environment.api import Environment

TEXTS = ["99999999999", "99999", "1e400", "99999999999999999999", "123.456", "abc", " 12 "]
TYPES = ["smallint", "integer", "bigint", "double precision", "numeric(5,2)"]


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Environment]:
    with Environment.open(tmp_path / "data") as e:
        yield e


def _pg_outcomes(postgres_url: str) -> dict[tuple[str, str], str | None]:
    """PostgreSQL's SQLSTATE (``None``: no error) for each text cast to each type."""
    import psycopg

    out: dict[tuple[str, str], str | None] = {}
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        for text in TEXTS:
            for type in TYPES:
                try:
                    conn.execute("SELECT CAST(%s::text AS " + type + ")", (text,)).fetchall()
                    out[text, type] = None
                except psycopg.Error as e:
                    out[text, type] = e.sqlstate
    return out


def test_text_casts_out_of_range_give_postgresql_sqlstates(
    env: Environment, postgres_url: str
) -> None:
    """``'99999999999'::int`` and the like: 22003 (out of range) as in PostgreSQL, for a
    constant (cast at planning) and for a column (cast when evaluated); 22P02 only for text
    that is not a number."""
    want = _pg_outcomes(postgres_url)
    assert want["99999999999", "integer"] == "22003"  # the oracle is what we think it is
    table = f"casts_{uuid.uuid4().hex[:8]}"
    env.sql(f"CREATE TABLE {table} (s text)")
    for text in TEXTS:
        env.sql(f"DELETE FROM {table}")
        env.sql(f"INSERT INTO {table} VALUES ('{text}')")
        for type in TYPES:
            queries = [f"SELECT '{text}'::{type}", f"SELECT s::{type} FROM {table}"]
            if "e" in text and type.startswith("numeric"):
                queries.pop()  # a column's text cast to numeric takes no exponent (22P02)
            for query in queries:
                try:
                    env.sql(query)
                    got = None
                except Exception as e:  # every failure here must carry a SQLSTATE
                    got = getattr(e, "sqlstate", type_name(e))
                assert got == want[text, type], (query, got, want[text, type])


def type_name(e: BaseException) -> str:
    return type(e).__name__
