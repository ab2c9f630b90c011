"""The default cluster: a fresh environment runs statements that need a cluster without a
CREATE CLUSTER (``quickstart`` is created on first need), SHOW cluster names it, small reads
never create it, and ``default_cluster = ""`` keeps the old refusal."""

from __future__ import annotations

from pathlib import Path

import pytest

from spate.config import Settings
from spate.environment.api import Environment
from spate.errors import UnknownName


def _clusters(env: Environment) -> list[tuple[str, str]]:
    return [tuple(r.values()) for r in env.sql("SHOW CLUSTERS").to_pylist()]  # type: ignore[misc]


def test_a_fresh_environment_creates_quickstart_on_first_need(env: Environment) -> None:
    assert env.sql("SHOW cluster").to_pylist() == [{"cluster": "quickstart"}]
    env.sql("CREATE TABLE t (k int PRIMARY KEY, v text)")
    env.sql("INSERT INTO t VALUES (1, 'a'), (2, 'a'), (3, 'b')")
    counts = env.sql("SELECT v, count(*) AS n FROM t GROUP BY v ORDER BY v").to_pylist()
    assert counts == [{"v": "a", "n": 2}, {"v": "b", "n": 1}]
    assert _clusters(env) == []  # read here: no cluster needed yet
    env.sql("SET cluster = quickstart")  # named before it exists: accepted
    env.sql("CREATE INDEX t_v_idx ON t (v)")  # needs a cluster: quickstart, one replica
    assert _clusters(env) == [("quickstart", "r1")]
    assert env.sql("SHOW cluster").to_pylist() == [{"cluster": "quickstart"}]


def test_without_a_default_cluster_work_needing_one_is_refused(tmp_path: Path) -> None:
    with Environment.open(tmp_path / "data", settings=Settings(default_cluster="")) as env:
        env.sql("CREATE TABLE t (k int)")
        with pytest.raises(UnknownName, match="no cluster exists"):
            env.sql("CREATE INDEX t_k ON t (k)")
        assert _clusters(env) == []
