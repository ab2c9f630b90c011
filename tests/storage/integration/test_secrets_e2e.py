"""A PostgreSQL source through the Environment keeps its password out of consensus and logs:
the catalog and the storage controller hold a reference, the storage replica reads the secret
from the data directory's secrets, across a restart, and dropping the source deletes it."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from spate.environment.api import Environment
from spate.protocol.secret import Secret
from spate.protocol.storage_desc import PostgresSinkConnection, PostgresSinkMode, PostgresSource

pytestmark = [pytest.mark.integration, pytest.mark.postgres, pytest.mark.timeout(300)]


def _with_password(url: str, password: str) -> str:
    """``url`` with ``password`` (a trust-auth server never asks for it)."""
    parts = urlsplit(url)
    user = parts.username or "postgres"
    host = parts.hostname or "127.0.0.1"
    port = f":{parts.port}" if parts.port else ""
    return urlunsplit(parts._replace(netloc=f"{user}:{password}@{host}{port}"))


def _wait_rows(env: Environment, name: str, n: int, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while (got := env.select(name, timeout=30).num_rows) != n:
        assert time.monotonic() < deadline, f"{name} has {got} rows, expected {n}"
        time.sleep(0.5)


def _wait_upstream(url: str, table: str, n: int, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    got = -1
    while time.monotonic() < deadline:
        with psycopg.connect(url) as conn:
            try:
                row = conn.execute(f"select count(*) from {table}").fetchone()  # type: ignore[arg-type]
                got = int(row[0]) if row else 0
            except psycopg.errors.UndefinedTable:
                got = -1
        if got == n:
            return
        time.sleep(0.5)
    raise AssertionError(f"{table} has {got} rows upstream, expected {n}")


def test_a_postgres_password_stays_in_the_secrets_directory(
    tmp_path: Path, pg_logical_url: str, pg_name: str, pg_cleanup: list[str]
) -> None:
    canary = f"pw-{uuid.uuid4().hex}"
    pg_cleanup.extend(
        [
            f"select pg_drop_replication_slot('{pg_name}') from pg_replication_slots "
            f"where slot_name = '{pg_name}'",
            f"drop publication if exists {pg_name}",
            f"drop table if exists {pg_name}",
            f"drop table if exists {pg_name}_out",
        ]
    )
    with psycopg.connect(pg_logical_url, autocommit=True) as up:
        up.execute(f"create table {pg_name} (id bigint primary key, v text)")  # type: ignore[arg-type]
        up.execute(f"alter table {pg_name} replica identity full")  # type: ignore[arg-type]
        up.execute(f"insert into {pg_name} values (1, 'a')")  # type: ignore[arg-type]
        up.execute(f"create publication {pg_name} for table {pg_name}")  # type: ignore[arg-type]
    url = _with_password(pg_logical_url, canary)
    data = tmp_path / "data"
    sub = f"pg_{pg_name}"
    with Environment.open(data) as env:
        env.create_source("pg", PostgresSource(Secret(url), pg_name, pg_name))
        _wait_rows(env, sub, 1)
        sink = PostgresSinkConnection(
            Secret(url), f"{pg_name}_out", PostgresSinkMode.UPSERT, key=("id",)
        )
        env.create_sink("out", from_=sub, connection=sink)
        _wait_upstream(pg_logical_url, f"{pg_name}_out", 1)
    secrets = data / "secrets"
    assert sorted(f.read_text() for f in secrets.iterdir()) == [url, url]  # source, sink
    leaks = [
        str(f)
        for f in data.rglob("*")
        if f.is_file() and secrets not in f.parents and canary.encode() in f.read_bytes()
    ]
    assert leaks == [], f"the password is in {leaks}"
    with Environment.open(data) as env:  # a new storage replica reads the secret again
        with psycopg.connect(pg_logical_url, autocommit=True) as up:
            up.execute(f"insert into {pg_name} values (2, 'b')")  # type: ignore[arg-type]
        _wait_rows(env, sub, 2)
        _wait_upstream(pg_logical_url, f"{pg_name}_out", 2)  # the sink resumed too
        env.drop("pg", cascade=True)
    assert list(secrets.iterdir()) == []
