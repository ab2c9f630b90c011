"""A constraint violation reaches the client as PostgreSQL sends it: SQLSTATE, message and
the detail field (``Key (k)=(1) already exists.``), checked against PostgreSQL itself."""

from __future__ import annotations

import uuid

import psycopg
import pytest

from spate.errors import UniqueViolation
from spate.pgwire.engine import Context, Result
from spate.pgwire.server import ServerConfig, ServerThread
from tests.pgwire.fake_engine import FakeEngine


class _KeyedEngine(FakeEngine):
    def execute(self, sql: str, ctx: Context) -> Result:
        if sql.startswith("INSERT INTO k"):
            raise UniqueViolation(
                'duplicate key value violates unique constraint "k_pkey"',
                constraint="k_pkey",
                detail="Key (id)=(1) already exists.",
            )
        return super().execute(sql, ctx)


def test_a_unique_violation_carries_postgresql_fields(postgres_url: str) -> None:
    schema = f"kerr_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        try:
            conn.execute(f"SET search_path = {schema}")
            conn.execute("CREATE TABLE k (id int PRIMARY KEY)")
            conn.execute("INSERT INTO k VALUES (1)")
            with pytest.raises(psycopg.errors.UniqueViolation) as pg:
                conn.execute("INSERT INTO k VALUES (1)")
        finally:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
    server = ServerThread(_KeyedEngine(), ServerConfig(port=0))
    try:
        dsn = f"host=127.0.0.1 port={server.port} user=tester dbname=spate sslmode=disable"
        with (
            psycopg.connect(dsn, autocommit=True) as c,
            pytest.raises(psycopg.errors.UniqueViolation) as got,
        ):
            c.execute("INSERT INTO k VALUES (1)")
    finally:
        server.close()
    for field in ("sqlstate", "message_primary", "message_detail"):
        assert getattr(got.value.diag, field) == getattr(pg.value.diag, field), field
