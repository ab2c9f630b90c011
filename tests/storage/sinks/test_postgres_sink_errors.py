"""A PostgreSQL sink fails loudly: what can be checked is refused by ``create_sink`` (unknown key
column, a table name that is not ``table`` or ``schema.table``, an unreachable server), a NUL in
text is refused on insert as PostgreSQL refuses it, and an error of a running sink shows in
``status()`` within seconds. Real PostgreSQL, one schema per test, dropped after."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from spate.environment.api import Environment
from spate.errors import SchemaMismatch, SpateError
from spate.protocol.secret import Secret
from spate.protocol.storage_desc import PostgresSinkConnection, PostgresSinkMode
from spate.repr import INT64, TEXT, RelationDesc

pytestmark = [pytest.mark.timeout(300)]

DESC = RelationDesc.of(("k", INT64, False), ("v", TEXT))


@pytest.fixture
def schema(postgres_url: str) -> Iterator[str]:
    name = f"sink_err_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"create schema {name}")  # type: ignore[arg-type]
    yield name
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"drop schema {name} cascade")  # type: ignore[arg-type]


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Environment]:
    e = Environment.open(tmp_path / "data")
    yield e
    e.close()


def _upsert(
    url: str, table: str, key: tuple[str, ...] = ("k",), **kw: str
) -> PostgresSinkConnection:
    return PostgresSinkConnection(Secret(url), table, PostgresSinkMode.UPSERT, key, **kw)


def test_create_sink_refuses_what_it_can_check(
    env: Environment, postgres_url: str, schema: str
) -> None:
    env.create_table("t", DESC)
    cases = {
        "unknown key column": (_upsert(postgres_url, f"{schema}.out", ("nope",)), "nope"),
        "three-part name": (_upsert(postgres_url, f"{schema}.b.c"), "table name"),
        "path-like name": (_upsert(postgres_url, "../x"), "table name"),
        "bad progress table": (
            _upsert(postgres_url, f"{schema}.out", progress_table="a;b"),
            "table name",
        ),
        "unreachable server": (
            _upsert("postgresql://postgres@127.0.0.1:1/test", f"{schema}.out"),
            "cannot connect",
        ),
    }
    for what, (connection, message) in cases.items():
        begin = time.monotonic()
        with pytest.raises(SpateError, match=message):
            env.create_sink("s", from_="t", connection=connection)
        assert time.monotonic() - begin < 15, what
        assert env.names() == ["t"], what


def test_nul_in_text_is_refused_on_insert(env: Environment) -> None:
    env.create_table("t", DESC)
    with pytest.raises(SchemaMismatch, match="NUL"):
        env.insert("t", [(1, "a\x00b")])
    assert env.select("t").num_rows == 0


def test_a_running_sink_error_shows_in_status_within_seconds(
    env: Environment, postgres_url: str, schema: str
) -> None:
    env.create_table("t", DESC)
    env.insert("t", [(1, "a")])
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        # A target table whose columns do not match the collection's: the sink cannot write.
        conn.execute(f"create table {schema}.out (k bigint primary key, other date)")  # type: ignore[arg-type]
    env.create_sink(
        "s",
        from_="t",
        connection=_upsert(postgres_url, f"{schema}.out", progress_table=f"{schema}.progress"),
    )
    deadline = time.monotonic() + 20
    while (status := env.status().collection("s")).error is None:
        assert time.monotonic() < deadline, f"no sink error in status after 20 s: {status}"
        time.sleep(0.2)
    assert status.status == "stalled"
    assert "exists with columns" in status.error
