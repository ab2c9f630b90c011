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
from spate.errors import SpateError

TEXTS = [
    "99999999999",
    "99999",
    "1e400",
    "99999999999999999999",
    "123.456",
    "abc",
    " 12 ",
    "1e2",
    "1.5E-3",
    "+.5",
    "-5e-3",
    "1.e+2",
    "1e1001",
    "1e",
    "1_0",
]
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
            for query in [f"SELECT '{text}'::{type}", f"SELECT s::{type} FROM {table}"]:
                try:
                    env.sql(query)
                    got = None
                except Exception as e:  # every failure here must carry a SQLSTATE
                    got = getattr(e, "sqlstate", type_name(e))
                assert got == want[text, type], (query, got, want[text, type])


def type_name(e: BaseException) -> str:
    return type(e).__name__


NUMERIC_TEXTS = ["1e2", "1.5E-3", " 12 ", "+.5", "-5e-3", "5E-3", "1.e+2", "-0", "1e-1000"]


def test_text_cast_to_numeric_takes_exponents_as_postgresql(
    env: Environment, postgres_url: str
) -> None:
    """``'1e2'::numeric`` on a column read is 100 as in PostgreSQL (it failed with 22P02),
    rounded half away from zero to ``numeric(p,s)``'s scale; the same as a constant."""
    import psycopg

    table = f"numtext_{uuid.uuid4().hex[:8]}"
    env.sql(f"CREATE TABLE {table} (s text)")
    env.sql(f"INSERT INTO {table} VALUES " + ", ".join(f"('{t}')" for t in NUMERIC_TEXTS))
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        for type in ["numeric", "numeric(5,2)", "numeric(5,1)"]:
            # spate's unconstrained numeric is numeric(38,10)
            pg_type = "numeric(38,10)" if type == "numeric" else type
            want = sorted(
                conn.execute(
                    f"SELECT s::{pg_type} FROM unnest(%s::text[]) AS s", (NUMERIC_TEXTS,)
                ).fetchall()
            )
            got = sorted(env.sql(f"SELECT s::{type} FROM {table}").to_pylist(), key=str)
            assert sorted(r["s"] for r in got) == [r[0] for r in want], type
            for text in NUMERIC_TEXTS:
                (pg,) = conn.execute(f"SELECT %s::text::{pg_type}", (text,)).fetchone()  # type: ignore[misc]
                constant = env.sql(f"SELECT '{text}'::{type} AS v").to_pylist()
                assert constant == [{"v": pg}], (text, type)


def test_numeric_nan_and_infinity_text_are_refused_alike(env: Environment) -> None:
    """PostgreSQL 15 reads 'NaN' and 'inf' as numeric; spate's numeric has no such values, so
    both a constant and a column's cast refuse them with 22P02 rather than invent a number."""
    table = f"numspecial_{uuid.uuid4().hex[:8]}"
    env.sql(f"CREATE TABLE {table} (s text)")
    for text in ["NaN", "inf", "-Infinity"]:
        env.sql(f"DELETE FROM {table}")
        env.sql(f"INSERT INTO {table} VALUES ('{text}')")
        for query in [f"SELECT '{text}'::numeric", f"SELECT s::numeric FROM {table}"]:
            with pytest.raises(SpateError) as info:
                env.sql(query)
            assert getattr(info.value, "sqlstate", None) == "22P02", query


def test_text_cast_to_numeric_keeps_all_38_digits(env: Environment, postgres_url: str) -> None:
    """A 28-digit integer text fits numeric(38,10) (and so spate's numeric), as a constant and
    on a column; the constant failed with 22003, rounding with 28 digits of precision."""
    import psycopg

    text = "1234567890123456789012345678.25"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        (want,) = conn.execute("SELECT %s::text::numeric(38,10)", (text,)).fetchone()  # type: ignore[misc]
    table = f"wide_{uuid.uuid4().hex[:8]}"
    env.sql(f"CREATE TABLE {table} (s text)")
    env.sql(f"INSERT INTO {table} VALUES ('{text}')")
    for query in [f"SELECT '{text}'::numeric AS v", f"SELECT s::numeric AS v FROM {table}"]:
        assert env.sql(query).to_pylist() == [{"v": want}], query
