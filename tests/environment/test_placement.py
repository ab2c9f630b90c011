"""Where replicas are placed: durable addresses, the settings' placement, stale entries."""

from __future__ import annotations

from pathlib import Path

import pytest

from spate.config import Settings
from spate.environment import placement
from spate.environment.api import Environment
from spate.environment.inspect import inspect_environment
from spate.orchestrator.service import ServiceError

# Nothing listens here: placed replicas are only connected to, never started.
A1, A2, A3 = "127.0.0.1:9", "127.0.0.1:19", "127.0.0.1:29"


def processes(env: Environment) -> dict[str, str]:
    return {f"{r.cluster}.{r.name}": r.process for r in env.status().replicas}


def test_placements_are_durable_and_the_settings_override_them(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = Environment.open(data)
    try:
        env.create_cluster("c", replicas={"r1": A1})
        env.add_replica("c", "r2", address=A2)
        assert processes(env) == {"c.r1": f"at {A1}", "c.r2": f"at {A2}"}
        assert not (data / "services").exists()  # nothing was started here
        with pytest.raises(ServiceError, match="HOST:PORT"):
            env.add_replica("c", "r3", address="nowhere")
        assert [r.name for r in env.status().replicas] == ["r1", "r2"]  # nothing changed
    finally:
        env.close()
    offline = {r.name: r.placed_at for r in inspect_environment(data).replicas}
    assert offline == {"r1": A1, "r2": A2}  # spate status, without opening the environment
    moved = Settings(data_dir=data, clusters={"c": {"replicas": {"r2": A3}}})
    env = Environment.open(data, settings=moved)
    try:
        assert processes(env) == {"c.r1": f"at {A1}", "c.r2": f"at {A3}"}
        env.drop_replica("c", "r1")
        env.drop_cluster("c")
        assert placement.load(env.runtime.persist.consensus) == placement.Placement()
    finally:
        env.close()


def test_a_local_replica_clears_a_stale_placement_of_its_name(tmp_path: Path) -> None:
    env = Environment.open(tmp_path / "data")
    try:
        doc = placement.document(env.runtime.persist.consensus)
        doc.update(lambda p: (p or placement.Placement()).with_address("c", "r1", A1))
        env.create_cluster("c", replicas=["r1"])
        assert processes(env) != {"c.r1": f"at {A1}"}
        assert placement.load(env.runtime.persist.consensus).address("c", "r1") is None
    finally:
        env.close()
