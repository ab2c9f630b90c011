"""An evaluation error over pgwire is answered as PostgreSQL answers it: its text and SQLSTATE,
not spate's plan of the query. No cluster: the constant query is evaluated in-process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from spate.environment.api import Environment
from spate.pgwire.environment import EnvironmentEngine
from spate.pgwire.server import ServerConfig, ServerThread


@pytest.fixture
def dsn(tmp_path: Path) -> Iterator[str]:
    env = Environment.open(tmp_path / "env")
    server = ServerThread(EnvironmentEngine(env), ServerConfig(port=0))
    try:
        yield f"host=127.0.0.1 port={server.port} user=u dbname=spate sslmode=disable"
    finally:
        server.close()
        env.close()


def test_division_by_zero_is_postgres_message_and_sqlstate(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.DivisionByZero) as raised:
            conn.execute("SELECT 1/0")
        assert raised.value.diag.message_primary == "division by zero"  # as PostgreSQL 15
        assert raised.value.diag.sqlstate == "22012"
        assert conn.execute("SELECT 2 AS two").fetchall() == [(2,)]
