"""A materialized view's errors are durable, like its rows: written to an errors shard beside
its shard, they are seen by every reader of the view — a read on another cluster, a read with
no replica at all, a view defined over it (the error propagates) — and after the environment
is reopened, without anything recomputing them; and the error history is compacted with the
view. (The errors used to live only in the memory of the replica computing the view: any other
reader got the view's rows as if nothing had failed.) Real compute replica processes run."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from spate.environment.api import Environment
from spate.errors import EvaluationFailed
from spate.persist.error_shard import errors_shard
from spate.plan.builder import col, sum_
from spate.repr import INT64, RelationDesc

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

DESC = RelationDesc.of(("k", INT64, False), ("x", INT64, False))
BIG = 2**63 - 1


def _fails(env: Environment, name: str, cluster: str | None, as_of: int | None = None) -> None:
    with pytest.raises(EvaluationFailed, match="bigint out of range") as caught:
        env.select(name, cluster=cluster, timeout=120, as_of=as_of)
    assert caught.value.sqlstate == "22003", caught.value
    assert name in str(caught.value), caught.value


def _until(cond: object, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not cond():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.25)


def test_view_errors_are_durable_and_seen_by_every_reader(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Environment.open(data) as env:
        env.create_cluster("c", replicas=1)
        env.create_cluster("d", replicas=1)  # runs no dataflow: reads the views' shards
        env.create_table("t", DESC)
        env.insert("t", [(1, 5), (2, 7)])
        env.create_materialized_view(
            "sums", env.get("t").reduce(["k"], total=sum_(col("x"))), cluster="c"
        )
        env.sql("CREATE MATERIALIZED VIEW over IN CLUSTER c AS SELECT k FROM sums")
        assert env.select("over", cluster="c", timeout=120).num_rows == 2
        env.insert("t", [(1, BIG)])  # key 1's sum no longer fits 64 bits
        for name in ("sums", "over"):  # `over` reads sums' shard: the error propagates
            _fails(env, name, "c")
            _fails(env, name, "d")  # a cluster that computes nothing sees it too
        env.drop_replica("c", "r1")
        env.drop_replica("d", "r1")
        # No replica anywhere: nothing advances the views' uppers. Read (from persist, here)
        # at the latest time both are complete, which the reads above waited for.
        as_of = min(_upper(env, name) for name in ("sums", "over")) - 1
        for name in ("sums", "over"):
            _fails(env, name, None, as_of)
    with Environment.open(data) as env:  # nothing recomputes: the errors are durable
        assert not any(c.replicas for c in env.runtime.catalog.clusters)
        for name in ("sums", "over"):
            _fails(env, name, None, as_of)


def _upper(env: Environment, name: str) -> int:
    found = env.runtime.catalog.find(name)
    assert found is not None
    shard = env.runtime.storage.collection_metadata(found.id).shard
    upper = env.runtime.persist.fetch_state(shard).upper.as_option()
    assert upper is not None
    return upper


def test_view_error_history_is_compacted_with_the_view(cluster_env: Environment) -> None:
    env = cluster_env
    env.create_table("t", DESC)
    env.insert("t", [(1, 5)])
    env.create_materialized_view(
        "sums", env.get("t").reduce(["k"], total=sum_(col("x"))), cluster="c"
    )
    env.select("sums", cluster="c", timeout=120)
    env.insert("t", [(1, BIG)])
    _fails(env, "sums", "c")
    env.delete("t", [(1, BIG)])
    assert env.select("sums", cluster="c", timeout=120).to_pylist() == [{"k": 1, "total": 5}]
    after = env.runtime.oracle.read_ts()
    rt = env.runtime
    found = rt.catalog.find("sums")
    assert found is not None
    view = found.id
    shard = rt.storage.collection_metadata(view).shard

    def compacted() -> bool:
        env.insert("t", [(2, 1)])  # time moves on; the read policy follows it
        env.delete("t", [(2, 1)])
        rows = rt.persist.fetch_state(shard).since
        errors = rt.persist.fetch_state(errors_shard(shard)).since
        return rows.less_equal(errors) and not errors.less_equal(after)

    # the errors shard's since follows the view's past the time the error went away
    _until(compacted, "the errors shard's since to pass the retraction")
