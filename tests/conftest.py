"""Shared fixtures: strict invariants, hypothesis profiles, seeds, one SparkSession, PostgreSQL."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tests._mariadb import MariaDB

# Invariant checks raise inside the test suite (they log and count in production).
os.environ["SPATE_SOFT_ASSERT"] = "raise"

# Hypothesis profiles: ci = 500 examples per property, nightly = 20,000, dev = 100.
_common = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
settings.register_profile("ci", max_examples=500, **_common)
settings.register_profile("dev", max_examples=100, **_common)
settings.register_profile("nightly", max_examples=20_000, **_common)
settings.load_profile(os.environ.get("SPATE_HYPOTHESIS_PROFILE", "ci"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--seed", type=int, default=None, help="seed for randomised tests (replay)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)
        if "postgres_url" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.postgres)


@pytest.fixture
def seed(request: pytest.FixtureRequest) -> int:
    """A seed for a randomised test, printed with the command that replays it."""
    given = request.config.getoption("--seed")
    value = given if given is not None else random.SystemRandom().randrange(2**32)
    print(f"seed={value}  replay: pytest '{request.node.nodeid}' --seed={value}")
    return int(value)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The test process's one SparkSession: local[2], 2 shuffle partitions, UI off."""
    from spate.render.spark import create_session

    session = create_session("local[2]", app_name="spate-tests", driver_memory="2g")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """The URL of a PostgreSQL server for tests (``SPATE_TEST_POSTGRES_URL``), or skip."""
    url = os.environ.get("SPATE_TEST_POSTGRES_URL")
    if not url:
        pytest.skip("SPATE_TEST_POSTGRES_URL is not set; PostgreSQL tests skipped")
    import psycopg

    try:
        with psycopg.connect(url, connect_timeout=5) as conn:
            conn.execute("select 1")
    except psycopg.Error as e:
        pytest.skip(f"PostgreSQL at SPATE_TEST_POSTGRES_URL is not reachable: {e}")
    return url


@pytest.fixture(scope="session")
def mariadb() -> Iterator[MariaDB]:
    """A MariaDB server of the session's own with the row-based binlog (``tests/_mariadb.py``);
    tests make their own databases in it and drop them."""
    from tests._mariadb import running_mariadb

    yield from running_mariadb()
