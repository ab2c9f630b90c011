"""``print(env.status())`` shows the tables ``spate status`` shows, not a dataclass repr."""

from __future__ import annotations

from spate.environment.status import CollectionStatus, EnvironmentStatus, ReplicaStatus
from spate.frontier.antichain import Antichain


def test_an_environment_status_prints_as_its_tables() -> None:
    status = EnvironmentStatus(
        data_dir="/d",
        epoch=3,
        read_ts=1_700,
        now_ms=2_000,
        collections=(
            CollectionStatus("best", "materialized view", "u7", Antichain([5]), Antichain([1_650]), 350, "c", True),
        ),
        replicas=(ReplicaStatus("c", "r1", "u2", "pid 42", "connected", 1, 2, 2, None),),
    )  # fmt: skip
    text = str(status)
    assert "EnvironmentStatus(" not in text
    lines = text.splitlines()
    assert any("collections (read ts 1700)" in line for line in lines)
    best = next(line for line in lines if "best" in line)
    for cell in ("materialized view", "u7", "350 ms", "yes"):
        assert cell in best
    r1 = next(line for line in lines if "r1 (u2)" in line)
    assert "connected" in r1 and "2/2" in r1 and "pid 42" in r1
