"""Fixtures of the storage tests: a PostgreSQL server with logical replication, unique names."""

from __future__ import annotations

import contextlib
import subprocess
import time
import uuid
from collections.abc import Iterator

import pytest


def _wal_level(url: str) -> str:
    import psycopg

    with psycopg.connect(url, connect_timeout=5, autocommit=True) as conn:
        row = conn.execute("show wal_level").fetchone()
        assert row is not None
        return str(row[0])


def _wait_ready(url: str, timeout: float = 60.0) -> None:
    import psycopg

    deadline = time.monotonic() + timeout
    while True:
        try:
            with psycopg.connect(url, connect_timeout=2) as conn:
                conn.execute("select 1")
            return
        except psycopg.Error:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


@pytest.fixture(scope="session")
def pg_logical_url(postgres_url: str) -> str:
    """``postgres_url``, on a server whose ``wal_level`` is ``logical``.

    If it is not, set it with ``ALTER SYSTEM`` and restart the server once (other test runs
    against the same server fail transiently during the restart, so restart only when needed).
    """
    if _wal_level(postgres_url) != "logical":
        import psycopg

        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute("alter system set wal_level = logical")
        subprocess.run(
            ["pg_ctlcluster", "--skip-systemctl-redirect", "15", "main", "restart"],
            check=True,
            timeout=120,
        )
        _wait_ready(postgres_url)
        if _wal_level(postgres_url) != "logical":
            pytest.fail("could not switch PostgreSQL to wal_level=logical")
    return postgres_url


@pytest.fixture
def pg_name() -> str:
    """A unique lower-case identifier for tables, slots and publications of one test."""
    return f"spt_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def pg_cleanup(pg_logical_url: str) -> Iterator[list[str]]:
    """SQL statements to run after the test (drop slots, publications, tables), in order."""
    import psycopg

    statements: list[str] = []
    yield statements
    with psycopg.connect(pg_logical_url, autocommit=True) as conn:
        for sql in statements:
            with contextlib.suppress(psycopg.Error):
                conn.execute(sql)  # type: ignore[arg-type]
