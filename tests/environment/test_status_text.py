"""``print(env.status())`` shows the tables ``spate status`` shows, not a dataclass repr."""

from __future__ import annotations

from spate.environment.status import CollectionStatus, EnvironmentStatus, ReplicaStatus
from spate.frontier.antichain import Antichain


def test_an_environment_status_prints_as_its_tables() -> None:
    status = EnvironmentStatus(
        data_dir="/d",
        epoch=3,
        read_ts=1_795_693_373_504,
        now_ms=2_000,
        collections=(
            CollectionStatus("best", "materialized view", "u7", Antichain([1_795_693_370_000]), Antichain([1_795_693_373_154]), 350, "c", True),
        ),
        replicas=(ReplicaStatus("c", "r1", "u2", "pid 42", "connected", 1, 2, 2, None),),
    )  # fmt: skip
    text = str(status)
    assert "EnvironmentStatus(" not in text
    lines = text.splitlines()
    # times are shown as timestamps (UTC, milliseconds); the status keeps the numbers
    assert any("collections (read ts 2026-11-26 11:42:53.504)" in line for line in lines)
    assert status.read_ts == 1_795_693_373_504
    best = next(line for line in lines if "best" in line)
    for cell in ("materialized view", "u7", "350 ms", "yes"):
        assert cell in best
    assert "2026-11-26 11:42:50.000" in best and "2026-11-26 11:42:53.154" in best
    assert status.collection("best").upper.as_option() == 1_795_693_373_154
    r1 = next(line for line in lines if "r1 (u2)" in line)
    assert "connected" in r1 and "2/2" in r1 and "pid 42" in r1
