"""Fixtures of the Environment tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from spate.environment.api import Environment
from spate.errors import SpateError


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Environment]:
    """A fresh Environment in ``tmp_path/data`` (no clusters), closed after the test."""
    e = Environment.open(tmp_path / "data")
    yield e
    e.close()


@pytest.fixture(scope="package")
def shared_cluster_env(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Environment, Path]]:
    """One Environment (and its data directory) with cluster ``c`` of one replica, for the tests
    of the package that need nothing more than a cluster to run their views and subscribes on:
    a replica's start and first Spark job are most of such a test's time. Use it through
    ``cluster_env``."""
    data = tmp_path_factory.mktemp("shared_cluster") / "data"
    with Environment.open(data) as e:
        e.create_cluster("c", replicas=1)
        yield e, data


@pytest.fixture
def cluster_env(shared_cluster_env: tuple[Environment, Path]) -> Iterator[Environment]:
    """The package's Environment with cluster ``c`` (``shared_cluster_env``); what the test
    creates is dropped after it (dependents through CASCADE), so the next test finds it as
    this one did."""
    e, _ = shared_cluster_env
    before = set(e.names())
    yield e
    for _ in range(3):
        fresh = sorted(set(e.names()) - before)
        if not fresh:
            break
        for name in fresh:
            try:
                e.drop(name, cascade=True)
            except SpateError:  # already dropped by a cascade; the next pass retries
                continue
    assert set(e.names()) <= before, f"left behind: {sorted(set(e.names()) - before)}"
