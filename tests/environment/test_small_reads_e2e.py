"""One-off reads over small collections (subqueries, joins, aggregates) are evaluated in the
environment from the inputs' snapshots instead of by a one-off dataflow on a replica (a Spark
job per operator: seconds for a three-row table); larger ones still build a dataflow, and both
give the same answers and errors. A real compute replica process runs the cluster: the
package's shared Environment and cluster (``cluster_env``)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from spate.config import with_overrides
from spate.environment import reads, small_reads
from spate.environment.api import Environment
from spate.environment.sql import SqlSession
from spate.errors import EvaluationFailed
from spate.plan.builder import col, sum_
from spate.repr import INT64, RelationDesc

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

QUERIES = {
    "SELECT x FROM t WHERE x IN (SELECT y FROM s)": [(2,)],
    "SELECT x FROM t WHERE x NOT IN (SELECT y FROM s)": [],
    "SELECT x FROM t WHERE x NOT IN (SELECT y FROM s WHERE y IS NOT NULL)": [(1,)],
    "SELECT x, x = ANY (SELECT y FROM s), x <> ALL (SELECT y FROM s) FROM t": [
        (1, None, None),
        (2, True, False),
        (None, None, None),
    ],
    "SELECT x FROM t WHERE NOT EXISTS (SELECT 1 FROM s WHERE s.y = t.x)": [(1,), (None,)],
    "SELECT x, (SELECT count(*) FROM s WHERE s.y >= t.x) FROM t": [(1, 1), (2, 1), (None, 0)],
}


@pytest.fixture
def env(cluster_env: Environment) -> Iterator[Environment]:
    cluster_env.sql("SET cluster = c")
    cluster_env.sql("CREATE TABLE t (x bigint); CREATE TABLE s (y bigint)")
    cluster_env.sql("INSERT INTO t VALUES (1), (2), (NULL); INSERT INTO s VALUES (2), (NULL)")
    yield cluster_env
    cluster_env.sql("RESET cluster")


@pytest.fixture
def dataflows(env: Environment, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The dataflows the environment asks replicas to build from here on."""
    built: list[Any] = []
    compute = env.runtime.compute
    create = compute.create_dataflow

    def recording(instance: Any, dataflow: Any, *args: Any, **kwargs: Any) -> None:
        built.append(dataflow)
        create(instance, dataflow, *args, **kwargs)

    monkeypatch.setattr(compute, "create_dataflow", recording)
    return built


def _rows(env: Environment | SqlSession, sql: str) -> list[tuple[Any, ...]]:
    out = env.sql(sql)
    assert out is not None and not isinstance(out, int)
    columns = [c.to_pylist() for c in out.columns]  # names may repeat (?column?)
    return sorted(zip(*columns, strict=True), key=repr)


def test_small_subquery_reads_build_no_dataflow(env: Environment, dataflows: list[Any]) -> None:
    for sql, expected in QUERIES.items():
        assert _rows(env, sql) == sorted(expected, key=repr), sql
    assert dataflows == []


