"""A scratch schema in the local PostgreSQL holding the same objects a test makes in spate,
so that the test can ask both the same catalog questions."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator, Sequence

import psycopg
import pytest


@contextlib.contextmanager
def pg_scratch(ddl: Sequence[str], prefix: str) -> Iterator[str]:
    """A new schema named ``prefix_<random>`` with ``ddl`` run in it; dropped after. Skips the
    test when ``SPATE_TEST_POSTGRES_URL`` is not set."""
    url = os.environ.get("SPATE_TEST_POSTGRES_URL")
    if not url:
        pytest.skip("SPATE_TEST_POSTGRES_URL is not set")
    schema = f"{prefix}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(f"SET search_path = {schema}")
        for statement in ddl:
            conn.execute(statement)
    try:
        yield schema
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
