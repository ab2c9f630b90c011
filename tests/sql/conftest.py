"""Fixtures of the SQL tests: one Environment with the corpus cluster for the package."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from tests.sql._slt_spate import CLUSTER, warm_up

if TYPE_CHECKING:
    from spate.environment.api import Environment


@pytest.fixture(scope="package")
def corpus_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Environment]:
    """An Environment with cluster ``slt`` (one replica, warmed up, the session's cluster),
    shared by the corpus tests of this package (the SQL corpus against PostgreSQL, the Spark
    dialect): a replica's start and its first Spark job take a minute on a small machine. Its
    users drop what they create."""
    from spate.environment.api import Environment

    env = Environment.open(tmp_path_factory.mktemp("corpus") / "data")
    try:
        env.create_cluster(CLUSTER, replicas=1)
        # PostgreSQL bounds no recursion (the corpus's PostgreSQL session stops a statement
        # after 20 s: an error either way). The random rounds can give a WITH RECURSIVE … UNION
        # ALL view a cycle, which spate runs to its limit at every step: 10,000 rounds a step
        # took a CI run 20 minutes. The corpus's recursions end within a few dozen rounds.
        env.sql("SET recursion_limit = 1000")  # type: ignore[attr-defined]
        warm_up(env)
        yield env
    finally:
        env.close()