def test_reads_beyond_the_limit_build_a_dataflow_with_the_same_answers(
    env: Environment, dataflows: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = env.runtime
    monkeypatch.setattr(rt, "settings", with_overrides(rt.settings, small_read_updates=4))
    sql = "SELECT x FROM t WHERE x NOT IN (SELECT y FROM s WHERE y IS NOT NULL)"
    assert _rows(env, sql) == [(1,)]  # five updates in t and s: a dataflow
    assert len(dataflows) == 1
    assert _rows(env, "SELECT x FROM t WHERE x IN (SELECT 2)") == [(2,)]  # three: none
    assert len(dataflows) == 1


def test_a_read_asked_not_to_use_small_reads_builds_a_dataflow(
    env: Environment, dataflows: list[Any]
) -> None:
    session = env.sql_session()
    session.session.small_reads = False
    session.sql("SET cluster = c")
    sql = "SELECT x FROM t WHERE x IN (SELECT y FROM s)"
    assert _rows(session, sql) == [(2,)]
    assert len(dataflows) == 1
    assert _rows(env, sql) == [(2,)]  # other sessions still read here
    assert len(dataflows) == 1
    plan = env.get("t").reduce([], total=sum_(col("x")))
    assert env.select(plan, small_reads=False).to_pylist() == [{"total": 3}]
    assert len(dataflows) == 2


def test_reads_answered_from_cached_contents_see_every_acknowledged_write(
    env: Environment, dataflows: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reads evaluated on the event loop from the contents cached here (no read hold, no
    worker thread: reads.evaluate_seen) observe every write acknowledged before them."""
    answered: list[bool] = []
    evaluate_seen = reads.evaluate_seen

    def recording(*args: Any) -> Any:
        found = evaluate_seen(*args)
        answered.append(found is not None)
        return found

    monkeypatch.setattr(reads, "evaluate_seen", recording)
    env.sql("CREATE TABLE u (k bigint, v bigint)")
    env.sql("INSERT INTO u VALUES (1, 10), (2, 20)")
    u, s = [(1, 10), (2, 20)], [2, None]
    for i in range(3, 8):
        join = sorted((k, y) for k, _ in u for y in s if k == y)
        for _ in range(2):  # the second read is answered from the cache
            assert _rows(env, "SELECT k, y FROM u JOIN s ON u.k = s.y") == join
            assert _rows(env, "SELECT sum(v) FROM u WHERE v > 5") == [(sum(v for _, v in u),)]
        env.sql("INSERT INTO s VALUES (2)")
        env.sql(f"INSERT INTO u VALUES ({i}, {10 * i})")
        s.append(2)
        u.append((i, 10 * i))
    assert any(answered)
    assert dataflows == []


def test_an_evaluation_error_is_the_one_a_dataflow_gives(
    env: Environment, dataflows: list[Any]
) -> None:
    with pytest.raises(EvaluationFailed, match="division by zero") as caught:
        env.sql("SELECT x / (SELECT count(*) FROM s WHERE y > 5) FROM t")
    assert caught.value.sqlstate == "22012"
    assert dataflows == []


def test_a_read_over_a_view_in_error_fails(env: Environment) -> None:
    desc = RelationDesc.of(("k", INT64, False), ("v", INT64, False))
    env.create_table("kv", desc)
    env.insert("kv", [(1, 2**63 - 1), (1, 1), (2, 3)])
    env.create_materialized_view(
        "sums", env.get("kv").reduce(["k"], total=sum_(col("v"))), cluster="c"
    )
    with pytest.raises(EvaluationFailed, match="bigint out of range") as caught:
        env.sql("SELECT k FROM sums WHERE k IN (SELECT x FROM t)")
    assert caught.value.sqlstate == "22003"
    env.delete("kv", [(1, 1)])
    assert _rows(env, "SELECT k FROM sums WHERE k IN (SELECT x FROM t)") == [(1,), (2,)]


def test_a_read_the_environment_fails_to_evaluate_goes_to_a_dataflow(
    env: Environment, dataflows: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("not an evaluation error")

    monkeypatch.setattr(small_reads, "evaluate_arrow", broken)
    monkeypatch.setattr(small_reads, "evaluate", broken)
    assert _rows(env, "SELECT x FROM t WHERE x IN (SELECT y FROM s)") == [(2,)]
    assert len(dataflows) == 1


def test_a_read_the_vectorised_evaluator_fails_on_is_evaluated_by_rows(
    env: Environment, dataflows: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[object] = []

    def broken(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        raise RuntimeError("not an evaluation error")

    monkeypatch.setattr(small_reads, "evaluate_arrow", broken)
    assert _rows(env, "SELECT x FROM t WHERE x IN (SELECT y FROM s)") == [(2,)]
    assert calls  # the plan is one the vectorised evaluator covers
    assert not dataflows


def test_a_read_too_large_to_evaluate_here_is_held_at_its_timestamp_until_its_dataflow_is(
    env: Environment, dataflows: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read that tries the inputs here and gives up (a many-table join: its intermediate
    result too large) then builds a dataflow at the timestamp it chose: the inputs' sinces must
    not pass it meanwhile (they follow their uppers one second behind)."""
    rt = env.runtime
    ids = [env.runtime.catalog.get(n).id for n in ("t", "s")]

    async def too_large_after_a_while(_rt: Any, _plan: Any, ts: int, _timeout: float) -> None:
        for _ in range(100):  # until the inputs' read policies would compact past ts
            uppers = [rt.storage.collection_frontiers(i).upper.as_option() for i in ids]
            if all(u is not None and u > ts + 2_500 for u in uppers):
                break
            await asyncio.sleep(0.05)
        return None

    monkeypatch.setattr(reads, "read_here", too_large_after_a_while)
    sql = "SELECT x FROM t WHERE x IN (SELECT y FROM s)"
    assert _rows(env, sql) == [(2,)]
    assert len(dataflows) == 1


def _slow_cluster_for(env: Environment) -> Any:
    """``cluster_for`` that first waits until the inputs' read policies would have compacted
    them past a timestamp chosen before it was called (sinces follow uppers 1 s behind)."""
    rt = env.runtime
    ids = [env.runtime.catalog.get(n).id for n in ("t", "s")]
    real = reads.cluster_for

    async def slow_cluster_for(rt_: Any, cluster: str | None) -> str:
        start = [rt.storage.collection_frontiers(i).upper.as_option() for i in ids]
        for _ in range(100):
            uppers = [rt.storage.collection_frontiers(i).upper.as_option() for i in ids]
            if all(
                u is not None and b is not None and u > b + 2_500
                for u, b in zip(uppers, start, strict=True)
            ):
                break
            await asyncio.sleep(0.05)
        return await real(rt_, cluster)

    return slow_cluster_for


def test_a_subscribe_is_held_at_its_as_of_while_it_waits_for_its_cluster(
    env: Environment, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A subscribe chooses its as_of, then finds its cluster, which may wait (the default
    cluster is created on first need): its inputs' sinces must not pass the as_of meanwhile.
    Without the hold: DataflowSinceViolation."""
    monkeypatch.setattr(reads, "cluster_for", _slow_cluster_for(env))
    changes = env.subscribe("t", timeout=120)
    try:
        first = next(changes)
    finally:
        changes.close()  # type: ignore[attr-defined]
    assert sorted((c.row[0], c.diff) for c in first if c.row[0] is not None) == [(1, 1), (2, 1)]


def test_a_persist_read_is_held_at_its_timestamp_while_it_waits_for_its_cluster(
    env: Environment, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read of a table's persisted contents by a replica (too large to read here) chooses
    its timestamp, then finds its cluster: the table must stay readable at that time."""
    rt = env.runtime
    monkeypatch.setattr(rt, "settings", with_overrides(rt.settings, small_read_updates=0))
    monkeypatch.setattr(reads, "cluster_for", _slow_cluster_for(env))
    assert _rows(env, "SELECT x FROM t WHERE x > 1") == [(2,)]
