"""The environment's Prometheus endpoint, scraped over HTTP, and ``wait_hydrated``."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from spate.config import Settings
from spate.environment.api import Environment
from spate.environment.catalog import NameExists
from spate.environment.hydration import HydrationTimeout, wait_hydrated
from spate.environment.status import CollectionStatus, EnvironmentStatus, ReplicaStatus
from spate.frontier.antichain import Antichain
from spate.plan.builder import col
from spate.repr.desc import RelationDesc
from spate.repr.types import INT64

T = RelationDesc.of(("a", INT64, False), ("b", INT64, False))


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_endpoint_reports_frontiers_lag_replicas_steps_peeks_and_errors(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    settings = Settings(data_dir=data, metrics_port=0, spark={"master": "local[1]"})
    env = Environment.open(data, settings=settings)
    try:
        url = env.metrics_url
        assert url is not None and url.startswith("http://127.0.0.1:")
        env.create_cluster("c", replicas=["r1"])
        env.create_table("t", T)
        env.insert("t", [(1, 10), (2, 20)])
        env.create_materialized_view("v", env.get("t").filter(col("b") > 15), cluster="c")
        env.create_index("v_by_a", on="v", key=["a"], cluster="c")
        seen: list[EnvironmentStatus] = []
        final = env.wait_hydrated(timeout=240, progress=seen.append)
        assert seen and seen[-1] == final
        assert all(c.hydrated for c in final.collections if c.hydrated is not None)
        assert env.select("v").num_rows == 1
        env.insert("t", [(3, 30)])
        assert env.select("v").num_rows == 2
        with pytest.raises(NameExists):
            env.create_table("t", T)

        m = scrape(url)
        v = (("cluster", "c"), ("kind", "materialized view"), ("name", "v"))
        assert m[("spate_collection_hydrated", v)] == 1
        assert m[("spate_collection_upper_ms", v)] > 0
        assert ("spate_collection_lag_seconds", v) in m
        assert m[("spate_replica_connected", (("cluster", "c"), ("replica", "r1")))] == 1
        assert m[("spate_peeks_total", (("outcome", "ok"),))] == 2
        assert m[("spate_peek_seconds_count", ())] == 2
        errors = (("error", "NameExists"), ("operation", "create_table"))
        assert m[("spate_errors_total", errors)] == 1
        assert m[("spate_epoch", ())] == 1
        # The local replica's own series, collected at scrape time: its step times.
        steps = [v for (name, _), v in m.items() if name == "spate_compute_replica_steps_total"]
        assert steps and steps[0] > 0
        assert any(n == "spate_compute_replica_step_seconds_count" for n, _ in m)
    finally:
        env.close()
    with pytest.raises(urllib.error.URLError, match="refused"):
        scrape(url)


def _status(hydrated: bool) -> EnvironmentStatus:
    never = Antichain.empty()
    return EnvironmentStatus(
        "d", 1, 0, 0,
        (CollectionStatus("v", "materialized view", "u1", never, never, None, "c", hydrated),),
        (ReplicaStatus("c", "r1", "r1", "online", "connecting", 0, 0, 1, None),),
    )  # fmt: skip


def test_wait_hydrated_names_what_did_not_hydrate() -> None:
    with pytest.raises(HydrationTimeout, match=r"not hydrated after 0.2 s: v \(replicas: c.r1"):
        wait_hydrated(lambda: _status(False), 0.2, poll_s=0.05)
    assert isinstance(HydrationTimeout("x"), TimeoutError)
    assert wait_hydrated(lambda: _status(True), 0.2) == _status(True)
